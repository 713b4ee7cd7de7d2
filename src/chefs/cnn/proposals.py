"""Structure proposals for the CNN architecture chain (pluggable).

A proposal is any callable ``proposal(rng, dag) -> (new_dag, log_ratio)`` with

    log_ratio = log p(new) / p(old) + log q(old | new) / q(new | old),

everything in the Metropolis-Hastings log acceptance ratio except the model
evidence, which the chain adds (section 4.2 of 002: the evidence is added to
the acceptance ratios of eqs. 14-16). ``p`` is the ICP density of
:meth:`chefs.ICP.log_prob` (w.r.t. Lebesgue measure on the *sorted* hidden
order values: hidden nodes are unlabelled). A proposal that cannot move returns
``(dag, -inf)``: the chain rejects it without computing any evidence. A
proposal may set ``last_name`` (a short string) for the chain's per-move
acceptance statistics.

Provided here (derivations and detailed-balance proofs in
``docs/derivations-cnn.md``):

* :class:`EdgeToggle` - fixed node set, symmetric; toggles one edge.
* :class:`NodeBirthDeath` - inserts a hidden node on an edge (``k -> i`` becomes
  ``k -> j -> i``) or removes such a node; reversible jump with an exact
  Hastings ratio.
* :class:`Mixture` - picks one of the above with fixed probabilities.

``default_proposal(icp)`` mixes the two with equal weights. Only numpy.
"""

from __future__ import annotations

import math
from typing import Callable, Sequence

import numpy as np

from ..graph import DAG
from ..priors.icp import ICP

__all__ = ["EdgeToggle", "NodeBirthDeath", "Mixture", "default_proposal", "removable_nodes"]

Proposal = Callable[[np.random.Generator, DAG], "tuple[DAG, float]"]


def _check(rng, dag):
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator (use numpy.random.default_rng(seed))")
    if not isinstance(dag, DAG):
        raise ValueError(f"expected a chefs.DAG, got {type(dag).__name__}")


def _check_icp(icp):
    if not isinstance(icp, ICP):
        raise ValueError(f"expected a chefs.ICP prior, got {type(icp).__name__}")
    return icp


def removable_nodes(dag: DAG) -> np.ndarray:
    """Hidden nodes a death move may remove (the set R of ``docs/derivations-cnn.md``).

    A hidden node ``j`` is removable when it has exactly one parent ``k`` and
    one child ``i`` and the edge ``k -> i`` is absent, i.e. exactly when ``dag``
    is the result of a birth on the edge ``k -> i`` of the graph without ``j``.
    """
    indeg = dag.in_degree()
    outdeg = dag.out_degree()
    cand = np.flatnonzero(~dag.observed & (indeg == 1) & (outdeg == 1))
    if cand.size == 0:
        return cand
    par = np.empty(dag.num_nodes, dtype=np.int64)
    chi = np.empty(dag.num_nodes, dtype=np.int64)
    par[dag.children] = dag.parents  # only read where indeg == 1
    chi[dag.parents] = dag.children  # only read where outdeg == 1
    edges = set(zip(dag.parents.tolist(), dag.children.tolist()))
    keep = [j for j in cand.tolist() if (int(par[j]), int(chi[j])) not in edges]
    return np.asarray(keep, dtype=np.int64)


class EdgeToggle:
    """Toggle one edge between two existing nodes (fixed node set).

    Picks an unordered pair of distinct nodes uniformly, orients it from the
    higher to the lower order value (so every ordered pair ``(k, i)`` with
    ``theta_k > theta_i`` has probability ``1 / C(n, 2)``) and adds or removes
    the edge ``k -> i``. Removing the last child of a hidden node would leave
    an invalid ICP state: such a proposal returns ``(dag, -inf)``. The node
    set is unchanged, so ``q(new | old) = q(old | new)`` and
    ``log_ratio = log p(new) - log p(old)`` (eq. 9 of 002 through
    :meth:`chefs.ICP.log_prob`).
    """

    name = "toggle"

    def __init__(self, icp: ICP):
        self.icp = _check_icp(icp)
        self.last_name = self.name

    def __call__(self, rng: np.random.Generator, dag: DAG) -> tuple[DAG, float]:
        _check(rng, dag)
        n = dag.num_nodes
        if n < 2:
            return dag, -math.inf
        a, b = (int(v) for v in rng.choice(n, size=2, replace=False))
        th = dag.theta
        if th[a] == th[b]:
            return dag, -math.inf
        k, i = (a, b) if th[a] > th[b] else (b, a)
        hit = np.flatnonzero((dag.parents == k) & (dag.children == i))
        if hit.size:
            if not dag.observed[k] and np.count_nonzero(dag.parents == k) == 1:
                return dag, -math.inf
            keep = np.ones(dag.num_edges, dtype=bool)
            keep[hit] = False
            new = DAG(th, dag.observed, dag.parents[keep], dag.children[keep], dag.fixed)
        else:
            new = DAG(th, dag.observed, np.append(dag.parents, k), np.append(dag.children, i), dag.fixed)
        return new, self.icp.log_prob(new) - self.icp.log_prob(dag)


class NodeBirthDeath:
    """Insert a hidden node on an edge, or remove one (reversible jump).

    Birth (probability 1/2): pick one of the ``E`` edges ``k -> i`` uniformly,
    draw ``t ~ U(theta_i, theta_k)`` and replace the edge by ``k -> j -> i``
    with a new hidden node ``j`` at ``theta_j = t``. Death (probability 1/2):
    pick one of the ``R`` removable nodes (:func:`removable_nodes`) uniformly
    and replace ``k -> j -> i`` by ``k -> i``. With ``E`` edges before a birth
    and ``R'`` removable nodes after it,

        log_ratio(birth) = log p(new) - log p(old) + log E + log(theta_k - theta_i) - log R'

    and the death ratio is its negative with the roles swapped (the Jacobian
    of inserting ``t`` into the sorted hidden orders is 1). Derivation in
    ``docs/derivations-cnn.md``; the paper's future-work "increase depth"
    move (section 5 of 002).
    """

    name = "birth-death"

    def __init__(self, icp: ICP):
        self.icp = _check_icp(icp)
        self.last_name = self.name

    def __call__(self, rng: np.random.Generator, dag: DAG) -> tuple[DAG, float]:
        _check(rng, dag)
        if rng.random() < 0.5:
            self.last_name = "birth"
            return self._birth(rng, dag)
        self.last_name = "death"
        return self._death(rng, dag)

    def grow(self, rng: np.random.Generator, dag: DAG, hidden: int) -> DAG:
        """``dag`` with node births applied until it has ``hidden`` hidden nodes
        (no acceptance test: a way to build test and benchmark graphs, not a move)."""
        if int(hidden) != hidden or hidden < 0:
            raise ValueError(f"hidden must be a non-negative integer, got {hidden!r}")
        _check(rng, dag)
        cur = dag
        while cur.num_hidden < hidden:
            new, lr = self._birth(rng, cur)
            if not math.isfinite(lr):
                raise ValueError("no node can be born on a graph without edges")
            cur = new
        return cur

    def _birth(self, rng, dag):
        E = dag.num_edges
        if E == 0:
            return dag, -math.inf
        e = int(rng.integers(E))
        k, i = int(dag.parents[e]), int(dag.children[e])
        hi, lo = float(dag.theta[k]), float(dag.theta[i])
        t = float(rng.uniform(lo, hi))
        if not lo < t < hi or np.any(dag.theta == t):  # probability zero; keeps orders distinct
            return dag, -math.inf
        j = dag.num_nodes
        keep = np.ones(E, dtype=bool)
        keep[e] = False
        new = DAG(
            np.append(dag.theta, t), np.append(dag.observed, False),
            np.concatenate([dag.parents[keep], [k, j]]), np.concatenate([dag.children[keep], [j, i]]),
            np.append(dag.fixed, False),
        )
        r_new = removable_nodes(new).size  # >= 1: j itself
        lr = self.icp.log_prob(new) - self.icp.log_prob(dag) + math.log(E) + math.log(hi - lo) - math.log(r_new)
        return new, lr

    def _death(self, rng, dag):
        rem = removable_nodes(dag)
        R = rem.size
        if R == 0:
            return dag, -math.inf
        j = int(rem[int(rng.integers(R))])
        k = int(dag.parents[dag.children == j][0])
        i = int(dag.children[dag.parents == j][0])
        hi, lo = float(dag.theta[k]), float(dag.theta[i])
        keep_e = (dag.parents != j) & (dag.children != j)
        p = np.append(dag.parents[keep_e], k)
        c = np.append(dag.children[keep_e], i)
        p = p - (p > j)
        c = c - (c > j)
        keep_n = np.arange(dag.num_nodes) != j
        new = DAG(dag.theta[keep_n], dag.observed[keep_n], p, c, dag.fixed[keep_n])
        lr = (self.icp.log_prob(new) - self.icp.log_prob(dag) + math.log(R)
              - math.log(new.num_edges) - math.log(hi - lo))
        return new, lr


class Mixture:
    """Pick one proposal with fixed probabilities and apply it (docs/derivations-cnn.md
    section 6.3).

    Each component satisfies detailed balance on its own (its ``log_ratio`` is
    its own Hastings ratio) and the choice does not depend on the state, so
    the mixture kernel does too.

    Parameters
    ----------
    components : sequence of (weight, proposal)
        Positive weights (normalised here) and proposals.
    """

    name = "mixture"

    def __init__(self, components: Sequence[tuple[float, Proposal]]):
        comps = list(components)
        if not comps:
            raise ValueError("a mixture needs at least one (weight, proposal) pair")
        w = np.asarray([float(c[0]) for c in comps])
        if not np.all(np.isfinite(w)) or np.any(w <= 0):
            raise ValueError(f"mixture weights must be positive and finite, got {w.tolist()}")
        for _, prop in comps:
            if not callable(prop):
                raise ValueError(f"mixture components must be callables proposal(rng, dag), got {prop!r}")
        self.weights = w / w.sum()
        self.proposals = [c[1] for c in comps]
        self.last_name = self.name

    def __call__(self, rng: np.random.Generator, dag: DAG) -> tuple[DAG, float]:
        _check(rng, dag)
        m = int(rng.choice(len(self.proposals), p=self.weights))
        prop = self.proposals[m]
        out = prop(rng, dag)
        self.last_name = str(getattr(prop, "last_name", getattr(prop, "name", type(prop).__name__)))
        return out


def default_proposal(icp: ICP, toggle_weight: float = 0.5) -> Mixture:
    """Edge toggles with probability ``toggle_weight``, births/deaths otherwise
    (docs/derivations-cnn.md section 6.3)."""
    if not 0.0 < float(toggle_weight) < 1.0:
        raise ValueError(f"toggle_weight must lie strictly between 0 and 1, got {toggle_weight}")
    return Mixture([(float(toggle_weight), EdgeToggle(icp)), (1.0 - float(toggle_weight), NodeBirthDeath(icp))])
