"""Posterior invariance with the data held (``stationarity_test(refresh_data=False)``; docs/derivations.md 3.25).

The joint-draw stationarity tests elsewhere refresh the data after each sweep. They check that the sweep and the
data step together leave the joint p(G, v, y) invariant. A kernel that ignores the data altogether (one that
keeps the prior of everything it moves) passes them: with the data redrawn from the new state, the prior-keeping
kernel leaves the joint invariant too. In a full sweep such a kernel disagrees with the kernels that run after it
and read the data (the edge pass follows the within-structure updates), and the refreshing tests catch it. A test
of one kernel alone cannot. Measured at stop 47 with the
data term of one kernel dropped (max |z|, refreshing test / data held):

* HMC alone (``hmc_plant=3``): 2.07 / 17.06;
* births and deaths alone (collapsed gain dropped, the new weight from its prior): 1.64 / 10.66;
* depth moves alone (the same plant): 1.46 / 8.08;
* the non-centred updates alone (``noncentred_plant=3``, tests/test_noncentred.py): 1.15 / 7.94;
* for contrast, in a full sweep (the settings below), HMC with ``hmc_plant=3``: 21.40 / 15.81, and the observed
  units' parameters drawn from their prior: 21.56 / 14.22.

Here each kernel tested alone elsewhere, and each full sweep, runs from exact joint draws with the data held. A
sweep that targets the posterior given the data leaves the joint invariant on its own. The test functions include
two that are coupled to the data, so they see a kernel that ignores it:

* ``mu_y_cov``: how much of the data the parents explain;
* ``obs_rss``: the observed units' precision-weighted residual sum of squares.
"""

from __future__ import annotations

import math

import numpy as np
import pytest

from chefs.mcmc.chain import ChainConfig
from chefs.mcmc.geweke import stationarity_test
from chefs.models import nlgbn as nl
from chefs.models.nlgbn import NLGBN

from .conftest import DataCoupled
from .stats import Z
from .test_causal import POWER, POWER_N, _CausalNLGBN, _PowerNLGBN, _RelocationOnly
from .test_hmc import RHO_PRIOR, _HMCOnly
from .test_nlgbn import BIRTH_DEATH, SENSITIVE, _layered, _OneMoveOnly, make_model

CONFIG = ChainConfig(1, 0.0, 1.0, 1.0, 1.0)


class _HeldNLGBN(DataCoupled, NLGBN):
    pass


class _HeldOneMove(DataCoupled, _OneMoveOnly):
    pass


class _HeldHMC(DataCoupled, _HMCOnly):
    pass


class _HeldCausal(DataCoupled, _CausalNLGBN):
    pass


class _HeldPower(DataCoupled, _PowerNLGBN):
    pass


class _HeldRelocation(DataCoupled, _RelocationOnly):
    pass


def _z(zs):
    return max(abs(z) for z in zs.values())


# ------------------------------------------------------------------ kernels tested alone elsewhere
def _kernel_alone(kernel, refresh=False, replicates=1000, seed=4, plant=False):
    """z-scores of one kernel alone from exact joint draws (the settings of its refreshing test: births/deaths and
    depth moves as ``tests/test_nlgbn.py``'s one-move tests, HMC as ``tests/test_hmc.py``'s), one round with the
    data held (``refresh``: two rounds, each followed by a data refresh). ``plant``: the kernel ignores the
    data."""
    rng = np.random.default_rng(seed)
    sweeps = 2 if refresh else 1
    if kernel == "hmc":
        model = _HeldHMC(rng.uniform(0.2, 0.8, size=(5, 1)), 16, rng, rho_prior=RHO_PRIOR, weight_var=4.0,
                         hmc_steps=8, hmc_plant=3 if plant else 0)
        model.hmc.log_step = math.log(0.15)
        return stationarity_test(model, CONFIG, replicates, sweeps, rng, refresh_data=refresh)
    model = make_model(N=20, structure_moves=5, cls=_HeldOneMove, **SENSITIVE)
    model.only = kernel
    return stationarity_test(model, CONFIG, replicates, sweeps, rng, refresh_data=refresh)


@pytest.fixture
def gain_dropped(monkeypatch):
    """Plant: the collapsed gain of births, deaths and depth moves dropped and the new weight drawn from its
    prior N(0, v): those moves then keep the prior."""
    monkeypatch.setattr(nl, "collapsed_gain", lambda u, r, rho, v=1.0: (0.0, 0.0, v))


# Stop 47, seed 4, 1,000 replicates, data held: births/deaths 0.72 (mu_y_cov), depth moves 2.16 (u_hidden_sum),
# HMC 2.37 (log_rho_hidden).
@pytest.mark.parametrize("kernel", ["birth_death", "depth_move", "hmc"])
def test_kernel_alone_leaves_the_posterior_invariant(kernel):
    zs = _kernel_alone(kernel)
    assert _z(zs) < Z, zs


@pytest.mark.parametrize("kernel", ["birth_death", "depth_move"])
def test_structure_move_that_ignores_the_data_is_caught_only_with_the_data_held(gain_dropped, kernel):
    """The blind spot and its mend: a move that keeps the prior passes the refreshing test and fails this one
    (the module docstring's figures)."""
    assert _z(_kernel_alone(kernel, refresh=True)) < Z
    zs = _kernel_alone(kernel)
    assert _z(zs) > Z, zs


def test_hmc_that_ignores_the_data_is_caught_only_with_the_data_held():
    """HMC on the prior (the observed units' likelihood dropped from its target, ``hmc_plant=3``)."""
    assert _z(_kernel_alone("hmc", refresh=True, plant=True)) < Z
    zs = _kernel_alone("hmc", plant=True)
    assert _z(zs) > Z, zs


def _relocation_alone(refresh=False, replicates=1000, seed=4):
    """Relocation moves alone (20 per sweep, with the within-model updates; tests/test_causal.py's settings), D = 3,
    one sweep with the data held (``refresh``: two sweeps, each followed by a data refresh)."""
    rng = np.random.default_rng(seed)
    model = _HeldRelocation(rng.uniform(0.2, 0.8, size=(40, 3)), 16, rng, num_tries=4, structure_moves=20,
                            rho_prior=(4.0, 1.0), weight_var=4.0, relocate=True)
    return stationarity_test(model, ChainConfig(3, None, 1.0, 1.0, 1.0), replicates, 2 if refresh else 1, rng,
                             refresh_data=refresh)


def test_relocation_alone_leaves_the_posterior_invariant_with_the_data_held():
    """Measured (stop 53, seed 4, 1,000 replicates): max |z| 1.76 (mu_y_cov)."""
    zs = _relocation_alone()
    assert _z(zs) < Z, zs


def test_relocation_that_ignores_the_data_is_caught_only_with_the_data_held(monkeypatch):
    """The relocation move with every collapsed gain 0 and the weights from their prior N(0, v): it then keeps the
    prior, which the refreshing test cannot see and this one does. Measured (stop 53, seed 4, 1,000 replicates):
    refreshing 1.69 (theta_obs), data held 21.11 (obs_rss); at these 300 (stop 55, to shorten the suite): 1.32 and
    11.77."""
    monkeypatch.setattr(_HeldRelocation, "_gain", lambda self, u, r, i: (0.0, 0.0, self.weight_var))
    assert _z(_relocation_alone(refresh=True, replicates=300)) < Z
    zs = _relocation_alone(replicates=300)
    assert _z(zs) > Z, zs


# ------------------------------------------------------------------------------------ full sweeps
def _full_sweep(kind, replicates, seed=1):
    """One full sweep from exact joint draws with the data held:

    * ``icp``: the default ICP sweep at 20 data points (activations, parameters, edge pass, 3 rounds of
      births/deaths, order and depth moves); ``slice``: the same with the slice activation update;
    * ``hmc``: the same with HMC (``tests/test_hmc.py``'s full-sweep settings: 10 points, 5 leapfrog steps);
    * ``free2`` / ``free3``: free observed orders, 2 or 3 observed units, 40 points (``tests/test_causal.py``'s
      settings: 20 rounds of the structure moves, reversals among them); ``power``: the same at D = 2 under the
      power posterior (``tests/test_causal.py``'s: 10 points, power 0.5, joint draws from the model whose posterior
      it is); ``free3_relocate`` / ``power_relocate``: those with the relocation move added (stop 53);
    * ``cibp`` / ``ecibp``: the layered priors at their birth/death settings (200 points)."""
    rng = np.random.default_rng(seed)
    if kind in ("icp", "slice"):
        model = make_model(N=20, cls=_HeldNLGBN, activation_update="slice" if kind == "slice" else "mtm", **SENSITIVE)
        return stationarity_test(model, CONFIG, replicates, 1, rng, refresh_data=False)
    if kind == "hmc":
        model = _HeldNLGBN(rng.uniform(0.2, 0.8, size=(10, 1)), 16, rng, num_tries=4, structure_moves=3,
                           rho_prior=RHO_PRIOR, weight_var=4.0, hmc_steps=5)
        model.hmc.log_step = -2.0
        return stationarity_test(model, CONFIG, replicates, 1, rng, refresh_data=False)
    if kind in ("free2", "free3", "power", "free3_relocate", "power_relocate"):
        relocate = kind.endswith("_relocate")
        kind = kind.removesuffix("_relocate")
        D, N = (2, POWER_N) if kind == "power" else (int(kind[-1]), 40)
        cls, power = (_HeldPower, POWER) if kind == "power" else (_HeldCausal, 1.0)
        model = cls(rng.uniform(0.2, 0.8, size=(N, D)), 16, rng, num_tries=4, structure_moves=20,
                    rho_prior=(4.0, 1.0), weight_var=4.0, likelihood_power=power, relocate=relocate)
        return stationarity_test(model, ChainConfig(D, None, 1.0, 1.0, 1.0), replicates, 1, rng, refresh_data=False)
    model, prior = _layered(kind, **BIRTH_DEATH)
    return stationarity_test(model, ChainConfig(1, 0.0, weights=(1, 1, 0, 0)), replicates, 1, rng,
                             draw_state=lambda r: prior.state_from_dag(prior.sample(r, 1)), refresh_data=False)


FULL = {"icp": 300, "slice": 300, "hmc": 800, "free2": 300, "free3": 400, "power": 600, "cibp": 500, "ecibp": 1000,
        "free3_relocate": 400, "power_relocate": 600}


# Stop 47, seed 1, data held: icp 1.52 (log_rho_obs), slice 2.16 (b_obs), power 1.08 (confounded_01), hmc 1.23 (num_edges), free2 1.72 (theta_obs), free3 1.46
# (num_confounders), cibp 1.58 (mu_y_cov), ecibp 1.50 (mu_y_cov; 2.03 at 500 replicates, where its births/deaths
# control below read only 4.55). Stop 53: free3_relocate 2.32 (obs_rss), power_relocate 1.95 (edge_01).
# (power_relocate, the relocation option under the power posterior, behind slow since stop 55 for the suite's time:
# free3_relocate keeps the whole causal sweep with the move in CI, with the data held)
@pytest.mark.parametrize("kind", [pytest.param(k, marks=pytest.mark.slow) if k == "power_relocate" else k for k in FULL])
def test_full_sweep_leaves_the_posterior_invariant(kind):
    zs = _full_sweep(kind, FULL[kind])
    assert _z(zs) < Z, zs


def _observed_parameters_from_the_prior(monkeypatch):
    real = NLGBN.update_parameters

    def planted(self, rng, state, priors):
        real(self, rng, state, priors)
        for i in np.flatnonzero(state.alive & state.obs):
            pa = self.parents(state, i)
            self.b[i] = rng.normal() * math.sqrt(self.bias_var)
            self.W[pa, i] = rng.normal(size=pa.size) * math.sqrt(self.weight_var)
            self.rho[i] = rng.gamma(priors[0], 1.0 / priors[1])
            self.refresh_mu(state, i)

    monkeypatch.setattr(NLGBN, "update_parameters", planted)


def _edge_pass_without_likelihood(monkeypatch):
    real = nl._kern.edge_pass
    monkeypatch.setattr(nl._kern, "edge_pass", lambda *args: real(*args, 1))


def _power_conditional_untempered_residuals(monkeypatch):
    monkeypatch.setattr(NLGBN, "power_plant", 1)  # tests/test_causal.py's plant 1


def _slice_update_without_children(monkeypatch):
    """The slice activation update given no children: each hidden unit's activations from its prior."""
    real = nl._kern.slice_unit
    monkeypatch.setattr(nl._kern, "slice_unit",
                        lambda Y, U, MU, W, rho, h, ch, seed, steps, plant: real(Y, U, MU, W, rho, h, ch[:0], seed,
                                                                                steps, plant))


def _reversal_keeping_the_prior(monkeypatch):
    """The reversal move with both collapsed gains 0 and the new weights from their prior N(0, v)."""
    real = NLGBN.reversal_move

    def planted(self, rng, state, hyper, plant=0):
        self._gain = lambda u, r, i: (0.0, 0.0, self.weight_var)
        try:
            return real(self, rng, state, hyper, plant)
        finally:
            del self._gain

    monkeypatch.setattr(NLGBN, "reversal_move", planted)


def _layered_birth_death_keeping_the_prior(monkeypatch):
    """The layered priors' births and deaths (``collapsed_gain`` serves only them on that path) with the gain 0
    and the new weight from its prior."""
    monkeypatch.setattr(nl, "collapsed_gain", lambda u, r, rho, v=1.0: (0.0, 0.0, v))


def _layered_edge_pass_without_likelihood(monkeypatch):
    real = nl._kern.collapsed

    def no_gain(*args):
        _, mean, var = real(*args)
        return 0.0, mean, var

    monkeypatch.setattr(nl._kern, "collapsed", no_gain)


# Each full sweep's check with the data held has power of its own (stop 47, seed 1, the passing runs' sizes):
# icp with the observed units' parameters from their prior 14.22 (in_degree_obs), free2 with the edge pass
# without its likelihood gain 8.42 (u_hidden_sum), ecibp with the layered edge pass without it 14.6 (num_nodes),
# power with the observed precision's conditional tempering the count but not the residuals 31.72 (log_rho_obs),
# slice with the activations from their prior 5.70 (mu_y_cov), free2 with a prior-keeping reversal move 9.98
# (num_nodes), ecibp with prior-keeping births and deaths 7.30 (mu_y_cov). The last three were found by this stop's
# review, which planted the first two by hand. Stop 59 (the suite's 10 minutes): the three read at more than 14
# standard errors run at a third to a quarter of the passing run's replicates (expected |z| about 8, 7 and 16).
@pytest.mark.parametrize("kind,plant,replicates", [("icp", _observed_parameters_from_the_prior, 100),
                                                   ("free2", _edge_pass_without_likelihood, FULL["free2"]),
                                                   ("ecibp", _layered_edge_pass_without_likelihood, 250),
                                                   ("power", _power_conditional_untempered_residuals, 150),
                                                   ("slice", _slice_update_without_children, FULL["slice"]),
                                                   ("free2", _reversal_keeping_the_prior, FULL["free2"]),
                                                   ("ecibp", _layered_birth_death_keeping_the_prior, FULL["ecibp"])])
def test_full_sweep_with_the_data_held_negative_controls(monkeypatch, kind, plant, replicates):
    plant(monkeypatch)
    zs = _full_sweep(kind, replicates)
    assert _z(zs) > Z, zs
