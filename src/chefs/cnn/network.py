"""The part of an ICP DAG that a convolutional network uses (section 4.2 of 002).

Conventions shared by the whole :mod:`chefs.cnn` package:

* the input image X is the observed node with ``theta = 1`` and the class
  output Y the observed node with ``theta = 0`` (both fixed); draws of
  ``ICP(...).sample(rng, 2, observed_order=[1.0, 0.0])`` put X at index 0 and Y
  at index 1;
* only nodes reachable from X take part in the forward pass (section 4.2);
  every hidden node of a valid ICP graph is an ancestor of Y (it has a child and
  order values decrease along edges, and X at ``theta = 1`` has no ancestors),
  so the reachable nodes are exactly the nodes on some X -> Y path;
* hidden nodes have no stable labels across moves, so nodes are identified by
  their order values (exact floats) and an edge by the pair
  ``(theta_parent, theta_child)``; parameters carry these keys, which is how
  weights are matched between two graphs (warm starts) and how they are saved.

This module needs numpy only.
"""

from __future__ import annotations

import numpy as np

from ..graph import DAG

__all__ = [
    "io_nodes",
    "reachable_mask",
    "network_edges",
    "network_key",
    "architecture_stats",
    "STAT_NAMES",
]

STAT_NAMES = (
    "num_nodes", "num_edges", "avg_degree", "width", "depth",
    "theta_mean", "theta_std", "theta_min", "theta_max",
)


def io_nodes(dag: DAG) -> tuple[int, int]:
    """Indices ``(x, y)`` of the input node (observed, theta = 1) and the output node (observed, theta = 0)
    (002 section 4.2; docs/derivations-cnn.md section 1).

    Raises ``ValueError`` unless the graph has exactly these two observed nodes.
    """
    if not isinstance(dag, DAG):
        raise ValueError(f"expected a chefs.DAG, got {type(dag).__name__}")
    obs = np.flatnonzero(dag.observed)
    if obs.size != 2:
        raise ValueError(
            f"a CNN graph has exactly two observed nodes (input X at theta=1, output Y at theta=0), "
            f"got {obs.size}; draw one with ICP(...).sample(rng, 2, observed_order=[1.0, 0.0])"
        )
    th = dag.theta[obs]
    if not (np.any(th == 1.0) and np.any(th == 0.0)):
        raise ValueError(
            f"the observed nodes must sit at theta=1 (input X) and theta=0 (output Y), got {th.tolist()}"
        )
    x = int(obs[np.flatnonzero(th == 1.0)[0]])
    y = int(obs[np.flatnonzero(th == 0.0)[0]])
    return x, y


def reachable_mask(dag: DAG, source: int | None = None) -> np.ndarray:
    """Boolean mask of the nodes reachable from ``source`` (default: X), ``source`` included.
    Only these take part in the forward pass (002 section 4.2; docs/derivations-cnn.md section 1)."""
    if source is None:
        source, _ = io_nodes(dag)
    mask = np.zeros(dag.num_nodes, dtype=bool)
    mask[source] = True
    children = dag.child_sets()
    # parents have higher theta: visiting by decreasing theta sees every parent first
    for k in np.argsort(-dag.theta, kind="stable").tolist():
        if mask[k]:
            for c in children[k]:
                mask[c] = True
    return mask


def network_edges(dag: DAG) -> list[tuple[int, int]]:
    """Edges ``(parent, child)`` of the forward network: those whose parent is reachable from X
    (002 section 4.2)."""
    mask = reachable_mask(dag)
    return [(p, c) for p, c in zip(dag.parents.tolist(), dag.children.tolist()) if mask[p]]


def network_key(dag: DAG) -> tuple:
    """Hashable identity of the forward network: its sorted edge keys ``(theta_parent, theta_child)``.

    Two graphs with the same key define the same network (same tensors, same
    operators), whatever their unreachable nodes, so they share the evidence
    (docs/derivations-cnn.md section 5).
    """
    th = dag.theta
    return tuple(sorted((float(th[p]), float(th[c])) for p, c in network_edges(dag)))


def count_structures(dags, shape_rule) -> int:
    """Number of distinct architectures up to the naming of hidden nodes.

    :func:`network_key` tells forward networks apart by their order values, so
    two graphs with the same edges between nodes of the same shape bins (the
    same tensors and operators, hence the same function class) count twice
    there. Here they count once: the reachable networks, with X, Y and every
    hidden node's shape bin as labels, are grouped into isomorphism classes
    (networkx: Weisfeiler-Lehman hashes, then exact isomorphism tests).
    """
    import warnings

    import networkx as nx

    def labelled(dag):
        x, y = io_nodes(dag)
        g = nx.DiGraph()
        g.add_node(x, label="X")
        g.add_node(y, label="Y")
        for p, c in network_edges(dag):
            for k in (p, c):
                if k not in g:
                    g.add_node(k, label=f"bin{shape_rule.bin(dag.theta[k])}")
            g.add_edge(p, c)
        return g

    same = nx.algorithms.isomorphism.categorical_node_match("label", None)
    classes: dict[str, list] = {}
    seen = set()
    for dag in dags:
        key = network_key(dag)
        if key in seen:
            continue
        seen.add(key)
        g = labelled(dag)
        with warnings.catch_warnings():  # networkx 3.5 changed the directed hashes: only used to group here
            warnings.simplefilter("ignore", UserWarning)
            h = nx.weisfeiler_lehman_graph_hash(g, node_attr="label")
        reps = classes.setdefault(h, [])
        if not any(nx.is_isomorphic(g, r, node_match=same) for r in reps):
            reps.append(g)
    return sum(len(r) for r in classes.values())


def architecture_stats(dag: DAG) -> dict:
    """Statistics of Figure 5 of 002 over the nodes reachable from the input.

    Returns
    -------
    dict with
        ``num_nodes`` (reachable nodes, X and Y included), ``num_edges``
        (edges among them), ``avg_degree`` (``2 E / N``, mean in+out degree),
        ``width`` (number of directed X -> Y paths), ``depth`` (longest
        directed path from X, in edges), ``theta_mean``, ``theta_std``,
        ``theta_min``, ``theta_max`` (order values of the reachable *hidden*
        nodes, NaN when there is none: X and Y sit at 1 and 0 in every graph),
        and ``total_nodes`` / ``total_edges`` of the whole ICP state.
    """
    x, y = io_nodes(dag)
    mask = reachable_mask(dag, x)
    edges = network_edges(dag)
    n = int(mask.sum())
    e = len(edges)
    order = [k for k in np.argsort(-dag.theta, kind="stable").tolist() if mask[k]]
    children: dict[int, list[int]] = {k: [] for k in order}
    for p, c in edges:
        children[p].append(c)
    paths = {k: 0 for k in order}
    longest = {k: -1 for k in order}
    paths[x] = 1
    longest[x] = 0
    for k in order:  # decreasing theta = topological order
        for c in children[k]:
            paths[c] += paths[k]
            longest[c] = max(longest[c], longest[k] + 1)
    hid = dag.theta[mask & ~dag.observed]
    return {
        "num_nodes": n,
        "num_edges": e,
        "avg_degree": 2.0 * e / n,
        "width": int(paths.get(y, 0)),
        "depth": int(max(longest.values())),
        "theta_mean": float(hid.mean()) if hid.size else float("nan"),
        "theta_std": float(hid.std()) if hid.size else float("nan"),
        "theta_min": float(hid.min()) if hid.size else float("nan"),
        "theta_max": float(hid.max()) if hid.size else float("nan"),
        "total_nodes": dag.num_nodes,
        "total_edges": dag.num_edges,
    }
