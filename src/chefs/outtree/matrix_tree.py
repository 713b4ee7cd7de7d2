"""Tutte's directed matrix-tree theorem for out-trees, in log space.

Conventions (paper 004, section 2): ``log_beta[u, v]`` is the log weight of the
edge *parent v -> child u*, i.e. ``log p(X_u | X_v, theta_c)``; the diagonal is
ignored. For a root ``r``

    Z_r = sum over out-trees rooted at r of prod_{edges} beta_{child, parent}
        = det([diag(beta 1) - beta]_r)                       (Tutte; sec. 2 of 004)

and with root weights ``rho_r = p(X_r | root model)`` the total weight of all
rooted out-trees is ``Z = sum_r rho_r Z_r``, which equals the determinant of the
Laplacian with one column replaced by ``rho`` (derivation in
``docs/derivations-outtree.md``, section 2).

Numerical stability
-------------------
Every row ``u`` of ``beta`` is divided by its largest entry ``exp(m_u)`` before
anything leaves log space; this rescales every tree rooted at ``r`` by the same
factor ``exp(-sum_{u != r} m_u)``, which is added back in log space. The
all-roots log-partition uses the Grassmann-Taylor-Heyman (GTH) elimination,
which performs only additions, multiplications and divisions of non-negative
numbers and therefore keeps every ``log Z_r`` to high relative accuracy even when
the data form well separated clusters (the case where a plain LU factorisation
of the Laplacian loses all digits to cancellation). Entries smaller than
``exp(LOG_FLOOR)`` times their row maximum are raised to that floor so that the
linear-space matrix never contains an exact zero (a departure documented in the
derivations; it never triggers unless one data point is more than ~700 nats
more likely under one parent than under another).
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numba
import numpy as np
import scipy.linalg
from scipy.special import logsumexp, xlogy

LOG_FLOOR = -700.0

__all__ = [
    "LOG_FLOOR",
    "RootMixture",
    "normalized_weights",
    "log_partition",
    "log_partition_all_roots",
    "root_marginals",
    "root_entropy",
    "root_mixture",
    "grounded_inverse",
    "enumerate_out_trees",
    "brute_force",
]


def _check_log_beta(log_beta) -> np.ndarray:
    log_beta = np.asarray(log_beta, dtype=float)
    if log_beta.ndim != 2 or log_beta.shape[0] != log_beta.shape[1]:
        raise ValueError(f"log_beta must be a square matrix, got shape {log_beta.shape}")
    if log_beta.shape[0] < 2:
        raise ValueError("need at least 2 nodes for an out-tree")
    off = ~np.eye(log_beta.shape[0], dtype=bool)
    if np.isnan(log_beta[off]).any() or np.isposinf(log_beta[off]).any():
        raise ValueError("log_beta has NaN or +inf off-diagonal entries")
    return log_beta


def normalized_weights(log_beta) -> tuple[np.ndarray, np.ndarray]:
    """Row-normalised linear weights ``B[u, v] = exp(log_beta[u, v] - m_u)``.

    Returns ``(B, m)`` with a zero diagonal, every row maximum equal to one and
    every off-diagonal entry at least ``exp(LOG_FLOOR)`` (the row rescaling of
    docs/derivations-outtree.md section 2; the floor is its section 7).
    """
    log_beta = _check_log_beta(log_beta)
    n = log_beta.shape[0]
    lb = log_beta.copy()
    np.fill_diagonal(lb, -np.inf)
    m = lb.max(axis=1)
    if not np.all(np.isfinite(m)):
        raise ValueError("every node needs at least one finite candidate parent weight")
    rel = np.maximum(lb - m[:, None], LOG_FLOOR)
    B = np.exp(rel)
    B[np.arange(n), np.arange(n)] = 0.0
    return B, m


@numba.njit(cache=True, fastmath=True, nogil=True)
def _gth_block(B, lo, hi, pivot, log_pivot, inv_scale):  # pragma: no cover - compiled
    """Serial GTH elimination of nodes hi-1, ..., lo, updating only rows lo..hi-1.

    Row k's pivot is the sum of its remaining off-diagonal weights (columns
    < k), so no subtraction ever happens. Rows < lo are updated later in one
    matrix product (see :func:`_gth_eliminate`). ``pivot`` gets the pivots as
    they are (in ``B``'s scale), ``log_pivot`` the logs of the pivots times
    ``inv_scale`` (an exact power of two: the log of a number of order one).
    """
    for k in range(hi - 1, lo - 1, -1):
        s = 0.0
        for j in range(k):
            s += B[k, j]
        pivot[k] = s
        log_pivot[k] = math.log(s * inv_scale)
        inv = 1.0 / s
        for i in range(lo, k):
            f = B[i, k] * inv
            if f != 0.0:
                for j in range(k):
                    B[i, j] += f * B[k, j]


@numba.njit(cache=True, nogil=True)
def _left_null_log(B, log_pivot):  # pragma: no cover - compiled
    """Back substitution ``w_k = sum_{i<k} w_i B[i, k] / pivot_k`` in log space."""
    n = B.shape[0]
    log_w = np.zeros(n)
    for k in range(1, n):
        mx = -np.inf
        for i in range(k):
            if B[i, k] > 0.0:
                v = log_w[i] + math.log(B[i, k])
                if v > mx:
                    mx = v
        acc = 0.0
        for i in range(k):
            if B[i, k] > 0.0:
                acc += math.exp(log_w[i] + math.log(B[i, k]) - mx)
        log_w[k] = mx + math.log(acc) - log_pivot[k]
    return log_w


def _gth_eliminate(B, log_pivot, block: int = 128, scale_exp: int = 0, on_block=None):
    """In-place blocked GTH elimination of nodes n-1, ..., 1 of the Laplacian.

    ``B`` holds the weights times ``2^scale_exp`` (see :func:`gth_scale_exponent`);
    ``log_pivot`` gets the logs of the pivots of the weights themselves.

    Eliminating a block ``K`` of nodes replaces the remaining weights by the
    Schur complement ``B_AA + B_AK L_KK^{-1} B_KA``: ``L_KK`` is a non-singular
    M-matrix, so its triangular factors have non-negative inverses and every
    step (the within-block GTH sweep, the triangular solve and the matrix
    product) adds non-negative numbers only. Afterwards ``log_pivot[k]`` holds
    the log pivots and ``B[i, k]`` (``i < k``) the reduced weight of edge
    ``k -> i`` at the moment node ``k`` was eliminated. ``on_block(lo)``, if
    given, is called each time nodes ``lo, ..., n - 1`` are gone (``B[:lo, :lo]``
    then holds the Schur complement on the nodes left); returns the pivots.
    """
    n = B.shape[0]
    pivot = np.zeros(n)
    inv_scale = 2.0 ** -int(scale_exp)
    hi = n
    while hi > 1:
        lo = max(1, hi - block)
        _gth_block(B, lo, hi, pivot, log_pivot, inv_scale)
        if lo > 0:
            s = pivot[lo:hi]
            R = B[lo:hi, lo:hi]
            T = -np.tril(R, -1)
            T[np.arange(hi - lo), np.arange(hi - lo)] = s
            # F T = B_AK with T lower triangular, positive diagonal, non-positive
            # off-diagonal: back substitution adds non-negative terms only.
            F = scipy.linalg.solve_triangular(T, B[:lo, lo:hi].T, trans="T", lower=True,
                                              check_finite=False).T
            B[:lo, lo:hi] = F * s
            B[:lo, :lo] += F @ B[lo:hi, :lo]
        if on_block is not None:
            on_block(lo)
        hi = lo
    return pivot


def log_partition_all_roots(log_beta) -> np.ndarray:
    """``log Z_r`` for every root ``r`` at once in O(T^3) (Tutte; sec. 2 of 004).

    Implements the "all roots in O(T^3)" remark after eq. for ``Z_r`` in 004:
    one subtraction-free (GTH) elimination gives ``log Z_0`` as the sum of the
    log pivots and, by back substitution, the left null vector ``w`` of the
    Laplacian, whose entries are proportional to ``Z_r`` (the adjugate of a
    rank T-1 Laplacian is ``1 w^T``).

    Parameters
    ----------
    log_beta : (T, T) array
        ``log_beta[u, v] = log p(X_u | X_v)``; diagonal ignored.

    Returns
    -------
    (T,) array of ``log Z_r``.
    """
    B, m = normalized_weights(log_beta)
    return log_partition_all_roots_scaled(B, m)


def gth_scale_exponent(n: int) -> int:
    """Power of two ``e`` by which :func:`log_partition_all_roots_scaled` multiplies its
    weights before the elimination.

    The weights lie in ``[exp(LOG_FLOOR), 1]`` (rows divided by their maximum, floored),
    and elimination conserves row sums, so every intermediate lies below ``n``.
    ``2^e ~ exp(-LOG_FLOOR)`` moves the floor to about 0.53. A multiplier (a weight
    over a pivot) is then at least ``0.53 / ((n - 1) 2^e)``, and times a weight at
    least ``0.28 / ((n - 1) 2^e)``: above the smallest normal double (2^-1022)
    for ``n`` up to about 2,300. ``n 2^e`` stays below 2^1021 (``e`` shrinks for
    ``n`` above 4,096). A power of two scales exactly: wherever the unscaled
    computation had no subnormal number, the scaled one gives the same bits.
    """
    return int(min(math.floor(-LOG_FLOOR / math.log(2.0)), 1021 - math.ceil(math.log2(max(n, 2)))))


def _eliminate_scaled(B) -> np.ndarray:
    """GTH elimination of nodes n-1, ..., 1 of the contiguous weights ``B`` in place; returns the
    logs of the pivots. ``B`` is left holding the reduced weights (see :func:`_gth_eliminate`).

    The weights are eliminated times an exact power of two, so that the floor-level weights sit
    near 1: the products of two small entries then stay normal numbers instead of subnormal ones
    (about 100x slower per operation on x86). The elimination is homogeneous of degree one, and
    scaling by a power of two is exact, so the pivots and reduced weights are 2^e times the
    unscaled ones, bit for bit wherever the unscaled run formed no subnormal number; the reduced
    weights are scaled back, exactly (docs/derivations-outtree.md, section 12)."""
    n = B.shape[0]
    e = gth_scale_exponent(n)
    B *= 2.0 ** e
    log_pivot = np.zeros(n)
    _gth_eliminate(B, log_pivot, scale_exp=e)  # log_pivot: the unscaled pivots' logs
    B *= 2.0 ** -e  # exact: the reduced weights the back substitution reads are >= the floor
    return log_pivot


@numba.njit(cache=True, nogil=True)
def _back_y(B, log_pivot, log_rt, scale_log, log_y):  # pragma: no cover - compiled
    """``log sum_r rt_r w_r``, ``w`` the left null vector of the eliminated Laplacian with
    ``w_0 = 1`` (the back substitution of :func:`_left_null_log`, summed against ``rt``).

    ``B`` holds the reduced weights times ``e^scale_log`` (an exact power of two), as
    :func:`_gth_eliminate` leaves them, ``log_pivot`` the logs of the unscaled pivots and
    ``log_rt`` the logs of ``rt``. With ``U`` the upper triangle of the elimination
    (``U_kk = s_k``, ``U_ik = -B_ik``), ``w_{1:}^T = B_{0,1:} U_{1:,1:}^{-1}``, so the sum is
    ``rt_0 + B_{0,1:} y`` with ``y_k = (rt_k + sum_{j>k} B_kj y_j) / s_k`` from ``k = n - 1``
    down: one pass over the rows (contiguous) instead of the columns, additions only.
    ``log_y[k]`` gets ``log y_k`` (``k >= 1``). ``t_j = y_j e^{-M}`` is kept against the
    running maximum ``M`` of ``log y``; a term it drops (below ``e^-745`` of the maximum) is
    below ``n e^-45`` of its row's sum, which is at least a scaled floor weight. Each product
    is scaled by ``2^-c``, ``2^c >= n``: a stored weight is at most ``n 2^e < 2^1021``, but a
    row's stored weights (each a share of the row's conserved sum at a different time) can
    add up to about ``n^2 2^e``.
    """
    n = B.shape[0]
    c = math.ceil(math.log2(max(n, 2)))
    inv = 2.0 ** -c
    scale_log = scale_log - c * math.log(2.0)
    t = np.zeros(n)
    big = -np.inf
    for k in range(n - 1, -1, -1):
        acc = 0.0
        for j in range(k + 1, n):
            acc += (B[k, j] * t[j]) * inv
        lv = log_rt[k]
        if acc > 0.0:
            ls = big + math.log(acc) - scale_log
            if lv == -np.inf:
                lv = ls
            elif ls > lv:
                lv = ls + math.log1p(math.exp(lv - ls))
            else:
                lv = lv + math.log1p(math.exp(ls - lv))
        if k == 0:
            return lv
        ly = lv - log_pivot[k]
        log_y[k] = ly
        if ly > big:
            if big > -np.inf:
                f = math.exp(big - ly)
                for j in range(k + 1, n):
                    t[j] *= f
            big = ly
        t[k] = math.exp(ly - big)
    return -np.inf


def _log_weighted_total(B, log_pivot, log_rt, scale_log) -> float:
    """``log sum_r rt_r w_r`` of an eliminated Laplacian (:func:`_back_y`)."""
    return float(_back_y(B, log_pivot, log_rt, scale_log, np.empty(B.shape[0])))


def _log_y(B, log_pivot, log_rt, scale_log) -> np.ndarray:
    """``log y_k`` of :func:`_back_y` for every node ``k >= 1`` (entry 0 unused)."""
    log_y = np.full(B.shape[0], -np.inf)
    _back_y(B, log_pivot, log_rt, scale_log, log_y)
    return log_y


def _scaled_log_total(B, e: int, log_rt) -> float:
    """``log Z_0 + log sum_r rt_r w_r`` of the weights ``B`` times ``2^e`` (eliminated in place):
    the sum of the log pivots and :func:`_log_weighted_total`."""
    log_pivot = np.zeros(B.shape[0])
    _gth_eliminate(B, log_pivot, scale_exp=e)
    if not np.all(np.isfinite(log_pivot[1:])):
        raise FloatingPointError("matrix-tree elimination produced a non-finite pivot")
    rest = _log_weighted_total(B, log_pivot, log_rt, e * math.log(2.0))
    if not math.isfinite(rest):
        raise FloatingPointError("matrix-tree back substitution produced a non-finite total")
    return float(log_pivot[1:].sum() + rest)


def log_total_all_roots_scaled(B, m, log_rho) -> float:
    """``log sum_r rho_r Z_r`` from row-normalised weights ``B`` (overwritten) and their row
    log-scales ``m``: :func:`log_partition_all_roots_scaled` summed against the root weights,
    without forming every ``log Z_r`` (``log Z_r = log Z_0 + log w_r + sum(m) - m_r``, so the
    total is ``log Z_0 + sum(m) + log sum_r rho_r e^{-m_r} w_r``)."""
    B = np.ascontiguousarray(B)
    e = gth_scale_exponent(B.shape[0])
    B *= 2.0 ** e
    return _scaled_log_total(B, e, np.asarray(log_rho, float) - m) + float(m.sum())


def log_partition_all_roots_scaled(B, m) -> np.ndarray:
    """:func:`log_partition_all_roots` from row-normalised weights ``B`` (zero
    diagonal, positive off-diagonal, overwritten) and the row log-scales ``m``
    (``log_beta[u, v] = log B[u, v] + m[u]``), without re-checking them.

    Tutte's ``Z_r`` of 004 sec. 2 for every root by one GTH elimination
    (docs/derivations-outtree.md section 2).
    """
    B = np.ascontiguousarray(B)
    log_pivot = _eliminate_scaled(B)
    if not np.all(np.isfinite(log_pivot)):
        raise FloatingPointError("matrix-tree elimination produced a non-finite pivot")
    log_w = _left_null_log(B, log_pivot)
    log_z0 = float(log_pivot[1:].sum())
    return log_z0 + log_w + (m.sum() - m)


def grounded_inverse(B, c: int):
    """``(H, idx)``: the inverse of the Laplacian of the row-normalised weights ``B`` (zero
    diagonal, rows are children) with row and column ``c`` removed, and the remaining nodes
    ``idx`` in ``H``'s order; ``(None, idx)`` when it is not finite.

    The GTH elimination (:func:`_gth_eliminate`) never eliminates node 0. With ``c`` moved to
    index 0, that node is the ground, and the grounded matrix ``M`` factors as
    ``M = (I - N) diag(p) (I - W)`` with ``N[i, k] = B_ik / p_k`` (``i < k``) and
    ``W[k, j] = B_kj / p_k`` (``j < k``) the reduced weights at node ``k``'s elimination, all
    non-negative. The triangular inverses are then sums of non-negative terms (back
    substitution only adds), and so is ``H = (I - W)^-1 diag(1/p) (I - N)^-1``: every entry is
    accurate to a modest multiple of the rounding unit, however weakly coupled the nodes are
    (docs/derivations-outtree.md section 13). An LU of the same matrix loses the small
    couplings to cancellation. O(T^3).
    """
    B = np.asarray(B, float)
    T = B.shape[0]
    idx = np.concatenate([np.arange(c), np.arange(c + 1, T)])
    perm = np.concatenate([[c], idx])
    Bp = np.ascontiguousarray(B[np.ix_(perm, perm)])
    p = np.exp(_eliminate_scaled(Bp)[1:])
    if not (np.all(np.isfinite(p)) and np.all(p > 0)):
        return None, idx
    R = Bp[1:, 1:]
    eye = np.eye(T - 1)
    with np.errstate(over="ignore", invalid="ignore"):
        U_inv = scipy.linalg.solve_triangular(eye - np.triu(R, 1) / p[None, :], eye, lower=False, unit_diagonal=True,
                                              check_finite=False)
        W_inv = scipy.linalg.solve_triangular(eye - np.tril(R, -1) / p[:, None], eye, lower=True, unit_diagonal=True,
                                              check_finite=False)
        H = (W_inv / p[None, :]) @ U_inv
    if not np.all(np.isfinite(H)):
        return None, idx
    return H, idx


def _minor(B, root):
    L = np.diag(B.sum(axis=1)) - B
    keep = np.delete(np.arange(B.shape[0]), root)
    return L[np.ix_(keep, keep)], keep


def log_partition(log_beta, root: int) -> float:
    """``log Z_root`` from the log-determinant of one Laplacian minor (004, sec. 2).

    A reference implementation (LU factorisation); prefer
    :func:`log_partition_all_roots`, which is also stable for clustered data.
    """
    B, m = normalized_weights(log_beta)
    M, _ = _minor(B, root)
    sign, logdet = np.linalg.slogdet(M)
    if sign <= 0:
        raise FloatingPointError("Laplacian minor is numerically singular")
    return float(logdet + m.sum() - m[root])


def root_marginals(log_beta, root: int) -> np.ndarray:
    """Edge marginals ``P_r(v -> u)`` of the out-tree distribution rooted at ``root``.

    ``q_r(T) = prod beta / Z_r`` (update for ``q_r`` in sec. 3 of 004); the
    marginal of edge ``v -> u`` is ``beta_uv d log Z_r / d beta_uv =
    beta_uv (G_uu - G_vu)`` with ``G`` the inverse of the Laplacian minor.
    """
    B, _ = normalized_weights(log_beta)
    n = B.shape[0]
    M, keep = _minor(B, root)
    Gm = np.linalg.inv(M)
    G = np.zeros((n, n))
    G[np.ix_(keep, keep)] = Gm
    P = B * (np.diag(G)[:, None] - G.T)
    P[root, :] = 0.0
    np.fill_diagonal(P, 0.0)
    return P


def root_entropy(log_beta, root: int) -> float:
    """Entropy ``H(q_r)`` of the out-tree distribution rooted at ``root`` (004, sec. 3).

    ``H(q_r) = log Z_r - sum_{uv} P_r(v -> u) log beta_uv``.
    """
    log_beta = _check_log_beta(log_beta)
    P = root_marginals(log_beta, root)
    lb = np.where(P > 0, log_beta, 0.0)
    return float(log_partition_all_roots(log_beta)[root] - np.sum(P * lb))


@dataclass(frozen=True)
class RootMixture:
    """The out-tree distribution summed over roots, ``q(r) q_r(T)`` of 004 sec. 3.

    Attributes
    ----------
    log_z_total : float
        ``log sum_r rho_r Z_r``.
    log_z : (T,) array
        ``log Z_r`` for every root.
    q_root : (T,) array
        ``q(r) = rho_r Z_r / sum_r rho_r Z_r``.
    edge_marginals : (T, T) array
        ``W[u, v] = sum_r q(r) P_r(v -> u)``; ``W.sum(1) + q_root == 1``.
    entropy : float
        ``H(q) + sum_r q(r) H(q_r)``.
    max_residual : float
        ``max_u |sum_v W[u, v] + q(u) - 1|``, a check on the linear algebra.
    """

    log_z_total: float
    log_z: np.ndarray
    q_root: np.ndarray
    edge_marginals: np.ndarray
    entropy: float
    max_residual: float


def root_mixture(log_beta, log_rho, _depth: int = 0, root_hint: int | None = None) -> RootMixture:
    """Partition function, root posterior and edge marginals over all roots.

    Implements the ``q(r)`` and ``W_uv`` updates of sec. 3 of 004 with ``W_uv``
    weighted by ``q(r)`` (the printed paper omits the ``q(r)`` factor). The
    root-summed weight ``sum_r rho_r Z_r`` is the determinant of the Laplacian
    with column ``c`` replaced by ``rho``; the gradient of its log-determinant
    gives ``W`` and ``q`` from one LU factorisation and inverse, O(T^3).

    Fast path (``root_hint`` given, e.g. the most probable root of the previous
    VB iteration): when the identity ``sum_v W_uv + q(u) = 1`` holds to 1e-8,
    ``log sum_r rho_r Z_r`` is the LU log-determinant and ``q`` comes from the
    inverse. Otherwise ``log Z_r`` and ``q`` come from the subtraction-free GTH
    elimination, small problems try the grouped decomposition, and the rows of
    ``W`` are projected onto ``sum_v W_uv = 1 - q(u)``.

    Parameters
    ----------
    log_beta : (T, T) array
        Log edge weights, ``log_beta[u, v]`` for parent ``v`` -> child ``u``.
    log_rho : (T,) array
        Log root weights.
    root_hint : int, optional
        Column to replace by ``rho``; any root with non-negligible ``q`` works.
    """
    log_beta = _check_log_beta(log_beta)
    log_rho = np.asarray(log_rho, dtype=float)
    n = log_beta.shape[0]
    if log_rho.shape != (n,) or not np.all(np.isfinite(log_rho)):
        raise ValueError(f"log_rho must be a finite vector of length {n}")
    off = ~np.eye(n, dtype=bool)
    koo = None
    if root_hint is not None:
        koo = (int(root_hint),) + _koo_marginals(log_beta, log_rho, int(root_hint))
        _, W, q_lu, logdet = koo
        resid = float(np.max(np.abs(W.sum(axis=1) + q_lu - 1.0)))
        if resid <= FAST_PATH_RESIDUAL and np.isfinite(logdet):
            q = q_lu / q_lu.sum()
            with np.errstate(divide="ignore"):
                log_z = np.log(q) + logdet - log_rho
            ent = logdet - float(np.sum(q * log_rho)) - float(np.sum(W[off] * log_beta[off]))
            return RootMixture(float(logdet), log_z, q, W, ent, resid)
    log_z = log_partition_all_roots(log_beta)
    a = log_rho + log_z
    log_z_total = float(logsumexp(a))
    q = np.exp(a - log_z_total)
    c = int(np.argmax(a))
    if koo is None or koo[0] != c:  # reuse the fast-path inverse when c agrees
        W, q_lu, _ = _koo_marginals(log_beta, log_rho, c)
    W, resid = _sanitize(W, q_lu, log_beta)
    if not resid <= 1e-9 and _depth < 4 and n <= GROUPED_MAX_NODES:
        Wg = _grouped_marginals(log_beta, log_rho, log_z, q, _depth)
        if Wg is not None:
            resid_g = float(np.max(np.abs(Wg.sum(axis=1) + q - 1.0)))
            if resid_g < resid:
                W, resid = Wg, resid_g
    if resid > 0.0:
        W = _project_rows(W, q)
    ent = log_z_total - float(np.sum(q * log_rho)) - float(np.sum(W[off] * log_beta[off]))
    return RootMixture(log_z_total, log_z, q, W, ent, resid)


GROUPED_MAX_NODES = 400
FAST_PATH_RESIDUAL = 1e-8


def _sanitize(W, q_lu, log_beta):
    """Residual of the row identity, and ``W`` with non-finite entries removed.

    When the column-replaced Laplacian is numerically singular (high-dimensional
    data whose points have one overwhelming parent each) the inverse can
    overflow. Rows with non-finite entries, or with no mass left, are replaced by
    the parent distribution of a node choosing its parent on its own,
    ``W_u. ∝ beta_u.`` (the tree constraint dropped); the row projection then
    gives them the mass ``1 - q(u)``. The returned residual is ``inf`` in that case
    so that the caller's warning fires.
    """
    bad = ~np.all(np.isfinite(W), axis=1) | (W.sum(axis=1) <= 0.0)
    if not np.all(np.isfinite(q_lu)):
        bad[:] = True
    if not bad.any():
        return W, float(np.max(np.abs(W.sum(axis=1) + q_lu - 1.0)))
    B, _ = normalized_weights(log_beta)
    W = W.copy()
    W[bad] = B[bad]
    return W, np.inf


def _project_rows(W, q):
    """Rescale each row of ``W`` (already clipped to be non-negative) so that
    ``sum_v W_uv = 1 - q(u)``, the exact identity of section 2 of the derivations.

    ``q`` comes from the subtraction-free GTH elimination and is accurate; the
    row sums of ``W`` carry the cancellation error of the inverse. The change
    of every entry is bounded by the reported residual.
    """
    s = W.sum(axis=1)
    target = np.clip(1.0 - q, 0.0, 1.0)
    scale = np.divide(target, s, out=np.ones_like(s), where=s > 0)
    return W * scale[:, None]


WEAK_LOG = -12.0


def _grouped_marginals(log_beta, log_rho, log_z, q, depth):
    """Edge marginals when the nodes split into groups joined only by weak edges.

    Groups are the weakly connected components of the graph of edges whose
    weight is above ``exp(WEAK_LOG)`` times their row maximum. A tree then
    enters every group but the root's through exactly one weak edge (two
    entries cost an extra factor below ``exp(WEAK_LOG)``, far below double
    precision), so the group level is itself a root-mixture problem with
    edge weights ``gamma_gh = sum_{u in g, v in h} beta_uv Z^g_u`` and root
    weights ``sum_{r in g} rho_r Z^g_r``, and inside a group the tree is a
    root mixture whose root weights are the entry probabilities. Every
    sub-problem is well conditioned; sums are taken in log space.
    Returns ``None`` when there is a single group.
    """
    from scipy.sparse import csr_matrix
    from scipy.sparse.csgraph import connected_components

    n = log_beta.shape[0]
    lb = log_beta.copy()
    np.fill_diagonal(lb, -np.inf)
    rel = lb - lb.max(axis=1, keepdims=True)
    ng, label = connected_components(csr_matrix(rel > WEAK_LOG), directed=True, connection="weak")
    if ng < 2:
        return None
    groups = [np.nonzero(label == g)[0] for g in range(ng)]
    log_zg = np.zeros(n)  # log Z^g_u inside its own group
    for idx in groups:
        if idx.size >= 2:
            log_zg[idx] = log_partition_all_roots(lb[np.ix_(idx, idx)])
    log_rho_g = np.array([logsumexp(log_rho[idx] + log_zg[idx]) for idx in groups])
    log_gamma = np.zeros((ng, ng))
    for g, ig in enumerate(groups):
        for h, ih in enumerate(groups):
            if g != h:
                log_gamma[g, h] = logsumexp(lb[np.ix_(ig, ih)] + log_zg[ig][:, None])
    top = root_mixture(log_gamma, log_rho_g, depth + 1)
    W = np.zeros((n, n))
    with np.errstate(divide="ignore"):
        log_wg = np.log(top.edge_marginals)
        log_qg = np.log(top.q_root)
    for g, ig in enumerate(groups):
        parts = [log_qg[g] + log_rho[ig] - log_rho_g[g]]
        for h, ih in enumerate(groups):
            if h == g:
                continue
            block = lb[np.ix_(ig, ih)] + log_zg[ig][:, None]
            parts.append(log_wg[g, h] + logsumexp(lb[np.ix_(ig, ih)], axis=1) - log_gamma[g, h])
            W[np.ix_(ig, ih)] = np.exp(log_wg[g, h] + block - log_gamma[g, h])
        if ig.size >= 2:
            log_eff = logsumexp(np.vstack(parts), axis=0)
            inner = root_mixture(lb[np.ix_(ig, ig)], log_eff, depth + 1)
            W[np.ix_(ig, ig)] = inner.edge_marginals
    return W


def koo_matrix(B, rho_scaled, c):
    """Laplacian ``diag(B 1) - B`` with column ``c`` replaced by ``rho_scaled`` (Tutte's directed
    matrix-tree theorem as used in 004; docs/derivations-outtree.md section 2)."""
    L = np.diag(B.sum(axis=1)) - B
    L[:, c] = rho_scaled
    return L


def scaled_root_column(log_rho, m):
    """Root column ``rho_u exp(-m_u - s)`` of the row-scaled Laplacian, and ``s``
    (docs/derivations-outtree.md sections 2 and 8).

    Row ``u`` of the Laplacian is divided by ``exp(m_u)`` (its largest parent
    weight). A point with no plausible parent (an outlier in high dimension)
    has ``log rho_u - m_u`` in the thousands, so ``exp(log rho_u - m_u)``
    overflows to inf and the LU returns NaN (the failure on yeast, abalone,
    cloud and wine). Dividing the whole replaced column by ``exp(s)``,
    ``s = max_u (log rho_u - m_u)``, keeps every entry in ``[0, 1]`` and
    multiplies the determinant by ``exp(-s)``; ``W`` and ``q`` are unchanged
    (``q(u) = rho_u G_cu`` is invariant under scaling column ``c`` of the
    matrix and row ``c`` of its inverse inversely).
    """
    rel = np.asarray(log_rho, float) - m
    shift = float(np.max(rel))
    return np.exp(rel - shift), shift


def _koo_marginals(log_beta, log_rho, c):
    """``(W, q, log det)`` from one LU factorisation of the column-replaced Laplacian.

    ``log det`` is ``log sum_r rho_r Z_r`` (NaN when the LU determinant is not
    positive); ``W`` is clipped at zero. LAPACK ``getrf`` + ``getrs``.
    """
    B, m = normalized_weights(log_beta)
    n = B.shape[0]
    rho, shift = scaled_root_column(log_rho, m)
    L = koo_matrix(B, rho, c)
    lu, piv, info = scipy.linalg.lapack.dgetrf(L, overwrite_a=True)
    G = None
    logdet = np.nan
    if info == 0:
        d = np.diag(lu)
        sign = np.prod(np.sign(d)) * (-1.0) ** int(np.sum(piv != np.arange(n)))
        if sign > 0:
            logdet = float(np.sum(np.log(np.abs(d))) + m.sum() + shift)
        # getrs on the identity (BLAS-3 triangular solves); this OpenBLAS's getri
        # is 5-15x slower at T = 2000
        G, info = scipy.linalg.lapack.dgetrs(lu, piv, np.eye(n), overwrite_b=True)
    if G is None or info != 0:
        logdet = np.nan
        G = np.full((n, n), np.nan)  # singular: _sanitize replaces the marginals
    return _marginals_from_inverse(G, B, rho, c) + (logdet,)


def _marginals_from_inverse(G, B, rho, c):
    """``W`` and ``q`` from ``G = K^-1`` (overwrites ``G``); see :func:`_koo_marginals`."""
    dG = np.diag(G).copy()
    dG[c] = 0.0
    with np.errstate(over="ignore", invalid="ignore"):
        return _marginals_core(G, B, rho, c, dG)


def _marginals_core(G, B, rho, c, dG):
    # d log det / d beta_uv = [u != c] G_uu - [v != c] G_vu
    q = np.clip(rho * G[c, :], 0.0, None)
    W = G.T
    W *= -1.0
    W += dG[:, None]
    W *= B
    W[:, c] = B[:, c] * dG
    np.fill_diagonal(W, 0.0)
    np.maximum(W, 0.0, out=W)
    return W, q


# ---------------------------------------------------------------------------
# brute force (reference for tests, T <= 7)
# ---------------------------------------------------------------------------


def enumerate_out_trees(n: int, root: int):
    """Yield every out-tree on ``n`` nodes rooted at ``root`` as a parent array.

    ``parent[root] == -1``. There are ``n^(n-2)`` of them (Cayley; 004 sec. 2).
    """
    if n > 7:
        raise ValueError("brute-force enumeration is only for n <= 7")
    others = [u for u in range(n) if u != root]
    for choice in itertools.product(range(n), repeat=n - 1):
        parent = np.full(n, -1)
        ok = True
        for u, p in zip(others, choice):
            if p == u:
                ok = False
                break
            parent[u] = p
        if not ok:
            continue
        # acyclic iff every node reaches the root
        good = True
        for u in others:
            seen = 0
            x = u
            while x != root and seen <= n:
                x = parent[x]
                seen += 1
            if x != root:
                good = False
                break
        if good:
            yield parent


def brute_force(log_beta, log_rho=None) -> dict:
    """Exact sums over every rooted out-tree (for tests with T <= 6): the reference
    for Tutte's theorem (004 sec. 2) and the marginals and entropies of
    docs/derivations-outtree.md sections 2-3.

    Returns a dict with ``log_z`` (per root), ``marginals`` (per root, (T,T,T)),
    ``entropy`` (per root) and, when ``log_rho`` is given, ``log_z_total``,
    ``q_root``, ``edge_marginals`` and ``mixture_entropy``.
    """
    log_beta = np.asarray(log_beta, float)
    n = log_beta.shape[0]
    log_z = np.zeros(n)
    marg = np.zeros((n, n, n))
    ent = np.zeros(n)
    for r in range(n):
        logs, edges = [], []
        for parent in enumerate_out_trees(n, r):
            kids = np.array([u for u in range(n) if u != r])
            logs.append(log_beta[kids, parent[kids]].sum())
            edges.append((kids, parent[kids]))
        logs = np.array(logs)
        log_z[r] = logsumexp(logs)
        p = np.exp(logs - log_z[r])
        ent[r] = -float(np.sum(xlogy(p, p)))
        for pk, (kids, par) in zip(p, edges):
            marg[r, kids, par] += pk
    out = {"log_z": log_z, "marginals": marg, "entropy": ent}
    if log_rho is not None:
        log_rho = np.asarray(log_rho, float)
        a = log_rho + log_z
        tot = logsumexp(a)
        q = np.exp(a - tot)
        out["log_z_total"] = float(tot)
        out["q_root"] = q
        out["edge_marginals"] = np.einsum("r,ruv->uv", q, marg)
        out["mixture_entropy"] = float(-np.sum(xlogy(q, q)) + np.sum(q * ent))
    return out
