"""Hyperparameter updates: a prior-only chain that samples alpha, gamma, phi
must reproduce their priors (checked by quantiles: the priors are
heavy-tailed) and the forward distribution of K+; negative control: a chain
targeting a different gamma prior fails the same check."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats as sps

from chefs import ICP
from chefs.mcmc.chain import ChainConfig, init_state, sweep
from chefs.mcmc.hyper import HyperPriors

from .stats import Z, mcse_mean

PROBS = (0.1, 0.25, 0.5, 0.75, 0.9)


def prior_quantiles(hp: HyperPriors) -> dict:
    q = {}
    q["gamma"] = sps.gamma(hp.gamma_shape, scale=1 / hp.gamma_rate).ppf(PROBS)
    q["phi"] = sps.gamma(hp.phi_shape, scale=1 / hp.phi_rate).ppf(PROBS)
    # alpha = 1/X, X ~ Gamma: P(alpha < t) = P(X > 1/t)
    q["alpha"] = 1 / sps.gamma(hp.inv_alpha_shape, scale=1 / hp.inv_alpha_rate).ppf(1 - np.asarray(PROBS))
    return q


def run_hyper_chain(hp: HyperPriors, num: int, seed: int, D=2):
    config = ChainConfig(D, 0.0, 1.0, 1.0, 1.0, sample_hyper=("alpha", "gamma", "phi"), hyper_priors=hp)
    state = init_state(config, np.random.default_rng(seed))
    out = {"alpha": [], "gamma": [], "phi": [], "K": []}
    for _ in range(num):
        sweep(state, config)
        for k in ("alpha", "gamma", "phi"):
            out[k].append(state.hyper[k])
        out["K"].append(state.graph.num_nodes)
    return {k: np.array(v) for k, v in out.items()}


def quantile_z(x, qs):
    """z-scores of P(x < q) against the prior probabilities PROBS, the chain's SE
    from its effective sample size. A chain that never crosses a quantile (SE 0)
    reads inf: it is stuck on one side, which no correct chain of this length is."""
    zs = []
    for p, q in zip(PROBS, qs):
        ind = (x < q).astype(float)
        se = mcse_mean(ind)
        zs.append((ind.mean() - p) / se if se > 0 else math.inf)
    return zs


def test_prior_chain_recovers_hyperpriors_and_k_distribution():
    hp = HyperPriors()
    tr = run_hyper_chain(hp, 8000, seed=1)
    qs = prior_quantiles(hp)
    zs = {name: quantile_z(tr[name], qs[name]) for name in ("alpha", "gamma", "phi")}
    # forward draws: hyperparameters from their priors, then the chefs process
    rng = np.random.default_rng(2)
    K = []
    for _ in range(4000):
        h = hp.sample(rng)
        K.append(ICP(**h).sample(rng, 2, observed_order=0.0, max_nodes=10**6).num_nodes)
    K = np.array(K)
    kq = [float(np.quantile(K, p)) + 0.5 for p in (0.25, 0.5, 0.75)]
    for q in kq:
        ind = (tr["K"] < q).astype(float)
        se = math.sqrt(mcse_mean(ind) ** 2 + np.mean(K < q) * (1 - np.mean(K < q)) / K.size)
        zs.setdefault("K", []).append((ind.mean() - np.mean(K < q)) / se)
    worst = max(abs(z) for v in zs.values() for z in v)
    assert worst < Z, zs


def test_negative_control_wrong_gamma_prior_fails():
    tr = run_hyper_chain(HyperPriors(gamma_shape=1.5), 3000, seed=1)
    zs = quantile_z(tr["gamma"], prior_quantiles(HyperPriors())["gamma"])
    assert max(abs(z) for z in zs) > Z


def test_bad_hyperpriors():
    with pytest.raises(ValueError):
        HyperPriors(gamma_shape=0)


@pytest.mark.parametrize("name", ["alpha", "phi"])
def test_negative_control_slice_update_without_log_jacobian(monkeypatch, name):
    """The slice updates of alpha and phi run on log(x): a plant that drops the
    Jacobian x from the log-scale density (the prior of x used as if it were the
    prior of log x) makes the same quantile check fail for that parameter (alpha:
    |z| 28-299; phi: the chain sinks to about 1e-300 and never crosses a quantile,
    which reads inf)."""
    real = HyperPriors.log_density_log_scale

    def planted(self, which, x):
        return real(self, which, x) - (math.log(x) if which == name else 0.0)

    monkeypatch.setattr(HyperPriors, "log_density_log_scale", planted)
    hp = HyperPriors()
    tr = run_hyper_chain(hp, 3000, seed=1)
    assert max(abs(z) for z in quantile_z(tr[name], prior_quantiles(hp)[name])) > Z
