"""RJMCMCProposal (the RJMCMC moves as an MH proposal on whole graphs, used by
the CNN sampler): with a flat likelihood the MH chain reproduces chefs-process
draws, in the CNN's setting (input at theta = 1, output at 0), and steps from exact draws leave
the prior invariant; planted errors in the edge-flip ratio are caught."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chefs import DAG, ICP
from chefs.mcmc.proposal import RJMCMCProposal

from .stats import Z
from .test_mcmc_moves import _stats, compare_chain_with_draws


def mh_chain(prop, prior, steps, seed, thin=5, flip_bias=0.0):
    rng = np.random.default_rng(seed)
    d = DAG([1.0, 0.0], [True, True], [0], [1], fixed=[True, True])
    rows = []
    for s in range(steps):
        new, lr = prop(rng, d)
        if prop.last_name == "edge" and new.num_edges > d.num_edges:
            lr += flip_bias  # planted: additions favoured, removals not
        if lr >= 0 or math.log(rng.random()) < lr:
            d = new
        if s % thin == 0:
            rows.append(_stats(d))
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


# Stop 59 (the suite's 10 minutes): both runs with -m slow; at its ESS of about 5 this check is weak, and the
# joint-draw test below, which stays in CI with its -1 plant, is the one with power.
@pytest.mark.slow
@pytest.mark.parametrize("bias", [0.0, -1.0], ids=["correct", "planted-flip-ratio"])
def test_mh_with_rjmcmc_proposal_samples_the_prior(bias):
    """20,000 steps, every 10th kept (the SE comes from the chain's effective sample size: an audit at
    stop 45 measured only 4.7-5.7 for K, E, H and depth at this seed, so this check is weak; the
    joint-draw test below is the one with power): max |z| 0.44. The plant lowers the log ratio of edge additions by 1 (max |z| 22.6
    at 20,000 steps, about 25 at 40,000); since stop 36 its run takes 10,000 steps (14.54). A plant
    favouring additions (+1) is not a useful control here: the chain then grows
    without settling (ESS about 1 in 40,000 steps), so no comparison of means can
    resolve it (z about 3.3)."""
    prior = ICP(1.0, 1.5, 1.0)
    chain = mh_chain(RJMCMCProposal(prior), prior, 20000 if bias == 0.0 else 10000, 3, thin=10, flip_bias=bias)
    rng = np.random.default_rng(4)
    draws = [_stats(g) for g in prior.sample_many(rng, 4000, 2, observed_order=[1.0, 0.0])]
    draws = {k: np.array([d[k] for d in draws]) for k in draws[0]}
    zs = compare_chain_with_draws(chain, draws)
    worst = max(abs(v) for v in zs.values())
    if bias == 0.0:
        assert worst < Z, zs
    else:
        assert worst > Z, zs


def _stationarity_z(replicates, steps, seed, bias=0.0):
    """Joint-draw stationarity under a flat likelihood: each replicate starts at an exact chefs-process draw
    (the CNN's setting: observed orders 1 and 0, fixed) and takes ``steps`` MH steps with the proposal; if the
    steps leave the prior invariant, E[f(end) - f(start)] = 0 exactly however slowly the chain mixes, and the
    replicates are independent, so the standard error of the mean difference is honest."""
    prior = ICP(1.0, 1.5, 1.0)
    rng = np.random.default_rng(seed)
    prop = RJMCMCProposal(prior)
    diffs = []
    for _ in range(replicates):
        d = prior.sample(rng, 2, observed_order=[1.0, 0.0])
        s0 = _stats(d)
        for _ in range(steps):
            new, lr = prop(rng, d)
            if prop.last_name == "edge" and new.num_edges > d.num_edges:
                lr += bias  # planted: the log ratio of edge additions shifted
            if lr >= 0 or math.log(rng.random()) < lr:
                d = new
        s1 = _stats(d)
        diffs.append([s1[k] - s0[k] for k in s0])
    D = np.array(diffs, float)
    sd = D.std(axis=0, ddof=1)
    keep = sd > 0  # the observed orders are fixed: their mean never moves
    return dict(zip([k for k, m in zip(s0, keep) if m], D.mean(axis=0)[keep] / (sd[keep] / math.sqrt(len(D)))))


# Stop 45: 4,000 replicates of 20 steps, seed 5: the passing run reads max |z| 0.39 (depth); the plant -0.3 reads
# 6.94 (E), and -1 at 1,000 replicates 10.1 (19.46 at 4,000); a +0.3 plant reads 4.21, just below Z, and -0.5 10.45.
# The -0.3 plant (26 s, the suite's slowest test) runs with `pytest -m slow` since stop 56; the -1 plant, caught at a
# quarter of the passing run's replicates, stays in the suite. Stop 59 (the suite's 10 minutes): CI runs the passing
# check at the -1 plant's 1,000 replicates, the size at which that plant is caught; 4,000 with -m slow.
# Stop 62 (the suite's time again): both at 500 replicates, where the -1 plant reads -7.84 (E) and the passing
# run 1.01 (depth), seed 5.
@pytest.mark.parametrize("bias,replicates", [(0.0, 500), pytest.param(0.0, 4000, marks=pytest.mark.slow),
                                             pytest.param(-0.3, 4000, marks=pytest.mark.slow), (-1.0, 500)],
                         ids=["correct", "correct-4000", "planted-0.3", "planted-1"])
def test_rjmcmc_proposal_leaves_the_prior_invariant_from_exact_draws(bias, replicates):
    zs = _stationarity_z(replicates, 20, 5, bias)
    assert {"K", "E", "depth"} <= set(zs)
    worst = max(abs(v) for v in zs.values())
    if bias == 0.0:
        assert worst < Z, zs
    else:
        assert worst > Z, zs


def test_rejects_non_icp():
    with pytest.raises(ValueError):
        RJMCMCProposal("icp")


def test_a_move_that_cannot_be_made_is_impossible_not_accepted():
    """Order moves on a graph of fixed nodes only, and deaths with no singleton
    orphan, cannot be made: the proposal says so with -inf, and the CNN's
    Metropolis-Hastings step records a rejection without training (before, such
    a no-op came back with log_ratio 0 and counted as an accepted move)."""
    from chefs.cnn.chain import ChainState, mh_step

    prior = ICP(1.0, 1.5, 1.0)
    d = DAG([1.0, 0.0], [True, True], [0], [1], fixed=[True, True])
    rng = np.random.default_rng(0)
    prop = RJMCMCProposal(prior, weights=(0.0, 0.0, 1.0, 0.0))
    for _ in range(20):
        new, lr = prop(rng, d)
        assert lr == -math.inf and new is d and prop.last_name == "order"
    bd = RJMCMCProposal(prior, weights=(0.0, 1.0, 0.0, 0.0))
    outcomes = [bd(rng, d)[1] for _ in range(200)]  # half are deaths, and no node has a singleton orphan
    assert sum(lr == -math.inf for lr in outcomes) > 50 and any(np.isfinite(outcomes))

    def fit(*args):
        raise AssertionError("an impossible move must not be trained")

    state = ChainState(d, "key", prior.log_prob(d), -1.0, None, 0)
    new_state, info = mh_step(rng, state, prop, fit, prior)
    assert new_state is state and not info.accepted and not info.trained and info.log_ratio == -math.inf
