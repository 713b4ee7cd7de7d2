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
