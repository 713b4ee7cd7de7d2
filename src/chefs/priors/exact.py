"""Exact structure probabilities of the ICP on tiny spaces, by enumeration.

For a fixed *rank arrangement* (which labelled observed node and how many
unlabelled hidden nodes sit at each rank) and a fixed edge set, the ICP
density depends on the order values only through the interval lengths
Delta_j between consecutive active orders. Integrating it over the order values
is then exact:

* infinite model (eq. 9): the factor exp(-alpha*gamma*sum_j c_j Delta_j) with
  (Delta_j) uniform on a simplex integrates to a divided difference of exp
  (Hermite-Genocchi), read off the matrix exponential of a bidiagonal matrix;
* finite model (eq. 8): (sum_j f_j Delta_j)^n integrates to
  n!/(n+H)! h_n(f) with h_n the complete homogeneous symmetric polynomial.

Summed over every structure with at most ``max_hidden`` hidden nodes this gives
P(structure) exactly; for the finite model with ``max_hidden = K - D`` the total
must be 1. These are the references of the agreement tests (and of the
MCMC's enumeration tests). See ``docs/derivations.md``.
"""

from __future__ import annotations

import itertools
import math
from dataclasses import dataclass

import numpy as np
from scipy.linalg import expm
from scipy.special import digamma, gammaln

from .icp import ICP

__all__ = ["Structure", "enumerate_structures", "structure_key"]


@dataclass(frozen=True)
class Structure:
    """One structure: ``labels[r]`` is the observed index at rank r (bottom = 0)
    or -1 for a hidden node; ``edges`` are (parent_rank, child_rank) pairs; ``prob``
    its exact probability (docs/derivations.md section 1.4)."""

    labels: tuple
    edges: tuple
    prob: float

    @property
    def num_hidden(self) -> int:
        return sum(1 for v in self.labels if v < 0)

    @property
    def num_edges(self) -> int:
        return len(self.edges)

    @property
    def num_nodes(self) -> int:
        return len(self.labels)

    def depth(self) -> int:
        longest = [0] * len(self.labels)
        for r in range(len(self.labels)):  # children have lower rank than parents
            for p, c in self.edges:
                if p == r:
                    longest[r] = max(longest[r], longest[c] + 1)
        return max(longest) if longest else 0


def structure_key(graph) -> tuple:
    """Key of a :class:`~chefs.graph.DAG` comparable with :class:`Structure`.

    Nodes are ranked by theta (ties, e.g. observed nodes fixed at the same
    value, broken by observed index).
    """
    # plain Python on these small graphs: a third of the numpy version's time (the prior tests key
    # hundreds of thousands of draws)
    theta = graph.theta.tolist()
    observed = graph.observed.tolist()
    n = len(theta)
    obs_idx = [-1] * n
    j = 0
    for k in range(n):
        if observed[k]:
            obs_idx[k] = j
            j += 1
    order = sorted(range(n), key=lambda k: (theta[k], obs_idx[k] if observed[k] else n))
    rank = [0] * n
    for r, k in enumerate(order):
        rank[k] = r
    labels = tuple(obs_idx[k] for k in order)
    edges = tuple(sorted((rank[p], rank[c]) for p, c in zip(graph.parents.tolist(), graph.children.tolist())))
    return labels, edges


def _dd_exp(y: np.ndarray) -> float:
    """Divided difference exp[y_0, ..., y_H] = integral over the standard
    simplex of exp(sum_j Delta_j y_j) (Hermite-Genocchi)."""
    H = y.size - 1
    if H == 0:
        return float(np.exp(y[0]))
    M = np.diag(y) + np.diag(np.ones(H), 1)
    return float(expm(M)[0, H])


def _h_poly(f: np.ndarray, n: int) -> float:
    """Complete homogeneous symmetric polynomial h_n(f_0, ..., f_H)."""
    h = np.zeros(n + 1)
    h[0] = 1.0
    for x in f:
        for d in range(1, n + 1):
            h[d] += x * h[d - 1]
    return float(h[n])


def _arrangements(D: int, H: int, fixed_at_zero: bool):
    """Rank labelings: tuples of observed indices / -1 (hidden), bottom first."""
    if fixed_at_zero:
        yield tuple(range(D)) + (-1,) * H
        return
    n = D + H
    for obs_slots in itertools.permutations(range(n), D):
        labels = [-1] * n
        for d, s in enumerate(obs_slots):
            labels[s] = d
        yield tuple(labels)


def enumerate_structures(prior: ICP, num_observed: int, max_hidden: int,
                         fixed_at_zero: bool = True, finite_K: int | None = None) -> list[Structure]:
    """Every structure with at most ``max_hidden`` hidden nodes and its exact
    probability (order values integrated out): eq. 9 of 002, or eq. 8 with
    ``finite_K``, both corrected (docs/derivations.md sections 1.2-1.4).

    ``fixed_at_zero=True``: all observed nodes fixed at theta = 0 (no edges
    between them); False: observed orders free (uniform). Sizes grow very fast:
    keep ``num_observed + max_hidden <= 4`` (free) or ``<= 5`` (fixed).
    """
    D = int(num_observed)
    alpha, gamma, phi = prior.alpha, prior.gamma, prior.phi
    out: list[Structure] = []
    for H in range(max_hidden + 1):
        n = D + H
        if finite_K is not None and n > finite_K:
            break
        for labels in _arrangements(D, H, fixed_at_zero):
            # a_k: active nodes strictly below; with observed tied at 0 the
            # bottom D ranks all have a = 0.
            if fixed_at_zero:
                a = [0] * D + [D + r for r in range(H)]
            else:
                a = list(range(n))
            # candidate child sets for each rank
            choices = []
            for r in range(n):
                lower = [c for c in range(n) if a[c] < a[r]]
                subsets = []
                for size in range(len(lower) + 1):
                    for sub in itertools.combinations(lower, size):
                        if labels[r] < 0 and size == 0:
                            continue
                        subsets.append(sub)
                choices.append(subsets)
            # interval coefficients: the free spacings and their j (nodes below)
            if fixed_at_zero:
                js = np.arange(D, n + 1)
            else:
                js = np.arange(0, n + 1)
            if finite_K is None:
                c = np.where(js > 0, digamma(alpha + js) - digamma(alpha), 0.0)
                interval = _dd_exp(-alpha * gamma * c)
                log_count = 0.0
            else:
                K = int(finite_K)
                b = alpha - alpha * gamma / K
                f = np.exp(gammaln(b + js) - gammaln(b) - gammaln(alpha + js) + gammaln(alpha))
                nfree = js.size - 1
                nin = K - n
                interval = math.exp(gammaln(nin + 1) - gammaln(nin + nfree + 1)) * _h_poly(f, nin)
                log_count = gammaln(K - D + 1) - gammaln(K - D - H + 1)
            for combo in itertools.product(*choices):
                lp = log_count
                edges = []
                for r, sub in enumerate(combo):
                    m = len(sub)
                    lp += _node_log_factor(labels[r] >= 0, m, a[r], alpha, gamma, phi, finite_K)
                    edges.extend((r, ch) for ch in sub)
                out.append(Structure(labels, tuple(sorted(edges)), math.exp(lp) * interval))
    return out


def _node_log_factor(is_obs, m, a, alpha, gamma, phi, K):
    if K is None:
        if is_obs:
            return (math.lgamma(phi + m) - math.lgamma(phi) + math.lgamma(alpha + a - m) - math.lgamma(alpha)
                    - math.lgamma(alpha + phi + a) + math.lgamma(alpha + phi))
        return math.log(alpha * gamma) + math.lgamma(m) + math.lgamma(alpha + a - m) - math.lgamma(alpha + a)
    c = alpha * gamma / K
    b = alpha - c
    w = phi if is_obs else 0.0
    return (math.lgamma(c + w + m) - math.lgamma(c + w) + math.lgamma(b + a - m) - math.lgamma(b)
            - math.lgamma(alpha + w + a) + math.lgamma(alpha + w))
