"""The Hellinger distance estimator (Table 1 of 001/002) against closed forms.

Tolerances are derived, not tuned (see docs/derivations-data.md, "Tests"):

* Monte Carlo and sampling: ``Z`` standard errors of the estimate of the Bhattacharyya
  coefficient (BC): the stratified importance-sampling error and, independent of it, the
  first-order sampling error of the two n-point samples, sqrt((1 - BC^2) / (2n)).
* KDE smoothing bias: the KDE of a Gaussian sample is, in expectation, the
  Gaussian with covariance ``(1 + f^2) S`` (Scott factor ``f``), so
  ``BC_smooth`` is a closed form; the tolerance includes ``|BC_true - BC_smooth|``.
* KDE sampling noise lowers BC (never raises it, to second order); its size for
  two n-point KDEs of one Gaussian is, to second order,
  ``v(n, d) = (((1 + f^2) / f^2)^d - 1) / (4 n)``, used as the bound.
"""

from __future__ import annotations

import numpy as np
import pytest
from scipy import integrate, stats as sps

from chefs import cli
from chefs.evaluation import (
    gaussian_bhattacharyya,
    gaussian_hellinger,
    hellinger,
    hellinger_estimate,
    scott_factor,
)

from .stats import Z


def noise_bound(n: int, d: int) -> float:
    """Second-order expected BC loss of two n-point Scott KDEs of one Gaussian."""
    f2 = scott_factor(n, d) ** 2
    return (((1 + f2) / f2) ** d - 1) / (4 * n)


# ----------------------------------------------------------------- closed form


def test_gaussian_closed_form_matches_quadrature_1d():
    for (m1, s1, m2, s2) in [(0, 1, 1, 1.5), (0, 1, 0, 3), (-2, 0.5, 1, 0.7), (0, 1, 0, 1)]:
        f = lambda x: np.sqrt(sps.norm.pdf(x, m1, s1) * sps.norm.pdf(x, m2, s2))  # noqa: E731
        bc, _ = integrate.quad(f, -30, 30, points=[m1, m2], limit=200)
        assert gaussian_bhattacharyya(m1, s1**2, m2, s2**2) == pytest.approx(bc, abs=1e-9)
        assert gaussian_hellinger(m1, s1**2, m2, s2**2) == pytest.approx(np.sqrt(max(0, 1 - bc)), abs=1e-6)


def test_gaussian_closed_form_2d_matches_quadrature_and_is_symmetric():
    mu1, c1 = np.zeros(2), np.eye(2)
    mu2, c2 = np.array([1.0, 0.5]), np.array([[2.25, 0.3], [0.3, 0.64]])
    p, q = sps.multivariate_normal(mu1, c1), sps.multivariate_normal(mu2, c2)
    g = np.linspace(-10, 10, 801)
    xx, yy = np.meshgrid(g, g)
    pts = np.dstack([xx, yy])
    bc_grid = np.sqrt(p.pdf(pts) * q.pdf(pts)).sum() * (g[1] - g[0]) ** 2
    assert gaussian_bhattacharyya(mu1, c1, mu2, c2) == pytest.approx(bc_grid, abs=1e-6)
    assert gaussian_hellinger(mu1, c1, mu2, c2) == gaussian_hellinger(mu2, c2, mu1, c1)
    assert gaussian_hellinger(mu1, c1, mu1, c1) == 0.0


def test_gaussian_closed_form_rejects_bad_input():
    with pytest.raises(ValueError, match="positive definite"):
        gaussian_hellinger([0, 0], [[1, 2], [2, 1]], [0, 0], np.eye(2))
    with pytest.raises(ValueError, match="shape"):
        gaussian_hellinger([0, 0], np.eye(3), [0, 0], np.eye(2))
    with pytest.raises(ValueError, match="different dimensions"):
        gaussian_hellinger([0], 1.0, [0, 0], np.eye(2))


# ------------------------------------------------------ estimator vs closed form

CASES = {
    "1d": (np.zeros(1), np.eye(1), np.array([1.0]), np.array([[1.5**2]]), 5000),
    "2d": (np.zeros(2), np.eye(2), np.array([1.0, 0.5]), np.array([[2.25, 0.3], [0.3, 0.64]]), 5000),
}


def _draw(mu, cov, n, rng):
    return rng.multivariate_normal(mu, cov, size=n)


def _check(bc_claimed, est, mu1, c1, mu2, c2, n):
    """True when the BC implied by a claimed estimate is within the derived tolerance."""
    d = mu1.size
    f2 = scott_factor(n, d) ** 2
    bc_true = gaussian_bhattacharyya(mu1, c1, mu2, c2)
    bc_smooth = gaussian_bhattacharyya(mu1, (1 + f2) * c1, mu2, (1 + f2) * c2)
    smoothing = abs(bc_true - bc_smooth)
    se = np.hypot(est.bhattacharyya_se, sampling_sd(bc_true, n))
    lower = bc_true - smoothing - noise_bound(n, d) - Z * se
    upper = bc_true + smoothing + Z * se
    return lower <= bc_claimed <= upper


def sampling_sd(bc: float, n: int) -> float:
    """First-order sd of the estimated BC from the two n-point samples themselves (delta method:
    dBC = 1/2 E_p[sqrt(q/p) dp] + 1/2 E_q[sqrt(p/q) dq], each with variance (E_p[q/p] - BC^2) / (4n) and
    E_p[q/p] = 1), independent of the Monte Carlo error: sqrt((1 - BC^2) / (2n))."""
    return float(np.sqrt((1.0 - bc**2) / (2 * n)))


@pytest.fixture(scope="module")
def gaussian_estimates():
    out = {}
    for k, (name, (mu1, c1, mu2, c2, n)) in enumerate(sorted(CASES.items())):
        rng = np.random.default_rng([2024, k])
        a, b = _draw(mu1, c1, n, rng), _draw(mu2, c2, n, rng)
        out[name] = hellinger_estimate(a, b, seed=k, num_mc=10000)
    return out


@pytest.mark.parametrize("case", sorted(CASES))
def test_estimator_matches_gaussian_closed_form(case, gaussian_estimates):
    mu1, c1, mu2, c2, n = CASES[case]
    est = gaussian_estimates[case]
    assert est.distance == pytest.approx(np.sqrt(1 - est.bhattacharyya))
    assert _check(est.bhattacharyya, est, mu1, c1, mu2, c2, n), (
        est, gaussian_hellinger(mu1, c1, mu2, c2))


@pytest.mark.parametrize("case", sorted(CASES))
def test_negative_control_wrong_formulas_fail(case, gaussian_estimates):
    """HD = 1 - BC, or the unnormalised sqrt(2 (1 - BC)), must be rejected by the same test."""
    mu1, c1, mu2, c2, n = CASES[case]
    est = gaussian_estimates[case]
    wrong_1 = 1 - est.bhattacharyya  # claimed HD; implied BC = 1 - HD^2
    wrong_2 = np.sqrt(2 * (1 - est.bhattacharyya))
    for hd in (wrong_1, wrong_2):
        assert not _check(1 - hd**2, est, mu1, c1, mu2, c2, n)


def test_noise_floor_of_one_gaussian_is_within_the_bound():
    """Two samples of the same 2-D Gaussian: 0 <= 1 - BC <= v(n, d) (+ MC error)."""
    rng = np.random.default_rng(7)
    n = 2000
    a, b = rng.standard_normal((n, 2)), rng.standard_normal((n, 2))
    est = hellinger_estimate(a, b, seed=3, num_mc=4000)
    loss = 1 - est.bhattacharyya
    assert -Z * est.bhattacharyya_se <= loss <= noise_bound(n, 2) + Z * est.bhattacharyya_se


def test_standard_error_is_calibrated():
    """The spread of estimates over Monte Carlo seeds matches the reported SE
    (chi-square bounds on the variance ratio, one-sided 1e-4 each)."""
    rng = np.random.default_rng(11)
    a, b = rng.standard_normal((400, 2)), rng.standard_normal((400, 2)) + [0.8, 0.0]
    ests = [hellinger_estimate(a, b, seed=s, num_mc=1000) for s in range(30)]
    bc = np.array([e.bhattacharyya for e in ests])
    se2 = np.mean([e.bhattacharyya_se**2 for e in ests])
    ratio = bc.var(ddof=1) / se2
    k = bc.size - 1
    assert sps.chi2.ppf(1e-4, k) / k < ratio < sps.chi2.ppf(1 - 1e-4, k) / k


# ----------------------------------------------------------------- properties


def test_symmetric_deterministic_and_affine_invariant():
    rng = np.random.default_rng(5)
    a = rng.standard_normal((300, 3))
    b = rng.standard_normal((250, 3)) * [1, 2, 1] + 0.3
    h = hellinger(a, b, seed=4, num_mc=2000)
    assert hellinger(b, a, seed=4, num_mc=2000) == h
    assert hellinger(a, b, seed=4, num_mc=2000) == h
    scale, shift = np.array([10.0, 0.01, 3.0]), np.array([-5.0, 100.0, 0.5])
    assert hellinger(a * scale + shift, b * scale + shift, seed=4, num_mc=2000) == pytest.approx(h, abs=1e-9)


def test_identical_and_disjoint_samples():
    rng = np.random.default_rng(6)
    a = rng.standard_normal((200, 2))
    assert hellinger(a, a, num_mc=1000) == 0.0
    assert hellinger(a, a + [100.0, 0.0], num_mc=1000) == pytest.approx(1.0, abs=1e-9)


@pytest.mark.parametrize(
    "a, b, match",
    [
        (np.full((10, 2), np.nan), np.zeros((10, 2)), "non-finite"),
        (np.ones((10, 2)), np.ones((10, 3)), "different dimensions"),
        (np.ones((2, 2)), np.ones((10, 2)), "at least"),
        (np.c_[np.arange(10.0), np.ones(10)], np.c_[np.arange(10.0), np.ones(10)], "constant"),
        (np.c_[np.arange(10.0), 2 * np.arange(10.0)], np.random.default_rng(0).normal(size=(10, 2)), "singular"),
    ],
)
def test_bad_samples_raise(a, b, match):
    with pytest.raises(ValueError, match=match):
        hellinger(a, b, num_mc=200)


def test_bad_options_raise():
    a = np.random.default_rng(0).normal(size=(20, 1))
    with pytest.raises(ValueError, match="num_mc"):
        hellinger(a, a, num_mc=10)
    with pytest.raises(ValueError, match="seed"):
        hellinger(a, a, seed=-1)


# ------------------------------------------------------------------------ CLI


def test_cli_hellinger_prints_the_library_value(tmp_path, capsys):
    rng = np.random.default_rng(8)
    a, b = rng.standard_normal((300, 2)), rng.standard_normal((300, 2)) + 0.5
    pa, pb = tmp_path / "a.csv", tmp_path / "b.csv"
    np.savetxt(pa, a, delimiter=",", header="x,y", comments="", fmt="%.17g")
    np.savetxt(pb, b, delimiter=",", fmt="%.17g")
    assert cli.main(["hellinger", str(pa), str(pb), "--seed", "3", "--num-mc", "2000"]) == 0
    out = capsys.readouterr().out
    assert float(out) == pytest.approx(hellinger(a, b, seed=3, num_mc=2000), abs=1e-6)
    assert cli.main(["hellinger", str(pa), str(tmp_path / "missing.csv")]) == 2
    assert "neither a CSV file nor a data set" in capsys.readouterr().err
