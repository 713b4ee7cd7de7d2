"""Dequantisation of discrete columns.

Rule (documented in ``docs/derivations-data.md``): a column is **discrete**
when at least one of its values occurs more than once (ties). Its step ``h``
is the smallest gap between two of its distinct values; every value gets
independent ``U(-h/2, h/2)`` noise. For a column on a complete grid (integers,
one decimal, ...) ``h`` is the grid step; in general the intervals
``[v - h/2, v + h/2)`` of distinct values never overlap, so the noise keeps the
order of the values and rounding to the nearest original value undoes it.
A column without ties is left unchanged. Genuinely continuous columns recorded
to a fixed number of decimals with ties (wine density, cloud features) get
noise of half a recording unit, the usual dequantisation of rounded data.
"""

from __future__ import annotations

import numpy as np

__all__ = ["discrete_steps", "dequantize"]


def discrete_steps(x: np.ndarray) -> np.ndarray:
    """Step ``h`` of each discrete column (0 for continuous ones; docs/derivations-data.md
    section 2).

    Parameters
    ----------
    x : numpy.ndarray, shape (n, d)
        The data.

    Returns
    -------
    numpy.ndarray, shape (d,)
        ``h_j`` = smallest gap between distinct values of column ``j`` when the
        column has ties, else 0.
    """
    x = np.asarray(x, dtype=np.float64)
    if x.ndim != 2:
        raise ValueError(f"expected a 2-D array (rows = points), got {x.ndim} dimensions")
    steps = np.zeros(x.shape[1])
    for j in range(x.shape[1]):
        u = np.unique(x[:, j])
        if u.size < x.shape[0] and u.size > 1:
            steps[j] = float(np.min(np.diff(u)))
    return steps


def dequantize(x: np.ndarray, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray]:
    """Add ``U(-h/2, h/2)`` noise to the discrete columns of ``x`` (docs/derivations-data.md
    section 2).

    Parameters
    ----------
    x : numpy.ndarray, shape (n, d)
        The data.
    rng : numpy.random.Generator
        Source of the noise.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        The dequantised copy of ``x`` and the step of each column
        (0 = continuous, left unchanged).
    """
    if not isinstance(rng, np.random.Generator):
        raise ValueError("rng must be a numpy.random.Generator")
    steps = discrete_steps(x)
    noise = rng.uniform(-0.5, 0.5, size=x.shape) * steps[None, :]
    return np.asarray(x, dtype=np.float64) + noise, steps
