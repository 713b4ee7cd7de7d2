"""The chain: configuration, state, one sweep, and the ``sample`` generator.

A sweep makes ``moves_per_sweep`` random-scan moves, each of a kind drawn with
probabilities proportional to ``weights`` (edge Gibbs, birth/death, order,
depth), then updates the hyperparameters that are sampled. Each kernel leaves
the target invariant on its own (docs/derivations.md §2), so any such mixture
does too. The number of moves per sweep must not depend on the current state:
"4 K+ moves" with K+ read at the start of the sweep biases the chain towards
small graphs (measured: E[K+] 6.3 instead of 8.6 at gamma = 4, D = 1), so it is
a fixed number per chain.

Models: ``model=None`` (or :class:`NullModel`) samples the prior through the
numba fast path. Any other model supplies ``log_likelihood(graph_state)``; the
moves are then driven from Python with the *same* proposal kernels and the
likelihood change added to each log acceptance ratio (edge updates become
Gibbs updates of prior x likelihood).
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass, field
from typing import Iterator

import numpy as np

from ..graph import DAG
from ..priors.icp import check_hyper, observed_orders
from . import _kernels as kern
from .hyper import HYPER_NAMES, HyperPriors, update_hyper
from .state import GraphState


class NullModel:
    """Likelihood 1: the chain samples the ICP prior (eq. 9 of 002, corrected;
    docs/derivations.md sections 1.3 and 2)."""

    is_null = True

    def log_likelihood(self, state: GraphState) -> float:  # noqa: ARG002
        return 0.0


@dataclass
class ChainConfig:
    """Everything that defines a chain except its seed and its model.

    Parameters
    ----------
    num_observed : int
    observed_order : None, float or list
        As in :meth:`chefs.ICP.sample`: fixed observed orders (None: free).
    alpha, gamma, phi : float
        Initial (or fixed) hyperparameters.
    sample_hyper : tuple of str
        Which of "alpha", "gamma", "phi" are sampled (others stay fixed).
    hyper_priors : HyperPriors
    weights : tuple of 4 floats
        Relative frequencies of edge, birth/death, order and depth moves.
    moves_per_sweep : int or None
        Structure moves per sweep (fixed for the chain). None: 4 max(10, 2 D).
    structure_warmup : int
        Sweeps at the start of the chain that keep the structure and the
        hyperparameters fixed and run only the model's within-model updates
        (``model.update_within``: parameters, latent activations). A start-up
        procedure (every update still leaves the target invariant): hidden
        units of the initial graph learn features before death moves can
        remove them (docs/derivations.md section 3.3). Ignored without a model.
    """

    num_observed: int
    observed_order: object = None
    alpha: float = 1.0
    gamma: float = 1.0
    phi: float = 1.0
    sample_hyper: tuple = ()
    hyper_priors: HyperPriors = field(default_factory=HyperPriors)
    weights: tuple = (1.0, 1.0, 1.0, 1.0)
    moves_per_sweep: int | None = None
    structure_warmup: int = 0

    def __post_init__(self):
        check_hyper(self.alpha, self.gamma, self.phi)
        self.orders = observed_orders(self.num_observed, self.observed_order)
        self.sample_hyper = tuple(self.sample_hyper)
        bad = [h for h in self.sample_hyper if h not in HYPER_NAMES]
        if bad:
            raise ValueError(f"unknown hyperparameter(s) to sample: {bad}; choose from {HYPER_NAMES}")
        w = np.asarray(self.weights, dtype=float)
        if w.shape != (4,) or np.any(w < 0) or w.sum() <= 0 or not np.all(np.isfinite(w)):
            raise ValueError("weights must be 4 non-negative numbers (edge, birth_death, order, depth), not all 0")
        if self.moves_per_sweep is None:
            self.moves_per_sweep = 4 * max(10, 2 * int(self.num_observed))
        if int(self.moves_per_sweep) != self.moves_per_sweep or self.moves_per_sweep < 1:
            raise ValueError(f"moves_per_sweep must be a positive integer, got {self.moves_per_sweep}")
        self.moves_per_sweep = int(self.moves_per_sweep)
        if int(self.structure_warmup) != self.structure_warmup or self.structure_warmup < 0:
            raise ValueError(f"structure_warmup must be a non-negative integer, got {self.structure_warmup}")
        self.structure_warmup = int(self.structure_warmup)
        if isinstance(self.hyper_priors, dict):
            self.hyper_priors = HyperPriors(**self.hyper_priors)

    def to_dict(self) -> dict:
        order = self.observed_order
        if isinstance(order, np.ndarray):
            order = order.tolist()
        return {
            "num_observed": int(self.num_observed),
            "observed_order": order,
            "alpha": self.alpha,
            "gamma": self.gamma,
            "phi": self.phi,
            "sample_hyper": list(self.sample_hyper),
            "hyper_priors": asdict(self.hyper_priors),
            "weights": list(map(float, self.weights)),
            "moves_per_sweep": self.moves_per_sweep,
            "structure_warmup": self.structure_warmup,
        }

    @classmethod
    def from_dict(cls, d: dict) -> "ChainConfig":
        d = dict(d)
        d["hyper_priors"] = HyperPriors(**d.get("hyper_priors", {}))
        d["sample_hyper"] = tuple(d.get("sample_hyper", ()))
        d["weights"] = tuple(d.get("weights", (1, 1, 1, 1)))
        return cls(**d)

    def initial_graph(self, rng: np.random.Generator) -> DAG:
        """Observed nodes only, no edges: free orders drawn from U(0, 1) (eq. 1 of 002)."""
        th = np.where(np.isnan(self.orders), rng.random(self.orders.size), self.orders)
        return DAG(th, np.ones(th.size, bool), fixed=~np.isnan(self.orders))


@dataclass
class ChainState:
    """What the next sweep needs: graph, hyperparameters, random stream, counters."""

    graph: GraphState
    hyper: dict
    rng: np.random.Generator
    sweep: int = 0
    stats: np.ndarray = field(default_factory=lambda: np.zeros((4, 2), dtype=np.int64))

    def to_record(self) -> dict:
        return {
            "graph": self.graph.to_record(),
            "hyper": dict(self.hyper),
            "rng": self.rng.bit_generator.state,
            "sweep": int(self.sweep),
            "stats": self.stats.tolist(),
        }

    @classmethod
    def from_record(cls, rec: dict) -> "ChainState":
        state = rec["rng"]
        name = state["bit_generator"]
        if name not in ("PCG64", "PCG64DXSM", "Philox", "SFC64", "MT19937"):
            raise ValueError(f"unsupported bit generator in checkpoint: {name}")
        bg = getattr(np.random, name)()
        bg.state = state
        return cls(GraphState.from_record(rec["graph"]), dict(rec["hyper"]), np.random.Generator(bg),
                   int(rec["sweep"]), np.asarray(rec["stats"], dtype=np.int64))


def init_state(config: ChainConfig, rng: np.random.Generator, graph: DAG | None = None) -> ChainState:
    g = graph if graph is not None else config.initial_graph(rng)
    if g.num_observed != config.num_observed:
        raise ValueError(f"initial graph has {g.num_observed} observed nodes, config says {config.num_observed}")
    return ChainState(GraphState.from_dag(g), {"alpha": config.alpha, "gamma": config.gamma, "phi": config.phi}, rng)


# ------------------------------------------------------------------ sweeps
def _null_moves(state: ChainState, weights: np.ndarray, num_steps: int, plant: int = 0) -> None:
    g = state.graph
    hyper = np.array([state.hyper["alpha"], state.hyper["gamma"], state.hyper["phi"]])
    left = num_steps
    while left > 0:
        g.ensure_capacity(4)
        left -= kern.run_null(state.rng, *g.arrays(), hyper, weights, left, state.stats, plant)


def _model_moves(state: ChainState, model, weights: np.ndarray, num_steps: int, plant: int = 0) -> None:
    """The same kernels as ``run_null``, with the model's log-likelihood change."""
    g = state.graph
    rng = state.rng
    alpha, gamma, phi = state.hyper["alpha"], state.hyper["gamma"], state.hyper["phi"]
    cum = np.cumsum(weights) / np.sum(weights)
    ll = model.log_likelihood(g)
    cand = np.empty(0, dtype=np.int64)

    def accept(kind, lr, undo) -> None:
        """The shared MH step: prior + Hastings log-ratio plus the likelihood change."""
        nonlocal ll
        ll_new = model.log_likelihood(g)
        if math.log(rng.random()) < lr + ll_new - ll:
            ll = ll_new
            state.stats[kind, 1] += 1
        else:
            undo()

    for _ in range(num_steps):
        g.ensure_capacity(4)
        theta, obs, fixed, alive, tie, Z, m, npar, a = g.arrays()
        if cand.shape[0] != g.capacity:
            cand = np.empty(g.capacity, dtype=np.int64)
        kind = kern.choose_kind(rng, cum)
        state.stats[kind, 0] += 1
        if kind == kern.EDGE:
            i, _ = kern.pick_alive(rng, alive)
            n = kern.edge_candidates(theta, obs, alive, Z, m, i, cand)
            changed = False
            for k in cand[:n].tolist():
                if not (obs[k] or m[k] - int(Z[k, i]) >= 1):
                    continue
                p1 = kern.edge_prior_prob(obs, Z, m, a, k, i, alpha, phi)
                cur = bool(Z[k, i])
                kern.apply_set_edge(Z, m, npar, k, i, not cur)
                ll_flip = model.log_likelihood(g)
                kern.apply_set_edge(Z, m, npar, k, i, cur)
                ll1, ll0 = (ll, ll_flip) if cur else (ll_flip, ll)
                d = ll1 - ll0
                if d == 0.0:
                    p = p1
                else:
                    logit = math.log(p1) - math.log1p(-p1) + d if 0 < p1 < 1 else (math.inf if p1 >= 1 else -math.inf)
                    p = 1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0
                new = rng.random() < p
                if new != cur:
                    kern.apply_set_edge(Z, m, npar, k, i, new)
                    ll = ll1 if new else ll0
                    changed = True
            state.stats[kind, 1] += int(changed)
        elif kind == kern.BIRTH_DEATH:
            bd, lr, h, i = kern.propose_birth_death(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, cand,
                                                    alpha, gamma, phi, plant)
            if bd != 0:
                accept(kind, lr, lambda: kern.undo_birth_death(theta, obs, fixed, alive, tie, Z, m, npar, a, bd, h, i))
        elif kind == kern.ORDER:
            ok, lr, i, old = kern.propose_order(rng, theta, obs, fixed, alive, tie, Z, m, a, alpha, gamma, phi, plant)
            if ok:
                accept(kind, lr, lambda: kern.apply_move_node(theta, alive, a, i, old))
        else:
            dk, lr, h, k, i = kern.propose_depth(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, alpha, gamma, phi)
            if dk != 0:
                accept(kind, lr, lambda: kern.undo_depth(theta, obs, fixed, alive, tie, Z, m, npar, a, dk, h, k, i))


def sweep(state: ChainState, config: ChainConfig, model=None, plant: int = 0) -> ChainState:
    """One sweep in place: ``moves_per_sweep`` structure moves, then the sampled hyperparameters.

    The moves are those of 002 section 3 (eqs. 13-16) plus depth moves, as re-derived in
    docs/derivations.md sections 2.2-2.5; a fixed number per sweep (section 2.7); the
    hyperparameter updates of section 2.6.

    If the model has ``update(rng, graph_state)`` (its own within-model
    updates: parameters, latent variables), it runs once per sweep. During the
    first ``config.structure_warmup`` sweeps a model with ``update_within``
    runs only that (structure and hyperparameters stay fixed).
    """
    weights = np.asarray(config.weights, dtype=float)
    num_steps = config.moves_per_sweep
    if state.sweep < config.structure_warmup and model is not None and hasattr(model, "update_within"):
        model.update_within(state.rng, state.graph)
        state.sweep += 1
        return state
    if model is None or getattr(model, "is_null", False):
        _null_moves(state, weights, num_steps, plant)
    elif hasattr(model, "sweep"):
        if plant:  # that path runs the model's own compiled moves; plant errors there by patching its kernels
            raise ValueError("plant is not supported for a model with its own sweep (e.g. the NLGBN)")
        model.sweep(state.rng, state.graph, config, state.hyper)
    else:
        if hasattr(model, "update"):
            model.update(state.rng, state.graph)
        _model_moves(state, model, weights, num_steps, plant)
    if config.sample_hyper:
        state.hyper = update_hyper(state.rng, state.graph, state.hyper, config.hyper_priors, config.sample_hyper)
    state.sweep += 1
    return state


def sample(state: ChainState, config: ChainConfig, num_sweeps: int, model=None, plant: int = 0) -> Iterator[ChainState]:
    """Generator: runs ``num_sweeps`` sweeps, yielding the (mutable) state after each.

    The yielded object is the live state; take a snapshot
    (``state.graph.to_dag()``, ``dict(state.hyper)``) of what you keep.
    """
    if int(num_sweeps) != num_sweeps or num_sweeps < 0:
        raise ValueError(f"num_sweeps must be a non-negative integer, got {num_sweeps}")
    for _ in range(int(num_sweeps)):
        yield sweep(state, config, model, plant)


def scalars(state: ChainState, model=None) -> dict:
    """Scalar trace values of a state."""
    g = state.graph
    h = state.hyper
    sp = getattr(model, "structure_prior", None)
    log_prior = sp.log_prob_state(g) if sp is not None else g.log_prior(h["alpha"], h["gamma"], h["phi"])
    log_lik = 0.0 if model is None else float(model.log_likelihood(g))
    dag = g.to_dag()
    return {
        "num_nodes": g.num_nodes,
        "num_edges": g.num_edges(),
        "num_hidden": g.num_hidden(),
        "depth": dag.depth(),
        "log_prior": log_prior,
        "log_lik": log_lik,
        "log_joint": log_prior + log_lik,
        "alpha": h["alpha"],
        "gamma": h["gamma"],
        "phi": h["phi"],
    }
