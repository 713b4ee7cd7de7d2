"""Numba kernels of the ICP prior: density (eq. 9 of 002, corrected) and the two
forward samplers (finite model of eqs. 1-3; sequential chefs process, eqs. 10-12
corrected). See ``docs/derivations.md`` for every formula used here.

All kernels take a ``numpy.random.Generator`` as first argument (numba advances
its bit generator in place, so the caller's stream stays reproducible).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

CACHE = True


@njit(cache=CACHE)
def interval_term(sorted_theta, alpha):
    """S = sum_j (theta~_{j+1} - theta~_j) [psi(alpha + j) - psi(alpha)]
         = sum_{r=1}^{K+} (1 - theta~_r) / (alpha + r - 1)   (telescoped).
    """
    s = 0.0
    for r in range(sorted_theta.shape[0]):
        s += (1.0 - sorted_theta[r]) / (alpha + r)
    return s


@njit(cache=CACHE)
def counts(theta, parents):
    """m_k (children) and a_k (active nodes strictly below)."""
    n = theta.shape[0]
    m = np.zeros(n, np.int64)
    for e in range(parents.shape[0]):
        m[parents[e]] += 1
    st = np.sort(theta)
    a = np.searchsorted(st, theta)  # side='left': strictly below
    return m, a, st


@njit(cache=CACHE)
def node_log_factor(is_obs, m, a, alpha, phi):
    """Per-node factor of eq. 9 (without the alpha*gamma of hidden nodes).

    hidden:   Gamma(m) Gamma(alpha + a - m) / Gamma(alpha + a)
    observed: phi^(m) alpha^(a-m) / (alpha + phi)^(a)   (rising factorials)
    """
    if is_obs:
        return (math.lgamma(phi + m) - math.lgamma(phi)
                + math.lgamma(alpha + a - m) - math.lgamma(alpha)
                - math.lgamma(alpha + phi + a) + math.lgamma(alpha + phi))
    return math.lgamma(m) + math.lgamma(alpha + a - m) - math.lgamma(alpha + a)


@njit(cache=CACHE)
def log_prob_infinite(theta, observed, parents, alpha, gamma, phi):
    """Log of eq. 9 of 002 without the printed 1/K+! (see derivations)."""
    m, a, st = counts(theta, parents)
    n = theta.shape[0]
    lp = 0.0
    num_hidden = 0
    for k in range(n):
        if not observed[k]:
            num_hidden += 1
            if m[k] == 0:
                return -np.inf
        lp += node_log_factor(observed[k], m[k], a[k], alpha, phi)
    lp += num_hidden * math.log(alpha * gamma)
    lp -= alpha * gamma * interval_term(st, alpha)
    return lp


# --------------------------------------------------------------------------
# growable buffers
@njit(cache=CACHE)
def _grow_f(x):
    y = np.empty(2 * x.shape[0], x.dtype)
    y[: x.shape[0]] = x
    return y


@njit(cache=CACHE)
def _grow_i(x):
    y = np.empty(2 * x.shape[0], x.dtype)
    y[: x.shape[0]] = x
    return y


@njit(cache=CACHE)
def _grow_b(x):
    y = np.zeros(2 * x.shape[0], x.dtype)
    y[: x.shape[0]] = x
    return y


# --------------------------------------------------------------------------
@njit(cache=CACHE)
def chefs_draw(rng, obs_theta, alpha, gamma, phi, hidden_at_one, max_nodes, max_edges, variant=0):
    """One draw of the sequential chefs process (002 section 2.2, corrected).

    ``obs_theta[s]`` is the fixed order of star chef ``s`` or NaN to draw it
    from U(0, 1). Returns (theta, observed, parents, children, status);
    ``status`` is 0 for a finished draw, 1 when it exceeded ``max_nodes``
    active nodes and 2 when it exceeded ``max_edges`` edges (a large gamma's
    draws have edges of the order of the square of their nodes). The result is in
    canonical form (observed nodes first in star order, then hidden nodes by
    increasing theta, edges sorted).

    ``variant`` plants the printed paper's versions for negative controls:
    1 = eq. 10 as printed (Binomial(a_i, phi/(alpha+phi)) backward count),
    2 = a Poisson rate off by one in eq. 12 (alpha + n + 1).

    Bookkeeping: ``trials[k]`` is the number of processed chefs strictly below
    k (Bernoulli trials of pi_k so far) and ``m[k]`` the successes among them;
    the predictive of the next trial is (m + phi I_obs) / (alpha + trials + phi I_obs).
    """
    cap = 64
    theta = np.empty(cap)
    obs = np.zeros(cap, np.bool_)
    done = np.zeros(cap, np.bool_)
    trials = np.zeros(cap, np.int64)
    m = np.zeros(cap, np.int64)
    ecap = 128
    par = np.empty(ecap, np.int64)
    chi = np.empty(ecap, np.int64)
    queue = np.empty(cap, np.int64)
    K = 0
    E = 0
    D = obs_theta.shape[0]
    for s in range(D):
        th = obs_theta[s]
        if np.isnan(th):
            th = rng.random()
        if K + 1 > theta.shape[0]:
            theta = _grow_f(theta); obs = _grow_b(obs); done = _grow_b(done)
            trials = _grow_i(trials); m = _grow_i(m); queue = _grow_i(queue)
        star = K
        theta[star] = th
        obs[star] = True
        done[star] = False
        m[star] = 0
        K += 1
        # Step 1 (backward): trials of the new star against every processed chef
        # below it. Exchangeable Bernoulli(pi) with pi ~ Beta(phi, alpha):
        # the count is Beta-binomial, not the printed Binomial of eq. 10.
        below = np.empty(K, np.int64)
        nb = 0
        for k in range(K):
            if done[k] and theta[k] < th:
                below[nb] = k
                nb += 1
        q = 0
        if nb > 0:
            if variant == 1:
                q = rng.binomial(nb, phi / (alpha + phi))
            else:
                pi = rng.beta(phi, alpha)
                q = rng.binomial(nb, pi)
        for r in range(q):
            j = r + rng.integers(0, nb - r)
            tmp = below[r]; below[r] = below[j]; below[j] = tmp
            if E + 1 > par.shape[0]:
                par = _grow_i(par); chi = _grow_i(chi)
            par[E] = star; chi[E] = below[r]; E += 1
        trials[star] = nb
        m[star] = q
        # process the star, then every regular chef it brings in (FIFO)
        head = 0
        tail = 0
        queue[tail] = star
        tail += 1
        while head < tail:
            c = queue[head]
            head += 1
            tc = theta[c]
            # Step 2: existing active chefs above c (eq. 11 with the number of
            # processed chefs below k in place of a_k - 1).
            for k in range(K):
                if theta[k] > tc:
                    w = phi if obs[k] else 0.0
                    p = (m[k] + w) / (alpha + trials[k] + w)
                    if rng.random() < p:
                        if E + 1 > par.shape[0]:
                            par = _grow_i(par); chi = _grow_i(chi)
                        par[E] = k; chi[E] = c; E += 1
                        m[k] += 1
                    trials[k] += 1
            # Step 3: new regular chefs, a Poisson process above c with
            # intensity alpha*gamma / (alpha + n(t)), n(t) = processed chefs below t.
            if hidden_at_one:
                if tc < 1.0:
                    nn = 0
                    for k in range(K):
                        if done[k] and theta[k] < 1.0:
                            nn += 1
                    cnt = rng.poisson(alpha * gamma / (alpha + nn))
                    for r in range(cnt):
                        if K + 1 > theta.shape[0]:
                            theta = _grow_f(theta); obs = _grow_b(obs); done = _grow_b(done)
                            trials = _grow_i(trials); m = _grow_i(m); queue = _grow_i(queue)
                        h = K
                        K += 1
                        theta[h] = 1.0; obs[h] = False; done[h] = False
                        trials[h] = nn + 1; m[h] = 1
                        if E + 1 > par.shape[0]:
                            par = _grow_i(par); chi = _grow_i(chi)
                        par[E] = h; chi[E] = c; E += 1
                        queue[tail] = h; tail += 1
            else:
                # processed chefs at or below tc, and the sorted ones above
                nn = 0
                na = 0
                above = np.empty(K, np.float64)
                for k in range(K):
                    if done[k]:
                        if theta[k] <= tc:
                            nn += 1
                        else:
                            above[na] = theta[k]
                            na += 1
                ab = np.sort(above[:na])
                lo = tc
                for j in range(na + 1):
                    hi = ab[j] if j < na else 1.0
                    length = hi - lo
                    if length > 0.0:
                        cnt = rng.poisson(alpha * gamma * length / (alpha + nn + (variant == 2)))
                        for r in range(cnt):
                            if K + 1 > theta.shape[0]:
                                theta = _grow_f(theta); obs = _grow_b(obs); done = _grow_b(done)
                                trials = _grow_i(trials); m = _grow_i(m); queue = _grow_i(queue)
                            h = K
                            K += 1
                            theta[h] = lo + length * rng.random()
                            obs[h] = False; done[h] = False
                            trials[h] = nn + 1; m[h] = 1
                            if E + 1 > par.shape[0]:
                                par = _grow_i(par); chi = _grow_i(chi)
                            par[E] = h; chi[E] = c; E += 1
                            queue[tail] = h; tail += 1
                    nn += 1
                    lo = hi
            done[c] = True
            if K > max_nodes or E > max_edges:
                return theta[:K].copy(), obs[:K].copy(), par[:E].copy(), chi[:E].copy(), 1 if K > max_nodes else 2
    th, ob, p, ch = canonical(theta[:K], obs[:K], par[:E], chi[:E])
    return th, ob, p, ch, 0


@njit(cache=CACHE)
def canonical(theta, obs, par, chi):
    """Observed nodes first (in index order), hidden by increasing theta; edges
    sorted by (parent, child)."""
    n = theta.shape[0]
    hid_idx = np.empty(n, np.int64)
    nh = 0
    perm = np.empty(n, np.int64)
    no = 0
    for k in range(n):
        if obs[k]:
            perm[no] = k
            no += 1
        else:
            hid_idx[nh] = k
            nh += 1
    hid = hid_idx[:nh]
    order = np.argsort(theta[hid], kind="mergesort")
    for r in range(nh):
        perm[no + r] = hid[order[r]]
    inv = np.empty(n, np.int64)
    for r in range(n):
        inv[perm[r]] = r
    th = theta[perm]
    ob = obs[perm]
    E = par.shape[0]
    key = np.empty(E, np.int64)
    for e in range(E):
        key[e] = inv[par[e]] * n + inv[chi[e]]
    key = np.sort(key)
    p = np.empty(E, np.int64)
    c = np.empty(E, np.int64)
    for e in range(E):
        p[e] = key[e] // n
        c[e] = key[e] % n
    return th, ob, p, c


@njit(cache=CACHE)
def finite_draw(rng, obs_theta, K, alpha, gamma, phi, hidden_at_one):
    """One draw of the finite model, eqs. 1-3 of 002, with K nodes in all.

    Draws theta and pi for the K - D hidden nodes, then activates lazily from
    the observed nodes upwards: each active node c draws Z_kc for every node k
    above it, so the cost is O(K * K+). Returns the active subgraph.
    """
    D = obs_theta.shape[0]
    theta = np.empty(K)
    pi = np.empty(K)
    for s in range(D):
        th = obs_theta[s]
        theta[s] = rng.random() if np.isnan(th) else th
        pi[s] = rng.beta(alpha * gamma / K + phi, alpha - alpha * gamma / K)
    for k in range(D, K):
        theta[k] = 1.0 if hidden_at_one else rng.random()
        pi[k] = rng.beta(alpha * gamma / K, alpha - alpha * gamma / K)
    active = np.zeros(K, np.bool_)
    queue = np.empty(K, np.int64)
    tail = 0
    for s in range(D):
        active[s] = True
        queue[tail] = s
        tail += 1
    ecap = 128
    par = np.empty(ecap, np.int64)
    chi = np.empty(ecap, np.int64)
    E = 0
    head = 0
    while head < tail:
        c = queue[head]
        head += 1
        tc = theta[c]
        for k in range(K):
            if theta[k] > tc and rng.random() < pi[k]:
                if E + 1 > par.shape[0]:
                    par = _grow_i(par); chi = _grow_i(chi)
                par[E] = k; chi[E] = c; E += 1
                if not active[k]:
                    active[k] = True
                    queue[tail] = k
                    tail += 1
    # relabel active nodes 0..K+-1 in activation order (observed first)
    newid = np.full(K, -1, np.int64)
    for r in range(tail):
        newid[queue[r]] = r
    th = np.empty(tail)
    ob = np.zeros(tail, np.bool_)
    for r in range(tail):
        th[r] = theta[queue[r]]
        ob[r] = queue[r] < D
    p = np.empty(E, np.int64)
    ch = np.empty(E, np.int64)
    for e in range(E):
        p[e] = newid[par[e]]
        ch[e] = newid[chi[e]]
    return canonical(th, ob, p, ch)
