"""Predictive density of a new point under a fitted tdid model (paper 004, sec. 2).

With fitted parameters the tdid likelihood of ``T`` points is
``p_T(X) = T^{-(T-1)} sum_r rho_r Z_r`` (004, sec. 2). Adding a point ``x*`` lets
it sit anywhere in an out-tree on ``T + 1`` nodes (leaf, root, or an internal
node with any set of children), and

    ratio(x*) = p_{T+1}(X, x*) / p_T(X)

is a ratio of two matrix-tree determinants. The ``(T+1)``-node matrix is the
``T``-node one bordered by one row and column plus a diagonal change on the
nodes that ``x*`` could parent; with the inverse ``G`` of the ``T``-node matrix
precomputed this costs one vector-matrix product (O(T^2)) plus O(k^3) for the
``k`` nodes for which ``x*`` is a non-negligible parent (derivation in
``docs/derivations-outtree.md``, section 6).

The tdid family is exchangeable but not projective: integrating the
``(T+1)``-point model over ``x*`` does *not* give the ``T``-point model, so
``ratio`` does not integrate to one. :class:`Predictive` therefore also
estimates the normaliser ``c(X) = int ratio(x) dx`` by importance sampling and
reports ``log ratio - log c`` as the (normalised) predictive log-density.
"""

from __future__ import annotations

import math
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

import numpy as np
import scipy.linalg
from scipy.special import logsumexp

from .gaussian import NIW, gaussian_log_lik_matrix
from .matrix_tree import (
    LOG_FLOOR,
    _gth_eliminate,
    _log_y,
    _scaled_log_total,
    grounded_inverse,
    gth_scale_exponent,
    koo_matrix,
    log_partition_all_roots,
    log_total_all_roots_scaled,
    root_mixture,
    scaled_root_column,
)

__all__ = ["Predictive"]


def _det_negative(lu, piv) -> bool:
    """Whether the matrix that LAPACK ``getrf`` factored into ``lu, piv`` has a negative
    determinant: an odd count of negative pivots and row swaps."""
    return bool((int(np.sum(np.diag(lu) < 0)) + int(np.sum(piv != np.arange(piv.size)))) % 2)


def _support(sc) -> np.ndarray:
    """The training points ``u`` that a new point may parent: ``sc[u]`` (log b~_u plus the log
    scale of ``u``'s inverse entry) within e^_SUPPORT_LOG_TOL of max(0, largest) (sec. 6)."""
    return np.nonzero(sc > min(0.0, sc.max()) + _SUPPORT_LOG_TOL)[0]


def _single_thread():
    """Context manager limiting BLAS to one thread (no-op without threadpoolctl)."""
    try:
        from threadpoolctl import threadpool_limits
    except ImportError:  # pragma: no cover
        import contextlib
        return contextlib.nullcontext()
    return threadpool_limits(1)


def _available_cores() -> int:
    """Cores this process may use, at most 4 (threads for the direct path)."""
    from .._threads import available_cores

    return max(1, min(available_cores(), 4))


_SUPPORT_LOG_TOL = -45.0  # drop parent weights below e^-45 of the |G| scale
# a training point u with |G_uu| above this is coupled to the rest so weakly that
# the column-replaced matrix is near-singular along it. The LU's rounding error
# in G is then about eps |G| |K| |G|, i.e. it reaches entries far from u, so
# when the fit has any such point *every* new point is scored by the direct
# O(T^3) path (derivations sec. 10: routing only the points whose support
# contains u left errors of up to 679 nats on cloud)
_WEAK_COUPLING_G = 1e10
# grounded path (sec. 13): a point goes to the direct path when the estimated relative error of
# its sum of Woodbury differences exceeds _GROUNDED_REL_ERR, when it is a better parent of some
# training point than that point's best one by more than e^_GROUNDED_MAX_LOG_B (overflow), or
# when its support holds more than half the training points (the small solve is then no cheaper)
_GROUNDED_REL_ERR = 1e-8  # the estimate can be low by a factor of about 2 (review): scores within 1e-7
_EPS = float(np.finfo(float).eps)
_GROUNDED_EQUILIBRATE = True  # rows of the small matrix scaled to size one (False: negative control only)
_GROUNDED_MAX_LOG_B = 300.0
_BRIDGE_MIN_MARGINAL = 1e-3  # bridge components only on edges this probable (sec. 11)
SAMPLE_METHODS = ("sir", "isir")  # Predictive.sample: plain SIR or iterated SIR (exactly invariant)
ISIR_BURN_IN = 20  # i-SIR steps before the first kept point (sec. 11)


@dataclass
class Predictive:
    """Precomputed matrix-tree quantities for fast predictive densities (the predictive of 004;
    docs/derivations-outtree.md section 6).

    Parameters
    ----------
    X : (T, d) training data.
    B : (d, d+1) fitted ``[A, c]``.
    Sigma : (d, d) fitted conditional noise covariance.
    root : NIW root prior (root weights are its Student-t predictive).
    root_hint : int, optional
        Column to replace by the root weights (any root with non-negligible
        posterior probability, e.g. the most probable root of the VB fit).
        Without it the subtraction-free all-roots elimination picks the most
        probable root (one more O(T^3) step).
    """

    X: np.ndarray
    B: np.ndarray
    Sigma: np.ndarray
    root: NIW
    root_hint: int | None = None

    def __post_init__(self):
        X = self.X
        T = X.shape[0]
        lb = gaussian_log_lik_matrix(X, X, self.B, self.Sigma)
        np.fill_diagonal(lb, -np.inf)
        self.log_beta = lb
        self.log_rho = self.root.log_predictive(X)
        m = lb.max(axis=1)
        self.m = m
        Bn = np.exp(np.maximum(lb - m[:, None], LOG_FLOOR))
        np.fill_diagonal(Bn, 0.0)
        self.Bn = Bn
        self.rho_scaled, self.shift = scaled_root_column(self.log_rho, m)
        if self.root_hint is None:
            log_z = log_partition_all_roots(np.where(np.isfinite(lb), lb, 0.0))
            c = int(np.argmax(self.log_rho + log_z))
        else:
            c = int(self.root_hint)
            if not 0 <= c < T:
                raise ValueError(f"root_hint must be in [0, {T}), got {c}")
        self._factor(c)
        # the column must be a root of non-negligible probability q(c) = rho_c G_cc
        q = self.rho_scaled * self.G[self.c, :]
        if not q[self.c] > 1e-6 * np.max(q):
            self._factor(int(np.argmax(q)))
        self.diagG = np.abs(np.diag(self.G))
        self.weak = self.diagG > _WEAK_COUPLING_G
        # The LU's G is unreliable everywhere once one point looks weakly coupled. The grounded
        # inverse (subtraction-free, sec. 13) tells whether the coupling is really weak: where it
        # is not, points are scored from it (the grounded path); where it is, by the direct path.
        self.grounded = False
        self._ground = None
        if self.weak.any() and not self.route_by_support and self.use_grounded:
            self._factor_grounded()
        self.all_direct = bool(self.weak.any()) and not self.route_by_support and not self.grounded
        self.n_direct = 0  # points scored by the direct path (weakly coupled fits, guarded grounded points)
        self.log_norm = 0.0
        self.n_fallback = 0  # points scored by the leaf lower bound
        self.log_norm_se = np.nan
        self._const = (T - 1) * np.log(T) - T * np.log(T + 1.0)
        self.support_sizes: list[int] = []  # k of the last scored batch (diagnostics)
        self._bridge_cache = None
        self._direct_base = None  # log total of the T training points (direct path)
        self._prefix = None  # the eliminated tails of the direct path (sec. 14), built on first use
        if int(self.direct_threads) != self.direct_threads or self.direct_threads < 0:
            raise ValueError(f"direct_threads must be a non-negative integer, got {self.direct_threads!r}")
        if not (0.0 <= self.bridge_weight and 0.0 < self.broad_weight
                and self.bridge_weight + self.broad_weight < 1.0):
            raise ValueError("need bridge_weight >= 0, broad_weight > 0 and bridge_weight + broad_weight < 1")

    def _factor(self, c: int) -> None:
        """One LU of the column-replaced Laplacian and its inverse ``G`` (O(T^3), once)."""
        T = self.X.shape[0]
        self.c = c
        K = koo_matrix(self.Bn, self.rho_scaled, c)
        lu, piv, info = scipy.linalg.lapack.dgetrf(K, overwrite_a=True)
        if info != 0:
            raise FloatingPointError("the fitted Laplacian is numerically singular")
        d = np.diag(lu)
        self.log_z_total = float(np.sum(np.log(np.abs(d))) + self.m.sum() + self.shift)
        self.G, info = scipy.linalg.lapack.dgetrs(lu, piv, np.eye(T), overwrite_b=True)
        if info != 0 or not np.all(np.isfinite(self.G)):
            raise FloatingPointError("inverse of the fitted Laplacian is not finite")

    def _factor_grounded(self) -> None:
        """The inverse ``H`` of the Laplacian grounded at ``c`` (:func:`grounded_inverse`,
        accurate entry by entry however weak the couplings), and the quantities every score
        reuses (docs/derivations-outtree.md section 13). Sets ``grounded`` when no diagonal
        entry of ``H`` exceeds ``_WEAK_COUPLING_G``: the coupling the LU flagged is not really
        weak. Where it is, the guarded scores fail (cloud: errors of 0.16 nats), so those
        fits keep the direct path."""
        c = self.c
        H, idx = grounded_inverse(self.Bn, c)
        if H is None or np.max(np.diag(H)) > _WEAK_COUPLING_G:
            return
        beta_c = self.Bn[c, idx]  # c's parent weights
        rho = self.rho_scaled[idx]
        H_rho = H @ rho
        self._ground = {"H": H, "idx": idx, "rho": rho,
                        "H_rho": H_rho, "bcH": beta_c @ H, "bcH_rho": float(beta_c @ H_rho),
                        "sigma": float(self.rho_scaled[c] + beta_c @ H_rho),
                        "log_h": np.log(np.maximum(np.insert(np.diag(H), c, 1.0), 1.0))}
        self.grounded = True

    # ------------------------------------------------------------------
    def log_ratio(self, Xnew: np.ndarray, batch: int = 256) -> np.ndarray:
        """``log p_{T+1}(X, x*) - log p_T(X)`` for each row ``x*`` of ``Xnew``.

        Exact: sums over every out-tree on the ``T + 1`` points (up to dropping
        the edges ``x* -> u`` whose weight is below ``e^-45`` of the matrix scale).
        Each point is scored on its own against the training set. On a fit whose LU
        flags a weakly coupled training point ``G`` is unreliable in every entry: if
        the grounded inverse has no weakly coupled point either (``grounded``), points
        are scored from it, each guarded (derivations-outtree sec. 13); otherwise
        (``all_direct``) every point is scored by :meth:`log_ratio_direct` (O(T^3)
        each; sec. 10). ``n_direct`` counts the points scored by the direct path.
        """
        Xnew = np.atleast_2d(np.asarray(Xnew, float))
        out = np.empty(Xnew.shape[0])
        self.support_sizes = []
        for s in range(0, Xnew.shape[0], batch):
            out[s:s + batch] = self._log_ratio_batch(Xnew[s:s + batch])
        return out

    def _log_ratio_batch(self, Xs):
        X, G, c = self.X, self.G, self.c
        n = Xs.shape[0]
        if self.all_direct:
            self.n_direct += n
            return self.log_ratio_direct(Xs)
        # a[j, v] = log p(x*_j | X_v): x* as child; b[j, u] = log p(X_u | x*_j): x* as parent
        log_a = gaussian_log_lik_matrix(Xs, X, self.B, self.Sigma)
        log_b = gaussian_log_lik_matrix(X, Xs, self.B, self.Sigma).T
        log_rho_new = self.root.log_predictive(Xs) - self.shift  # column c is scaled by e^-shift
        # x*'s row is linear in (a, rho*): the trees where x* has a parent (scale m_a) and
        # those where x* is the root (scale log rho*) are summed in log space, so neither
        # underflows when the other dominates.
        m_a = log_a.max(axis=1)
        a = np.exp(log_a - m_a[:, None])
        rel_b = log_b - self.m[None, :]  # log of b~_u = b_u / e^{m_u} (row u's scale)
        out = np.empty(n)
        if self.grounded:
            aH = a[:, self._ground["idx"]] @ self._ground["H"]  # the O(T^2) part, one product for the batch
            with _single_thread():  # small LUs, as below
                direct = self._grounded_loop(out, a, aH, m_a, rel_b, log_rho_new)
        else:
            R = -a
            R[:, c] = 0.0
            RG = R @ G  # the O(T^2) part, batched as one matrix product
            sum_a = a.sum(axis=1)
            scale = np.log(np.maximum(self.diagG, 1.0))
            low = m_a + np.log(sum_a)  # x* a leaf: exact lower bound
            with _single_thread():  # small LUs: BLAS threads only add synchronisation cost
                direct = self._score_loop(out, n, rel_b, scale, low, sum_a, RG, G, c, m_a, log_rho_new)
        out = out + self._const
        if direct:
            self.n_direct += len(direct)
            out[direct] = self.log_ratio_direct(Xs[direct])
        return out

    def _score_loop(self, out, n, rel_b, scale, low, sum_a, RG, G, c, m_a, log_rho_new) -> list[int]:
        """Fast scores into ``out``; returns the rows left to the direct path."""
        direct = []
        for j in range(n):
            keep = _support(rel_b[j] + scale)
            k = keep.size
            self.support_sizes.append(k)
            if self.route_by_support and self.weak[keep].any():  # the old rule (negative control only)
                direct.append(j)
                out[j] = np.nan
                continue
            if k:
                # ratio = det C (s + g'C^-1 beta) with C = I + D G_KK (derivations, sec. 6);
                # row u of [C, beta] divided by e^{sigma_u}, sigma_u = max(log b~_u, 0)
                lbk = rel_b[j, keep]
                sig = np.maximum(lbk, 0.0)
                bs = np.exp(lbk - sig)  # b~_u e^-sigma_u <= 1
                ds = np.where(keep == c, 0.0, bs)  # no diagonal change in the root column
                Ck = ds[:, None] * G[np.ix_(keep, keep)]
                Ck[np.arange(k), np.arange(k)] += np.exp(-sig)
                lu, piv, info = scipy.linalg.lapack.dgetrf(Ck, overwrite_a=True)
                d = np.diag(lu)
                if info > 0 or _det_negative(lu, piv):
                    val = -np.inf
                else:
                    y, _ = scipy.linalg.lapack.dgetrs(lu, piv, bs)
                    logdet_c = float(np.sum(np.log(np.abs(d)))) + sig.sum()
                    t_a = sum_a[j] + RG[j, keep] @ y  # x* has a parent (scale e^m_a)
                    t_r = G[c, keep] @ y  # x* is the root (times rho*)
                    with np.errstate(divide="ignore", invalid="ignore"):
                        val = logdet_c + np.logaddexp(m_a[j] + np.log(t_a),
                                                      log_rho_new[j] + np.log(t_r))
                    if not (t_a > 0 and t_r >= 0):
                        val = -np.inf
            else:
                val = low[j]
            # Exact lower bound: the trees in which x* is a leaf give det ratio
            # >= sum_v a_v. A value below it (or a non-positive one) is
            # cancellation in G for weakly coupled clusters; fall back to it.
            if not np.isfinite(val) or val < low[j]:
                if not (np.isfinite(val) and val > low[j] - 1e-9):
                    self.n_fallback += 1
                val = low[j]
            out[j] = val
        return direct

    def _grounded_loop(self, out, a, aH, m_a, rel_b, log_rho_new) -> list[int]:
        """Scores from the grounded inverse into ``out`` (without the constant ``_const``);
        returns the rows left to the direct path (docs/derivations-outtree.md section 13).
        ``aH`` is ``a[:, idx] @ H``, the batch's parent weights (without ``c``) times ``H``.

        With ``A = M + diag(b~)`` on the support, ``alpha`` the new point's parent weights
        without ``c`` and ``gamma`` the weights from ``c``, the all-roots total of the
        ``T + 1`` points over that of the ``T`` points is
        ``det(I + D H_KK) (d (rho_c + e1) + (e2 + b~_c)(e3 + rho*)) / sigma`` with
        ``d = a_c + alpha' A^-1 gamma``, ``e1 = beta_c' A^-1 rho``, ``e2 = beta_c' A^-1 b~``,
        ``e3 = alpha' A^-1 rho``: sums of non-negative terms. Each ``u' A^-1 y`` comes from
        ``H`` by Woodbury, ``u'H y - (u'H)_K C^-1 D (H y)_K`` with ``C = I + D H_KK``: a
        subtraction. Their errors (rounding, and the small solve's error from two steps of
        refinement with extended-precision residuals, ``C``'s rows equilibrated) are carried to
        first order into the bracket; a point whose bracket's relative error may exceed
        ``_GROUNDED_REL_ERR``, whose refinement stalls, or whose bracket is not a positive
        finite number is scored by the direct path instead.
        """
        g = self._ground
        H, idx, rho = g["H"], g["idx"], g["rho"]
        c, T = self.c, self.X.shape[0]
        alpha = a[:, idx]
        direct = []
        for j in range(a.shape[0]):
            keep = _support(rel_b[j] + g["log_h"])
            self.support_sizes.append(keep.size)
            if rel_b[j].max() > _GROUNDED_MAX_LOG_B or 2 * keep.size > T:  # overflow; or no faster
                direct.append(j)
                continue
            b_c = float(np.exp(rel_b[j, c])) if np.any(keep == c) else 0.0
            K = keep[keep != c]
            kk = K - (K > c)  # their places in H (row and column c removed)
            bK = np.exp(rel_b[j, K])
            HKK = H[np.ix_(kk, kk)]
            # the four differences u'H y - (u'H)_K C^-1 D (H y)_K: three right-hand sides
            Y = np.column_stack([np.ones(kk.size), g["H_rho"][kk], HKK @ bK])
            bases = [(a[j, c], float(alpha[j].sum()), aH[j, kk], 0),  # d (H gamma = 1)
                     (0.0, g["bcH_rho"], g["bcH"][kk], 1),  # e1
                     (0.0, float(g["bcH"][kk] @ bK), g["bcH"][kk], 2),  # e2
                     (0.0, float(aH[j] @ rho), aH[j, kk], 1)]  # e3
            logdet_c = 0.0
            if kk.size:
                # row u of C = I + D H_KK divided by max(1, b~_u): rows of size one, so that
                # partial pivoting keeps the small components (unscaled rows up to e^28 lost them)
                w_eq = 1.0 / np.maximum(bK, 1.0) if _GROUNDED_EQUILIBRATE else np.ones(kk.size)
                C = (bK * w_eq)[:, None] * HKK
                C[np.arange(kk.size), np.arange(kk.size)] += w_eq
                lu, piv, info = scipy.linalg.lapack.dgetrf(C, overwrite_a=False)
                if info != 0 or _det_negative(lu, piv):
                    direct.append(j)
                    continue
                logdet_c = float(np.sum(np.log(np.abs(np.diag(lu)))) - np.sum(np.log(w_eq)))
                Z = (bK * w_eq)[:, None] * Y
                Xsol = scipy.linalg.lapack.dgetrs(lu, piv, Z)[0]
                # two steps of iterative refinement with the residual in extended precision: the
                # second correction estimates the error left after the first; a refinement that
                # does not shrink the correction has stalled (the point goes to the direct path)
                Cl = C.astype(np.longdouble)
                steps = []
                for _ in range(2):
                    res = (Z - Cl @ Xsol.astype(np.longdouble)).astype(float)
                    delta = scipy.linalg.lapack.dgetrs(lu, piv, res)[0]
                    Xsol += delta
                    steps.append(float(np.max(np.abs(delta))))
                if not (np.all(np.isfinite(Xsol)) and (steps[1] <= 0.5 * steps[0]
                                                       or steps[1] <= 1e3 * _EPS * float(np.max(np.abs(Xsol))))):
                    direct.append(j)
                    continue
            vals, errs = [], []
            ok = True
            for extra, base, uK, col in bases:
                if kk.size:
                    corr = float(uK @ Xsol[:, col])
                    # rounding: base sums T non-negative terms, corr k terms of either sign
                    err = (_EPS * (extra + math.sqrt(T) * base + kk.size * float(np.abs(uK) @ np.abs(Xsol[:, col])))
                           + float(np.abs(uK) @ np.abs(delta[:, col])))
                else:
                    corr, err = 0.0, _EPS * (extra + math.sqrt(T) * base)
                v = extra + base - corr
                if not (np.isfinite(v) and v >= -err):
                    ok = False
                    break
                vals.append(max(v, 0.0))
                errs.append(err)
            if not ok:
                direct.append(j)
                continue
            dd, e1, e2, e3 = vals
            # the bracket d (rho_c + e1) + (e2 + b_c)(e3 + rho*) and its first-order error, all
            # divided by e^s so that rho* = e^{log rho* - m_a} cannot overflow
            log_rho_new_j = log_rho_new[j] - m_a[j]
            sft = max(0.0, log_rho_new_j)
            rho_s = np.exp(log_rho_new_j - sft)
            f = np.exp(-sft)
            inner = (dd * (self.rho_scaled[c] + e1) + (e2 + b_c) * e3) * f + (e2 + b_c) * rho_s
            err_inner = ((errs[0] * (self.rho_scaled[c] + e1) + (dd + errs[0]) * errs[1] + errs[2] * e3
                          + (e2 + b_c + errs[2]) * errs[3]) * f + errs[2] * rho_s)
            if not (np.isfinite(inner) and inner > 0.0 and err_inner <= _GROUNDED_REL_ERR * inner):
                direct.append(j)
                continue
            inner_log = sft + np.log(inner)
            out[j] = logdet_c + inner_log - np.log(g["sigma"]) + m_a[j]
        return direct

    def log_ratio_direct(self, Xnew: np.ndarray) -> np.ndarray:
        """Reference: ``log p_{T+1} - log p_T`` from two all-roots log-partitions
        (docs/derivations-outtree.md sections 6, 10 and 14).

        O(T^3) per point at most (a subtraction-free GTH elimination of the (T+1)-node
        problem), exact however weakly the training points are coupled. The training
        points that the new point cannot parent (their weight from it at the floor) are
        eliminated once per fit, in two orders along the data's first principal axis,
        and only the rest per point (section 14; built for a fit whose every point comes
        here, or for a call with ``_TAIL_MIN_POINTS`` points or more; ``prefix_direct=False``:
        every point from scratch). The points are spread over ``direct_threads`` threads (the
        elimination kernels release the GIL).
        """
        Xnew = np.atleast_2d(np.asarray(Xnew, float))
        if self._direct_base is None:
            self._direct_base = log_total_all_roots_scaled(self.Bn.copy(), self.m, self.log_rho)
        n = Xnew.shape[0]
        # the tails cost about ten points' full eliminations to build: worth it on a fit whose every
        # point comes here, or for a large batch, not for the few points the fast paths' guards send
        if (self.prefix_direct and self._prefix is None and (self.all_direct or n >= _TAIL_MIN_POINTS)
                and _tail_step(self.X.shape[0] + 1) <= self.X.shape[0] - 1):  # at least one checkpoint
            self._prefix = [_EliminatedTail(self, order) for order in _principal_orders(self.X)]
        log_rho_new = self.root.log_predictive(Xnew)
        workers = min(n, self.direct_threads or _available_cores())
        total = self._direct_total if self.prefix_direct and self._prefix is not None else self._direct_total_full
        with _single_thread():  # one BLAS thread per worker
            if workers > 1:
                with ThreadPoolExecutor(max_workers=workers) as ex:
                    totals = list(ex.map(total, Xnew, log_rho_new))
            else:
                totals = [total(x, lr) for x, lr in zip(Xnew, log_rho_new)]
        return np.asarray(totals) - self._direct_base + self._const

    def _new_weights(self, x):
        """``x``'s weights: ``log_a[v]`` (x a child of v), ``log_b[u]`` (x a parent of u)."""
        x2 = x[None, :]
        log_a = gaussian_log_lik_matrix(x2, self.X, self.B, self.Sigma)[0]
        log_b = gaussian_log_lik_matrix(self.X, x2, self.B, self.Sigma)[:, 0]
        return log_a, log_b

    def _direct_total_full(self, x, log_rho_x, weights=None) -> float:
        """``log sum_r rho_r Z_r`` of the training points plus ``x``: one GTH elimination of
        all ``T + 1`` nodes (O(T^3); the reference of :meth:`_direct_total`). ``weights``:
        :meth:`_new_weights` of ``x`` if already computed."""
        T = self.X.shape[0]
        log_a, log_b = self._new_weights(x) if weights is None else weights
        M = np.empty((T + 1, T + 1))
        M[:T, :T] = self.Bn
        m_new = np.maximum(self.m, log_b)
        up = np.nonzero(log_b > self.m)[0]  # rows whose largest weight is now the edge from x
        if up.size:
            M[up, :T] = np.maximum(M[up, :T] * np.exp(self.m[up] - log_b[up])[:, None], np.exp(LOG_FLOOR))
            M[up, up] = 0.0
        M[:T, T] = np.exp(np.maximum(log_b - m_new, LOG_FLOOR))
        m_a = float(log_a.max())
        M[T, :T] = np.exp(np.maximum(log_a - m_a, LOG_FLOOR))
        M[T, T] = 0.0
        return log_total_all_roots_scaled(M, np.append(m_new, m_a), np.append(self.log_rho, log_rho_x))

    def _direct_total(self, x, log_rho_x) -> float:
        """:meth:`_direct_total_full` with the training points ``x`` cannot parent
        eliminated once per fit (the order of the two whose eliminated tail is longest)."""
        log_a, log_b = self._new_weights(x)
        at_floor = log_b - self.m <= LOG_FLOOR
        lo, k = min((t.checkpoint(at_floor), k) for k, t in enumerate(self._prefix))
        if lo == self._prefix[k].n:  # no eliminated tail serves this point
            return self._direct_total_full(x, log_rho_x, (log_a, log_b))
        return self._prefix[k].total(lo, log_a, log_b, log_rho_x)

    def log_beta_finite(self, Y):
        lb = gaussian_log_lik_matrix(Y, Y, self.B, self.Sigma)
        np.fill_diagonal(lb, 0.0)
        return lb

    # ------------------------------------------------------------------
    def _bridges(self):
        """Gaussian "bridge" proposal components, one per training point (cached).

        Inserting ``x*`` on an edge ``v -> u`` of a T-node tree replaces the factor
        ``beta_vu`` by ``p(x*|X_v) p(X_u|x*)``: a Gaussian bump in ``x*`` with precision
        ``P = Sigma^-1 + A' Sigma^-1 A`` (shared by all edges) whose integral is the
        two-step density ``N(X_u | A m_v + c, Sigma + A Sigma A')``. Its share of the
        normaliser ``c(X)`` is about ``W_uv exp(gain_uv)``, with ``W_uv`` the fitted
        tree's edge marginal and ``gain_uv`` the log two-step density minus
        ``log beta_uv`` (derivations-outtree, sec. 11). Where an edge is long in noise
        units (a gap between the arms of pinwheel, or between two clusters) that
        share dwarfs everything else and sits far from every training point, where
        the local proposal never goes. For each node ``u`` the component is the
        parent ``v`` with the largest share among the edges with ``W_uv > 1e-3``
        (the best-fitting parent where there is none, e.g. at the root); the
        components are weighted by half the normalised share plus half uniform.
        """
        if self._bridge_cache is not None:
            return self._bridge_cache
        X, B, S = self.X, self.B, self.Sigma
        T, d = X.shape
        A, c = B[:, :d], B[:, d]
        Si = np.linalg.inv(S)
        cov = np.linalg.inv(Si + A.T @ Si @ A)
        cov = 0.5 * (cov + cov.T)
        # two-step density log N(X_u | A (A X_v + c) + c, Sigma + A Sigma A')
        two_step = gaussian_log_lik_matrix(X, X, np.hstack([A @ A, (A @ c + c)[:, None]]), S + A @ S @ A.T)
        # edge marginals from the robust all-roots routine: with weakly coupled
        # points the entries of G are huge and G_uu - G_vu cancels to noise
        W = root_mixture(self.log_beta_finite(X), self.log_rho, root_hint=self.c).edge_marginals
        lb = np.where(np.isfinite(self.log_beta), self.log_beta, 0.0)
        with np.errstate(divide="ignore"):
            share = np.log(W) + two_step - lb
        # only edges with a marginal above 1e-3: tiny marginals of long edges are
        # rounding noise (after the row projection), and times e^gain they
        # would swamp the real spikes
        share[~(W > _BRIDGE_MIN_MARGINAL)] = -np.inf
        np.fill_diagonal(share, -np.inf)
        v = np.argmax(share, axis=1)
        best = share[np.arange(T), v]
        none = ~np.isfinite(best)  # e.g. the root: fall back on the best parent
        if none.any():
            v[none] = np.argmax(self.log_beta[none], axis=1)  # diagonal is -inf
        m_v = X[v] @ A.T + c
        means = (m_v @ Si.T + (X - c) @ (Si @ A)) @ cov.T
        if (~none).any():
            log_w = np.logaddexp(np.log(0.5) - np.log(T), np.log(0.5) + best - logsumexp(best))
        else:  # pragma: no cover - every edge marginal underflowed
            log_w = np.full(T, -np.log(T))
        self._bridge_cache = (means, cov, log_w, best)
        return self._bridge_cache

    def _proposal_sample(self, n, rng):
        T, d = self.X.shape
        mean = self.X @ self.B[:, :d].T + self.B[:, d]
        L = np.linalg.cholesky(self.Sigma * self.widen ** 2)
        pick = rng.integers(T, size=n)
        out = mean[pick] + rng.standard_normal((n, d)) @ L.T
        u = rng.random(n)
        bridge = u < self.bridge_weight
        if bridge.any():
            means, cov, log_w, _ = self._bridges()
            nb = int(bridge.sum())
            comp = rng.choice(T, size=nb, p=np.exp(log_w - logsumexp(log_w)))
            Lb = np.linalg.cholesky(cov * self.widen ** 2)
            out[bridge] = means[comp] + rng.standard_normal((nb, d)) @ Lb.T
        broad = u > 1.0 - self.broad_weight
        if broad.any():
            out[broad] = self.root.sample_predictive(int(broad.sum()), rng)
        return out

    def _proposal_logpdf(self, Xs):
        T, d = self.X.shape
        lm = gaussian_log_lik_matrix(Xs, self.X, self.B, self.Sigma * self.widen ** 2)
        local = logsumexp(lm, axis=1) - np.log(T)
        broad = self.root.log_predictive(Xs)
        w_local = 1.0 - self.bridge_weight - self.broad_weight
        parts = [np.log(w_local) + local, np.log(self.broad_weight) + broad]
        if self.bridge_weight > 0:
            means, cov, log_w, _ = self._bridges()
            identity = np.hstack([np.eye(d), np.zeros((d, 1))])  # B = [I, 0]: mean = means[i]
            lbm = gaussian_log_lik_matrix(Xs, means, identity, cov * self.widen ** 2)
            parts.append(np.log(self.bridge_weight) + logsumexp(lbm + log_w[None, :], axis=1))
        return logsumexp(np.stack(parts), axis=0)

    widen: float = 1.5
    broad_weight: float = 0.05
    bridge_weight: float = 0.2
    direct_threads: int = 0  # threads for the direct path; 0: one per available core, at most 4
    # False (default): a fit with any weakly coupled point scores every point by the direct
    # path. True: the pre-fix rule, only points whose support holds a weak point (tests only)
    route_by_support: bool = False
    # True (default): a fit whose LU flags a weakly coupled point but whose grounded inverse
    # does not is scored by the grounded path (sec. 13). False: by the direct path (controls)
    use_grounded: bool = True
    # True (default): the direct path eliminates the training points a new point cannot parent
    # once per fit (sec. 14). False: every point from scratch (the reference; tests)
    prefix_direct: bool = True

    def estimate_normalizer(self, n: int, rng: np.random.Generator) -> tuple[float, float]:
        """Importance-sampling estimate of ``log int ratio(x) dx`` and its standard error
        (docs/derivations-outtree.md sections 6 and 11).

        Proposal: a mixture of the fitted conditionals around every training
        point (widened by 1.5), 20% of "bridge" bumps on the edges whose
        insertion point carries most of the mass (:meth:`_bridges`) and 5% of
        the root Student-t. Sets ``self.log_norm`` and ``self.log_norm_se``
        (relative standard error of the estimate of ``c``).
        """
        Xs = self._proposal_sample(n, rng)
        lw = self.log_ratio(Xs) - self._proposal_logpdf(Xs)
        log_mean = float(logsumexp(lw) - np.log(n))
        w = np.exp(lw - log_mean)
        rel_se = float(np.std(w, ddof=1) / np.sqrt(n))  # SE of the mean / mean
        self.log_norm = log_mean
        self.log_norm_se = rel_se
        return log_mean, rel_se

    def log_density(self, Xnew: np.ndarray) -> np.ndarray:
        """Normalised predictive log-density ``log ratio(x*) - log c(X)``
        (docs/derivations-outtree.md section 6)."""
        return self.log_ratio(Xnew) - self.log_norm

    def sample(self, n: int, rng: np.random.Generator, candidates: int = 16, method: str = "sir",
               burn_in: int = ISIR_BURN_IN) -> np.ndarray:
        """Fantasy points from the predictive, ``candidates`` proposals per point.

        ``method="sir"`` (default): independent sampling-importance-resampling
        draws, one kept of ``candidates`` fresh proposals each. They tend to exact
        draws only as ``candidates`` grows: on the test toy of
        docs/derivations-outtree.md section 11, 16 candidates under-fill a
        low-density gap (z = -7.9 at 20,000 draws).

        ``method="isir"``: iterated sampling-importance-resampling
        (Andrieu, Lee and Vihola 2018), a Markov chain that leaves the predictive
        exactly invariant: the current point joins ``candidates`` fresh proposals
        and the next point is drawn from the ``candidates + 1`` by their weights
        ``ratio / proposal``. The chain starts at a SIR draw and runs ``burn_in``
        steps before the first kept point; the points are then one step apart, so
        consecutive points coincide with probability about ``1 / (candidates + 1)``
        (more where the weights are uneven: 16 % of iris's fantasy points with 16
        candidates, 55 % on pinwheel). Repeated points make a kernel density
        estimate of the fantasy data lumpier, so for Hellinger distances SIR is
        the better choice (section 11 has the measurements).
        """
        if method not in SAMPLE_METHODS:
            raise ValueError(f"method must be one of {SAMPLE_METHODS}, got {method!r}")
        if int(burn_in) != burn_in or burn_in < 0:
            raise ValueError(f"burn_in must be a non-negative integer, got {burn_in!r}")
        d = self.X.shape[1]
        steps = n if method == "sir" else n + 1 + int(burn_in)
        Xs = self._proposal_sample(steps * candidates, rng)
        lw = (self.log_ratio(Xs) - self._proposal_logpdf(Xs)).reshape(steps, candidates)
        Xs = Xs.reshape(steps, candidates, d)
        u = rng.random(steps)
        if method == "sir":
            p = np.exp(lw - lw.max(axis=1, keepdims=True))
            p /= p.sum(axis=1, keepdims=True)
            idx = np.minimum((np.cumsum(p, axis=1) < u[:, None]).sum(axis=1), candidates - 1)
            return Xs[np.arange(n), idx]
        return _isir_chain(Xs, lw, u, n)


def _isir_chain(Xs: np.ndarray, lw: np.ndarray, u: np.ndarray, n: int) -> np.ndarray:
    """Run iterated SIR over proposal blocks ``Xs[t]`` (weights ``lw[t]``, uniforms
    ``u[t]``); block 0 gives the start (a SIR draw), the last ``n`` states are kept."""
    steps, candidates, d = Xs.shape
    out = np.empty((n, d))
    x, lx = None, -np.inf
    for t in range(steps):
        pool = lw[t] if x is None else np.append(lw[t], lx)  # the current point is index `candidates`
        if not np.isfinite(pool.max()):
            raise FloatingPointError("no proposal of the i-SIR start block has a positive, finite weight")
        p = np.exp(pool - pool.max())
        j = min(int(np.searchsorted(np.cumsum(p), u[t] * p.sum(), side="right")), pool.size - 1)
        if j < candidates:
            x, lx = Xs[t, j], lw[t, j]
        if t >= steps - n:
            out[t - (steps - n)] = x
    return out


# memory the eliminated tails of one order may hold (their Schur complements): the checkpoints
# are spaced so that the snapshots fit
_TAIL_BYTES = 128 * 2 ** 20
_TAIL_MIN_STEP = 64
_TAIL_MIN_POINTS = 32  # a fit that is not all_direct builds the tails for a call with this many points


def _tail_step(n: int) -> int:
    """Nodes between two checkpoints of an eliminated tail (a multiple of ``_TAIL_MIN_STEP``, the
    elimination's block): the snapshots of one order, at most ``8 n^3 / (3 step)`` bytes, stay
    under ``_TAIL_BYTES``."""
    blocks = math.ceil(8.0 * n ** 3 / (3.0 * _TAIL_BYTES) / _TAIL_MIN_STEP)
    return _TAIL_MIN_STEP * max(1, blocks)


def _principal_orders(X) -> list[np.ndarray]:
    """The training points sorted along the first principal axis, both ways: the points far
    from a new point along it are those it cannot parent, and the tail of an order is
    eliminated first (sec. 14)."""
    Xc = X - X.mean(axis=0)
    axis = np.linalg.svd(Xc, full_matrices=False)[2][0]
    order = np.argsort(Xc @ axis, kind="stable")
    return [order, order[::-1].copy()]


class _EliminatedTail:
    """The direct path's elimination of the training points in one order, stopped at
    checkpoints (docs/derivations-outtree.md section 14).

    Node 0 is the new point ``x*``; node ``i >= 1`` is training point ``order[i - 1]``.
    GTH eliminates nodes ``T, T - 1, ...`` first. A training node ``u`` whose weight from
    ``x*`` is at the floor (``log b_u - m_u <= LOG_FLOOR``) has the same row and the same
    column-0 entry (the floor) whatever ``x*`` is. So when every node from ``lo`` on is such a
    node, eliminating them is done once here: the Schur complement on nodes ``0..lo-1``
    (``snap[lo]``), the pivots, and the part of the root-weighted back substitution that
    runs over the eliminated nodes. Per point only ``x*``'s own row and the rows of the
    training points whose best parent ``x*`` becomes are swept through the eliminated blocks,
    and the ``lo``-node rest is eliminated. Every step adds non-negative numbers.
    """

    def __init__(self, pred: Predictive, order: np.ndarray):
        T = pred.X.shape[0]
        n = T + 1
        self.order = order
        self._m, self._Bn, self._log_rho = pred.m, pred.Bn, pred.log_rho
        self.n = n
        self.e = gth_scale_exponent(n)
        self.scale = 2.0 ** self.e
        self.floor = math.exp(LOG_FLOOR)
        step = _tail_step(n)
        M = np.empty((n, n))
        M[0, :] = 0.0
        M[1:, 1:] = pred.Bn[np.ix_(order, order)]
        M[1:, 0] = self.floor
        M *= self.scale
        self.snap = {}  # lo -> the Schur complement on nodes 0..lo-1, at every step-th block
        self.blocks = []  # (lo, hi) in elimination order

        def keep(lo):
            hi = self.blocks[-1][0] if self.blocks else n
            self.blocks.append((lo, hi))
            if lo >= 2 and (n - lo) % step == 0:
                self.snap[lo] = M[:lo, :lo].copy()

        self.log_pivot = np.zeros(n)
        pivot = _gth_eliminate(M, self.log_pivot, block=_TAIL_MIN_STEP, scale_exp=self.e, on_block=keep)
        if not np.all(np.isfinite(self.log_pivot[1:])):
            raise FloatingPointError("matrix-tree elimination produced a non-finite pivot")
        self.M = M  # reduced weights times 2^e
        self.tri = {}  # the blocks' triangular factors
        for lo, hi in self.blocks:
            R = -np.tril(M[lo:hi, lo:hi], -1)
            R[np.arange(hi - lo), np.arange(hi - lo)] = pivot[lo:hi]
            self.tri[lo] = (R, pivot[lo:hi].copy())
        # y_k = (rt_k + sum_{j>k} B_kj y_j) / s_k over the training nodes: node k's value uses
        # nodes after k only, so one pass serves every checkpoint
        self.log_rt = np.concatenate(([0.0], pred.log_rho[order] - pred.m[order]))
        self.log_y = _log_y(M, self.log_pivot, self.log_rt, self.e * math.log(2.0))
        self.checkpoints = np.array(sorted(self.snap) + [n], dtype=np.intp)  # n: no tail (the full path)
        self.logz_tail = {}
        self.log_rt_g = {}  # log(rt_i + g_i), g_i = sum_{j >= lo} B_ij y_j, for nodes i < lo
        for lo in self.snap:
            self.logz_tail[lo] = float(self.log_pivot[lo:].sum())
            self.log_rt_g[lo] = np.logaddexp(self.log_rt[:lo], self._log_g(M[:lo, lo:], lo))

    def _log_g(self, rows, lo) -> np.ndarray:
        """``log sum_{j >= lo} rows[:, j - lo] y_j`` for reduced weights ``rows`` (times 2^e; scaled
        by ``2^-c``, ``2^c >= n``, before the sum, as in :func:`matrix_tree._back_y`)."""
        ly = self.log_y[lo:]
        top = ly.max()
        c = math.ceil(math.log2(self.n))
        with np.errstate(divide="ignore"):
            return np.log((rows * 2.0 ** -c) @ np.exp(ly - top)) + top - (self.e - c) * math.log(2.0)

    def checkpoint(self, at_floor) -> int:
        """The first checkpoint ``lo`` from which every node is at the floor for this point
        (``n``: none; the point is eliminated in full)."""
        f = at_floor[self.order]
        bad = np.flatnonzero(~f)
        need = 1 + (bad[-1] + 1 if bad.size else 0)  # nodes >= need are at the floor
        return int(self.checkpoints[np.searchsorted(self.checkpoints, max(need, 2))])

    def total(self, lo, log_a, log_b, log_rho_x) -> float:
        """``log sum_r rho_r Z_r`` of the training points plus ``x*``, from checkpoint ``lo``
        (:meth:`checkpoint`, below ``n``)."""
        lb = log_b[self.order]
        m_new = np.maximum(self._m[self.order], lb)
        S = self.snap[lo].copy()
        self._add_parent_column(S, lb[:lo - 1] - m_new[:lo - 1])
        m_a = float(log_a.max())
        rows, up = self._new_rows(log_a - m_a, log_b)
        red = self._sweep(rows, lo)
        S[0, :] = rows[0, :lo]
        S[up, :] = rows[1:, :lo]
        # root weights e^{-m} rho of the nodes left, plus what the eliminated nodes add (g)
        log_rt = self.log_rt_g[lo].copy()
        log_g = self._log_g(red, lo)
        log_rt[0] = np.logaddexp(log_rho_x - m_a, log_g[0])
        u = self.order[up - 1]
        log_rt[up] = np.logaddexp(self._log_rho[u] - log_b[u], log_g[1:])
        return _scaled_log_total(S, self.e, log_rt) + self.logz_tail[lo] + float(m_new.sum()) + m_a

    def _add_parent_column(self, S, rel_b) -> None:
        """Column 0 of the nodes left: ``x*``'s weight as their parent, ``rel_b = log b - m_new``
        (the elimination above ``lo`` started from the floor there, and is linear in it)."""
        S[1:, 0] += (np.exp(np.maximum(rel_b, LOG_FLOOR)) - self.floor) * self.scale

    def _new_rows(self, rel_a, log_b):
        """The rows that depend on ``x*`` (times 2^e, in node order): its own (``rel_a = log a -
        m_a``), and those of the training points whose best parent it becomes (their row scale
        moves to ``log b``); and those points' node indices."""
        order = self.order
        up = np.flatnonzero(log_b[order] > self._m[order]) + 1
        rows = np.empty((1 + up.size, self.n))
        rows[0, 0] = 0.0
        rows[0, 1:] = np.exp(np.maximum(rel_a[order], LOG_FLOOR))
        if up.size:
            u = order[up - 1]
            rows[1:, 1:] = np.maximum(self._Bn[np.ix_(u, order)] * np.exp(self._m[u] - log_b[u])[:, None],
                                      self.floor)
            rows[1:, 0] = 1.0
            rows[np.arange(1, 1 + up.size), up] = 0.0
        rows *= self.scale
        return rows, up

    def _sweep(self, rows, lo) -> np.ndarray:
        """Eliminate nodes ``lo..n-1`` from ``rows`` (in place) with the stored blocks, as the
        elimination would have; returns the rows' reduced weights on those nodes."""
        red = np.empty((rows.shape[0], self.n - lo))
        M = self.M
        for blo, bhi in self.blocks:
            if blo < lo:
                break
            R, piv = self.tri[blo]
            F = scipy.linalg.solve_triangular(R, rows[:, blo:bhi].T, trans="T", lower=True,
                                              check_finite=False).T
            red[:, blo - lo:bhi - lo] = F * piv
            rows[:, :blo] += F @ M[blo:bhi, :blo]
        return red
