"""Missing-data reconstruction (003 section 5): BeliefNetwork.predict_missing
against exact conditional means of a small network, a planted-bug negative
control, input validation and the ``chefs bench reconstruct`` CLI."""

from __future__ import annotations

import csv
import math

import numpy as np
import pytest
from scipy import integrate
from scipy.special import expit

from chefs import impute
from chefs.density import BeliefNetwork, UnitMap

# Two posterior samples of one structure: observed x0, x1, x2 (theta 0),
# hidden h1 (node 3) -> x0, x1, x2 and h2 (node 4) -> h1, x2.
EDGES = [(3, 0), (3, 1), (3, 2), (4, 2), (4, 3)]
SAMPLES = [
    {"theta": [0.0, 0.0, 0.0, 0.5, 0.9], "observed": [True, True, True, False, False],
     "fixed": [True, True, True, False, False], "edges": EDGES,
     "weights": [5.0, -5.0, 3.0, -2.0, 3.0], "bias": [-2.0, 2.5, -1.0, -1.5, 0.5],
     "precision": [3.0, 2.0, 4.0, 1.5, 1.0]},
    {"theta": [0.0, 0.0, 0.0, 0.5, 0.9], "observed": [True, True, True, False, False],
     "fixed": [True, True, True, False, False], "edges": EDGES,
     "weights": [4.0, -6.0, 2.0, -3.0, -2.0], "bias": [-1.5, 3.0, -0.5, 0.0, -0.3],
     "precision": [2.5, 2.0, 3.0, 1.0, 2.0]},
]
UMAP = UnitMap(np.array([0.0, 10.0, -5.0]), np.array([1.0, 30.0, 5.0]))
U_OBS = np.array([0.2, 0.75, 0.5])  # unit-space values of the observed entries (x2's is always hidden)


def _normal_logpdf(y, mu, rho):
    return 0.5 * (math.log(rho) - math.log(2 * math.pi)) - 0.5 * rho * (y - mu) ** 2


def exact_conditional_mean(sample, u, missing):
    """E[u_d | observed u, sample] for d in ``missing`` by quadrature over (y_h2, y_h1)."""
    W = {e: w for e, w in zip(sample["edges"], sample["weights"])}
    b, rho = sample["bias"], sample["precision"]
    g = np.linspace(-9, 9, 721)
    y4 = g[:, None]
    y3 = g[None, :]
    s4, s3 = expit(y4), expit(y3)
    logw = _normal_logpdf(y4, b[4], rho[4]) + _normal_logpdf(y3, b[3] + W[4, 3] * s4, rho[3])
    mu = {0: b[0] + W[3, 0] * s3 + 0 * s4, 1: b[1] + W[3, 1] * s3 + 0 * s4, 2: b[2] + W[3, 2] * s3 + W[4, 2] * s4}
    for d in range(3):
        if d not in missing:
            logw = logw + _normal_logpdf(math.log(u[d] / (1 - u[d])), mu[d], rho[d])
    w = np.exp(logw - logw.max())
    w /= w.sum()
    return np.array([np.sum(w * _sigmoid_normal_mean_quad(mu[d], rho[d] ** -0.5)) for d in missing])


def _sigmoid_normal_mean_by_quad(m, sd):
    """E[sigmoid(m + sd Z)] by adaptive quadrature (independent of impute's Gauss-Hermite rule)."""
    f = lambda z: expit(m + sd * z) * math.exp(-0.5 * z * z) / math.sqrt(2 * math.pi)  # noqa: E731
    step = [-m / sd] if abs(m / sd) < 12 else None  # the sigmoid's centre, where a wide spread makes it steep
    return integrate.quad(f, -12, 12, epsabs=1e-14, epsrel=1e-12, limit=500, points=step)[0]


def _sigmoid_normal_mean_quad(mu, sd):
    """E[sigmoid(mu + sd Z)] for an array ``mu``: adaptive quadrature on a fine grid of
    mu, interpolated (the function is smooth; grid step 0.005 keeps the error < 1e-6)."""
    grid = np.arange(mu.min() - 0.01, mu.max() + 0.01, 0.005)
    vals = np.array([_sigmoid_normal_mean_by_quad(m, sd) for m in grid])
    return np.interp(mu, grid, vals)


@pytest.mark.parametrize("sd", [0.3, 1.0, 1.5, 1.6, 3.0, 10.0, 100.0])
def test_sigmoid_normal_mean_matches_quadrature(sd):
    mu = np.linspace(-12, 12, 49)
    ref = np.array([_sigmoid_normal_mean_by_quad(m, sd) for m in mu])
    # the rule's own error is below 1e-9 (docs/derivations-reconstruct.md); 1e-8 leaves room for quad's
    np.testing.assert_allclose(impute.sigmoid_normal_mean(mu, np.full(mu.shape, sd)), ref, rtol=0, atol=1e-8)
    # negative control: a wrong spread (sd doubled) is far outside the tolerance
    assert np.max(np.abs(impute.sigmoid_normal_mean(mu, np.full(mu.shape, 2 * sd)) - ref)) > 1e-3


def test_negative_control_gauss_hermite_alone_fails_for_wide_spreads():
    # the plain 32-point Gauss-Hermite rule (the code before stop 12) is off by 1e-2 at sd = 10
    mu = np.linspace(-12, 12, 49)
    ref = np.array([_sigmoid_normal_mean_by_quad(m, 10.0) for m in mu])
    plain = expit(mu[:, None] + 10.0 * impute._GH_X) @ impute._GH_W
    assert np.max(np.abs(plain - ref)) > 1e-3


def make_net(samples=SAMPLES):
    net = BeliefNetwork()
    net.map_ = UMAP
    net.samples_ = list(samples)
    net.inputs = ()
    return net


PATTERNS = [(2,), (1, 2)]  # missing columns per row type
R = 300  # replicate rows per pattern: independent chains, so their spread gives the Monte Carlo error


def z_scores(net, seed, max_groups=16):
    """(estimate - exact) / standard error for every missing entry of both patterns.
    With ``max_groups=1`` both patterns share one chain state: x2 (missing in every
    row) is integrated out and x1 (missing in half the rows) imputed by Gibbs draws."""
    X = np.tile(UMAP.inverse(U_OBS), (R * len(PATTERNS), 1))
    mask = np.zeros(X.shape, bool)
    for p, cols in enumerate(PATTERNS):
        mask[p * R:(p + 1) * R, list(cols)] = True
    X[mask] = np.nan
    out = UMAP.forward(impute.predict_missing(net, X, mask, num_sweeps=100, burn_in=20, rng=seed,
                                              max_groups=max_groups))
    z = []
    for p, cols in enumerate(PATTERNS):
        exact = np.mean([exact_conditional_mean(s, U_OBS, cols) for s in net.samples_], axis=0)
        est = out[p * R:(p + 1) * R][:, list(cols)]
        se = est.std(axis=0, ddof=1) / math.sqrt(R)
        z.extend((est.mean(axis=0) - exact) / se)
    return np.array(z)


@pytest.mark.parametrize("max_groups", [16, 1])
def test_imputed_mean_matches_exact_conditional_mean(max_groups):
    z = z_scores(make_net(), seed=1, max_groups=max_groups)
    assert np.all(np.abs(z) < 4), z


@pytest.mark.parametrize("max_groups", [16, 1])
def test_negative_control_ignoring_observed_entries_fails(monkeypatch, max_groups):
    # planted bug: hidden units are updated without their observed children
    monkeypatch.setattr(impute, "_activation_children", lambda net, h, collapsed: net.children[h][~net.obs[net.children[h]]])
    z = z_scores(make_net(), seed=1, max_groups=max_groups)
    assert np.max(np.abs(z)) > 4, z


def test_negative_control_wrong_rao_blackwell_mean_fails(monkeypatch):
    # planted bug: the Rao-Blackwellised mean uses twice the observed units' noise sd
    # (the reference computes that expectation by its own quadrature, so it does not move with it)
    good = impute.sigmoid_normal_mean
    monkeypatch.setattr(impute, "sigmoid_normal_mean", lambda mu, sd: good(mu, 2 * np.asarray(sd)))
    z = z_scores(make_net(), seed=1)
    assert np.max(np.abs(z)) > 4, z


def test_conditioning_matters_and_samples_are_averaged():
    # the exact targets differ between the samples and from the unconditional mean,
    # so the checks above can tell a wrong weighting or no conditioning apart
    a = exact_conditional_mean(SAMPLES[0], U_OBS, (1, 2))
    b = exact_conditional_mean(SAMPLES[1], U_OBS, (1, 2))
    free = exact_conditional_mean(SAMPLES[0], U_OBS, (0, 1, 2))[1:]
    assert np.min(np.abs(a - b)) > 0.05 and np.min(np.abs(a - free)) > 0.05


def test_observed_entries_pass_through_and_seeded():
    net = make_net()
    X = UMAP.inverse(np.array([[0.2, 0.75, 0.5], [0.4, 0.35, 0.6], [0.5, 0.5, 0.5]]))
    mask = np.array([[False, False, True], [True, False, True], [False, False, False]])
    Xn = X.copy()
    Xn[mask] = np.nan
    a = net.predict_missing(Xn, mask, num_sweeps=20, rng=3)
    b = net.predict_missing(Xn, mask, num_sweeps=20, rng=np.random.default_rng(3))
    np.testing.assert_array_equal(a, b)
    np.testing.assert_array_equal(a[~mask], X[~mask])
    assert np.all(np.isfinite(a))
    # the means lie inside the support (unit space (0, 1))
    assert np.all((UMAP.forward(a) > 0) & (UMAP.forward(a) < 1))


@pytest.mark.parametrize("X, mask, kw, msg", [
    (np.zeros((2, 3)) + 0.5, np.zeros((2, 2), bool), {}, "mask has shape"),
    (np.zeros((2, 3)) + 0.5, np.zeros((2, 3), int), {}, "boolean"),
    (np.zeros((2, 4)) + 0.5, np.zeros((2, 4), bool), {}, "3 columns"),
    (np.array([[0.5, np.nan, 0.0], [0.5, 20.0, 0.0]]), np.zeros((2, 3), bool), {}, "non-finite observed"),
    (np.array([[0.5, 1e6, 0.0], [0.5, 20.0, 0.0]]), np.zeros((2, 3), bool), {}, "outside the model's support"),
    (np.array([[0.5, 20.0, 0.0]]), np.array([[True, False, False]]), {"num_sweeps": 0}, "num_sweeps"),
    (np.array([[0.5, 20.0, 0.0]]), np.array([[True, False, False]]), {"num_sweeps": 5, "burn_in": 5}, "burn_in"),
    ([["a", "b", "c"]], np.zeros((1, 3), bool), {}, "numeric"),
])
def test_validation(X, mask, kw, msg):
    with pytest.raises(ValueError, match=msg):
        make_net().predict_missing(X, mask, **kw)


def test_not_fitted_and_inputs_cannot_be_missing():
    with pytest.raises(ValueError, match="not fitted"):
        BeliefNetwork().predict_missing(np.zeros((1, 3)), np.zeros((1, 3), bool))
    net = make_net()
    net.inputs = (0,)
    with pytest.raises(ValueError, match="input column"):
        net.predict_missing(np.array([[np.nan, 20.0, 0.0]]), np.array([[True, False, False]]))


def test_cli_quick_smoke(tmp_path, capsys):
    from chefs.cli import main

    out = tmp_path / "rec"
    argv = ["bench", "reconstruct", "--out", str(out), "--quick", "--priors", "cibp,icp", "--sweeps", "6",
            "--burn-in", "2", "--num-test", "4", "--num-train", "120", "--impute-sweeps", "6", "--seed", "3"]
    rc = main(argv)
    assert rc == 0
    before = (out / "reconstruct.csv").read_bytes()
    assert main(argv) == 2 and "--force" in capsys.readouterr().err  # not replaced without --force
    assert (out / "reconstruct.csv").read_bytes() == before
    assert main(argv[:3] + [str(tmp_path / "rec2"), "--data-dir", str(tmp_path / "nowhere")]) == 2
    assert "does not exist" in capsys.readouterr().err
    rows = list(csv.DictReader((out / "reconstruct.csv").open()))
    assert [r["prior"] for r in rows] == ["cibp", "icp"]
    for r in rows:
        assert float(r["rmse"]) > 0 and float(r["baseline_rmse"]) > 0 and float(r["seconds"]) > 0
        assert r["seed"] == "3"
    assert (out / "reconstruct.md").read_text().startswith("#")
    assert (out / "reconstruct.png").stat().st_size > 1000


@pytest.mark.parametrize("flags, msg", [
    (["--priors", "icp,icp"], "prior(s) ['icp'] listed more than once in --priors"),
    (["--priors", ""], "--priors is empty"),
    (["--num-test", "5000"], "500 training and 5000 test images requested, but the data have 1797 images in 10 "
                             "classes, split evenly per class (the smallest has 174): at most 1748 images in all; "
                             "--num-test at most 1248 with --num-train 500"),
    (["--num-train", "1700", "--num-test", "100"], "--num-train at most 1648 with --num-test 100"),
])
def test_cli_refuses_bad_lists_and_sizes(tmp_path, capsys, flags, msg):
    """Duplicated priors wrote identical rows into one runs/ directory; the split's
    error spoke of one class's counts instead of the totals a user can type."""
    from chefs.cli import main

    out = tmp_path / "rec"
    assert main(["bench", "reconstruct", "--out", str(out), "--quick"] + flags) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error:") and msg in err and err.count("\n") == 1
    assert not out.exists()


def test_data_dir_csv(tmp_path):
    from chefs.bench.reconstruct import load_digits_data, split

    rng = np.random.default_rng(0)
    arr = np.hstack([rng.integers(0, 17, (30, 64)), np.repeat(np.arange(10), 3)[:, None]])
    np.savetxt(tmp_path / "digits.csv", arr, delimiter=",", fmt="%d")
    X, y = load_digits_data(tmp_path)
    np.testing.assert_array_equal(X, arr[:, :64])
    tr, te = split(X, y, 10, 10, seed=0)
    assert len(set(tr) | set(te)) == 20 and sorted(y[te]) == list(range(10))
    np.savetxt(tmp_path / "digits.csv", arr[:, :10], delimiter=",", fmt="%d")
    with pytest.raises(ValueError, match="65 columns"):
        load_digits_data(tmp_path)
