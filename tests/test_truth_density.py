"""The true log-densities of the synthetic generators (chefs.datasets.synthetic;
docs/derivations-data.md section 1.1), checked against draws of the generators.

* Histogram: 10^6 draws binned on a grid; each bin's expected count is the
  density integrated over the bin (tensor Gauss-Legendre). Pearson's chi-square
  over the bins expecting at least 5 (plus one cell for the rest) must lie below
  its 1 - 1e-6 quantile. The same sums give the integral over the grid's box,
  which must be 1 up to the mass outside the box and the quadrature error.
* Where the maps are not injective (a negative radius of the ring; pinwheel arms
  that overlap and fold), the identity E_p[1_B(X) / p(X)] = area(B) checks the
  density's values without integrating over its fold singularities.
Each check has a negative control with a planted error that it rejects.
"""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy import stats
from scipy.integrate import quad

from chefs import cli, datasets
from chefs.datasets import synthetic as syn

from .stats import Z

N_DRAWS = 1_000_000
P_FALSE_ALARM = 1e-6  # chi-square bound: its 1 - 1e-6 quantile for the test's degrees of freedom
QUAD_TOL = 1e-5  # quadrature error allowed in the integral over the box (measured: 3.7e-7 pinwheel, 1e-9 others)

# (box, bin width, Gauss-Legendre nodes per bin side): the box reaches 6 noise sd beyond every
# arc (ring, two-moons) or radius 2.8 = 6 radial sd beyond u's mean (pinwheel); pinwheel bins are
# two tangential sd wide so that the quadrature resolves its arms (bias below 0.07 sd of a count)
GRIDS = {
    "ring": (((-1.6, 1.6), (-1.6, 1.6)), 0.2, 6),
    "two-moons": (((-1.6, 2.6), (-1.2, 1.8)), 0.2, 6),
    "pinwheel": (((-2.8, 2.8), (-2.8, 2.8)), 0.1, 6),
}


def _tail_mass(name) -> float:
    """Upper bound on the generator's mass outside the box of GRIDS, independent of the density code."""
    sf = stats.norm.sf
    if name == "ring":  # |r| > 1.6 with r ~ N(1, 0.1^2)
        return float(sf(6.0) + sf(26.0))
    if name == "two-moons":  # arcs within x in [-1, 2], y in [-0.5, 1]; noise 0.1 beyond 0.6 or 0.7
        return float(2 * sf(6.0) + 2 * sf(7.0))
    # pinwheel: the map keeps |(u, v)|; outside the box means u^2 + v^2 > 2.8^2
    inner = lambda u: stats.norm.pdf(u, 1.0, 0.3) * 2 * sf(math.sqrt(max(2.8**2 - u * u, 0.0)) / 0.05)
    return float(quad(inner, -2.8, 2.8, points=[1.0], limit=200)[0] + sf(1.8 / 0.3) + stats.norm.cdf(-3.8 / 0.3))


def _bin_probabilities(logpdf, box, width, nodes):
    """Probability of each bin (density integrated by tensor Gauss-Legendre) and the bin edges."""
    (x0, x1), (y0, y1) = box
    ex = np.linspace(x0, x1, int(round((x1 - x0) / width)) + 1)
    ey = np.linspace(y0, y1, int(round((y1 - y0) / width)) + 1)
    z, w = np.polynomial.legendre.leggauss(nodes)
    cx = (ex[:-1, None] + ex[1:, None]) / 2 + z[None, :] * width / 2
    cy = (ey[:-1, None] + ey[1:, None]) / 2 + z[None, :] * width / 2
    gx, gy = np.meshgrid(cx.ravel(), cy.ravel(), indexing="ij")
    p = np.exp(logpdf(np.column_stack([gx.ravel(), gy.ravel()]))).reshape(ex.size - 1, nodes, ey.size - 1, nodes)
    return np.einsum("aibj,i,j->ab", p, w * width / 2, w * width / 2), ex, ey


def _draws(name):
    return syn.GENERATORS[name](N_DRAWS, np.random.default_rng([2027, list(syn.GENERATORS).index(name)]))


def _chi_square(probs, ex, ey, x):
    """Pearson's chi-square of the draws' bin counts against ``probs`` (bins expecting >= 5,
    and one cell for everything else), its bound and the largest per-bin |z|."""
    n = x.shape[0]
    counts, _, _ = np.histogram2d(x[:, 0], x[:, 1], bins=[ex, ey])
    expected = n * probs
    keep = expected >= 5
    rest = n * (1.0 - probs[keep].sum())
    df = int(keep.sum())  # cells (kept bins + rest) minus one
    if rest <= 0:  # the density puts more than all the mass into the kept bins
        return math.inf, stats.chi2.isf(P_FALSE_ALARM, df), math.inf
    o = np.append(counts[keep], n - counts[keep].sum())
    e = np.append(expected[keep], rest)
    z = (counts[keep] - expected[keep]) / np.sqrt(expected[keep] * (1 - probs[keep]))
    return float(np.sum((o - e) ** 2 / e)), float(stats.chi2.isf(P_FALSE_ALARM, df)), float(np.max(np.abs(z)))


@pytest.mark.parametrize("name", list(syn.GENERATORS))
def test_true_density_matches_a_histogram_of_draws_and_integrates_to_one(name):
    box, width, nodes = GRIDS[name]
    probs, ex, ey = _bin_probabilities(lambda X: syn.log_density(name, X), box, width, nodes)
    chi2, bound, max_z = _chi_square(probs, ex, ey, _draws(name))
    # measured (seeds [2027, k]): ring 148.2 (df 140, bound 234.4), two-moons 171.2 (df 153, bound
    # 251.0), pinwheel 519.2 (df 464, bound 623.5; six other seeds: mean 474); largest |z| 3.0-3.9;
    # integrals 1 + 1.2e-9, 1 + 8e-10, 1 + 3.7e-7
    assert chi2 < bound, (name, chi2, bound, max_z)
    total, tail = probs.sum(), _tail_mass(name)
    assert 1.0 - tail - QUAD_TOL <= total <= 1.0 + QUAD_TOL, (name, total, tail)


def _pinwheel_terms(pre, jacobian_sign=-1.0, use_jacobian=True, **kw):
    a, b, c = kw.get("radial_sd", 0.3), kw.get("tangential_sd", 0.05), kw.get("rate", 0.25)
    t = syn._log_normal(pre["u"], 1.0, a) + syn._log_normal(pre["v"], 0.0, b)
    if use_jacobian:
        t = t - np.log(np.abs(1.0 + jacobian_sign * c * np.exp(pre["u"]) * pre["v"]))
    return t


def _pinwheel_wrong(X, **wrong):
    """Pinwheel log-density with a planted error in its change of variables."""
    pre = syn.pinwheel_preimages(X)
    return syn._group_logsumexp(pre["point"], _pinwheel_terms(pre, **wrong), X.shape[0]) - math.log(5)


def test_histogram_check_rejects_wrong_densities():
    """Negative controls: a noise sd 10 % too large (ring, two-moons) and the pinwheel without
    its Jacobian |1 - rate e^u v| fail the chi-square (measured 9513, 9443 and 1377 against
    bounds 255, 267 and 622); the pinwheel with the Jacobian's sign flipped integrates to 1.0028."""
    controls = {
        "ring": lambda X: syn.ring_log_density(X, radial_sd=0.11),
        "two-moons": lambda X: syn.two_moons_log_density(X, noise_sd=0.11),
        "pinwheel": lambda X: _pinwheel_wrong(X, use_jacobian=False),
    }
    for name, logpdf in controls.items():
        box, width, nodes = GRIDS[name]
        probs, ex, ey = _bin_probabilities(logpdf, box, width, nodes)
        chi2, bound, _ = _chi_square(probs, ex, ey, _draws(name))
        assert chi2 > bound, (name, chi2, bound)
    box, width, nodes = GRIDS["pinwheel"]
    probs, _, _ = _bin_probabilities(lambda X: _pinwheel_wrong(X, jacobian_sign=1.0), box, width, nodes)
    assert probs.sum() > 1.0 + QUAD_TOL


STRESS = {"num_arms": 3, "radial_sd": 0.5, "tangential_sd": 0.3, "rate": 0.5}  # folds: 7 % of preimages


def _forward(k, u, v, num_arms, rate):
    a = 2 * np.pi * k / num_arms + rate * np.exp(u)
    return np.column_stack([np.cos(a) * u - np.sin(a) * v, np.sin(a) * u + np.cos(a) * v])


@pytest.mark.parametrize("params", [syn.PARAMETERS["pinwheel"], STRESS, {**STRESS, "rate": -0.5}])
def test_pinwheel_preimages_are_all_found_and_exact(params):
    """Every listed preimage maps back onto its point, and the (arm, u, v) that produced a draw
    is among its point's preimages (the enumeration misses none)."""
    rng = np.random.default_rng(11)
    n, K = 20000, params["num_arms"]
    k = rng.integers(0, K, n)
    u = 1.0 + params["radial_sd"] * rng.standard_normal(n)
    v = params["tangential_sd"] * rng.standard_normal(n)
    x = _forward(k, u, v, K, params["rate"])
    pre = syn.pinwheel_preimages(x, **params)
    back = _forward(pre["arm"], pre["u"], pre["v"], K, params["rate"])
    assert np.max(np.abs(back - x[pre["point"]])) < 1e-9
    dist = np.hypot(pre["u"] - u[pre["point"]], pre["v"] - v[pre["point"]])
    dist[pre["arm"] != k[pre["point"]]] = np.inf
    nearest = np.full(n, np.inf)
    np.minimum.at(nearest, pre["point"], dist)
    assert np.max(nearest) < 1e-9
    if params is STRESS:  # the stress case is genuinely non-injective
        assert np.mean(pre["jacobian"] < 0) > 0.05 and np.bincount(pre["point"]).max() > K


def _inverse_density_z(x, logpdf, half_width):
    """z of the estimate of E_p[1_B(X) / p(X)] = area(B), B = [-w, w]^2, from draws of p."""
    inside = np.all(np.abs(x) <= half_width, axis=1)
    w = np.zeros(x.shape[0])
    w[inside] = np.exp(-logpdf(x[inside]))
    return (w.mean() - (2 * half_width) ** 2) / (w.std(ddof=1) / math.sqrt(w.size))


def test_density_where_the_maps_are_not_injective():
    """Ring with radius 0.1 (a negative radius in 16 % of the draws: the point lands opposite
    its angle) and the pinwheel with overlapping, folding arms (STRESS): the identity
    E[1_B / p] = area(B) holds within Z standard errors (measured z -0.18 and 0.17); controls that
    keep only the positive-radius preimage or the largest pinwheel term are rejected
    (measured z 6.1 and 21.2)."""
    n = 200_000
    ring_kw = {"radius": 0.1, "radial_sd": 0.1}
    xr = syn.ring(n, np.random.default_rng(12), **ring_kw)
    z_ring = _inverse_density_z(xr, lambda X: syn.ring_log_density(X, **ring_kw), 0.3)
    xp = syn.pinwheel(n, np.random.default_rng(13), **STRESS)
    z_pin = _inverse_density_z(xp, lambda X: syn.pinwheel_log_density(X, **STRESS), 1.0)
    assert abs(z_ring) < Z and abs(z_pin) < Z, (z_ring, z_pin)

    def ring_positive_branch(X):
        rho = np.hypot(X[:, 0], X[:, 1])
        return syn._log_normal(rho, 0.1, 0.1) - math.log(2 * math.pi) - np.log(rho)

    def pinwheel_largest_term(X):
        pre = syn.pinwheel_preimages(X, **STRESS)
        top = np.full(X.shape[0], -np.inf)
        np.maximum.at(top, pre["point"], _pinwheel_terms(pre, **STRESS))
        return top - math.log(STRESS["num_arms"])

    assert _inverse_density_z(xr, ring_positive_branch, 0.3) > Z
    assert _inverse_density_z(xp, pinwheel_largest_term, 1.0) > Z


def test_two_moons_arc_quadrature_agrees_with_adaptive_quadrature():
    rng = np.random.default_rng(14)
    pts = np.vstack([rng.uniform([-2, -1.5], [3, 2], (20, 2)), [[0, 0], [1, 0.5], [1, 0], [-1, 0], [0, 1 + 1e-9]]])

    def reference(x, sd=0.1):
        total = 0.0
        for (cx, cy), start in (((0.0, 0.0), 0.0), ((1.0, 0.5), np.pi)):
            phi = math.atan2(x[1] - cy, x[0] - cx)
            f = lambda t: math.exp(-(x[0] - cx - math.cos(t)) ** 2 / (2 * sd**2) - (x[1] - cy - math.sin(t)) ** 2
                                   / (2 * sd**2))
            d = (phi - start) % (2 * np.pi)
            v = quad(f, start, start + np.pi, points=[start + d] if d <= np.pi else None, epsabs=0, epsrel=1e-13,
                     limit=500)[0]
            total += v / (2 * np.pi * sd**2) / np.pi / 2
        return math.log(total)

    ref = np.array([reference(p) for p in pts])
    assert np.max(np.abs(syn.two_moons_log_density(pts) - ref)) < 1e-9


def test_ring_density_closed_form_points():
    # on the circle: (N(1) + N(-1)) / (2 pi); at rho = 1.1 one sd out
    lp = syn.ring_log_density(np.array([[1.0, 0.0], [0.0, -1.1]]))
    n0 = 1 / (0.1 * math.sqrt(2 * math.pi))
    assert lp[0] == pytest.approx(math.log(n0 / (2 * math.pi)), rel=1e-12)
    assert lp[1] == pytest.approx(math.log(n0 * math.exp(-0.5) / (2 * math.pi * 1.1)), rel=1e-12)


@pytest.mark.parametrize("name", list(syn.GENERATORS))
def test_loaded_splits_are_the_generators_draws_unchanged(name):
    """load/load_split neither rescale nor dequantise the synthetic sets: the truth applies
    to the test split exactly."""
    import inspect

    defaults = {k: p.default for k, p in inspect.signature(syn.GENERATORS[name]).parameters.items()
                if p.default is not inspect.Parameter.empty}
    assert defaults == syn.PARAMETERS[name]
    for seed in range(3):
        raw = syn.GENERATORS[name](4000, np.random.default_rng([seed, datasets._STREAM_GENERATE]))
        train, test = datasets.load_split(name, seed=seed)
        assert np.array_equal(np.vstack([train, test]), raw)
        assert not np.any(datasets.discrete_steps(raw))


def test_true_density_input_checks():
    with pytest.raises(ValueError, match=r"shape \(n, 2\)"):
        syn.ring_log_density(np.zeros((3, 3)))
    with pytest.raises(ValueError, match="finite"):
        syn.two_moons_log_density([[0.0, np.nan]])
    with pytest.raises(ValueError, match="noise_sd"):
        syn.two_moons_log_density([[0.0, 0.0]], noise_sd=0)
    with pytest.raises(ValueError, match="num_arms"):
        syn.pinwheel_log_density([[0.0, 0.0]], num_arms=0)
    with pytest.raises(ValueError, match="synthetic"):
        datasets.true_heldout_loglik("iris")
    with pytest.raises(ValueError, match="no true density"):
        syn.log_density("geyser", [[0.0, 0.0]])
    # the origin: pinwheel's single preimage u = v = 0; far points beyond the 1e-300 tail: -inf
    lp = syn.pinwheel_log_density([[0.0, 0.0], [20.0, 0.0]])
    assert lp[0] == pytest.approx(syn._log_normal(0.0, 1.0, 0.3) + syn._log_normal(0.0, 0.0, 0.05), rel=1e-12)
    assert lp[1] == -np.inf


def test_cli_data_truth(capsys):
    assert cli.main(["data", "truth", "ring", "--seed", "0", "--seed", "1"]) == 0
    out = capsys.readouterr().out
    rows = [ln.split() for ln in out.splitlines() if ln.startswith("ring")]
    assert [r[1] for r in rows] == ["0", "1", "mean"]
    assert float(rows[0][3]) == pytest.approx(datasets.true_heldout_loglik("ring", 0), abs=1e-4)
    assert cli.main(["data", "truth", "iris"]) == 2
    assert "synthetic" in capsys.readouterr().err
