"""The Geweke joint test harness on a toy model whose likelihood depends on
the structure (observed in-degrees), driven through the Python model path;
negative control: a planted Hastings error fails it."""

from __future__ import annotations

import math

import numpy as np
import pytest

from chefs.mcmc import _kernels as kern
from chefs.mcmc.chain import ChainConfig
from chefs.mcmc.geweke import geweke_test

from .stats import Z


class InDegreeGaussian:
    """y[d, n] ~ N(0, 1 + in-degree of observed node d): data that carry
    information about the structure, with no parameters."""

    is_null = False

    def __init__(self, D: int, n: int = 2):
        self.D, self.n = D, n
        self.y = np.zeros((D, n))

    def _var(self, g):
        return 1.0 + g.npar[: self.D].astype(float)

    def log_likelihood(self, g) -> float:
        v = self._var(g)
        return float(-0.5 * np.sum(self.y**2 / v[:, None]) - 0.5 * self.n * np.sum(np.log(2 * math.pi * v)))

    def forward(self, rng, g):
        self.resample_data(rng, g)

    def resample_data(self, rng, g):
        self.y = rng.normal(size=(self.D, self.n)) * np.sqrt(self._var(g))[:, None]

    def test_functions(self, g) -> dict:
        return {"y_sq": float(np.sum(self.y**2)), "y0_sq": float(np.sum(self.y[0] ** 2))}


CONFIG = dict(moves_per_sweep=10, weights=(1, 3, 1, 1))  # birth/death-heavy: the plant's move


# Draws per side, since stop 36 (4,000 before): the passing run reads max |z| 1.80 (depth), the
# plant 7.23 (in_degree_obs; 9.20 at 4,000, 6.07 at 1,500), seed 1.
DRAWS = 2000


def test_geweke_passes_for_correct_sampler():
    config = ChainConfig(1, 0.0, 1.0, 1.5, 1.0, **CONFIG)
    zs = geweke_test(InDegreeGaussian(1), config, DRAWS, DRAWS, np.random.default_rng(1))
    assert len(zs) >= 6
    assert max(abs(z) for z in zs.values()) < Z, zs


def test_geweke_negative_control_planted_hastings_error():
    config = ChainConfig(1, 0.0, 1.0, 1.5, 1.0, **CONFIG)
    zs = geweke_test(InDegreeGaussian(1), config, DRAWS, DRAWS, np.random.default_rng(1),
                     plant=kern.PLANT_BIRTH_HASTINGS)
    assert max(abs(z) for z in zs.values()) > Z, zs


def test_geweke_standard_error_options():
    """``se="batch"`` keeps the batch-means errors; an unknown choice is refused."""
    config = ChainConfig(1, 0.0, 1.0, 1.5, 1.0, **CONFIG)
    zs = geweke_test(InDegreeGaussian(1), config, 200, 200, np.random.default_rng(1), se="batch", batches=10)
    assert set(zs) >= {"num_nodes", "y_sq"} and all(np.isfinite(list(zs.values())))
    with pytest.raises(ValueError, match="se must be"):
        geweke_test(InDegreeGaussian(1), config, 10, 10, np.random.default_rng(1), se="bootstrap")


def test_batch_means_variance_by_hand_and_on_iid_draws():
    """The batch-means error of ``se="batch"``: by hand on a short series (the remainder dropped), and on
    100,000 i.i.d. N(0, 1) draws, where 400 batch means give var / n times a chi-square(399) / 399 factor: the
    ratio must lie within that law's 1e-6 and 1 - 1e-6 quantiles (a variance off by a factor of 2 fails)."""
    from scipy.stats import chi2

    from chefs.mcmc.geweke import chain_mean_variance

    y = np.arange(22.0)  # 4 batches of 5: means 2, 7, 12, 17 (20 and 21 dropped)
    assert chain_mean_variance(y, "batch", 4) == pytest.approx(np.var([2.0, 7.0, 12.0, 17.0], ddof=1) / 4)
    n = 100_000
    x = np.random.default_rng(5).normal(size=n)
    ratio = chain_mean_variance(x, "batch", 400) * n
    lo, hi = chi2.ppf([1e-6, 1 - 1e-6], 399) / 399
    assert lo < ratio < hi, ratio
    assert not lo < 2 * ratio < hi and not lo < ratio / 2 < hi  # the band is narrow enough to catch a factor 2
    assert chain_mean_variance(x, "ess") * n == pytest.approx(1.0, rel=0.1)  # ESS about n for i.i.d. draws
    with pytest.raises(ValueError, match="se must be"):
        chain_mean_variance(x, "batches")
    with pytest.raises(ValueError, match="batches must be"):
        chain_mean_variance(y, "batch", 40)
