"""Missing-value imputation with a fitted NLGBN (003 section 5, the
reconstruction experiment): the posterior-predictive mean of the missing
entries of each row given its observed entries.

For every kept posterior sample (structure and parameters fixed) a Gibbs
sampler runs over (hidden activations, missing values), rows grouped by their
missing pattern:

1. each hidden unit's activations given its parents and its children's
   current values (observed or imputed), with the model's own multiple-try
   Metropolis kernel :func:`chefs.models._nlgbn_kernels.mtm_unit`;
2. each missing observed value from its Gaussian conditional given its
   parents, y = logit(u) ~ N(mu, 1/rho): observed units at theta = 0 are
   leaves of the network (no edge can point below theta = 0, and the CIBP
   keeps them in the bottom layer), so nothing else constrains them.

Because missing units are leaves, a column missing in every row of a group is
integrated out exactly: it is left out of the children in step 1 and never
drawn (collapsing; with the benchmark's fixed bottom-half mask every missing
value is collapsed, which mixes far better than imputing them). Columns missing
in only some rows of a group are imputed by step 2.

The chain targets p(hidden, x_miss | x_obs, sample). After a short burn-in it
accumulates the Rao-Blackwellised E[u_miss | hidden, sample] =
E[sigmoid(N(mu, 1/rho))] (Gauss-Hermite quadrature), and the estimate is the
average over sweeps and posterior samples (each sample weighted equally: the
samples are draws from p(graph, parameters | training data)). Derivations:
docs/derivations-reconstruct.md.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit, ndtr

from .models.predictive import SampleArrays, sample_arrays
from .models import _nlgbn_kernels as _kern

_GH_X, _GH_W = np.polynomial.hermite_e.hermegauss(32)
_SQRT_2PI = math.sqrt(2 * math.pi)
_GH_W = _GH_W / _SQRT_2PI
_GL_X, _GL_W = np.polynomial.laguerre.laggauss(32)
_WIDE_SD = 1.5  # above this spread the sigmoid is step-like on the Hermite nodes' scale


def sigmoid_normal_mean(mu, sd) -> np.ndarray:
    """E[sigmoid(mu + sd Z)], Z ~ N(0, 1), to about 1e-9 for every mu and sd > 0.

    sd <= 1.5: 32-point Gauss-Hermite quadrature in Z. Wider: the sigmoid is close
    to a step on the scale of sd, which Gauss-Hermite resolves badly (error 1e-2
    at sd = 10), so it is split as sigmoid(y) = 1[y > 0] + g(y): the step gives
    Phi(mu / sd) exactly, and ``g(y) = -sign(y) sigmoid(-|y|)`` decays like ``e^-|y|``,
    E[g] = int_0^inf e^-t [N(-t; mu, sd^2) - N(t; mu, sd^2)] / (1 + e^-t) dt by
    32-point Gauss-Laguerre quadrature (docs/derivations-reconstruct.md)."""
    mu = np.asarray(mu, float)
    sd = np.broadcast_to(np.asarray(sd, float), mu.shape)
    out = np.empty(mu.shape)
    narrow = sd <= _WIDE_SD
    if narrow.any():
        out[narrow] = expit(mu[narrow][..., None] + sd[narrow][..., None] * _GH_X) @ _GH_W
    wide = ~narrow
    if wide.any():
        m, s = mu[wide][..., None], sd[wide][..., None]
        # N(-t; m, s^2) - N(t; m, s^2) at the Laguerre nodes t
        dens = (np.exp(-0.5 * ((_GL_X + m) / s) ** 2) - np.exp(-0.5 * ((_GL_X - m) / s) ** 2)) / (s * _SQRT_2PI)
        out[wide] = ndtr(mu[wide] / sd[wide]) + (dens / (1 + np.exp(-_GL_X))) @ _GL_W
    return out


def _activation_children(net: SampleArrays, h: int, collapsed: np.ndarray) -> np.ndarray:
    """Children whose likelihood enters the update of hidden unit h: all but the
    ``collapsed`` (missing in every row of the group, integrated out) ones."""
    ch = net.children[h]
    return ch[~collapsed[ch]]


def impute_sample(sample: dict, U: np.ndarray, miss: np.ndarray, rng: np.random.Generator, num_sweeps: int,
                  burn_in: int, num_tries: int = 4, max_groups: int = 16) -> np.ndarray:
    """Posterior-predictive mean of the missing entries under one posterior sample (the missing-data
    experiment of 003 section 5; docs/derivations-reconstruct.md sections 3-4).

    ``U`` (N, D) holds the observed values in (0, 1) (entries under ``miss`` are
    ignored); returns an (N, D) array whose entries under ``miss`` are the
    estimates of E[u_miss | u_obs, sample] in unit space (other entries 0).

    Rows are grouped by missing pattern (one group when there are more than
    ``max_groups`` patterns); within a group, columns missing in every row are
    integrated out of the hidden updates (they are leaves) and the others are
    imputed by Gibbs draws.
    """
    net = sample_arrays(sample)
    N, D = U.shape
    if net.obs_nodes.size != D:
        raise ValueError(f"posterior sample has {net.obs_nodes.size} observed units, data have {D} columns")
    for d in np.flatnonzero(miss.any(axis=0)):
        if net.children[net.obs_nodes[d]].size:
            raise ValueError(f"column {d} has children in the network (an input unit): it cannot be missing")
    patterns, inv = np.unique(miss, axis=0, return_inverse=True)
    inv = np.asarray(inv).reshape(-1)
    groups = [np.flatnonzero(inv == g) for g in range(len(patterns))] if len(patterns) <= max_groups else [np.arange(N)]
    acc = np.zeros((N, D))
    for rows in groups:
        acc[rows] = _gibbs(net, U[rows], miss[rows], rng, num_sweeps, burn_in, int(num_tries))
    return acc


def _gibbs(net: SampleArrays, U, miss, rng, num_sweeps, burn_in, J) -> np.ndarray:
    N, D = U.shape
    n = net.b.size
    whole = miss.all(axis=0)  # integrated out of the hidden updates
    part = np.flatnonzero(miss.any(axis=0) & ~whole)  # imputed by Gibbs draws
    cols = np.flatnonzero(miss.any(axis=0))
    rows = [np.flatnonzero(miss[:, d]) for d in range(D)]
    collapsed = np.zeros(n, bool)
    collapsed[net.obs_nodes[whole]] = True
    col_of = {int(i): d for d, i in enumerate(net.obs_nodes)}
    sd = 1.0 / np.sqrt(net.rho)
    Y = np.zeros((n, N))
    Uu = np.zeros((n, N))
    MU = np.zeros((n, N))
    # start: an ancestral draw given the observed values
    for i in net.order:
        pa = net.parents[i]
        MU[i] = net.b[i] + (net.W[pa, i] @ Uu[pa] if pa.size else 0.0)
        draw = MU[i] + sd[i] * rng.standard_normal(N)
        if net.obs[i]:
            d = col_of[int(i)]
            u = np.where(miss[:, d], 0.5, U[:, d])
            Y[i] = np.where(miss[:, d], draw, np.log(u) - np.log1p(-u))
        else:
            Y[i] = draw
        Uu[i] = expit(Y[i])
    hidden = [int(h) for h in net.order if not net.obs[h]]
    children = {h: _activation_children(net, h, collapsed) for h in hidden}
    acc = np.zeros((N, D))
    for t in range(num_sweeps):
        for h in hidden:
            z = rng.standard_normal((2 * J - 1, N))
            uu = rng.random((2, N))
            _kern.mtm_unit(Y, Uu, MU, net.W, net.rho, h, children[h], J, z, uu)
        for d in part:
            i, r = net.obs_nodes[d], rows[d]
            Y[i, r] = MU[i, r] + sd[i] * rng.standard_normal(r.size)
            Uu[i, r] = expit(Y[i, r])
        if t >= burn_in:
            for d in cols:
                i, r = net.obs_nodes[d], rows[d]
                pa = net.parents[i]
                mu = net.b[i] + (net.W[pa, i] @ Uu[pa][:, r] if pa.size else 0.0)
                acc[r, d] += sigmoid_normal_mean(np.broadcast_to(mu, r.shape), np.full(r.size, sd[i]))
    return acc / max(num_sweeps - burn_in, 1)


def _check_inputs(net, X, mask):
    if not hasattr(net, "samples_"):
        raise ValueError("the model is not fitted: call fit(X) (or BeliefNetwork.load) first")
    if net.map_.rotated:
        raise ValueError("this network was fitted on rotated data (rotate=True, or the default rotate='auto' on "
                         "data with a thin principal axis), whose units mix the columns: imputation needs a network "
                         "fitted with rotate=False")
    if net.map_.tailed:  # the mean of the unit values maps back to the mean of the data only through an affine map
        raise ValueError("this network was fitted with compressed tails (tails=True), whose unit map is not affine: "
                         "imputation needs a network fitted with tails=False")
    D = net.map_.lo.size
    try:
        X = np.array(X, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("X must be numeric (a 2-D array of numbers; NaN allowed at missing entries)") from None
    if X.ndim != 2 or X.shape[1] != D or X.shape[0] < 1:
        raise ValueError(f"X must be 2-D with {D} columns (the fitted width) and at least one row, got shape {X.shape}")
    mask = np.asarray(mask)
    if mask.dtype != np.bool_:
        raise ValueError(f"mask must be a boolean array (True = missing), got dtype {mask.dtype}")
    if mask.shape != X.shape:
        raise ValueError(f"mask has shape {mask.shape} but X has shape {X.shape}")
    bad = ~mask & ~np.isfinite(X)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"X has a non-finite observed entry at row {r}, column {c} (mark it missing in the mask)")
    ins = [j for j in net.inputs if mask[:, j].any()]
    if ins:
        raise ValueError(f"input column(s) {ins} of this conditional model cannot be missing")
    U = np.where(mask, 0.5, net.map_.forward(np.where(mask, net.map_.lo, X)))
    out = ~mask & ((U <= 0) | (U >= 1))
    if out.any():
        r, c = np.argwhere(out)[0]
        raise ValueError(f"observed entry at row {r}, column {c} ({X[r, c]}) lies outside the model's support "
                         f"({net.map_.inverse(0.0)[c]:.4g}, {net.map_.inverse(1.0)[c]:.4g}); clip or drop it")
    return X, mask, U


def predict_missing(net, X, mask, num_sweeps: int = 100, burn_in: int | None = None, rng=0,
                    max_samples: int | None = 50, num_tries: int = 4, progress: bool = False,
                    max_groups: int = 16) -> np.ndarray:
    """Posterior-predictive mean of X's missing entries (``mask`` True = missing)
    under a fitted :class:`chefs.density.BeliefNetwork` ``net``; observed
    entries are returned unchanged. See :meth:`BeliefNetwork.predict_missing`;
    ``max_groups``: see :func:`impute_sample`. 003 section 5; docs/derivations-reconstruct.md."""
    X, mask, U = _check_inputs(net, X, mask)
    num_sweeps = _int(num_sweeps, "num_sweeps", 1)
    burn_in = num_sweeps // 5 if burn_in is None else _int(burn_in, "burn_in", 0)
    if burn_in >= num_sweeps:
        raise ValueError(f"burn_in ({burn_in}) must be smaller than num_sweeps ({num_sweeps})")
    num_tries = _int(num_tries, "num_tries", 1)
    max_groups = _int(max_groups, "max_groups", 1)
    S = len(net.samples_)
    if max_samples is not None:
        S = min(S, _int(max_samples, "max_samples", 1))
    pick = np.unique(np.linspace(0, len(net.samples_) - 1, S).astype(int))
    rng = rng if isinstance(rng, np.random.Generator) else np.random.default_rng(rng)
    out = X.copy()
    todo = np.flatnonzero(mask.any(axis=1))
    if todo.size == 0:
        return out
    Ut, Mt = U[todo], mask[todo]
    total = np.zeros(Ut.shape)
    it = pick
    if progress:
        from tqdm.auto import tqdm

        it = tqdm(pick, desc="impute", unit="sample")
    for s in it:
        total += impute_sample(net.samples_[s], Ut, Mt, rng, num_sweeps, burn_in, num_tries, max_groups)
    mean_u = total / pick.size
    filled = net.map_.inverse(mean_u)
    sub = out[todo]
    sub[Mt] = filled[Mt]
    out[todo] = sub
    return out


def _int(v, name: str, lo: int) -> int:
    if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < lo:
        raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    return int(v)
