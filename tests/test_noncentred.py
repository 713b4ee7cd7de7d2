"""The non-centred updates of a hidden unit's precision and incoming scale (NLGBN.noncentred_update,
docs/derivations.md 3.24): joint-draw stationarity with planted-error controls, the whole sweep with them on,
and the option's way through BeliefNetwork, the run's config, load and resume."""

from __future__ import annotations

import json
import shutil

import numpy as np
import pytest

from chefs.mcmc.chain import ChainConfig
from chefs.mcmc.geweke import stationarity_test
from chefs.mcmc.run import run_chain
from chefs.models.nlgbn import NLGBN

from .conftest import DataCoupled
from .conftest import chain_rows as _rows
from .stats import Z
from .test_hmc import _HMCOnly

RHO_PRIOR = (4.0, 1.0)  # informative enough that a dropped log-rho Jacobian shows (as tests/test_hmc.py)


class _NonCentredOnly(_HMCOnly):
    """The NLGBN whose sweep is three rounds of the non-centred updates (structure fixed), with the HMC test's
    functions of every block they move, and the hidden biases' mean square."""

    def sweep(self, rng, state, config, hyper):
        for _ in range(3):
            self.noncentred_update(rng, state)

    def test_functions(self, state):
        out = super().test_functions(state)
        hid = np.flatnonzero(state.alive & ~state.obs)
        out["b_sq_hidden"] = float((self.b[hid] ** 2).mean()) if hid.size else 0.0
        return out


# Stop 46, seed 4, 1,000 replicates: passing max |z| 1.57 (w_sq); the dropped log-rho Jacobian reads 12.2
# (log_rho_all), the dropped scale Jacobian 15.3 (b_sq_hidden).
def _config(free):
    """One observed unit at theta = 0 (density estimation), or two with free orders (causal discovery: a hidden
    unit may then have observed parents, whose weights the scale move moves)."""
    return ChainConfig(2, None, 1.0, 1.0, 1.0) if free else ChainConfig(1, 0.0, 1.0, 1.0, 1.0)


def _stationarity(plant=0, replicates=1000, seed=4, free=False):
    rng = np.random.default_rng(seed)
    model = _NonCentredOnly(rng.uniform(0.2, 0.8, size=(5, 2 if free else 1)), 16, rng, rho_prior=RHO_PRIOR,
                            weight_var=4.0)
    model.noncentred_plant = plant
    return stationarity_test(model, _config(free), replicates, 2, rng)


# With free observed orders (stop 47, D = 2, same seed and size): passing 1.26 (mu_y_cov); plants 12.07, 14.81.
@pytest.mark.parametrize("free", [False, True])
def test_noncentred_updates_leave_the_joint_invariant(free):
    """From exact joint draws (structure from the ICP, parameters, activations and five data points forward),
    two rounds of three non-centred updates and a data refresh leave every test function's mean unchanged."""
    zs = _stationarity(free=free)
    assert max(abs(z) for z in zs.values()) < Z, zs


@pytest.mark.parametrize("free", [False, True])
@pytest.mark.parametrize("plant", [1, 2])
def test_noncentred_stationarity_negative_controls(plant, free):
    """The same test catches the log-rho update without its Jacobian (1) and the scale move without its
    Jacobian g^(p + 1) (2)."""
    zs = _stationarity(plant=plant, free=free)
    assert max(abs(z) for z in zs.values()) > Z, zs


class _NonCentredHeld(DataCoupled, _NonCentredOnly):
    """The same sweep, with a test function coupled to the data (``obs_rss``)."""


def _posterior_invariance(plant=0, power=1.0, replicates=1000, seed=4, free=False):
    """From exact joint draws, one sweep (three rounds of the updates) with the data held
    (``stationarity_test(refresh_data=False)``): the updates target the posterior given the data, so the joint is
    invariant. The refreshing test above cannot see the data's term (review, stop 46)."""
    rng = np.random.default_rng(seed)
    model = _NonCentredHeld(rng.uniform(0.2, 0.8, size=(5, 2 if free else 1)), 16, rng, rho_prior=RHO_PRIOR,
                            weight_var=4.0, likelihood_power=power)
    model.noncentred_plant = plant
    return stationarity_test(model, _config(free), replicates, 1, rng, refresh_data=False)


# Stop 46, seed 4, 1,000 replicates: max |z| 1.80 at power 1 and 1.69 at power 0.5 (the power posterior's slots;
# RHO_PRIOR meets forward's condition a > N (1 - power) / 2); the children's likelihood dropped reads 7.94 here
# and 1.15 in the refreshing stationarity test.
# With free observed orders (stop 47, D = 2): 1.80 (log_rho_hidden); the plant 7.67 here and 1.89 refreshing.
@pytest.mark.parametrize("power,free", [(1.0, False), (0.5, False), (1.0, True)])
def test_noncentred_updates_leave_the_posterior_invariant(power, free):
    zs = _posterior_invariance(power=power, free=free)
    assert max(abs(z) for z in zs.values()) < Z, zs


@pytest.mark.parametrize("free", [False, True])
def test_posterior_invariance_negative_control_no_data_term(free):
    """The updates without the children's likelihood (the data's term) keep the prior and pass the refreshing
    test above; the test with the data held catches them."""
    assert max(abs(z) for z in _stationarity(plant=3, free=free).values()) < Z
    zs = _posterior_invariance(plant=3, free=free)
    assert max(abs(z) for z in zs.values()) > Z, zs


def test_full_sweep_with_noncentred_updates_leaves_the_joint_invariant():
    """The whole ICP sweep (activations, parameters, the non-centred updates, edges, births and deaths, orders,
    depth moves) from joint draws."""
    rng = np.random.default_rng(2)
    model = NLGBN(rng.uniform(0.2, 0.8, size=(10, 1)), 16, rng, num_tries=4, structure_moves=3,
                  rho_prior=RHO_PRIOR, weight_var=4.0, noncentred=True)
    zs = stationarity_test(model, ChainConfig(1, 0.0, 1.0, 1.0, 1.0), 600, 2, rng)
    assert max(abs(z) for z in zs.values()) < Z, zs


def test_noncentred_is_checked():
    for bad in (1, "yes", None):
        with pytest.raises(ValueError, match="noncentred must be True or False"):
            NLGBN(np.full((3, 1), 0.5), 8, np.random.default_rng(0), noncentred=bad)
    from chefs.density import BeliefNetwork

    with pytest.raises(ValueError, match="noncentred must be True or False"):
        BeliefNetwork(noncentred="no")


def test_fit_with_noncentred_updates_records_loads_and_resumes_bit_for_bit(tmp_path):
    """The option reaches the chain (its samples differ from a fit without it), is written into the run's
    config and restored by load, and an interrupted run resumes to exactly the uninterrupted one's samples.
    It is the default since stop 49 (chefs.density.NONCENTRED); noncentred=False writes no key."""
    from chefs.density import BeliefNetwork

    X = np.random.default_rng(0).normal(size=(60, 2))
    kw = dict(sweeps=30, burn_in=10, thin=2, seed=3, progress=False, structure_warmup=5, checkpoint_every=1e-9)
    a = tmp_path / "a"
    assert BeliefNetwork().noncentred is True
    BeliefNetwork(out=a, **kw).fit(X)
    BeliefNetwork(out=tmp_path / "plain", noncentred=False, **kw).fit(X)
    assert json.loads((a / "config.json").read_text())["model"]["noncentred"] is True
    assert "noncentred" not in json.loads((tmp_path / "plain" / "config.json").read_text())["model"]
    assert _rows(a) != _rows(tmp_path / "plain")
    assert BeliefNetwork.load(a).noncentred is True and BeliefNetwork.load(tmp_path / "plain").noncentred is False
    b = tmp_path / "b"
    b.mkdir()
    for f in a.iterdir():
        if f.is_file():
            shutil.copy(f, b / f.name)
    run_chain(b, 0, stop_after=7)
    run_chain(b, 0, stop_after=9)
    run_chain(b, 0)
    assert _rows(a) == _rows(b) and len(_rows(a)) == 10


def test_cli_fit_noncentred_flag(tmp_path, capsys):
    """``chefs fit --noncentred`` writes the option into the run's config, and so does no flag (the library's
    default since stop 49); ``--no-noncentred`` leaves the key out (the chains of the earlier default)."""
    from chefs.cli import main

    data = tmp_path / "x.csv"  # (60 rows: the flag's path, not ring's 2,000 points' fantasy and scores)
    np.savetxt(data, np.random.default_rng(3).normal(size=(60, 2)), delimiter=",")
    for flag, name, on in ((["--noncentred"], "nc", True), ([], "default", True), (["--no-noncentred"], "plain", False)):
        out = tmp_path / name
        assert main(["fit", "--data", str(data), "--sweeps", "6", "--burn-in", "2", "--thin", "1", "--pilots", "1",
                     "--no-progress", "--out", str(out), *flag]) == 0
        model = json.loads((out / "config.json").read_text())["model"]
        assert model.get("noncentred", False) is on


def test_table1_noncentred_label_and_runs(tmp_path):
    """``chefs bench table1 --noncentred``: the rows are labelled ',noncentred' and the belief networks' runs
    carry the option (the default since stop 49); with noncentred=False the label and the runs do not."""
    from chefs.bench.table1 import chain_settings, run_table1

    settings, label = chain_settings(quick=True, noncentred=True)
    assert settings["noncentred"] is True and ",noncentred" in label
    assert chain_settings(quick=True) == (settings, label)
    settings, label = chain_settings(quick=True, noncentred=False)
    assert settings["noncentred"] is False and "noncentred" not in label
    with pytest.raises(ValueError, match="noncentred must be True or False"):
        chain_settings(quick=True, noncentred="yes")
    run_table1(tmp_path / "t", datasets=("iris",), models=("icp",), seeds=(0,), quick=True, log=lambda *a: None,
               noncentred=True)
    rows = (tmp_path / "t" / "table1.csv").read_text()
    assert ",noncentred" in rows
    configs = list((tmp_path / "t").rglob("config.json"))
    assert configs and all(json.loads(c.read_text())["model"].get("noncentred") is True for c in configs)
    # either value is a belief-network setting, refused without a belief network (since stop 49 False is not the
    # default, and --no-noncentred can give it); None (not given) is not
    run_table1(tmp_path / "k", datasets=("iris",), models=("kde",), seeds=(0,), quick=True, log=lambda *a: None)
    for value in (True, False):
        with pytest.raises(ValueError, match="none of icp, cibp, ecibp"):
            run_table1(tmp_path / "k2", datasets=("iris",), models=("kde",), seeds=(0,), quick=True,
                       log=lambda *a: None, noncentred=value)


def test_cli_discover_and_bench_causal_noncentred_flag(tmp_path, capsys):
    """``chefs discover --noncentred`` writes the option into the run's config, and a chain interrupted and resumed
    from that config reproduces the uninterrupted chain's samples (the updates draw random numbers, so a resume
    that lost the option would not); ``chefs bench causal --noncentred`` runs the ICP with it and says so in
    causal.md."""
    from chefs.cli import main

    X = np.random.default_rng(0).normal(size=(80, 2))
    X[:, 1] += X[:, 0]
    data = tmp_path / "d.csv"
    np.savetxt(data, X, delimiter=",", header="a,b", comments="")
    for flag, name in ((["--noncentred"], "nc"), ([], "plain")):
        run = tmp_path / name
        assert main(["discover", "--data", str(data), "--out", str(run), "--sweeps", "12", "--burn-in", "4",
                     "--thin", "2", "--chains", "1", "--no-progress", "--checkpoint-every", "1e-9", "--start", "prior",
                     *flag]) == 0
        assert json.loads((run / "config.json").read_text())["model"].get("noncentred", False) is bool(flag)
    assert _rows(tmp_path / "nc") != _rows(tmp_path / "plain")
    b = tmp_path / "b"
    b.mkdir()
    for f in (tmp_path / "nc").iterdir():
        if f.is_file():
            shutil.copy(f, b / f.name)
    run_chain(b, 0, stop_after=5)
    run_chain(b, 0)
    assert _rows(b) == _rows(tmp_path / "nc") and len(_rows(b)) == 4
    capsys.readouterr()
    assert main(["bench", "causal", "--quick", "--methods", "icp", "--seeds", "0", "--no-real", "--noncentred",
                 "--out", str(tmp_path / "bench")]) == 0
    assert "non-centred updates" in (tmp_path / "bench" / "causal.md").read_text()
    assert json.loads((tmp_path / "bench" / "runs" / "seed0" / "config.json").read_text())["model"]["noncentred"] is True


def test_load_restores_the_runs_start_up_and_causal_default_stays_off(tmp_path):
    """``BeliefNetwork.load`` gives back the run's pilots, pilot sweeps and pilot draws (so that a refit repeats
    them), 32 draws for a run written before the setting was stored; causal discovery keeps the non-centred updates
    off (stop 47) although density estimation has them on since stop 49."""
    from chefs.causal import CausalDiscovery
    from chefs.density import LEGACY_PILOT_DRAWS, BeliefNetwork

    assert CausalDiscovery().noncentred is False and CausalDiscovery(noncentred=True).noncentred is True
    X = np.random.default_rng(1).normal(size=(40, 2))
    out = tmp_path / "r"
    BeliefNetwork(out=out, sweeps=8, burn_in=4, thin=2, pilots=2, pilot_sweeps=3, pilot_draws=16, progress=False,
                  structure_warmup=2).fit(X)
    net = BeliefNetwork.load(out)
    assert (net.pilots, net.pilot_sweeps, net.pilot_draws, net.noncentred) == (2, 3, 16, True)
    cfg = json.loads((out / "config.json").read_text())
    del cfg["model"]["pilot_draws"]
    (out / "config.json").write_text(json.dumps(cfg))
    assert BeliefNetwork.load(out).pilot_draws == LEGACY_PILOT_DRAWS == 32


@pytest.mark.parametrize("plant", [0, 1, 2, 3])
@pytest.mark.parametrize("N", [7, 300])
def test_numba_kernel_matches_the_numpy_reference(plant, N):
    """Since stop 51 the updates run in a numba kernel (``_nlgbn_kernels.noncentred_unit``). From one state and one
    random stream, it and the numpy code it replaced (``_noncentred_update_reference``) take the same draws (the
    generators end in the same state) and give the same precisions, weights, biases and activations to rounding
    (the sums run in another order), with every plant. Several rounds, so that each starts where the last ended."""
    import copy

    from .test_hmc import _model

    m, g = _model(seed=3, N=N, D=3, inputs=1)
    m.noncentred_plant = plant
    hid = np.flatnonzero(g.alive & ~g.obs)
    assert any(m.children(g, h).size for h in hid)
    rho0 = m.rho[hid].copy()
    ref = copy.deepcopy(m)
    r1, r2 = np.random.default_rng(11), np.random.default_rng(11)
    for _ in range(4):
        m.noncentred_update(r1, g)
        ref._noncentred_update_reference(r2, g)
        assert r1.bit_generator.state == r2.bit_generator.state
        for name in ("rho", "b", "W", "Y", "U", "MU"):
            np.testing.assert_allclose(getattr(m, name), getattr(ref, name), rtol=1e-9, atol=1e-12, err_msg=name)
    assert not np.allclose(m.rho[hid], rho0)  # the updates moved


@pytest.mark.parametrize("plant", [0, 1, 2, 3])
def test_numba_kernel_targets_equal_the_reference_targets(plant):
    """The kernel's two slice targets (``_nlgbn_kernels._nc_logf``) against the reference's closures, written out
    here from docs/derivations.md 3.24, on a grid of t: equal to 1e-12 relative. The draw test above sees the targets
    only through the slice sampler's decisions, so a small error in them (a prior term off by 0.01 t) passes it;
    this one does not."""
    from scipy.special import expit

    from chefs.models import _nlgbn_kernels as K

    from .test_hmc import _model

    m, g = _model(seed=3, N=300, D=3, inputs=1)
    a, rate = m.rho_prior
    jac = a - 1.0 if plant == 1 else a
    checked = 0
    for h in np.flatnonzero(g.alive & ~g.obs):
        ch = m.children(g, h)
        if ch.size == 0:
            continue
        pa = m.parents(g, h)
        eps = np.sqrt(m.rho[h]) * (m.Y[h] - m.MU[h])
        wc, rc, mu, Yc = m.W[h, ch].copy(), m.rho[ch].copy(), m.MU[h].copy(), m.Y[ch]
        base = m.MU[ch] - wc[:, None] * m.U[h][None, :]
        q = m.b[h] ** 2 / (2 * m.bias_var) + float(m.W[pa, h] @ m.W[pa, h]) / (2 * m.weight_var)
        k = 0.0 if plant == 2 else pa.size + 1.0
        noise = eps / np.sqrt(m.rho[h])

        def cll(y):
            r = Yc - base - wc[:, None] * expit(y)[None, :]
            return 0.0 if plant == 3 else -0.5 * float(rc @ np.einsum("ij,ij->i", r, r))

        for t in np.linspace(-4.0, 4.0, 17):
            want0 = jac * t - rate * np.exp(t) + cll(mu + eps * np.exp(-0.5 * t))
            want1 = -np.exp(2 * t) * q + k * t + cll(np.exp(t) * mu + noise)
            got0 = K._nc_logf(0, t, jac, rate, mu, eps, Yc, base, wc, rc, np.empty(m.N), plant == 3)
            got1 = K._nc_logf(1, t, k, q, mu, noise, Yc, base, wc, rc, np.empty(m.N), plant == 3)
            np.testing.assert_allclose([got0, got1], [want0, want1], rtol=1e-12, atol=1e-12)
        checked += 1
    assert checked >= 2


@pytest.mark.parametrize("bad", [0.0, -1.0, float("nan")])
def test_a_precision_that_is_not_positive_is_an_error_not_a_hang(bad):
    """In numba log(0) is -inf and a NaN target never accepts, so the kernel's slice sampler would loop for ever
    (where the numpy code raised): the wrapper refuses such a precision first."""
    from .test_hmc import _model

    m, g = _model(seed=3, N=7, D=3, inputs=1)
    h = next(h for h in np.flatnonzero(g.alive & ~g.obs) if m.children(g, h).size)
    m.rho[h] = bad
    with pytest.raises(FloatingPointError, match="precision"):
        m.noncentred_update(np.random.default_rng(0), g)
