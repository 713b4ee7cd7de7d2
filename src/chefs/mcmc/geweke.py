"""Geweke's joint distribution test (Geweke 2004) for samplers of
p(structure, model variables | data).

Two simulators of the same joint p(G, v, y):

* marginal-conditional: G from the ICP prior (chefs process), then the
  model draws its variables and data forward: ``model.forward(rng, state)``;
* successive-conditional: start from one forward draw and alternate the
  posterior sampler (structure moves + ``model.update``) with a fresh draw
  of the data given everything else: ``model.resample_data(rng, state)``.

If the posterior sampler is correct, both simulators have the same
distribution; the harness compares the means of test functions with z-scores
(the autocorrelated chain's standard error from its effective sample size). A model plugs in
by providing ``forward``, ``resample_data``, ``log_likelihood`` and,
optionally, ``update`` and ``test_functions(state) -> dict``.
"""

from __future__ import annotations

import math

import numpy as np

from ..priors.icp import ICP
from .chain import ChainConfig, ChainState, sweep
from .diagnostics import mcse_mean
from .state import GraphState


def _structure_functions(g: GraphState) -> dict:
    dag = g.to_dag()
    return {"num_nodes": dag.num_nodes, "num_edges": dag.num_edges, "depth": dag.depth(),
            "in_degree_obs": float(dag.in_degree()[dag.observed].sum())}


def _functions(model, g: GraphState) -> dict:
    out = _structure_functions(g)
    if hasattr(model, "test_functions"):
        out.update(model.test_functions(g))
    return out


def _icp_draw_state(config: ChainConfig):
    """Structures from the ICP of ``config`` through the chefs process."""
    prior = ICP(config.alpha, config.gamma, config.phi)

    def draw_state(rng):
        return GraphState.from_dag(prior.sample(rng, config.num_observed, observed_order=config.observed_order))

    return draw_state


def chain_mean_variance(y, se: str = "ess", batches: int = 40) -> float:
    """The squared standard error of the mean of the chain series ``y``: from its effective sample size
    (``se="ess"``, :func:`chefs.mcmc.diagnostics.mcse_mean`) or from ``batches`` batch means (``"batch"``:
    the variance of the means of equal consecutive batches, the last ``len(y) % batches`` values dropped,
    divided by ``batches``)."""
    if se not in ("ess", "batch"):
        raise ValueError(f"se must be 'ess' or 'batch', got {se!r}")
    y = np.asarray(y, float)
    if se == "ess":
        return float(mcse_mean(y) ** 2)
    if not (isinstance(batches, (int, np.integer)) and 2 <= batches <= y.size):
        raise ValueError(f"batches must be between 2 and the series' length ({y.size}), got {batches}")
    y = y[: y.size // batches * batches]
    return float(y.reshape(batches, -1).mean(axis=1).var(ddof=1) / batches)


def geweke_test(model, config: ChainConfig, num_forward: int, num_chain: int, rng: np.random.Generator,
                sweeps_between: int = 1, batches: int = 40, plant: int = 0, draw_state=None,
                se: str = "ess") -> dict:
    """Run both simulators; returns {function: z-score} (``|z|`` large = failure).

    Geweke (2004); the checks of docs/derivations.md sections 2.8 and 3.3.

    ``draw_state(rng) -> GraphState`` draws a structure from the prior (default:
    the ICP of ``config`` through the chefs process). ``se``: the successive-
    conditional chain's standard error from its effective sample size ("ess",
    the default) or from ``batches`` batch means ("batch"; it understates the
    error when a batch is shorter than the autocorrelation time).
    """
    if se not in ("ess", "batch"):
        raise ValueError(f"se must be 'ess' or 'batch', got {se!r}")
    draw_state = draw_state or _icp_draw_state(config)

    fwd: dict[str, list] = {}
    for _ in range(int(num_forward)):
        g = draw_state(rng)
        model.forward(rng, g)
        for k, v in _functions(model, g).items():
            fwd.setdefault(k, []).append(v)
    g = draw_state(rng)
    model.forward(rng, g)
    state = ChainState(g, {"alpha": config.alpha, "gamma": config.gamma, "phi": config.phi}, rng)
    chain: dict[str, list] = {}
    for _ in range(int(num_chain)):
        for _ in range(sweeps_between):
            sweep(state, config, model, plant)
        model.resample_data(rng, state.graph)
        for k, v in _functions(model, state.graph).items():
            chain.setdefault(k, []).append(v)
    zs = {}
    for k in fwd:
        x = np.asarray(fwd[k], float)
        y = np.asarray(chain[k], float)
        var_chain = chain_mean_variance(y, se, batches)
        s = math.sqrt(x.var(ddof=1) / x.size + var_chain)
        diff = x.mean() - y.mean()
        zs[k] = diff / s if s > 0 else (0.0 if diff == 0 else math.inf)
    return zs


def stationarity_test(model, config: ChainConfig, num_replicates: int, num_sweeps: int, rng: np.random.Generator,
                      plant: int = 0, draw_state=None, refresh_data: bool = True) -> dict:
    """Joint-draw stationarity test; returns {function: z-score} (docs/derivations.md
    section 3.3).

    Each replicate draws (G, v, y) from the joint (marginal-conditional), then
    applies ``num_sweeps`` successive-conditional steps (a posterior sweep, then
    fresh data). If every kernel leaves the joint invariant, f after the steps
    has the same distribution as f before, so E[f(x_T) - f(x_0)] = 0 exactly
    however slowly the chain mixes. Replicates are independent, so the
    standard error of the mean difference is honest (no batch means): this is
    the check to use where the single-chain test's autocorrelation is long
    (layered priors with heavy-tailed structure counts).

    ``refresh_data=False`` holds the data through the sweeps instead: a sweep that
    targets the posterior given the data leaves the joint invariant on its own. The
    refreshing version cannot see a kernel that ignores the data (one that keeps the
    prior passes it) when the kernel runs alone; with the data held, a test function
    coupled to the data catches it (docs/derivations.md 3.25).
    """
    if int(num_replicates) != num_replicates or num_replicates < 2:
        raise ValueError(f"num_replicates must be an integer >= 2, got {num_replicates}")
    if int(num_sweeps) != num_sweeps or num_sweeps < 1:
        raise ValueError(f"num_sweeps must be a positive integer, got {num_sweeps}")
    draw_state = draw_state or _icp_draw_state(config)

    diffs: dict[str, list] = {}
    for _ in range(int(num_replicates)):
        g = draw_state(rng)
        model.forward(rng, g)
        before = _functions(model, g)
        state = ChainState(g, {"alpha": config.alpha, "gamma": config.gamma, "phi": config.phi}, rng)
        for _ in range(int(num_sweeps)):
            sweep(state, config, model, plant)
            if refresh_data:
                model.resample_data(rng, state.graph)
        after = _functions(model, state.graph)
        for k, v in before.items():
            diffs.setdefault(k, []).append(after[k] - v)
    zs = {}
    for k, d in diffs.items():
        d = np.asarray(d, float)
        se = d.std(ddof=1) / math.sqrt(d.size)
        zs[k] = d.mean() / se if se > 0 else (0.0 if d.mean() == 0 else math.inf)
    return zs
