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
(batch-means standard errors for the autocorrelated chain). A model plugs in
by providing ``forward``, ``resample_data``, ``log_likelihood`` and,
optionally, ``update`` and ``test_functions(state) -> dict``.
"""

from __future__ import annotations

import math

import numpy as np

from ..priors.icp import ICP
from .chain import ChainConfig, ChainState, sweep
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


def geweke_test(model, config: ChainConfig, num_forward: int, num_chain: int, rng: np.random.Generator,
                sweeps_between: int = 1, batches: int = 40, plant: int = 0, draw_state=None) -> dict:
    """Run both simulators; returns {function: z-score} (|z| large = failure).

    ``draw_state(rng) -> GraphState`` draws a structure from the prior (default:
    the ICP of ``config`` through the chefs process).
    """
    if draw_state is None:
        prior = ICP(config.alpha, config.gamma, config.phi)

        def draw_state(rng):
            return GraphState.from_dag(prior.sample(rng, config.num_observed, observed_order=config.observed_order))

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
        n = y.size // batches * batches
        bm = y[:n].reshape(batches, -1).mean(axis=1)
        se = math.sqrt(x.var(ddof=1) / x.size + bm.var(ddof=1) / batches)
        diff = x.mean() - y[:n].mean()
        zs[k] = diff / se if se > 0 else (0.0 if diff == 0 else math.inf)
    return zs
