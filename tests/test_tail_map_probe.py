"""benchmarks/tail_map_probe.py's piecewise-linear map (docs/derivations.md 3.16): its inverse and
the log-slope it adds to held-out densities, which its measurements rely on."""

import numpy as np

from .conftest import load_script


def test_tail_map_inverse_and_log_slope():
    p = load_script("benchmarks/tail_map_probe.py")
    rng = np.random.default_rng(3)
    z = rng.standard_t(2, size=(3000, 3))  # heavy tails: isolated extremes on every axis
    k = p.knots(z)
    y, log_slope = p.g(z, k)
    assert np.allclose(p.g_inverse(y, k), z, atol=1e-10)
    assert np.allclose(y.min(axis=0), -1.1)
    assert np.allclose(y.max(axis=0), 1.1)
    beyond = np.array([[z[:, 0].min() - 5.0, 0.0, z[:, 2].max() + 5.0]])
    assert np.allclose(p.g_inverse(p.g(beyond, k)[0], k), beyond)
    # sum log g' against central differences, away from the knots (g is linear between them)
    h = 1e-6
    fd = np.log((p.g(z + h, k)[0] - p.g(z - h, k)[0]) / (2 * h)).sum(axis=1)
    knots = np.column_stack(k[1:3]).T
    away = np.all(np.abs(z[:, None, :] - knots[None]).min(axis=1) > 10 * h, axis=1)
    assert away.sum() > 2900 and np.allclose(fd[away], log_slope[away], atol=1e-6)
    # a planted error, the bulk's slope dropped from the log-slope, is far outside that tolerance
    wrong = log_slope - np.log(2.0 / (k[2] - k[1])).sum()
    assert not np.allclose(fd[away], wrong[away], atol=1e-2)


def test_tail_map_compresses_only_isolated_tails():
    p = load_script("benchmarks/tail_map_probe.py")
    rng = np.random.default_rng(4)
    small = rng.normal(size=(75, 4))  # no isolated extreme: the plain affine map on every axis
    lo, qlo, qhi, hi = p.knots(small, isolated=0.25)
    assert np.array_equal(qlo, lo) and np.array_equal(qhi, hi)
    y, log_slope = p.g(small, (lo, qlo, qhi, hi))
    assert np.allclose(y, -1 + (small - lo) * 2 / (hi - lo)) and np.allclose(log_slope, np.log(2 / (hi - lo)).sum())
    outlier = np.vstack([rng.normal(size=(2000, 2)), [[30.0, 0.0]]])  # one height-like extreme on axis 0
    lo, qlo, qhi, hi = p.knots(outlier, isolated=0.25)
    assert qhi[0] < 5 < hi[0] == 30.0 and qlo[0] == lo[0] and qlo[1] == lo[1] and qhi[1] == hi[1]
    assert np.isclose(p.g(outlier, (lo, qlo, qhi, hi))[0][-1, 0], 1.1)
