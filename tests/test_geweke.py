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
