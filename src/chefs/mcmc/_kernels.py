"""Numba kernels of the reversible-jump MCMC over ICP structures.

The graph lives in fixed-capacity arrays (slots); ``alive[k]`` marks active
nodes. Bookkeeping kept exact and incremental by every apply function:

    Z[k, i]   edge k -> i            m[k]   number of children
    npar[i]   number of parents      a[k]   active nodes strictly below k
    tie[k]    rank offset of k inside a block of equal theta (fixed nodes only)

so that the 0-based rank of node k in the sorted orders is ``a[k] + tie[k]``.
Every prior log-ratio is computed from these counts in O(K+) without sorting
and without recomputing the density (derivations: docs/derivations.md §2).

Proposal kernels return their pieces (prior log-ratio, Hastings log-ratio) and
do not touch the state; ``apply_*`` functions change it. The prior-only fast
path (``run_null``) uses exactly the same propose/apply functions as the
model path driven from Python.
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

CACHE = True

# move kinds
EDGE, BIRTH_DEATH, ORDER, DEPTH = 0, 1, 2, 3
MOVE_NAMES = ("edge", "birth_death", "order", "depth")

# planted errors for negative controls (tests only)
PLANT_NONE, PLANT_BIRTH_HASTINGS, PLANT_ORDER_DELTA, PLANT_DEPTH_HASTINGS, PLANT_EDGE_COUNT = 0, 1, 2, 3, 4


@njit(cache=CACHE)
def node_factor(is_obs, m, a, alpha, gamma, phi):
    """log of the per-node factor of eq. 9 (hidden nodes include alpha*gamma)."""
    if is_obs:
        return (math.lgamma(phi + m) - math.lgamma(phi) + math.lgamma(alpha + a - m) - math.lgamma(alpha)
                - math.lgamma(alpha + phi + a) + math.lgamma(alpha + phi))
    return math.log(alpha * gamma) + math.lgamma(m) + math.lgamma(alpha + a - m) - math.lgamma(alpha + a)


@njit(cache=CACHE)
def log_prior_full(theta, obs, alive, m, a, tie, alpha, gamma, phi):
    """Full log-density (eq. 9 corrected) from the bookkeeping arrays: used at
    initialisation, for hyperparameter updates and by the tests, never per move."""
    lp = 0.0
    S = 0.0
    for k in range(theta.shape[0]):
        if alive[k]:
            lp += node_factor(obs[k], m[k], a[k], alpha, gamma, phi)
            S += (1.0 - theta[k]) / (alpha + a[k] + tie[k])
    return lp - alpha * gamma * S


@njit(cache=CACHE)
def interval_sum(theta, alive, a, tie, alpha):
    S = 0.0
    for k in range(theta.shape[0]):
        if alive[k]:
            S += (1.0 - theta[k]) / (alpha + a[k] + tie[k])
    return S


@njit(cache=CACHE)
def insert_delta(theta, obs, alive, m, a, tie, th, m_x, obs_x, exclude, alpha, gamma, phi, Z, skip_parents):
    """log p(G + x) - log p(G) for a node x at order ``th`` with ``m_x`` children.

    G is the current graph without node ``exclude`` (-1: none); counts of
    nodes above ``exclude`` are corrected for its absence. Every node above
    ``th`` gains one trial (a -> a + 1) with no success, and the interval term
    changes by (1 - th)/(alpha + a_x) + sum_above (1 - theta_k)[1/(alpha+r_k+1) - 1/(alpha+r_k)].

    ``skip_parents``: leave out the parents of ``exclude`` (order moves, where
    their terms are identical at the old and the new position and cancel).
    """
    th_ex = theta[exclude] if exclude >= 0 else 2.0
    a_x = 0
    d_nodes = 0.0
    dS = 0.0
    for k in range(theta.shape[0]):
        if not alive[k] or k == exclude:
            continue
        if theta[k] < th:
            a_x += 1
        elif theta[k] > th:
            if skip_parents and Z[k, exclude]:
                continue
            ak = a[k]
            if exclude >= 0 and th_ex < theta[k]:
                ak -= 1
            mk = m[k]
            if obs[k]:
                d_nodes += math.log(alpha + ak - mk) - math.log(alpha + phi + ak)
            else:
                d_nodes += math.log(alpha + ak - mk) - math.log(alpha + ak)
            r = ak + tie[k]
            dS += (1.0 - theta[k]) * (1.0 / (alpha + r + 1) - 1.0 / (alpha + r))
    own = node_factor(obs_x, m_x, a_x, alpha, gamma, phi)
    dS += (1.0 - th) / (alpha + a_x)
    return own + d_nodes - alpha * gamma * dS


# ------------------------------------------------------------------ apply
@njit(cache=CACHE)
def apply_set_edge(Z, m, npar, k, i, value):
    if Z[k, i] != value:
        Z[k, i] = value
        if value:
            m[k] += 1
            npar[i] += 1
        else:
            m[k] -= 1
            npar[i] -= 1


@njit(cache=CACHE)
def free_slot(alive):
    for k in range(alive.shape[0]):
        if not alive[k]:
            return k
    return -1


@njit(cache=CACHE)
def apply_add_node(theta, obs, fixed, alive, tie, m, npar, a, slot, th):
    """Activate hidden node ``slot`` at order ``th`` (no edges yet)."""
    below = 0
    for k in range(theta.shape[0]):
        if alive[k]:
            if theta[k] < th:
                below += 1
            elif theta[k] > th:
                a[k] += 1
    theta[slot] = th
    obs[slot] = False
    fixed[slot] = False
    alive[slot] = True
    tie[slot] = 0
    m[slot] = 0
    npar[slot] = 0
    a[slot] = below


@njit(cache=CACHE)
def apply_remove_node(theta, alive, Z, m, npar, a, slot):
    """Deactivate ``slot`` (its edges must already be removed)."""
    th = theta[slot]
    alive[slot] = False
    for k in range(theta.shape[0]):
        if alive[k] and theta[k] > th:
            a[k] -= 1


@njit(cache=CACHE)
def apply_move_node(theta, alive, a, i, th_new):
    th_old = theta[i]
    below = 0
    for k in range(theta.shape[0]):
        if not alive[k] or k == i:
            continue
        t = theta[k]
        if t < th_new:
            below += 1
        # node k gains / loses i from below
        if th_old < t <= th_new:
            a[k] -= 1
        elif th_new < t <= th_old:
            a[k] += 1
    theta[i] = th_new
    a[i] = below


# ------------------------------------------------------------------ edges
@njit(cache=CACHE)
def edge_candidates(theta, obs, alive, Z, m, i, out):
    """Parents k of i whose edge can be Gibbs-updated without changing the
    active set: theta_k > theta_i and (k observed or k has a child other than i)."""
    n = 0
    ti = theta[i]
    for k in range(theta.shape[0]):
        if alive[k] and theta[k] > ti:
            if obs[k] or m[k] - (1 if Z[k, i] else 0) >= 1:
                out[n] = k
                n += 1
    return n


@njit(cache=CACHE)
def edge_prior_prob(obs, Z, m, a, k, i, alpha, phi):
    """P(Z_ki = 1 | rest) under the prior, eq. 13: (m^-i + phi I_O)/(alpha + a_k - 1 + phi I_O)."""
    m_other = m[k] - (1 if Z[k, i] else 0)
    w = phi if obs[k] else 0.0
    return (m_other + w) / (alpha + a[k] - 1 + w)


# ------------------------------------------------------------ birth/death
@njit(cache=CACHE)
def num_alive(alive):
    n = 0
    for k in range(alive.shape[0]):
        if alive[k]:
            n += 1
    return n


@njit(cache=CACHE)
def singleton_orphan_parents(theta, obs, alive, Z, m, npar, i, out):
    """Hidden parents of i whose only child is i and which have no parent."""
    n = 0
    for k in range(theta.shape[0]):
        if alive[k] and not obs[k] and Z[k, i] and m[k] == 1 and npar[k] == 0:
            out[n] = k
            n += 1
    return n


@njit(cache=CACHE)
def birth_log_hastings(Kp, n_so_after, th_i):
    """log [q(reverse) / q(forward)] for a birth: reverse picks i among K+ + 1
    nodes and the newborn among n_so_after singleton orphans; forward picks i
    among K+ and theta_new ~ U(theta_i, 1)."""
    return math.log(Kp) - math.log(Kp + 1) - math.log(n_so_after) + math.log(1.0 - th_i)


# ---------------------------------------------------------------- depth
@njit(cache=CACHE)
def count_edges(alive, Z):
    n = 0
    cap = alive.shape[0]
    for k in range(cap):
        if alive[k]:
            for i in range(cap):
                if Z[k, i]:
                    n += 1
    return n


@njit(cache=CACHE)
def nth_edge(alive, Z, r):
    cap = alive.shape[0]
    for k in range(cap):
        if alive[k]:
            for i in range(cap):
                if Z[k, i]:
                    if r == 0:
                        return k, i
                    r -= 1
    return -1, -1


@njit(cache=CACHE)
def only_parent(alive, Z, h):
    for k in range(alive.shape[0]):
        if alive[k] and Z[k, h]:
            return k
    return -1


@njit(cache=CACHE)
def only_child(alive, Z, h):
    for i in range(alive.shape[0]):
        if alive[i] and Z[h, i]:
            return i
    return -1


@njit(cache=CACHE)
def collapsible(obs, alive, Z, m, npar, h):
    """Hidden h with one parent k and one child i, and no edge k -> i: the
    result of an increase-depth move on k -> i."""
    if not alive[h] or obs[h] or m[h] != 1 or npar[h] != 1:
        return False
    k = only_parent(alive, Z, h)
    i = only_child(alive, Z, h)
    return not Z[k, i]


@njit(cache=CACHE)
def count_collapsible(obs, alive, Z, m, npar):
    n = 0
    for h in range(alive.shape[0]):
        if collapsible(obs, alive, Z, m, npar, h):
            n += 1
    return n


@njit(cache=CACHE)
def nth_collapsible(obs, alive, Z, m, npar, r):
    for h in range(alive.shape[0]):
        if collapsible(obs, alive, Z, m, npar, h):
            if r == 0:
                return h
            r -= 1
    return -1


# -------------------------------------------------------- prior-only steps
@njit(cache=CACHE)
def step_edge(rng, theta, obs, alive, Z, m, npar, a, cand, alpha, phi, plant=0):
    """Gibbs update of every candidate parent edge of a uniformly chosen node.
    Returns the number of edges that changed (-1 if no candidate). ``plant``
    (tests only): PLANT_EDGE_COUNT is an off-by-one in eq. 13's normaliser
    (alpha + a_k instead of alpha + a_k - 1: i counted among k's candidates twice)."""
    Kp = num_alive(alive)
    r = rng.integers(0, Kp)
    i = -1
    for k in range(alive.shape[0]):
        if alive[k]:
            if r == 0:
                i = k
                break
            r -= 1
    n = edge_candidates(theta, obs, alive, Z, m, i, cand)
    if n == 0:
        return -1
    changed = 0
    for c in range(n):
        k = cand[c]
        # candidacy can change during the pass (m_k changes): re-check
        if not (obs[k] or m[k] - (1 if Z[k, i] else 0) >= 1):
            continue
        p1 = edge_prior_prob(obs, Z, m, a, k, i, alpha, phi)
        if plant == PLANT_EDGE_COUNT:
            w = phi if obs[k] else 0.0
            p1 = (m[k] - (1 if Z[k, i] else 0) + w) / (alpha + a[k] + w)
        new = rng.random() < p1
        if new != Z[k, i]:
            changed += 1
            apply_set_edge(Z, m, npar, k, i, new)
    return changed


@njit(cache=CACHE)
def pick_alive(rng, alive):
    Kp = num_alive(alive)
    r = rng.integers(0, Kp)
    for k in range(alive.shape[0]):
        if alive[k]:
            if r == 0:
                return k, Kp
            r -= 1
    return -1, Kp


@njit(cache=CACHE)
def propose_birth_death(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, cand, alpha, gamma, phi, plant):
    """Birth/death of a singleton-orphan parent (eqs. 14-15 of 002, re-derived).

    Applies the proposal tentatively. Returns (kind, log_ratio, h, i):
    kind 1 = birth of h above i, 2 = death of h (parent of i), 0 = no proposal
    (nothing to do); log_ratio = prior log-ratio + log Hastings ratio.
    """
    i, Kp = pick_alive(rng, alive)
    if rng.random() < 0.5:
        th_i = theta[i]
        if th_i >= 1.0:
            return 0, 0.0, -1, i
        th = th_i + (1.0 - th_i) * rng.random()
        if th <= th_i:
            return 0, 0.0, -1, i
        n_so = singleton_orphan_parents(theta, obs, alive, Z, m, npar, i, cand)
        d_prior = insert_delta(theta, obs, alive, m, a, tie, th, 1, False, -1, alpha, gamma, phi, Z, False)
        log_h = birth_log_hastings(Kp, n_so + 1, th_i)
        if plant == PLANT_BIRTH_HASTINGS:
            log_h = math.log(1.0 - th_i)
        h = free_slot(alive)
        apply_add_node(theta, obs, fixed, alive, tie, m, npar, a, h, th)
        apply_set_edge(Z, m, npar, h, i, True)
        return 1, d_prior + log_h, h, i
    n_so = singleton_orphan_parents(theta, obs, alive, Z, m, npar, i, cand)
    if n_so == 0:
        return 0, 0.0, -1, i
    h = cand[rng.integers(0, n_so)]
    d_prior = -insert_delta(theta, obs, alive, m, a, tie, theta[h], 1, False, h, alpha, gamma, phi, Z, False)
    log_h = -birth_log_hastings(Kp - 1, n_so, theta[i])
    if plant == PLANT_BIRTH_HASTINGS:
        log_h = -math.log(1.0 - theta[i])
    apply_set_edge(Z, m, npar, h, i, False)
    apply_remove_node(theta, alive, Z, m, npar, a, h)
    return 2, d_prior + log_h, h, i


@njit(cache=CACHE)
def undo_birth_death(theta, obs, fixed, alive, tie, Z, m, npar, a, kind, h, i):
    if kind == 1:
        apply_set_edge(Z, m, npar, h, i, False)
        apply_remove_node(theta, alive, Z, m, npar, a, h)
    elif kind == 2:
        apply_add_node(theta, obs, fixed, alive, tie, m, npar, a, h, theta[h])
        apply_set_edge(Z, m, npar, h, i, True)


@njit(cache=CACHE)
def order_interval(theta, alive, Z, i):
    lo = 0.0
    hi = 1.0
    for k in range(theta.shape[0]):
        if alive[k]:
            if Z[i, k] and theta[k] > lo:
                lo = theta[k]
            if Z[k, i] and theta[k] < hi:
                hi = theta[k]
    return lo, hi


@njit(cache=CACHE)
def order_delta(theta, obs, alive, m, a, tie, Z, i, th_new, alpha, gamma, phi):
    """log p(theta_i = th_new) - log p(theta_i): remove i, reinsert it (its
    parents stay above and its children below both positions)."""
    return (insert_delta(theta, obs, alive, m, a, tie, th_new, m[i], obs[i], i, alpha, gamma, phi, Z, True)
            - insert_delta(theta, obs, alive, m, a, tie, theta[i], m[i], obs[i], i, alpha, gamma, phi, Z, True))


@njit(cache=CACHE)
def propose_order(rng, theta, obs, fixed, alive, tie, Z, m, a, alpha, gamma, phi, plant):
    """Order move (eq. 16): theta_i ~ U(highest child, lowest parent), a
    symmetric proposal; applied tentatively. Returns (valid, log_ratio, i, old_theta)."""
    i, Kp = pick_alive(rng, alive)
    if fixed[i]:
        return False, 0.0, i, theta[i]
    lo, hi = order_interval(theta, alive, Z, i)
    th = lo + (hi - lo) * rng.random()
    old = theta[i]
    if not (lo < th < hi):
        return False, 0.0, i, old
    d = order_delta(theta, obs, alive, m, a, tie, Z, i, th, alpha, gamma, phi)
    if plant == PLANT_ORDER_DELTA:
        d = 0.0
    apply_move_node(theta, alive, a, i, th)
    return True, d, i, old


@njit(cache=CACHE)
def propose_depth(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, alpha, gamma, phi, plant=0):
    """Increase depth (k -> i becomes k -> h -> i) or its exact reverse, applied
    tentatively. Returns (kind, log_ratio, h, k, i): kind 1 = increase,
    2 = decrease, 0 = no proposal. ``plant`` (tests only): PLANT_DEPTH_HASTINGS
    drops the density of the new node's order value from both Hastings terms."""
    if rng.random() < 0.5:
        E = count_edges(alive, Z)
        if E == 0:
            return 0, 0.0, -1, -1, -1
        k, i = nth_edge(alive, Z, rng.integers(0, E))
        lo, hi = theta[i], theta[k]
        th = lo + (hi - lo) * rng.random()
        if not (lo < th < hi):
            return 0, 0.0, -1, k, i
        d_prior = insert_delta(theta, obs, alive, m, a, tie, th, 1, False, -1, alpha, gamma, phi, Z, False)
        h = free_slot(alive)
        apply_add_node(theta, obs, fixed, alive, tie, m, npar, a, h, th)
        apply_set_edge(Z, m, npar, k, i, False)
        apply_set_edge(Z, m, npar, k, h, True)
        apply_set_edge(Z, m, npar, h, i, True)
        C_after = count_collapsible(obs, alive, Z, m, npar)
        log_h = math.log(E) + (0.0 if plant == PLANT_DEPTH_HASTINGS else math.log(hi - lo)) - math.log(C_after)
        return 1, d_prior + log_h, h, k, i
    C = count_collapsible(obs, alive, Z, m, npar)
    if C == 0:
        return 0, 0.0, -1, -1, -1
    h = nth_collapsible(obs, alive, Z, m, npar, rng.integers(0, C))
    k = only_parent(alive, Z, h)
    i = only_child(alive, Z, h)
    d_prior = -insert_delta(theta, obs, alive, m, a, tie, theta[h], 1, False, h, alpha, gamma, phi, Z, False)
    apply_set_edge(Z, m, npar, h, i, False)
    apply_set_edge(Z, m, npar, k, h, False)
    apply_set_edge(Z, m, npar, k, i, True)
    apply_remove_node(theta, alive, Z, m, npar, a, h)
    E_after = count_edges(alive, Z)
    log_h = math.log(C) - math.log(E_after) - (0.0 if plant == PLANT_DEPTH_HASTINGS else math.log(theta[k] - theta[i]))
    return 2, d_prior + log_h, h, k, i


@njit(cache=CACHE)
def undo_depth(theta, obs, fixed, alive, tie, Z, m, npar, a, kind, h, k, i):
    if kind == 1:
        apply_set_edge(Z, m, npar, h, i, False)
        apply_set_edge(Z, m, npar, k, h, False)
        apply_set_edge(Z, m, npar, k, i, True)
        apply_remove_node(theta, alive, Z, m, npar, a, h)
    elif kind == 2:
        apply_add_node(theta, obs, fixed, alive, tie, m, npar, a, h, theta[h])
        apply_set_edge(Z, m, npar, k, i, False)
        apply_set_edge(Z, m, npar, k, h, True)
        apply_set_edge(Z, m, npar, h, i, True)


@njit(cache=CACHE)
def choose_kind(rng, cum):
    u = rng.random()
    kind = 0
    while kind < 3 and u >= cum[kind]:
        kind += 1
    return kind


@njit(cache=CACHE)
def run_null(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, hyper, weights, num_steps, stats, plant):
    """Prior-only random-scan chain: ``num_steps`` moves, each of kind drawn
    with probabilities ``weights`` (edge, birth/death, order, depth).
    ``stats[kind, 0/1]`` accumulates proposals / acceptances. Stops early
    (returning the number of steps done) when fewer than 2 free slots remain,
    before drawing anything for that step, so the caller can grow the arrays
    and continue the same random stream."""
    alpha, gamma, phi = hyper[0], hyper[1], hyper[2]
    cand = np.empty(alive.shape[0], np.int64)
    cum = np.cumsum(weights) / np.sum(weights)
    cap = alive.shape[0]
    for s in range(num_steps):
        if num_alive(alive) + 2 > cap:
            return s
        kind = choose_kind(rng, cum)
        stats[kind, 0] += 1
        if kind == EDGE:
            if step_edge(rng, theta, obs, alive, Z, m, npar, a, cand, alpha, phi, plant) > 0:
                stats[EDGE, 1] += 1
        elif kind == BIRTH_DEATH:
            bd, lr, h, i = propose_birth_death(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, cand,
                                               alpha, gamma, phi, plant)
            if bd != 0:
                if math.log(rng.random()) < lr:
                    stats[BIRTH_DEATH, 1] += 1
                else:
                    undo_birth_death(theta, obs, fixed, alive, tie, Z, m, npar, a, bd, h, i)
        elif kind == ORDER:
            ok, lr, i, old = propose_order(rng, theta, obs, fixed, alive, tie, Z, m, a, alpha, gamma, phi, plant)
            if ok:
                if math.log(rng.random()) < lr:
                    stats[ORDER, 1] += 1
                else:
                    apply_move_node(theta, alive, a, i, old)
        else:
            dk, lr, h, k, i = propose_depth(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, alpha, gamma, phi,
                                            plant)
            if dk != 0:
                if math.log(rng.random()) < lr:
                    stats[DEPTH, 1] += 1
                else:
                    undo_depth(theta, obs, fixed, alive, tie, Z, m, npar, a, dk, h, k, i)
    return num_steps
