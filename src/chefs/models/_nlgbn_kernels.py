"""Numba kernels of the NLGBN sweep: multiple-try Metropolis for one hidden
unit's activations and the collapsed edge pass (same maths as the reference
numpy code in :mod:`chefs.models.nlgbn`, tested against it)."""

from __future__ import annotations

import math

import numpy as np
from numba import njit, prange

from ..mcmc._kernels import apply_set_edge, edge_candidates, edge_prior_prob

CACHE = True
# error_model="numpy": a division by zero gives inf/nan instead of raising, so
# numba emits no zero checks in the inner loops (1.2x on the activation kernel,
# same numbers bit for bit; no division here can see a zero denominator)


@njit(cache=CACHE, error_model="numpy")
def _sigmoid(x):
    if x >= 0:
        return 1.0 / (1.0 + math.exp(-x))
    e = math.exp(x)
    return e / (1.0 + e)


@njit(cache=CACHE, error_model="numpy")
def _logw(y, base, wc, rc, C):
    s = _sigmoid(y)
    v = 0.0
    for ci in range(C):
        d = base[ci] - wc[ci] * s
        v -= 0.5 * rc[ci] * d * d
    return v


@njit(cache=CACHE, error_model="numpy")
def _child_params(W, rho, h, children):
    """Weights from h to its children and the children's precisions."""
    C = children.shape[0]
    wc = np.empty(C)
    rc = np.empty(C)
    for ci in range(C):
        wc[ci] = W[h, children[ci]]
        rc[ci] = rho[children[ci]]
    return wc, rc


@njit(cache=CACHE, error_model="numpy")
def _residuals_without(Y, MU, children, wc, u_old, n, base):
    """Each child's residual at point n without h's contribution (into ``base``)."""
    for ci in range(children.shape[0]):
        c = children[ci]
        base[ci] = Y[c, n] - MU[c, n] + wc[ci] * u_old


@njit(cache=CACHE, parallel=True, error_model="numpy")
def mtm_unit(Y, U, MU, W, rho, h, children, J, z, uu):
    """Multiple-try Metropolis update of unit h's activations, one data point at
    a time: J tries from N(MU_h, 1/rho_h), one selected with probability
    proportional to the children's likelihood, accepted against J - 1 fresh
    reference draws plus the current value. Updates Y[h], U[h] and the
    children's MU. Returns the number of accepted points.

    ``z`` (2J - 1, N) standard normals and ``uu`` (2, N) uniforms are drawn by
    the caller with numpy (vectorised; much faster than per-call draws). The
    data points are independent given the other units, so blocks of them run on
    numba's threads; every point uses only its own columns of ``z`` and ``uu``,
    so the result does not depend on the number of threads.
    """
    N = Y.shape[1]
    wc, rc = _child_params(W, rho, h, children)
    nblocks = min(N, 64)
    acc = 0
    for blk in prange(nblocks):
        lo = blk * N // nblocks
        hi = (blk + 1) * N // nblocks
        acc += _mtm_block(Y, U, MU, rho, h, children, J, z, uu, wc, rc, lo, hi)
    return acc


@njit(cache=CACHE, parallel=True, error_model="numpy")
def mtm_units(Y, U, MU, W, rho, hidden, ptr, idx, J, z, uu):
    """``mtm_unit`` for every unit of ``hidden`` in turn, in one parallel region.

    Given the parameters, the data points are independent, so each block of
    points can run all the units' updates in order on its own thread: the
    numbers equal those of calling ``mtm_unit`` unit by unit (same order, same
    ``z[u]``, ``uu[u]`` per unit), with one fork and join per sweep instead of
    one per unit. Unit ``hidden[u]``'s children are ``idx[ptr[u]:ptr[u + 1]]``;
    ``z`` is (units, 2J - 1, N) and ``uu`` (units, 2, N). Returns the number of
    accepted (unit, point) updates.
    """
    N = Y.shape[1]
    H = hidden.shape[0]
    wcs = np.empty(idx.shape[0])
    rcs = np.empty(idx.shape[0])
    for u in range(H):
        for q in range(ptr[u], ptr[u + 1]):
            wcs[q] = W[hidden[u], idx[q]]
            rcs[q] = rho[idx[q]]
    nblocks = min(N, 64)
    acc = 0
    for blk in prange(nblocks):
        lo = blk * N // nblocks
        hi = (blk + 1) * N // nblocks
        a = 0
        for u in range(H):
            a0, a1 = ptr[u], ptr[u + 1]
            a += _mtm_block(Y, U, MU, rho, hidden[u], idx[a0:a1], J, z[u], uu[u], wcs[a0:a1], rcs[a0:a1], lo, hi)
        acc += a
    return acc


@njit(cache=CACHE, error_model="numpy")
def _mtm_block(Y, U, MU, rho, h, children, J, z, uu, wc, rc, lo, hi):
    """``mtm_unit`` on the data points lo..hi-1 (own scratch arrays)."""
    C = children.shape[0]
    sd = 1.0 / math.sqrt(rho[h])
    tries = np.empty(J)
    lw = np.empty(J)
    lr = np.empty(J)
    base = np.empty(C)
    acc = 0
    for n in range(lo, hi):
        u_old = U[h, n]
        mu = MU[h, n]
        _residuals_without(Y, MU, children, wc, u_old, n, base)
        mx = -np.inf
        for j in range(J):
            y = mu + sd * z[j, n]
            tries[j] = y
            v = _logw(y, base, wc, rc, C)
            lw[j] = v
            if v > mx:
                mx = v
        tot = 0.0
        for j in range(J):
            lw[j] = math.exp(lw[j] - mx)
            tot += lw[j]
        u = uu[0, n] * tot
        pick = J - 1
        cum = 0.0
        for j in range(J):
            cum += lw[j]
            if u < cum:
                pick = j
                break
        mr = -np.inf
        for j in range(J):
            y = mu + sd * z[J + j, n] if j < J - 1 else Y[h, n]
            v = _logw(y, base, wc, rc, C)
            lr[j] = v
            if v > mr:
                mr = v
        tot_r = 0.0
        for j in range(J):
            tot_r += math.exp(lr[j] - mr)
        if math.log(uu[1, n]) < (mx + math.log(tot)) - (mr + math.log(tot_r)):
            y_new = tries[pick]
            u_new = _sigmoid(y_new)
            Y[h, n] = y_new
            U[h, n] = u_new
            for ci in range(C):
                MU[children[ci], n] += wc[ci] * (u_new - u_old)
            acc += 1
    return acc


@njit(cache=CACHE, error_model="numpy")
def _logpi(y, mu, prec, base, wc, rc, C):
    d = y - mu
    return -0.5 * prec * d * d + _logw(y, base, wc, rc, C)





@njit(cache=CACHE, error_model="numpy")
def slice_unit(Y, U, MU, W, rho, h, children, seed, max_steps=8, plant=0):
    """Univariate slice sampling (Neal 2003: stepping out, then shrinkage) of
    unit h's pre-activation at every data point, from its full conditional
    N(y; MU_h, 1/rho_h) prod_children N(y_c; MU_c^-h + W_hc sigmoid(y), 1/rho_c).
    Initial bracket width: the prior standard deviation 1/sqrt(rho_h); at most
    ``max_steps`` widths of stepping out. Leaves each conditional invariant.
    Random numbers from numba's stream, seeded from ``seed`` (drawn by the
    caller from its Generator, so runs stay reproducible and resumable).
    Returns the number of evaluations of the conditional. ``plant`` = 1 (tests
    only): the prior mean is shifted by 0.5 (a negative control).
    """
    np.random.seed(seed)
    prec = rho[h]
    shift = 0.5 if plant == 1 else 0.0
    N = Y.shape[1]
    C = children.shape[0]
    w = 1.0 / math.sqrt(rho[h])
    base = np.empty(C)
    wc, rc = _child_params(W, rho, h, children)
    evals = 0
    for n in range(N):
        y0 = Y[h, n]
        u_old = U[h, n]
        mu = MU[h, n] + shift
        _residuals_without(Y, MU, children, wc, u_old, n, base)
        level = _logpi(y0, mu, prec, base, wc, rc, C) - np.random.exponential()
        left = y0 - w * np.random.random()
        right = left + w
        jl = int(max_steps * np.random.random())
        jr = max_steps - 1 - jl
        while jl > 0 and _logpi(left, mu, prec, base, wc, rc, C) > level:
            left -= w
            jl -= 1
            evals += 1
        while jr > 0 and _logpi(right, mu, prec, base, wc, rc, C) > level:
            right += w
            jr -= 1
            evals += 1
        while True:
            y1 = left + (right - left) * np.random.random()
            evals += 1
            if _logpi(y1, mu, prec, base, wc, rc, C) > level:
                break
            if y1 < y0:
                left = y1
            else:
                right = y1
        u_new = _sigmoid(y1)
        Y[h, n] = y1
        U[h, n] = u_new
        for ci in range(C):
            MU[children[ci], n] += wc[ci] * (u_new - u_old)
    return evals


@njit(cache=CACHE, error_model="numpy")
def collapsed(U, Y, MU, W, rho, k, i, cur, v):
    """(gain, mean, var) of regressor U[k] on the residual of i without k."""
    N = Y.shape[1]
    s = 0.0
    t = 0.0
    wk = W[k, i] if cur else 0.0
    for n in range(N):
        u = U[k, n]
        r = Y[i, n] - MU[i, n] + wk * u
        s += u * u
        t += u * r
    s *= rho[i]
    t *= rho[i]
    d = 1.0 + v * s
    return -0.5 * math.log(d) + 0.5 * v * t * t / d, v * t / d, v / d


@njit(cache=CACHE, error_model="numpy")
def edge_pass(rng, theta, obs, alive, Z, m, npar, a, W, Y, U, MU, rho, alpha, phi, v, stats, plant=0):
    """Collapsed Gibbs of (Z_ki, W_ki) for every node i and candidate parent k
    (docs/derivations.md section 3.2). ``plant`` (tests only): 1 drops the collapsed likelihood
    gain from the edge's conditional (edges drawn from the prior alone)."""
    cap = theta.shape[0]
    cand = np.empty(cap, np.int64)
    N = Y.shape[1]
    for i in range(cap):
        if not alive[i]:
            continue
        n_c = edge_candidates(theta, obs, alive, Z, m, i, cand)
        changed = False
        for ci in range(n_c):
            k = cand[ci]
            if not (obs[k] or m[k] - (1 if Z[k, i] else 0) >= 1):
                continue
            p1 = edge_prior_prob(obs, Z, m, a, k, i, alpha, phi)
            cur = Z[k, i]
            gain, mean, var = collapsed(U, Y, MU, W, rho, k, i, cur, v)
            logit = math.log(p1) - math.log1p(-p1) + (0.0 if plant == 1 else gain)
            p = 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0
            new = rng.random() < p
            w_old = W[k, i] if cur else 0.0
            w_new = mean + math.sqrt(var) * rng.standard_normal() if new else 0.0
            for n in range(N):
                MU[i, n] += (w_new - w_old) * U[k, n]
            W[k, i] = w_new
            if new != cur:
                apply_set_edge(Z, m, npar, k, i, new)
                changed = True
        stats[0, 0] += 1
        if changed:
            stats[0, 1] += 1


# ---------------------------------------------------------------- the non-centred updates (docs/derivations.md 3.24)
@njit(cache=CACHE, error_model="numpy")
def _nc_children_loglik(A, mu, B, v, Yc, base, wc, rc, u):
    """The log-density of h's children (up to a constant) with h's pre-activations ``A mu + B v``:
    ``-1/2 sum_c rc[c] sum_n (Yc - base - wc[c] expit(A mu + B v))^2`` (``u`` is a scratch row)."""
    N = mu.shape[0]
    for n in range(N):  # scipy's expit formula, not _sigmoid's: the reference's values to the bit
        u[n] = 1.0 / (1.0 + math.exp(-(A * mu[n] + B * v[n])))
    tot = 0.0
    for ci in range(Yc.shape[0]):
        s = 0.0
        w = wc[ci]
        for n in range(N):
            r = Yc[ci, n] - base[ci, n] - w * u[n]
            s += r * r
        tot += rc[ci] * s
    return -0.5 * tot


@njit(cache=CACHE, error_model="numpy")
def _nc_logf(mode, t, c1, c2, mu, v, Yc, base, wc, rc, u, no_data):
    """The two slice targets of ``noncentred_unit`` on the log scale: mode 0, ``log rho_h = t`` with
    ``c1 t - c2 e^t`` (the Gamma prior with its Jacobian) and h's pre-activations ``mu + eps e^(-t/2)``;
    mode 1, the scale ``log g = t`` with ``-q e^(2t) + k t`` (c2 = q, c1 = k) and ``e^t mu + noise``."""
    if mode == 0:
        f = c1 * t - c2 * math.exp(t)
        return f if no_data else f + _nc_children_loglik(1.0, mu, math.exp(-0.5 * t), v, Yc, base, wc, rc, u)
    f = -math.exp(2.0 * t) * c2 + c1 * t
    return f if no_data else f + _nc_children_loglik(math.exp(t), mu, 1.0, v, Yc, base, wc, rc, u)


@njit(cache=CACHE, error_model="numpy")
def _nc_slice(rng, mode, x0, c1, c2, mu, v, Yc, base, wc, rc, u, no_data):
    """One slice-sampling update of ``log x`` (stepping out, width 1, at most 50 steps): the same draws
    in the same order as :func:`chefs.mcmc.hyper.slice_sample_log`."""
    width = 1.0
    max_steps = 50
    y0 = math.log(x0)
    level = _nc_logf(mode, y0, c1, c2, mu, v, Yc, base, wc, rc, u, no_data) + math.log(rng.random())
    left = y0 - width * rng.random()
    right = left + width
    j = int(max_steps * rng.random())
    k = max_steps - 1 - j
    while j > 0 and _nc_logf(mode, left, c1, c2, mu, v, Yc, base, wc, rc, u, no_data) > level:
        left -= width
        j -= 1
    while k > 0 and _nc_logf(mode, right, c1, c2, mu, v, Yc, base, wc, rc, u, no_data) > level:
        right += width
        k -= 1
    while True:
        y = left + (right - left) * rng.random()
        if _nc_logf(mode, y, c1, c2, mu, v, Yc, base, wc, rc, u, no_data) > level:
            return math.exp(y)
        if y < y0:
            left = y
        else:
            right = y


@njit(cache=CACHE, error_model="numpy")
def noncentred_unit(rng, rho_h, mu, eps, Yc, base, wc, rc, jac_rho, rate, q, k, no_data):
    """The non-centred updates of one hidden unit h (``NLGBN.noncentred_update``, which has the maths):
    with ``eps`` (h's standardised noise) held, a slice update of ``log rho_h`` and then one of the scale
    ``g`` of ``(b_h, W_.h)``. ``mu`` is h's mean, ``Yc``/``base``/``wc``/``rc`` its children's values,
    their means without h, h's weights to them and their precisions. Returns ``(rho_h', g)``."""
    u = np.empty(mu.shape[0])
    rho_new = _nc_slice(rng, 0, rho_h, jac_rho, rate, mu, eps, Yc, base, wc, rc, u, no_data)
    noise = eps * (1.0 / math.sqrt(rho_new))
    g = _nc_slice(rng, 1, 1.0, k, q, mu, noise, Yc, base, wc, rc, u, no_data)
    return rho_new, g
