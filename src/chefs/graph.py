"""Ordered DAGs over active nodes: the objects the ICP puts a prior on.

A :class:`DAG` holds the active subgraph of an Indian-chefs-process draw: order
values ``theta`` in [0, 1] ("reputations", higher means nearer the top), an
observed mask, an optional mask of nodes whose order is fixed rather than drawn,
and directed edges ``parent -> child`` which always go from higher to lower
theta (002, eq. 3).

Observed nodes are labelled (their position among the observed nodes is their
label); hidden nodes are not: they are identified by their order values. The
canonical form (:meth:`DAG.canonical`) lists the observed nodes first, in their
original order, then the hidden nodes by increasing theta.

The JSON interchange form used by the CLI is::

    {"theta": [...], "observed": [true, ...], "edges": [[parent, child], ...],
     "fixed": [true, ...]}          # "fixed" is optional

with one graph per line in ``.jsonl`` files.
"""

from __future__ import annotations

import json
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator

import numpy as np

__all__ = ["DAG", "read_jsonl", "write_jsonl", "transitive_closure"]


def _as_bool(values, n: int, name: str) -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != (n,):
        raise ValueError(f"'{name}' must have one entry per node ({n}), got shape {arr.shape}")
    if arr.dtype != bool:
        if not np.all(np.isin(arr, [0, 1])):
            raise ValueError(f"'{name}' must hold booleans")
        arr = arr.astype(bool)
    return arr.copy()


@dataclass(frozen=True, eq=False)
class DAG:
    """An ordered DAG over the active nodes of an ICP draw.

    Parameters
    ----------
    theta : array of float, shape (n,)
        Order values in [0, 1].
    observed : array of bool, shape (n,)
        Observed-node mask (the set O of 002).
    parents, children : arrays of int, shape (E,)
        Edge list: ``parents[e] -> children[e]`` (Z_ki = 1 in 002).
    fixed : array of bool, shape (n,), optional
        Nodes whose order value is fixed rather than drawn from U(0, 1). Only
        observed nodes may be fixed.
    validate : bool
        Check the invariants (default True). Internal callers that build graphs
        which are valid by construction may skip it.
    """

    theta: np.ndarray
    observed: np.ndarray
    parents: np.ndarray
    children: np.ndarray
    fixed: np.ndarray = field(default=None)  # type: ignore[assignment]

    def __init__(self, theta, observed, parents=(), children=(), fixed=None, validate=True):
        theta = np.asarray(theta, dtype=float).reshape(-1).copy()
        n = theta.shape[0]
        observed = _as_bool(observed, n, "observed")
        fixed = np.zeros(n, dtype=bool) if fixed is None else _as_bool(fixed, n, "fixed")
        parents = np.asarray(parents, dtype=np.int64).reshape(-1).copy()
        children = np.asarray(children, dtype=np.int64).reshape(-1).copy()
        if parents.shape != children.shape:
            raise ValueError("parents and children must have the same length")
        for name, arr in (("theta", theta), ("observed", observed), ("fixed", fixed),
                          ("parents", parents), ("children", children)):
            arr.setflags(write=False)
            object.__setattr__(self, name, arr)
        if validate:
            self.validate()

    # ------------------------------------------------------------------ checks
    def validate(self) -> None:
        """Raise ``ValueError`` unless the graph is a valid ICP active subgraph.

        Checks: theta finite and in [0, 1]; edge indices in range; no self loop
        or repeated edge; every edge goes from strictly higher to strictly lower
        theta; every hidden node has at least one child (with strictly
        decreasing theta along edges this makes every hidden node an ancestor
        of an observed node); only observed nodes are fixed. The invariants
        follow from the definition of the active subgraph (eqs. 1-3 of 002;
        docs/derivations.md section 1.1).
        """
        n = self.num_nodes
        if not np.all(np.isfinite(self.theta)):
            raise ValueError("theta must be finite")
        if n and (self.theta.min() < 0.0 or self.theta.max() > 1.0):
            raise ValueError("theta values must lie in [0, 1]")
        if np.any(self.fixed & ~self.observed):
            raise ValueError("only observed nodes can have a fixed order")
        p, c = self.parents, self.children
        if p.size:
            if p.min() < 0 or c.min() < 0 or p.max() >= n or c.max() >= n:
                raise ValueError(f"edge index out of range (graph has {n} nodes)")
            if np.any(p == c):
                raise ValueError("self loops are not allowed")
            bad = self.theta[p] <= self.theta[c]
            if np.any(bad):
                e = int(np.flatnonzero(bad)[0])
                raise ValueError(
                    f"edge {p[e]} -> {c[e]} goes against the order "
                    f"(theta {self.theta[p[e]]:.6g} <= {self.theta[c[e]]:.6g}); "
                    "edges must go from higher to lower theta (this also rules out cycles)"
                )
            key = p * n + c
            if np.unique(key).size != key.size:
                raise ValueError("repeated edge")
        hidden_childless = ~self.observed & (self.out_degree() == 0)
        if np.any(hidden_childless):
            k = int(np.flatnonzero(hidden_childless)[0])
            raise ValueError(
                f"hidden node {k} has no child, so it is not an ancestor of an observed node "
                "(inactive nodes are not part of the graph)"
            )

    # --------------------------------------------------------------- counts
    @property
    def num_nodes(self) -> int:
        """K+: the number of active nodes."""
        return int(self.theta.shape[0])

    @property
    def num_edges(self) -> int:
        """E+: the number of active edges."""
        return int(self.parents.shape[0])

    @property
    def num_observed(self) -> int:
        return int(self.observed.sum())

    @property
    def num_hidden(self) -> int:
        return self.num_nodes - self.num_observed

    def out_degree(self) -> np.ndarray:
        """m_k: number of children of each node (as defined after eq. 5 of 002)."""
        return np.bincount(self.parents, minlength=self.num_nodes)

    def in_degree(self) -> np.ndarray:
        return np.bincount(self.children, minlength=self.num_nodes)

    def num_below(self) -> np.ndarray:
        """a_k: number of active nodes with strictly lower theta than node k (as defined
        after eq. 5 of 002)."""
        s = np.sort(self.theta)
        return np.searchsorted(s, self.theta, side="left")

    def adjacency(self) -> np.ndarray:
        """Boolean adjacency matrix ``Z[k, i]`` (edge k -> i; Z_ki of eq. 3 of 002)."""
        z = np.zeros((self.num_nodes, self.num_nodes), dtype=bool)
        z[self.parents, self.children] = True
        return z

    def parent_sets(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for p, c in zip(self.parents.tolist(), self.children.tolist()):
            out[c].append(p)
        return out

    def child_sets(self) -> list[list[int]]:
        out: list[list[int]] = [[] for _ in range(self.num_nodes)]
        for p, c in zip(self.parents.tolist(), self.children.tolist()):
            out[p].append(c)
        return out

    def depth(self) -> int:
        """Length (in edges) of the longest directed path."""
        if self.num_edges == 0:
            return 0
        order = np.argsort(self.theta, kind="stable")  # children before parents
        longest = np.zeros(self.num_nodes, dtype=np.int64)
        children = self.child_sets()
        for k in order.tolist():
            for c in children[k]:
                if longest[c] + 1 > longest[k]:
                    longest[k] = longest[c] + 1
        return int(longest.max())

    def summary(self) -> dict:
        """Scalar statistics used by tests, traces and reports."""
        return {
            "num_nodes": self.num_nodes,
            "num_edges": self.num_edges,
            "num_hidden": self.num_hidden,
            "depth": self.depth(),
        }

    # ------------------------------------------------------------ canonical
    def canonical(self) -> "DAG":
        """Observed nodes first (original order), then hidden nodes by increasing theta."""
        obs = np.flatnonzero(self.observed)
        hid = np.flatnonzero(~self.observed)
        hid = hid[np.argsort(self.theta[hid], kind="stable")]
        perm = np.concatenate([obs, hid])
        inv = np.empty_like(perm)
        inv[perm] = np.arange(perm.size)
        p, c = inv[self.parents], inv[self.children]
        o = np.lexsort((c, p))
        return DAG(self.theta[perm], self.observed[perm], p[o], c[o], self.fixed[perm], validate=False)

    def key(self) -> tuple:
        """A hashable key identifying the structure (ignores the order values of
        hidden nodes beyond their rank, and of observed nodes entirely)."""
        g = self.canonical()
        return (int(g.num_observed), int(g.num_nodes), tuple(zip(g.parents.tolist(), g.children.tolist())))

    # ------------------------------------------------------------------ I/O
    def to_dict(self) -> dict:
        d = {
            "theta": [float(t) for t in self.theta],
            "observed": [bool(o) for o in self.observed],
            "edges": [[int(p), int(c)] for p, c in zip(self.parents, self.children)],
        }
        if self.fixed.any():
            d["fixed"] = [bool(f) for f in self.fixed]
        return d

    def to_json(self) -> str:
        return json.dumps(self.to_dict(), separators=(",", ":"))

    @classmethod
    def from_dict(cls, d: dict) -> "DAG":
        if not isinstance(d, dict):
            raise ValueError("a graph must be a JSON object with 'theta', 'observed' and 'edges'")
        missing = [k for k in ("theta", "observed", "edges") if k not in d]
        if missing:
            raise ValueError(f"graph is missing field(s): {', '.join(missing)}")
        theta = d["theta"]
        if not isinstance(theta, list) or not all(isinstance(t, (int, float)) and not isinstance(t, bool) for t in theta):
            raise ValueError("'theta' must be a list of numbers")
        observed = d["observed"]
        if not isinstance(observed, list) or not all(isinstance(o, bool) for o in observed):
            raise ValueError("'observed' must be a list of true/false")
        edges = d["edges"]
        if not isinstance(edges, list) or not all(
            isinstance(e, list) and len(e) == 2 and all(isinstance(v, int) and not isinstance(v, bool) for v in e)
            for e in edges
        ):
            raise ValueError("'edges' must be a list of [parent, child] integer pairs")
        fixed = d.get("fixed")
        if fixed is not None and (not isinstance(fixed, list) or not all(isinstance(f, bool) for f in fixed)):
            raise ValueError("'fixed' must be a list of true/false")
        e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
        return cls(theta, observed, e[:, 0], e[:, 1], fixed)

    @classmethod
    def from_json(cls, text: str) -> "DAG":
        try:
            d = json.loads(text)
        except json.JSONDecodeError as err:
            raise ValueError(f"malformed JSON: {err.msg} (column {err.colno})") from None
        return cls.from_dict(d)

    def to_networkx(self):
        """A ``networkx.DiGraph`` with node attributes ``theta``, ``observed``, ``fixed``."""
        import networkx as nx

        g = nx.DiGraph()
        for k in range(self.num_nodes):
            g.add_node(k, theta=float(self.theta[k]), observed=bool(self.observed[k]), fixed=bool(self.fixed[k]))
        g.add_edges_from(zip(self.parents.tolist(), self.children.tolist()))
        return g

    def write_graphml(self, path) -> None:
        import networkx as nx

        nx.write_graphml(self.to_networkx(), str(path))

    def __eq__(self, other) -> bool:
        if not isinstance(other, DAG):
            return NotImplemented
        a, b = self.canonical(), other.canonical()
        return (
            a.num_nodes == b.num_nodes
            and np.array_equal(a.observed, b.observed)
            and np.array_equal(a.fixed, b.fixed)
            and np.array_equal(a.theta, b.theta)
            and np.array_equal(a.parents, b.parents)
            and np.array_equal(a.children, b.children)
        )

    __hash__ = None  # type: ignore[assignment]

    def __repr__(self) -> str:
        return f"DAG(K+={self.num_nodes}, observed={self.num_observed}, edges={self.num_edges})"


def transitive_closure(edges) -> np.ndarray:
    """``reach[i, j]``: a directed path from i to j in the adjacency matrix ``edges`` (``edges[i, j]``: i -> j; any
    square boolean array, acyclic or not), by Warshall's algorithm; False on the diagonal."""
    reach = np.array(edges, dtype=bool)
    for k in range(reach.shape[0]):
        reach |= reach[:, [k]] & reach[[k], :]
    np.fill_diagonal(reach, False)
    return reach


def read_jsonl(path) -> Iterator[DAG]:
    """Yield the graphs of a ``.jsonl`` file, one per non-empty line.

    Raises ``ValueError`` naming the line of the first malformed graph.
    """
    with open(path, encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if not line.strip():
                continue
            try:
                yield DAG.from_json(line)
            except ValueError as err:
                raise ValueError(f"{path}:{lineno}: {err}") from None


def write_jsonl(graphs: Iterable[DAG], path) -> int:
    """Write graphs one per line; returns the number written. The lines go to a
    ``.part`` file renamed over ``path`` at the end, so an error while the graphs
    are drawn leaves no empty or partial file behind."""
    n = 0
    path = Path(path)
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory; give a file name for the graphs")
    path.parent.mkdir(parents=True, exist_ok=True)
    # /dev/stdout, a FIFO or a link is written through; a regular file goes through a .part file
    through = path.exists() and not path.is_file() or path.is_symlink()
    target = path if through else path.with_name(path.name + ".part")
    try:
        with open(target, "w", encoding="utf-8") as fh:
            for g in graphs:
                fh.write(g.to_json() + "\n")
                n += 1
        if not through:
            os.replace(target, path)
    except BaseException:
        if not through:
            target.unlink(missing_ok=True)
        raise
    return n

