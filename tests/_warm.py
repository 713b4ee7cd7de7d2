"""Compile the numba kernels once per test run, split between two pytest-xdist workers.

On a clean checkout numba's on-disk cache is empty, and each worker compiled every kernel it
met: the two workers compiled the same kernels at the same time (about 60 s of wall time of
a CI run, measured at stop 36). Here worker ``gw0`` compiles the ICP prior's samplers and
density, and worker ``gw1`` the MCMC kernels and the belief network's (ICP path from a fixed
structure, the layered priors' path and HMC), which do not call the first group. Each kernel
is then in the cache, and the other worker loads it instead of compiling it. Nothing here is
asserted: kernels missed here are compiled on first use, as before. Stop 62 added the kernels that a
cold run still compiled in the tests (found by listing the cache after a cold run of the suite against
the cache after this warm-up): the non-centred and slice activation updates, the graph state's prior and
interval sum, the layered priors' prior chain and density, and the out-tree's matrix-tree kernels
(measured cold, the two shares side by side: 39 s and 36 s of wall time, before 31 s each).
"""

from __future__ import annotations

import numpy as np


def _prior_kernels(rng):
    from chefs import ICP

    prior = ICP(1.0, 1.0, 1.0)
    g = prior.sample(rng, 2)
    prior.sample(rng, 2, observed_order=0.0)
    prior.sample(rng, 2, method="finite", finite_K=6)
    prior.log_prob(g)
    # stop 62: kernels a cold run compiled lazily, in the tests (and in their chain processes, side by side)
    from chefs.mcmc.run import make_structure_prior
    from chefs.mcmc.state import GraphState
    from chefs.outtree import OutTree

    s = GraphState.from_dag(g)
    s.log_prior(1.0, 1.0, 1.0)
    s.interval_sum(1.0)
    for name in ("cibp", "ecibp"):
        layered = make_structure_prior({"name": name, "alpha": 1.0, "beta": 1.0})
        state = layered.state_from_dag(layered.sample(rng, 2))
        layered.run_prior_chain(rng, state, 5)
        layered.log_prob_state(state)
    OutTree(iters=2).fit(rng.normal(size=(12, 2)), rng=rng)


def _model_kernels(rng):
    from chefs.graph import DAG
    from chefs.mcmc.chain import ChainConfig, init_state, sample
    from chefs.mcmc.run import make_structure_prior
    from chefs.mcmc.state import GraphState
    from chefs.models.nlgbn import NLGBN

    for order in (0.0, None):
        config = ChainConfig(2, order, 1.0, 1.0, 1.0)
        for _ in sample(init_state(config, rng), config, 3):
            pass
    data = rng.uniform(0.2, 0.8, size=(20, 2))
    dag = DAG([0.0, 0.0, 0.5, 0.8], [True, True, False, False], [2, 2, 3], [0, 1, 2], fixed=[True, True, False, False])
    for kw in ({}, {"hmc_steps": 2}, {"noncentred": True, "activation_update": "mtm+slice"},
               {"activation_update": "slice"}):
        g = GraphState.from_dag(dag)
        model = NLGBN(data, g.capacity, rng, **kw)
        model.init_from_state(g, rng)
        config = ChainConfig(2, 0.0, 1.0, 1.0, 1.0)
        state = init_state(config, rng, dag)
        for _ in sample(state, config, 3, model=model):
            pass
    for name in ("cibp", "ecibp"):
        prior = make_structure_prior({"name": name, "alpha": 1.0, "beta": 1.0})
        g = prior.state_from_dag(prior.sample(rng, 2))
        model = NLGBN(data, g.capacity, rng, structure_prior=prior)
        model.init_from_state(g, rng)
        for _ in range(3):
            model.sweep(rng, g, ChainConfig(2, 0.0, weights=(1, 1, 0, 0)), None)


def warm(worker: str) -> None:
    """The share of worker ``gw0`` or ``gw1`` (others: none). A failure here (an API that changed
    under this script) is a warning, not a crashed worker: the tests themselves then say what broke."""
    import warnings

    rng = np.random.default_rng(0)
    share = {"gw0": _prior_kernels, "gw1": _model_kernels}.get(worker)
    if share is None:
        return
    try:
        share(rng)
    except Exception as exc:  # noqa: BLE001 - only a speed-up; the tests report real errors
        warnings.warn(f"tests/_warm.py: the numba warm-up of {worker} failed ({exc!r}); kernels compile on "
                      "first use", RuntimeWarning, stacklevel=1)
