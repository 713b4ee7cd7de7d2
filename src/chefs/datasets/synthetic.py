"""The three synthetic 2-D density data sets of Table 1 of 001/002.

The papers show the sets (Fig. 4 of 002, Fig. 1 of 001) but give no
parameters; the ones below are fixed here and documented in
``docs/derivations-data.md``. Every point is drawn independently (the mixture
component of each point is random too), so the points are i.i.d. draws from a
fixed density and any split of them is a fair train/test split.
"""

from __future__ import annotations

import numpy as np

__all__ = ["GENERATORS", "PARAMETERS", "ring", "two_moons", "pinwheel"]

PARAMETERS = {
    "ring": {"radius": 1.0, "radial_sd": 0.1},
    "two-moons": {"noise_sd": 0.1},
    "pinwheel": {"num_arms": 5, "radial_sd": 0.3, "tangential_sd": 0.05, "rate": 0.25},
}
"""The fixed parameters of each generator."""


def _check(n: int, rng) -> None:
    if isinstance(n, bool) or not isinstance(n, (int, np.integer)) or n < 1:
        raise ValueError(f"the number of points must be a positive integer, got {n!r}")
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator (e.g. numpy.random.default_rng(0))")


def ring(n: int, rng: np.random.Generator, radius: float = 1.0, radial_sd: float = 0.1) -> np.ndarray:
    """Points on a noisy circle.

    Angle ``t ~ U(0, 2 pi)``, radius ``r ~ N(radius, radial_sd**2)``, point
    ``(r cos t, r sin t)``.

    Parameters
    ----------
    n : int
        Number of points.
    rng : numpy.random.Generator
        Source of randomness.
    radius, radial_sd : float, optional
        Mean and standard deviation of the radius.

    Returns
    -------
    numpy.ndarray, shape (n, 2)
    """
    _check(n, rng)
    t = rng.uniform(0.0, 2.0 * np.pi, size=n)
    r = radius + radial_sd * rng.standard_normal(n)
    return np.column_stack([r * np.cos(t), r * np.sin(t)])


def two_moons(n: int, rng: np.random.Generator, noise_sd: float = 0.1) -> np.ndarray:
    """Two interleaved half circles (the ``make_moons`` shape of scikit-learn).

    Each point picks a moon with probability 1/2 and ``t ~ U(0, pi)``; the
    upper moon is ``(cos t, sin t)``, the lower one ``(1 - cos t, 1/2 - sin t)``;
    isotropic Gaussian noise of standard deviation ``noise_sd`` is added.

    Parameters
    ----------
    n : int
        Number of points.
    rng : numpy.random.Generator
        Source of randomness.
    noise_sd : float, optional
        Standard deviation of the added noise.

    Returns
    -------
    numpy.ndarray, shape (n, 2)
    """
    _check(n, rng)
    lower = rng.random(n) < 0.5
    t = rng.uniform(0.0, np.pi, size=n)
    x = np.where(lower, 1.0 - np.cos(t), np.cos(t))
    y = np.where(lower, 0.5 - np.sin(t), np.sin(t))
    return np.column_stack([x, y]) + noise_sd * rng.standard_normal((n, 2))


def pinwheel(
    n: int,
    rng: np.random.Generator,
    num_arms: int = 5,
    radial_sd: float = 0.3,
    tangential_sd: float = 0.05,
    rate: float = 0.25,
) -> np.ndarray:
    """The pinwheel density (as in Johnson et al. 2016, "Composing graphical
    models with neural networks").

    Each point picks an arm ``k`` uniformly from ``num_arms``; draws
    ``u ~ N(1, radial_sd**2)``, ``v ~ N(0, tangential_sd**2)``; and is rotated
    by the angle ``2 pi k / num_arms + rate * exp(u)``, giving ``R (u, v)``.

    Parameters
    ----------
    n : int
        Number of points.
    rng : numpy.random.Generator
        Source of randomness.
    num_arms : int, optional
        Number of arms.
    radial_sd, tangential_sd : float, optional
        Standard deviations along and across an arm before the twist.
    rate : float, optional
        Twist rate.

    Returns
    -------
    numpy.ndarray, shape (n, 2)
    """
    _check(n, rng)
    arm = rng.integers(0, num_arms, size=n)
    u = 1.0 + radial_sd * rng.standard_normal(n)
    v = tangential_sd * rng.standard_normal(n)
    angle = 2.0 * np.pi * arm / num_arms + rate * np.exp(u)
    c, s = np.cos(angle), np.sin(angle)
    return np.column_stack([c * u - s * v, s * u + c * v])


GENERATORS = {"ring": ring, "two-moons": two_moons, "pinwheel": pinwheel}
"""Name -> generator ``f(n, rng) -> (n, 2) array`` with the fixed parameters."""
