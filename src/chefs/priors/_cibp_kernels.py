"""Numba kernels shared by the CIBP and the ECIBP (``docs/derivations-cibp.md``).

The graph lives in the slot arrays of :class:`chefs.mcmc.state.GraphState`
(``theta``, ``obs``, ``alive``, ``Z``, ``m`` = number of children, ``npar`` =
number of parents). The layer of a unit is read off its order value,
``theta_l = 1 - 2**-l`` (observed layer 0 at theta = 0), so no extra
bookkeeping is kept: :func:`widths` recounts the layer widths in O(capacity).

Both priors have the same per-layer factor (ordered-labelled form, §2 and §4 of
the derivations)::

    (alpha_l beta_l)^K_l / K_l! exp(-lambda(C_l; alpha_l, beta_l))
        prod_{k in layer l} B(eta_k, N_l - eta_k + beta_l)

with ``C_l = K_{l-1}`` the customers that create dishes (units) of layer l and
``N_l`` all customers of restaurant l: ``N_l = K_{l-1}`` for the CIBP
(``skip = False``) and ``N_l = K_0 + ... + K_{l-1}`` for the ECIBP
(``skip = True``). ``lambda(C; a, b) = a sum_{j=1}^{C} b / (b + j - 1)`` is the
mean of the layer-width Markov chain (eq. 1 of 003).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ..mcmc import _kernels as mk

CACHE = True

# planted errors for negative controls (tests only)
PLANT_NONE, PLANT_HASTINGS_NSO, PLANT_ORDER_FACTOR = 0, 1, 2


@njit(cache=CACHE)
def layer_of(t):
    """Layer index of order value ``t = 1 - 2**-l``."""
    if t <= 0.0:
        return 0
    return int(round(-math.log2(1.0 - t)))


@njit(cache=CACHE)
def theta_of(layer):
    return 1.0 - 2.0 ** (-layer)


@njit(cache=CACHE)
def widths(theta, alive, K):
    """Fill ``K[l]`` with the width of layer l; return the top layer M."""
    K[:] = 0
    M = 0
    for s in range(theta.shape[0]):
        if alive[s]:
            lay = layer_of(theta[s])
            K[lay] += 1
            if lay > M:
                M = lay
    return M


@njit(cache=CACHE)
def customers(K, lay, skip):
    """N_l: customers of the restaurant whose dishes are layer ``lay``."""
    if not skip:
        return K[lay - 1]
    n = 0
    for j in range(lay):
        n += K[j]
    return n


@njit(cache=CACHE)
def lam(C, a, b):
    """lambda(C; a, b) = a * sum_{j=1}^{C} b / (b + j - 1) (eq. 1 of 003)."""
    s = 0.0
    for j in range(C):
        s += b / (b + j)
    return a * s


@njit(cache=CACHE)
def log_prob_ordered(theta, alive, m, alpha, beta, K, skip):
    """Log-density of the state with the units of each layer in an arbitrary
    (uniformly random) order: the product over layers l = 1..M+1 of the
    ordered two-parameter IBP probability (derivations §2.2, §4.2)."""
    M = widths(theta, alive, K)
    if M + 1 >= alpha.shape[0]:
        return -np.inf
    lp = 0.0
    for lay in range(1, M + 2):
        a = alpha[lay]
        b = beta[lay]
        lp += K[lay] * math.log(a * b) - math.lgamma(K[lay] + 1) - lam(K[lay - 1], a, b)
    for s in range(theta.shape[0]):
        if alive[s]:
            lay = layer_of(theta[s])
            if lay == 0:
                continue
            N = customers(K, lay, skip)
            b = beta[lay]
            eta = m[s]
            lp += math.lgamma(eta) + math.lgamma(N - eta + b) - math.lgamma(N + b)
    return lp


@njit(cache=CACHE)
def has_other_child_below(theta, alive, Z, k, i, lay_k):
    """Whether k has a child other than i in layer ``lay_k - 1``."""
    for c in range(theta.shape[0]):
        if c != i and alive[c] and Z[k, c] and layer_of(theta[c]) == lay_k - 1:
            return True
    return False


@njit(cache=CACHE)
def edge_candidates(theta, alive, Z, i, skip, out):
    """Parents k of i whose edge can be Gibbs-updated without changing any
    unit's layer: k one layer above i (CIBP) or in any higher layer (ECIBP),
    and, when k is one layer above i, k keeps another child in that layer."""
    li = layer_of(theta[i])
    n = 0
    for k in range(theta.shape[0]):
        if not alive[k]:
            continue
        lk = layer_of(theta[k])
        if lk <= li or (not skip and lk != li + 1):
            continue
        if lk == li + 1 and not has_other_child_below(theta, alive, Z, k, i, lk):
            continue
        out[n] = k
        n += 1
    return n


@njit(cache=CACHE)
def edge_prior_prob(theta, alive, Z, m, k, i, beta, K, skip):
    """P(Z_ik = 1 | rest) = eta_{-i,k} / (N_l + beta_l - 1), l = layer of k
    (003 section 4.4; the same form for the ECIBP with N_l all lower units)."""
    widths(theta, alive, K)
    lay = layer_of(theta[k])
    eta = m[k] - (1 if Z[k, i] else 0)
    N = customers(K, lay, skip)
    return eta / (N + beta[lay] - 1.0)


@njit(cache=CACHE)
def birth_delta(theta, alive, m, K, lay, alpha, beta, skip, plant):
    """log p_ord(x + h) - log p_ord(x) for a parentless unit h with one child
    in layer ``lay`` (x: the state without h, widths ``K`` of x).

    Terms (derivations §3.2): h's own factor alpha beta / ((K_l + 1)(N_l - 1 + beta));
    restaurant l + 1 gains a creating customer (no dish): -alpha beta / (K_l + beta);
    every restaurant in which h is a customer (l + 1 for the CIBP, all above l
    for the ECIBP) has N -> N + 1, each of its units k' taking
    (N - eta_k' + beta) / (N + beta).
    """
    a = alpha[lay]
    b = beta[lay]
    N = customers(K, lay, skip)
    d = math.log(a * b) - math.log(N - 1.0 + b)
    if plant != PLANT_ORDER_FACTOR:
        d -= math.log(K[lay] + 1.0)
    d -= alpha[lay + 1] * beta[lay + 1] / (K[lay] + beta[lay + 1])
    for s in range(theta.shape[0]):
        if not alive[s]:
            continue
        ls = layer_of(theta[s])
        if ls == lay + 1 or (skip and ls > lay + 1):
            Ns = customers(K, ls, skip)
            bs = beta[ls]
            d += math.log(Ns - m[s] + bs) - math.log(Ns + bs)
    return d


pick_alive = mk.pick_alive  # shared with the ICP kernels
singleton_orphans = mk.singleton_orphan_parents  # (theta, obs, alive, Z, m, npar, i, out)


@njit(cache=CACHE)
def propose_birth_death(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, alpha, beta, skip, K, cand, plant):
    """Birth/death of a parentless singleton parent, applied tentatively.

    i is drawn uniformly among the K+ units; with probability 1/2 a new unit h
    is born in layer(i) + 1 with i as its only child (and put at a uniform
    position among the K_l + 1 of its layer), otherwise one of the n parentless
    singleton parents of i is removed. Returns ``(kind, log_ratio, h, i)``:
    kind 1 = birth, 2 = death, 0 = nothing proposed; ``log_ratio`` is the prior
    log-ratio plus the log Hastings ratio (derivations §3.3)::

        birth: log K+ - log(K+ + 1) - log n' + log(K_l + 1)    (n' counts h)
    """
    i, Kp = pick_alive(rng, alive)
    max_layer = alpha.shape[0] - 2
    if rng.random() < 0.5:
        lay = layer_of(theta[i]) + 1
        if lay > max_layer:
            return 0, 0.0, -1, i
        widths(theta, alive, K)
        n_so = singleton_orphans(theta, obs, alive, Z, m, npar, i, cand) + 1
        d = birth_delta(theta, alive, m, K, lay, alpha, beta, skip, plant)
        log_h = math.log(Kp) - math.log(Kp + 1.0) + math.log(K[lay] + 1.0)
        if plant != PLANT_HASTINGS_NSO:
            log_h -= math.log(n_so)
        h = mk.free_slot(alive)
        mk.apply_add_node(theta, obs, fixed, alive, tie, m, npar, a, h, theta_of(lay))
        mk.apply_set_edge(Z, m, npar, h, i, True)
        return 1, d + log_h, h, i
    n_so = singleton_orphans(theta, obs, alive, Z, m, npar, i, cand)
    if n_so == 0:
        return 0, 0.0, -1, i
    h = cand[rng.integers(0, n_so)]
    lay = layer_of(theta[h])
    widths(theta, alive, K)
    K[lay] -= 1  # the state without h
    d = -birth_delta(theta, alive, m, K, lay, alpha, beta, skip, plant)
    log_h = -(math.log(Kp - 1.0) - math.log(Kp) + math.log(K[lay] + 1.0))
    if plant != PLANT_HASTINGS_NSO:
        log_h += math.log(n_so)
    mk.apply_set_edge(Z, m, npar, h, i, False)
    mk.apply_remove_node(theta, alive, Z, m, npar, a, h)
    return 2, d + log_h, h, i


@njit(cache=CACHE)
def undo_birth_death(theta, obs, fixed, alive, tie, Z, m, npar, a, kind, h, i):
    if kind == 1:
        mk.apply_set_edge(Z, m, npar, h, i, False)
        mk.apply_remove_node(theta, alive, Z, m, npar, a, h)
    elif kind == 2:
        mk.apply_add_node(theta, obs, fixed, alive, tie, m, npar, a, h, theta[h])
        mk.apply_set_edge(Z, m, npar, h, i, True)


@njit(cache=CACHE)
def step_edge(rng, theta, alive, Z, m, npar, beta, skip, K, cand):
    """Prior Gibbs update of every candidate parent edge of a uniform unit i."""
    i, _ = pick_alive(rng, alive)
    n = edge_candidates(theta, alive, Z, i, skip, cand)
    changed = 0
    for c in range(n):
        k = cand[c]
        p1 = edge_prior_prob(theta, alive, Z, m, k, i, beta, K, skip)
        new = rng.random() < p1
        if new != Z[k, i]:
            mk.apply_set_edge(Z, m, npar, k, i, new)
            changed += 1
    return changed


@njit(cache=CACHE)
def run_prior(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, alpha, beta, skip, p_edge, num_steps,
              stats, plant):
    """Prior-only chain: each step is an edge Gibbs sweep of one unit (prob
    ``p_edge``) or a birth/death proposal. ``stats[0/1, 0/1]`` counts proposals
    and acceptances (edge, birth/death). Stops early, before drawing anything,
    when fewer than 2 free slots remain (returns the number of steps done)."""
    cap = alive.shape[0]
    K = np.zeros(alpha.shape[0] + 1, np.int64)
    cand = np.empty(cap, np.int64)
    for s in range(num_steps):
        if mk.num_alive(alive) + 2 > cap:
            return s
        if rng.random() < p_edge:
            stats[0, 0] += 1
            if step_edge(rng, theta, alive, Z, m, npar, beta, skip, K, cand) > 0:
                stats[0, 1] += 1
        else:
            kind, lr, h, i = propose_birth_death(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, alpha, beta,
                                                 skip, K, cand, plant)
            if kind != 0:
                stats[1, 0] += 1
                if math.log(rng.random()) < lr:
                    stats[1, 1] += 1
                else:
                    undo_birth_death(theta, obs, fixed, alive, tie, Z, m, npar, a, kind, h, i)
    return num_steps


@njit(cache=CACHE)
def summary(theta, obs, alive, Z, out):
    """out = (depth M, K_1, K_2, K_3, hidden, edges, skip edges, in-degree of observed)."""
    out[:] = 0
    for s in range(theta.shape[0]):
        if not alive[s]:
            continue
        ls = layer_of(theta[s])
        if ls > out[0]:
            out[0] = ls
        if 1 <= ls <= 3:
            out[ls] += 1
        if not obs[s]:
            out[4] += 1
        for c in range(theta.shape[0]):
            if alive[c] and Z[s, c]:
                out[5] += 1
                if layer_of(theta[c]) < ls - 1:
                    out[6] += 1
                if obs[c]:
                    out[7] += 1
