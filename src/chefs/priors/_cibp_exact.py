"""Exact structure probabilities of the CIBP / ECIBP on tiny spaces.

Every network with at most ``max_hidden`` hidden units is enumerated in
ordered-labelled form (the hidden units of each layer in a fixed order: one
binary matrix per layer, every column non-zero on the creating customers),
its ordered probability taken from :meth:`LayeredPrior.log_prob_labelled`,
and the labelled versions of one unlabelled network summed. The sum must equal
:meth:`LayeredPrior.log_prob` (which uses prod K_l! / |Aut(G)| instead of
summing), and both must match forward-sampling frequencies (the tests).
"""

from __future__ import annotations

import itertools
import math

import numpy as np

from ._cibp_common import LayeredPrior, theta_layer

__all__ = ["canonical_key", "enumerate_networks", "raw_key"]


def canonical_key(graph, layer=None) -> tuple:
    """A key identifying the unlabelled network (observed units labelled):
    the lexicographically smallest edge list over all orders of the hidden
    units inside each layer. Brute force: for tiny graphs only."""
    g = graph.canonical()
    return raw_key(g.num_observed, theta_layer(g.theta).tolist(), g.parents.tolist(), g.children.tolist())


def raw_key(D: int, lay, parents, children) -> tuple:
    """:func:`canonical_key` of a network given as (layers, parents, children)."""
    lay = list(lay)
    M = max(lay) if lay else 0
    groups = [[k for k, v in enumerate(lay) if v == ll] for ll in range(1, M + 1)]
    edges = list(zip(parents, children))
    best = None
    for perms in itertools.product(*(itertools.permutations(gr) for gr in groups)):
        new = list(range(D))
        pos = {k: k for k in range(D)}
        for gr, perm in zip(groups, perms):
            for k in perm:
                pos[k] = len(new)
                new.append(k)
        e = tuple(sorted((pos[p], pos[c]) for p, c in edges))
        if best is None or e < best:
            best = e
    widths = tuple(len(gr) for gr in groups)
    return (D, widths, best)


def _columns(N: int, C: int):
    """Non-zero binary columns over N customers with a 1 among the first C."""
    out = []
    for bits in itertools.product((0, 1), repeat=N):
        if any(bits[:C]):
            out.append(bits)
    return out


def enumerate_networks(prior: LayeredPrior, num_observed: int, max_hidden: int) -> dict:
    """``{canonical_key: (probability, labelled_sum, dag)}`` for every network
    with at most ``max_hidden`` hidden units: ``probability`` from
    :meth:`LayeredPrior.log_prob`, ``labelled_sum`` the sum of the ordered
    probabilities of its labelled versions (the two must agree)."""
    D = int(num_observed)
    out: dict = {}

    def rec(layers, parents, children, budget):
        # layers: list of lists of node ids per layer (layer 0 = observed)
        below = layers[-1]
        lower = [u for lay in layers[:-1] for u in lay] if prior.skip else []
        custs = below + lower
        C = len(below)
        n_nodes = sum(len(lay) for lay in layers)
        # close the cascade here (next layer empty)
        lay_of = np.concatenate([np.full(len(lay), ll) for ll, lay in enumerate(layers)]).astype(np.int64)
        dag = prior.to_dag(lay_of, parents, children, D)
        p_lab = math.exp(prior.log_prob_labelled(dag))
        key = canonical_key(dag, lay_of)
        if key in out:
            out[key][1] += p_lab
        else:
            out[key] = [math.exp(prior.log_prob(dag)), p_lab, dag]
        if len(layers) > prior.max_layers:
            return
        cols = _columns(len(custs), C)
        for K in range(1, budget + 1):
            for combo in itertools.product(cols, repeat=K):
                new = list(range(n_nodes, n_nodes + K))
                p2, c2 = list(parents), list(children)
                for u, col in zip(new, combo):
                    for cust, bit in zip(custs, col):
                        if bit:
                            p2.append(u)
                            c2.append(cust)
                rec(layers + [new], p2, c2, budget - K)

    rec([list(range(D))], [], [], int(max_hidden))
    return {k: tuple(v) for k, v in out.items()}
