"""Hyperparameter study of the ICP (002 section 2.3, Figure 3) and the inverse
problem a user needs: the gamma giving a desired E[K+] for alpha and D.

Expectations are Monte Carlo averages of chefs-process draws, reported with
their standard errors. Calibration reweights one set of draws exactly: under
the ICP, p(G | gamma) / p(G | gamma0) = (gamma/gamma0)^H exp(-(gamma-gamma0) alpha S)
(eq. 9), so E_gamma[K+] is a smooth, deterministic function of gamma for fixed
draws and can be solved for by root finding; the draws are then refreshed at
the solution until it stops moving.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.optimize import brentq

from . import _icp_kernels as kern
from .icp import ICP


def _draw_stats(prior: ICP, rng, D: int, order, num: int):
    K = np.empty(num)
    E = np.empty(num)
    H = np.empty(num)
    S = np.empty(num)
    for r in range(num):
        g = prior.sample(rng, D, observed_order=order)
        K[r], E[r], H[r] = g.num_nodes, g.num_edges, g.num_hidden
        S[r] = kern.interval_term(np.sort(g.theta), prior.alpha)
    return K, E, H, S


def expectations(alpha: float, gamma: float, num_observed: int, num: int, rng, observed_order=0.0) -> dict:
    """E[K+], E[E+], E[H] with Monte Carlo standard errors (the quantities of Figure 3 of 002, section 2.3)."""
    K, E, H, _ = _draw_stats(ICP(alpha, gamma, 1.0), rng, num_observed, observed_order, num)
    se = lambda x: float(x.std(ddof=1) / math.sqrt(x.size))  # noqa: E731
    return {"K": K.mean(), "K_se": se(K), "E": E.mean(), "E_se": se(E), "H": H.mean(), "H_se": se(H)}


TOLERANCE = 0.02  # the solver stops when gamma moves by less than 2% between rounds
MAX_ROUNDS = 12  # rounds of draws and reweighting at most
TARGET_Z = 4.0  # an achieved E[K+] further than this many SE from the target is reported as a miss
MIN_ESS_FRACTION = 0.25  # reweighted draws are trusted where their effective sample size is >= num / 4
MAX_EXPECTED_NODES = 1000  # above it a draw's edges (about the square of its nodes) make each round take minutes


def _ess(logw) -> float:
    w = np.exp(logw - logw.max())
    return float(w.sum() ** 2 / np.sum(w * w))


def calibrate_gamma(expected_nodes: float, alpha: float, num_observed: int, rng, num: int = 4000,
                    observed_order=0.0, phi: float = 1.0, max_rounds: int = MAX_ROUNDS) -> dict:
    """The gamma with E[K+ | alpha, gamma, D] = expected_nodes (Figure 3(a) of 002 read backwards;
    the draws are reweighted with eq. 9 of 002, see the module docstring).

    Each round draws ``num`` graphs at the current gamma and solves the reweighted
    equation, but only where the importance weights keep an effective sample size
    of at least ``MIN_ESS_FRACTION * num`` (for large graphs the weights degenerate
    a few percent away from the drawing gamma); a root outside that region is
    approached by a step to its edge. The solver has converged when a round's root
    lies inside the trusted region and gamma moves by less than ``TOLERANCE``
    (relative). After ``max_rounds`` rounds a last root outside the trusted
    region is a ValueError (the target was not reached); a root inside it that
    still moved more (Monte Carlo noise of small ``num``) is returned with
    ``converged`` False and its relative move ``last_move``.

    Returns gamma, the achieved E[K+] with its standard error (from fresh draws
    at the solution), ``solver_se`` (the SE of the last round's reweighted E[K+] at
    its root: the solver's own error), ``z`` = (achieved - target) /
    sqrt(SE^2 + solver_se^2), the number of rounds, ``converged`` and ``last_move``.
    """
    D = int(num_observed)
    if not expected_nodes > D:
        raise ValueError(f"expected number of nodes must exceed the number of observed nodes ({D})")
    if not expected_nodes <= MAX_EXPECTED_NODES:
        raise ValueError(f"calibration is offered up to E[K+] = {MAX_EXPECTED_NODES:,} nodes (got {expected_nodes:g}): "
                         "a draw's edges grow about as the square of its nodes, so each round of draws would take "
                         "from minutes to beyond the memory; `chefs prior sample` at a few gammas measures E[K+] "
                         "there directly")
    # 1. bracket the root with cheap fresh estimates (E[K+] increases with gamma)
    small = max(200, num // 8)

    def mean_k(g):
        return _draw_stats(ICP(alpha, g, phi), rng, D, observed_order, small)[0].mean()

    lo_g = hi_g = 1.0
    k_lo = k_hi = mean_k(1.0)
    if k_lo < expected_nodes:
        while k_hi < expected_nodes:
            lo_g, k_lo = hi_g, k_hi
            hi_g *= 2
            if hi_g > 1e4:
                raise ValueError("no gamma below 1e4 reaches that many nodes")
            k_hi = mean_k(hi_g)
    else:
        while k_lo > expected_nodes:
            hi_g, k_hi = lo_g, k_lo
            lo_g /= 2
            if lo_g < 1e-6:
                raise ValueError("no gamma above 1e-6 gives that few nodes")
            k_lo = mean_k(lo_g)
    # start where the log-log line through the bracket's ends meets the target
    g0 = math.sqrt(lo_g * hi_g)
    if lo_g < hi_g and k_lo > D and k_hi > k_lo:
        slope = math.log((k_hi - D) / (k_lo - D)) / math.log(hi_g / lo_g)
        g0 = lo_g * math.exp(math.log((expected_nodes - D) / (k_lo - D)) / slope)
        g0 = min(max(g0, lo_g), hi_g)
    # 2. refine by exact reweighting of draws, within the region where the weights are trustworthy
    min_ess = MIN_ESS_FRACTION * num
    converged = interior = False
    rounds, moved = 0, math.inf
    for rounds in range(1, max_rounds + 1):
        K, _, H, S = _draw_stats(ICP(alpha, g0, phi), rng, D, observed_order, num)
        lg0 = math.log(g0)

        def logw(log_g, H=H, S=S, g0=g0, lg0=lg0):
            return H * (log_g - lg0) - (math.exp(log_g) - g0) * alpha * S

        def excess(log_g):
            lw = logw(log_g)
            w = np.exp(lw - lw.max())
            return float(np.sum(w * K) / np.sum(w)) - expected_nodes

        def trust(log_g):
            return _ess(logw(log_g)) - min_ess

        a, b = math.log(lo_g / 1.5), math.log(hi_g * 1.5)
        a, b = min(a, lg0), max(b, lg0)
        if trust(a) < 0:
            a = brentq(trust, a, lg0, xtol=1e-6)
        if trust(b) < 0:
            b = brentq(trust, lg0, b, xtol=1e-6)
        interior = False
        if excess(a) > 0:
            g_new = math.exp(a)
            lo_g = min(lo_g, g_new / 1.5)  # the root may lie below the bracket: widen it
        elif excess(b) < 0:
            g_new = math.exp(b)
            hi_g = max(hi_g, g_new * 1.5)
        else:
            g_new = math.exp(brentq(excess, a, b, xtol=1e-8))
            interior = True
            # the solver's own Monte Carlo error: the SE of the self-normalised estimate of
            # E[K+] at the root (which equals the target there)
            lw = logw(math.log(g_new))
            w = np.exp(lw - lw.max())
            w /= w.sum()
            solver_se = float(np.sqrt(np.sum(w * w * (K - expected_nodes) ** 2)))
        moved = abs(math.log(g_new / g0))
        g0 = g_new
        if interior and moved < TOLERANCE:
            converged = True
            break
    if not interior:
        raise ValueError(f"calibration did not reach E[K+] = {expected_nodes:g} in {max_rounds} round(s): the last "
                         f"round's root lay beyond the gamma its draws could reach (last gamma {g0:.6g}); "
                         "more draws per round (num) reach further")
    check = expectations(alpha, g0, D, num, rng, observed_order)
    se = check["K_se"]
    # the achieved E[K+] misses the target by the fresh check's error plus the solver's own
    # error in gamma (the reweighted estimate at the root): z uses both
    se_z = math.hypot(se, solver_se)
    z = (check["K"] - expected_nodes) / se_z if se_z > 0 else (0.0 if check["K"] == expected_nodes else math.inf)
    return {"gamma": g0, "expected_nodes": check["K"], "expected_nodes_se": se, "solver_se": solver_se, "z": z,
            "rounds": rounds, "converged": converged, "last_move": moved}
