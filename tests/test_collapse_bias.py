"""The structure moves with the child's bias integrated out together with the changing weight
(``collapse_bias``; docs/derivations.md section 3.2, "Bias collapsed too").

The gain and the conditionals are checked against the Gaussian marginal of the linear model
(scipy); every move that uses them (the compiled ICP edge pass, the layered edge pass, births and
deaths, depth moves, edge reversals) is checked from exact joint draws, each with a planted error
that the same check catches: the bias left where it was while the gain integrates it out."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.stats import multivariate_normal

from chefs.mcmc.chain import ChainConfig
from chefs.models import nlgbn as nl
from chefs.models.nlgbn import NLGBN, collapsed_gain_bias

from .stats import Z
from .test_nlgbn import (SENSITIVE, _icp_stationarity, _layered_stationarity, _one_move_stationarity, _OneMoveOnly,
                         make_model)


@pytest.mark.parametrize("v,vb,shift", [(1.0, 1.0, 0.0), (0.3, 2.5, 1.7), (4.0, 0.2, -3.0)])
def test_collapsed_gain_bias_matches_the_gaussian_marginal(rng, v, vb, shift):
    """Gain = log N(r; 0, I/rho + vb 11' + v uu') - log N(r; 0, I/rho + vb 11'), and the
    conditionals of (b, W) equal those of the Bayesian linear regression on [1, u], from the
    Python function and from the compiled kernel (which forms the residual itself: without the
    bias and without the current weight)."""
    N, rho = 9, 1.7
    u = rng.random(N)
    r = rng.normal(size=N) + shift
    one = np.ones(N)
    S0 = np.eye(N) / rho + vb * np.outer(one, one)
    ref = multivariate_normal.logpdf(r, np.zeros(N), S0 + v * np.outer(u, u)) - multivariate_normal.logpdf(
        r, np.zeros(N), S0)
    X = np.column_stack([one, u])
    A = np.diag([1 / vb, 1 / v]) + rho * X.T @ X
    C = np.linalg.inv(A)
    m = C @ (rho * X.T @ r)
    # the kernel: unit k = 1 feeds i = 0 with weight 0.8 and i has bias 0.6, so MU_i = 0.6 + 0.8 u and
    # the residual of i without its bias and without k is Y_i - MU_i + 0.6 + 0.8 u = r
    U = np.vstack([np.zeros(N), u])
    b = np.array([0.6, 0.0])
    W = np.zeros((2, 2))
    W[1, 0] = 0.8
    MU = np.vstack([0.6 + 0.8 * u, np.zeros(N)])
    Y = np.vstack([r, np.zeros(N)])
    kern = nl._kern.collapsed_b(U, Y, MU, W, b, np.array([rho, 1.0]), 1, 0, True, v, vb)
    for gain, mean, var, a, tb, c in (collapsed_gain_bias(u, r, rho, v, vb), kern):
        assert gain == pytest.approx(ref, rel=1e-9, abs=1e-11)
        assert mean == pytest.approx(m[1], rel=1e-9)
        assert var == pytest.approx(C[1, 1], rel=1e-9)
        w = 0.37  # b | W: the Gaussian conditional of the joint posterior
        assert (tb - c * w) / a == pytest.approx(m[0] + C[0, 1] / C[1, 1] * (w - m[1]), rel=1e-9)
        assert 1 / a == pytest.approx(C[0, 0] - C[0, 1] ** 2 / C[1, 1], rel=1e-9)
    # without the edge: b | r is the regression on [1] alone
    a0 = 1 / vb + rho * N
    assert kern[4] / kern[3] == pytest.approx(rho * r.sum() / a0, rel=1e-12) and kern[3] == pytest.approx(a0)


def test_collapsed_gain_bias_keeps_its_digits_for_a_nearly_constant_regressor():
    """A regressor that barely varies around 0.5 (where the uncentred 2x2 determinant of the
    regression on [1, u] cancels to a few digits), with a residual far from zero mean: the Python
    function and the kernel's one-pass shifted sums agree with the Gaussian marginal."""
    rng = np.random.default_rng(0)
    N, rho, v, vb = 300, 50.0, 1.0, 1.0
    u = 0.5 + 1e-5 * rng.normal(size=N)
    r = rng.normal(size=N) / math.sqrt(rho) + 2.0 + 3e-3 * (u - 0.5) / 1e-5
    one = np.ones(N)
    S0 = np.eye(N) / rho + vb * np.outer(one, one)
    ref = multivariate_normal.logpdf(r, np.zeros(N), S0 + v * np.outer(u, u)) - multivariate_normal.logpdf(
        r, np.zeros(N), S0)
    U = np.vstack([np.zeros(N), u])
    Y = np.vstack([r, np.zeros(N)])
    kern = nl._kern.collapsed_b(U, Y, np.zeros((2, N)), np.zeros((2, 2)), np.zeros(2), np.array([rho, 1.0]), 1, 0,
                                False, v, vb)
    for gain in (collapsed_gain_bias(u, r, rho, v, vb)[0], kern[0]):
        assert gain == pytest.approx(ref, abs=1e-6)


def test_collapse_bias_is_validated_and_old_runs_hold_the_bias(tmp_path):
    from chefs.density import BeliefNetwork
    from chefs.mcmc.run import make_model as make_run_model

    with pytest.raises(ValueError, match="collapse_bias"):
        BeliefNetwork(collapse_bias="yes")
    with pytest.raises(ValueError, match="collapse_bias"):
        make_model(collapse_bias=1)
    from chefs.graph import DAG
    from chefs.mcmc.state import GraphState

    g = GraphState.from_dag(DAG(np.array([0.0, 0.0, 0.5]), np.arange(3) < 2, [2], [0], fixed=np.arange(3) < 2))
    np.save(tmp_path / "d.npy", np.full((4, 2), 0.5))

    class S:
        graph = g
        rng = np.random.default_rng(0)

    assert make_run_model({"name": "nlgbn", "data": "d.npy"}, tmp_path, S).collapse_bias is False
    assert make_run_model({"name": "nlgbn", "data": "d.npy", "collapse_bias": True}, tmp_path, S).collapse_bias


def test_structure_moves_keep_the_means_consistent():
    """After many sweeps with the bias collapsed, every node's mean is b + W u of its parents
    (the moves update b, W and MU together)."""
    rng = np.random.default_rng(2)
    model = make_model(D=2, N=30, collapse_bias=True)
    from chefs.mcmc.chain import init_state, sweep

    config = ChainConfig(2, 0.0, 1.0, 1.0, 1.0)
    state = init_state(config, rng)
    model.init_from_state(state.graph, state.rng)
    for _ in range(60):
        state = sweep(state, config, model)
    g = state.graph
    for i in np.flatnonzero(g.alive):
        pa = model.parents(g, i)
        np.testing.assert_allclose(model.MU[i], model.b[i] + model.W[pa, i] @ model.U[pa], atol=1e-9)


# ------------------------------------------------------ joint-draw stationarity
def _icp():
    """The full ICP sweep (test_nlgbn's ``_icp_stationarity``) with the bias collapsed."""
    return _icp_stationarity(collapse_bias=True)


# The full sweep is the composition of the moves checked alone below (and of the parameter and
# activation updates, which the bias collapse does not touch, checked in test_nlgbn): a composition
# of kernels that each leave the posterior invariant does too, so this check runs with -m slow.
@pytest.mark.slow
def test_stationarity_icp_sweep_bias_collapsed():
    """Two full ICP sweeps with the bias collapsed, from exact joint draws: every test function's
    mean unchanged (measured: max |z| 1.23)."""
    zs = _icp()
    assert max(abs(z) for z in zs.values()) < Z, zs


def _one_move(move):
    """One structure move alone (test_nlgbn's ``_one_move_stationarity``) with the bias collapsed."""
    return _one_move_stationarity(move, collapse_bias=True)


@pytest.mark.parametrize("move,row", [("edge_pass", 0), ("birth_death", 1), ("depth_move", 3)])
def test_stationarity_structure_move_alone_bias_collapsed(move, row):
    """The compiled edge pass, births/deaths or depth moves alone, with the bias collapsed, from
    exact joint draws: unchanged means, and accepted often enough to be tested. (In the full sweep
    the next parameter update redraws (b, W), which hides an error in their conditional.)
    Measured max |z|: edge pass 1.43, births/deaths 0.87, depth moves 2.35."""
    zs, stats = _one_move(move)
    assert stats[row, 1] > 0.05 * stats[row, 0], stats[row]
    assert max(abs(z) for z in zs.values()) < Z, zs


def _keep_bias(monkeypatch):
    """Plant: an accepted move integrates the bias out but does not redraw it."""
    real_with, real_without = NLGBN._set_with_edge, NLGBN._set_without_edge

    def with_edge(self, rng, g, i, r, u):
        b = self.b[i]
        w = real_with(self, rng, g, i, r, u)
        self.MU[i] += b - self.b[i]
        self.b[i] = b
        return w

    def without_edge(self, rng, i, r):
        b = self.b[i]
        real_without(self, rng, i, r)
        self.MU[i] += b - self.b[i]
        self.b[i] = b

    monkeypatch.setattr(NLGBN, "_set_with_edge", with_edge)
    monkeypatch.setattr(NLGBN, "_set_without_edge", without_edge)


def test_stationarity_negative_control_edge_pass_keeps_the_bias(monkeypatch):
    """The compiled edge pass draws Z and W from their bias-marginal conditionals but leaves the
    bias where it was (``plant=2``): W then comes from the wrong conditional given b. Caught
    (measured: |z| 7.35 on y_obs_sq)."""
    real = nl._kern.edge_pass
    monkeypatch.setattr(nl._kern, "edge_pass", lambda *args: real(*args, 2))
    zs, _ = _one_move("edge_pass")
    assert max(abs(z) for z in zs.values()) > Z, zs


@pytest.mark.parametrize("move", ["birth_death", "depth_move"])
def test_stationarity_negative_control_move_keeps_the_bias(monkeypatch, move):
    """Births/deaths (or depth moves) whose acceptance integrates the bias out but which keep the
    old bias on acceptance are caught by the check above (measured: |z| 9.82 and 8.40, y_obs_sq)."""
    _keep_bias(monkeypatch)
    zs, _ = _one_move(move)
    assert max(abs(z) for z in zs.values()) > Z, zs


def _layered(replicates):
    """test_nlgbn's ECIBP joint-draw check (``SENSITIVE`` priors) with the bias collapsed."""
    return _layered_stationarity("ecibp", replicates, **SENSITIVE, collapse_bias=True)


def test_stationarity_layered_prior_bias_collapsed():
    """The ECIBP path (its Python edge pass and births/deaths) with the bias collapsed (measured:
    max |z| 1.48 at these 2,000 replicates, 1.10 at 4,000)."""
    zs = _layered(2000)
    assert max(abs(z) for z in zs.values()) < Z, zs


def test_stationarity_negative_control_layered_edge_pass_wrong_bias_conditional(monkeypatch):
    """The layered edge pass drawing the bias as if the edge were absent (b ~ N(t_b / a, 1 / a)
    whatever W is) is caught (measured: |z| 7.53 at 2,000 replicates, 10.68 at 4,000; indeg_x_ysq)."""
    real = nl._kern.collapsed_b
    monkeypatch.setattr(nl._kern, "collapsed_b", lambda *args: real(*args)[:5] + (0.0,))
    zs = _layered(2000)
    assert max(abs(z) for z in zs.values()) > Z, zs


def _reversals(replicates, seed=1, D=3):
    """Causal discovery's edge reversals alone (free observed orders), with the bias collapsed;
    test functions of test_causal's ``_CausalNLGBN``."""
    from chefs.mcmc.geweke import stationarity_test

    from .test_causal import _CausalNLGBN

    class Reversals(_OneMoveOnly, _CausalNLGBN):
        only = "reversal_move"

    rng = np.random.default_rng(seed)
    model = Reversals(rng.uniform(0.2, 0.8, size=(20, D)), 16, rng, num_tries=4, structure_moves=5,
                      collapse_bias=True, **SENSITIVE)
    zs = stationarity_test(model, ChainConfig(D, None, 1.0, 1.0, 1.0), replicates, 2, rng)
    return zs, model.stats


def test_stationarity_reversals_alone_bias_collapsed():
    """Measured: max |z| 2.23 at these 2,000 replicates (2.20 at 3,000; u_obs_mean)."""
    zs, stats = _reversals(2000)
    assert stats[6, 1] > 0.05 * stats[6, 0], stats[6]
    assert max(abs(z) for z in zs.values()) < Z, zs


def test_stationarity_negative_control_reversals_keep_the_bias(monkeypatch):
    """Reversals that integrate both biases out but keep the old ones on acceptance (measured:
    |z| 9.39 at these 2,000 replicates, 11.44 at 3,000; y_obs_sq)."""
    _keep_bias(monkeypatch)
    zs, _ = _reversals(2000)
    assert max(abs(z) for z in zs.values()) > Z, zs


def test_fit_with_the_bias_collapsed_resumes_bit_for_bit(tmp_path):
    """``chefs fit --collapse-bias`` writes the setting into the run's spec, and a chain stopped
    part-way and resumed stores exactly the samples of an uninterrupted one; the fit differs from
    the default's (the setting reaches the moves)."""
    import json
    import shutil

    from chefs.cli import main
    from chefs.mcmc.run import run_chain

    from .test_hmc import _rows

    X = np.random.default_rng(2).normal(size=(60, 2))
    np.savetxt(tmp_path / "x.csv", X, delimiter=",")
    common = ["fit", "--data", str(tmp_path / "x.csv"), "--sweeps", "30", "--burn-in", "10", "--thin", "2",
              "--seed", "4", "--warmup", "3", "--pilots", "1", "--no-progress", "--checkpoint-every", "1e-9"]
    assert main(common + ["--collapse-bias", "--out", str(tmp_path / "a")]) == 0
    assert main(common + ["--out", str(tmp_path / "d")]) == 0
    spec = json.loads((tmp_path / "a" / "config.json").read_text())
    assert spec["model"]["collapse_bias"] is True
    assert json.loads((tmp_path / "d" / "config.json").read_text())["model"]["collapse_bias"] is False
    b = tmp_path / "b"
    b.mkdir()
    for f in (tmp_path / "a").iterdir():
        if f.is_file():
            shutil.copy(f, b / f.name)
    run_chain(b, 0, stop_after=12)
    run_chain(b, 0)
    ra = _rows(tmp_path / "a")
    assert len(ra) == 10 and ra == _rows(b)
    assert ra != _rows(tmp_path / "d")
