"""Mutable graph state for MCMC: slot arrays with incremental bookkeeping.

The state is changed in place by the move kernels (and undone on rejection);
the chain driver only takes immutable snapshots (:meth:`GraphState.to_dag`)
of what it stores.
"""

from __future__ import annotations

import numpy as np

from ..graph import DAG
from . import _kernels as kern


class GraphState:
    """An ICP active subgraph in fixed-capacity arrays (the bookkeeping of
    docs/derivations.md section 2: ``m_k``, ``a_k`` as in eq. 5 of 002).

    Attributes (arrays of length ``capacity``): ``theta``, ``obs``, ``fixed``,
    ``alive``, ``tie``, ``m`` (children), ``npar`` (parents), ``a`` (active
    nodes strictly below), and ``Z`` (capacity x capacity adjacency).
    Observed nodes keep slots 0..D-1 for the whole chain.
    """

    ARRAYS = ("theta", "obs", "fixed", "alive", "tie", "m", "npar", "a")

    def __init__(self, capacity: int):
        cap = int(capacity)
        self.theta = np.zeros(cap)
        self.obs = np.zeros(cap, dtype=np.bool_)
        self.fixed = np.zeros(cap, dtype=np.bool_)
        self.alive = np.zeros(cap, dtype=np.bool_)
        self.tie = np.zeros(cap, dtype=np.int64)
        self.m = np.zeros(cap, dtype=np.int64)
        self.npar = np.zeros(cap, dtype=np.int64)
        self.a = np.zeros(cap, dtype=np.int64)
        self.Z = np.zeros((cap, cap), dtype=np.bool_)

    # ------------------------------------------------------------ building
    @classmethod
    def from_dag(cls, dag: DAG, capacity: int | None = None, allow_ties: bool = False) -> "GraphState":
        """Load a graph (observed nodes first, as in canonical form).

        Raises ``ValueError`` if a node with a free order shares its order value
        with another node (free orders are continuous; ties are only allowed
        between fixed nodes) unless ``allow_ties`` (layered priors, whose hidden
        units of one layer share an order value).
        """
        g = dag.canonical()
        n = g.num_nodes
        cap = max(16, int(capacity or 0), 2 * n + 8)
        s = cls(cap)
        s.theta[:n] = g.theta
        s.obs[:n] = g.observed
        s.fixed[:n] = g.fixed
        s.alive[:n] = True
        s.Z[g.parents, g.children] = True
        s._recount()
        # ties: only between fixed nodes
        vals, inv, counts = np.unique(g.theta, return_inverse=True, return_counts=True)
        for k in range(n):
            if counts[inv[k]] > 1:
                if not g.fixed[k] and not allow_ties:
                    raise ValueError(
                        f"node {k} has a free order equal to another node's ({g.theta[k]}); free orders must be distinct"
                    )
                s.tie[k] = int(np.sum(g.theta[:k] == g.theta[k]))
        return s

    def _recount(self) -> None:
        alive = self.alive
        self.m[:] = np.where(alive, self.Z[:, alive].sum(axis=1), 0)
        self.npar[:] = np.where(alive, self.Z[alive, :].sum(axis=0), 0)
        th = self.theta[alive]
        st = np.sort(th)
        a = np.zeros_like(self.a)
        a[alive] = np.searchsorted(st, th, side="left")
        self.a[:] = a

    @property
    def capacity(self) -> int:
        return self.theta.shape[0]

    @property
    def num_nodes(self) -> int:
        return int(self.alive.sum())

    @property
    def num_observed(self) -> int:
        return int((self.obs & self.alive).sum())

    def grow(self, factor: int = 2) -> None:
        """Enlarge the capacity (keeps every slot index)."""
        old = self.capacity
        new = old * factor
        for name in self.ARRAYS:
            arr = getattr(self, name)
            bigger = np.zeros(new, dtype=arr.dtype)
            bigger[:old] = arr
            setattr(self, name, bigger)
        Z = np.zeros((new, new), dtype=np.bool_)
        Z[:old, :old] = self.Z
        self.Z = Z

    def ensure_capacity(self, extra: int = 2) -> None:
        while self.num_nodes + extra > self.capacity:
            self.grow()

    # --------------------------------------------------------------- views
    def canonical_slots(self) -> np.ndarray:
        """Active slots in the node order of :meth:`to_dag` (observed by slot, hidden by theta)."""
        idx = np.flatnonzero(self.alive)
        obs = idx[self.obs[idx]]
        hid = idx[~self.obs[idx]]
        hid = hid[np.argsort(self.theta[hid], kind="stable")]
        return np.concatenate([obs, hid])

    def to_dag(self) -> DAG:
        """An immutable canonical snapshot."""
        idx = np.flatnonzero(self.alive)
        pos = np.full(self.capacity, -1)
        pos[idx] = np.arange(idx.size)
        sub = self.Z[np.ix_(idx, idx)]
        p, c = np.nonzero(sub)
        g = DAG(self.theta[idx], self.obs[idx], p, c, self.fixed[idx], validate=False)
        return g.canonical()

    def log_prior(self, alpha: float, gamma: float, phi: float) -> float:
        """log p(G, theta_A): eq. 9 of 002, corrected (docs/derivations.md section 1.3)."""
        return float(kern.log_prior_full(self.theta, self.obs, self.alive, self.m, self.a, self.tie,
                                         alpha, gamma, phi))

    def interval_sum(self, alpha: float) -> float:
        """S = sum_r (1 - theta_r) / (alpha + r - 1), the interval term of eq. 9 of 002
        (docs/derivations.md section 1.3)."""
        return float(kern.interval_sum(self.theta, self.alive, self.a, self.tie, alpha))

    def num_hidden(self) -> int:
        return int((self.alive & ~self.obs).sum())

    def num_edges(self) -> int:
        return int(self.m[self.alive].sum())

    def check(self) -> None:
        """Recount every bookkept quantity from scratch and compare (tests)."""
        m, npar, a = self.m.copy(), self.npar.copy(), self.a.copy()
        self._recount()
        al = self.alive
        if not (np.array_equal(m[al], self.m[al]) and np.array_equal(npar[al], self.npar[al])
                and np.array_equal(a[al], self.a[al])):
            raise RuntimeError("incremental bookkeeping diverged from a full recount")
        self.to_dag().validate()
        if np.any(self.Z[~al, :]) or np.any(self.Z[:, ~al]):
            raise RuntimeError("edge attached to an inactive slot")

    def arrays(self):
        return (self.theta, self.obs, self.fixed, self.alive, self.tie, self.Z, self.m, self.npar, self.a)

    # -------------------------------------------------------------- storage
    def to_record(self) -> dict:
        """JSON-able record of the graph (slot layout preserved for resume)."""
        idx = np.flatnonzero(self.alive)
        p, c = np.nonzero(self.Z)
        return {
            "capacity": self.capacity,
            "slots": idx.tolist(),
            "theta": self.theta[idx].tolist(),
            "observed": self.obs[idx].tolist(),
            "fixed": self.fixed[idx].tolist(),
            "tie": self.tie[idx].tolist(),
            "edges": [[int(x), int(y)] for x, y in zip(p, c)],
        }

    @classmethod
    def from_record(cls, rec: dict) -> "GraphState":
        s = cls(int(rec["capacity"]))
        idx = np.asarray(rec["slots"], dtype=np.int64)
        s.theta[idx] = rec["theta"]
        s.obs[idx] = rec["observed"]
        s.fixed[idx] = rec["fixed"]
        s.tie[idx] = rec["tie"]
        s.alive[idx] = True
        e = np.asarray(rec["edges"], dtype=np.int64).reshape(-1, 2)
        s.Z[e[:, 0], e[:, 1]] = True
        s._recount()
        return s
