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
    """E[K+], E[E+], E[H] with Monte Carlo standard errors."""
    K, E, H, _ = _draw_stats(ICP(alpha, gamma, 1.0), rng, num_observed, observed_order, num)
    se = lambda x: float(x.std(ddof=1) / math.sqrt(x.size))  # noqa: E731
    return {"K": K.mean(), "K_se": se(K), "E": E.mean(), "E_se": se(E), "H": H.mean(), "H_se": se(H)}


def calibrate_gamma(expected_nodes: float, alpha: float, num_observed: int, rng, num: int = 4000,
                    observed_order=0.0, phi: float = 1.0, max_rounds: int = 6) -> dict:
    """The gamma with E[K+ | alpha, gamma, D] = expected_nodes.

    Returns gamma, the achieved E[K+] with its standard error (from fresh
    draws at the solution) and the number of refinement rounds.
    """
    D = int(num_observed)
    if not expected_nodes > D:
        raise ValueError(f"expected number of nodes must exceed the number of observed nodes ({D})")
    # 1. bracket the root with cheap fresh estimates (E[K+] increases with gamma)
    small = max(200, num // 8)

    def mean_k(g):
        return _draw_stats(ICP(alpha, g, phi), rng, D, observed_order, small)[0].mean()

    lo_g, hi_g = 1.0, 1.0
    if mean_k(1.0) < expected_nodes:
        while mean_k(hi_g) < expected_nodes:
            lo_g, hi_g = hi_g, hi_g * 2
            if hi_g > 1e4:
                raise ValueError("no gamma below 1e4 reaches that many nodes")
    else:
        while mean_k(lo_g) > expected_nodes:
            lo_g, hi_g = lo_g / 2, lo_g
            if lo_g < 1e-6:
                raise ValueError("no gamma above 1e-6 gives that few nodes")
    # 2. refine by exact reweighting of draws taken inside the bracket
    g0 = math.sqrt(lo_g * hi_g)
    rounds = 0
    for rounds in range(1, max_rounds + 1):
        K, _, H, S = _draw_stats(ICP(alpha, g0, phi), rng, D, observed_order, num)

        def excess(log_g, K=K, H=H, S=S, g0=g0):
            g = math.exp(log_g)
            logw = H * (log_g - math.log(g0)) - (g - g0) * alpha * S
            w = np.exp(logw - logw.max())
            return float(np.sum(w * K) / np.sum(w)) - expected_nodes

        a, b = math.log(lo_g / 1.5), math.log(hi_g * 1.5)
        ea, eb = excess(a), excess(b)
        if ea > 0:
            g_new = math.exp(a)
        elif eb < 0:
            g_new = math.exp(b)
        else:
            g_new = math.exp(brentq(excess, a, b, xtol=1e-8))
        moved = abs(math.log(g_new / g0))
        g0 = g_new
        if moved < 0.02:
            break
    check = expectations(alpha, g0, D, num, rng, observed_order)
    return {"gamma": g0, "expected_nodes": check["K"], "expected_nodes_se": check["K_se"], "rounds": rounds}
