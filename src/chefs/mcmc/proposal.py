"""The reversible-jump moves as a plain Metropolis-Hastings *proposal* on DAGs.

For models whose likelihood is only available for a whole graph (the CNN
evidence of 002 section 4.2), :class:`RJMCMCProposal` draws one structure move
with the ICP kernels of :mod:`chefs.mcmc._kernels` and returns the proposed
graph with ``log_ratio`` = prior log-ratio + log Hastings ratio; the caller
adds its log-likelihood difference and accepts with ``min(1, exp(...))``.

Edge moves become Metropolis flips: pick i uniformly, then k uniformly among
the parents whose edge k -> i can change without changing the active set (the
candidate set of i does not depend on Z_ki, so the selection is symmetric);
the ratio is the prior odds of the flipped value, from eq. 13.
"""

from __future__ import annotations

import math

import numpy as np

from ..graph import DAG
from ..priors.icp import ICP
from . import _kernels as kern
from .state import GraphState


class RJMCMCProposal:
    """``proposal(rng, dag) -> (new_dag, log_ratio)`` from the ICP's RJMCMC moves
    (docs/derivations.md section 2; eq. 9 of 002 is the target).

    A move that cannot be made in the current graph (no edge candidate for
    the chosen node, a death with no singleton orphan, an order or depth move
    with nothing to move) returns ``(dag, -inf)``: the chain stays where it is,
    which is what a rejection does, and reports count it as "impossible"
    rather than as an accepted move.

    Parameters
    ----------
    prior : ICP
    weights : 4 floats
        Relative frequencies of edge flips, birth/death, order and depth moves.
    """

    name = "rjmcmc"

    def __init__(self, prior: ICP, weights=(1.0, 1.0, 1.0, 1.0)):
        if not isinstance(prior, ICP):
            raise ValueError("RJMCMCProposal needs a chefs.ICP prior")
        w = np.asarray(weights, dtype=float)
        if w.shape != (4,) or np.any(w < 0) or w.sum() <= 0:
            raise ValueError("weights must be 4 non-negative numbers, not all 0")
        self.prior = prior
        self.cum = np.cumsum(w) / w.sum()
        self.last_name = self.name

    def __call__(self, rng: np.random.Generator, dag: DAG) -> tuple[DAG, float]:
        s = GraphState.from_dag(dag)
        s.ensure_capacity(4)
        theta, obs, fixed, alive, tie, Z, m, npar, a = s.arrays()
        al, ga, ph = self.prior.alpha, self.prior.gamma, self.prior.phi
        kind = kern.choose_kind(rng, self.cum)
        self.last_name = kern.MOVE_NAMES[kind]
        if kind == kern.EDGE:
            i, _ = kern.pick_alive(rng, alive)
            cand = np.empty(s.capacity, dtype=np.int64)
            n = kern.edge_candidates(theta, obs, alive, Z, m, i, cand)
            if n == 0:
                return dag, -math.inf
            k = int(cand[rng.integers(0, n)])
            p1 = kern.edge_prior_prob(obs, Z, m, a, k, i, al, ph)
            cur = bool(Z[k, i])
            lr = (math.log1p(-p1) - math.log(p1)) if cur else (math.log(p1) - math.log1p(-p1))
            kern.apply_set_edge(Z, m, npar, k, i, not cur)
            return s.to_dag(), lr
        cand = np.empty(s.capacity, dtype=np.int64)
        if kind == kern.BIRTH_DEATH:
            bd, lr, _, _ = kern.propose_birth_death(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, cand,
                                                    al, ga, ph, 0)
            return (s.to_dag(), lr) if bd != 0 else (dag, -math.inf)
        if kind == kern.ORDER:
            ok, lr, _, _ = kern.propose_order(rng, theta, obs, fixed, alive, tie, Z, m, a, al, ga, ph, 0)
            return (s.to_dag(), lr) if ok else (dag, -math.inf)
        dk, lr, _, _, _ = kern.propose_depth(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, al, ga, ph)
        return (s.to_dag(), lr) if dk != 0 else (dag, -math.inf)
