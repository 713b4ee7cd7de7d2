"""Statistical helpers for the tests: every tolerance is a number of Monte
Carlo standard errors, never a value tuned to a seed."""

from __future__ import annotations

from collections import Counter

import numpy as np

Z = 4.5  # per-cell bound in standard errors (many cells are checked at once)


def cell_z(observed_counts: dict, n: int, probs: dict, min_prob: float = 0.0) -> dict:
    """z-scores of sample frequencies against exact probabilities, per cell.

    Cells are the keys of ``probs`` with probability >= min_prob; the standard
    error is the binomial one under the exact probability.
    """
    out = {}
    for key, p in probs.items():
        if p < min_prob or p <= 0 or p >= 1:
            continue
        f = observed_counts.get(key, 0) / n
        out[key] = (f - p) / np.sqrt(p * (1 - p) / n)
    return out


def mcse_mean(x) -> float:
    """Monte Carlo standard error of the mean of one autocorrelated chain, from its
    effective sample size (``chefs.mcmc.diagnostics.mcse_mean``). Batch means with a
    fixed number of batches understate it when a batch is shorter than the
    autocorrelation time."""
    from chefs.mcmc.diagnostics import mcse_mean as _mcse

    return _mcse(x)


def max_abs_z(zs: dict) -> float:
    return max((abs(v) for v in zs.values()), default=0.0)


def two_sample_mean_z(x, y) -> float:
    x = np.asarray(x, float)
    y = np.asarray(y, float)
    se = np.sqrt(x.var(ddof=1) / x.size + y.var(ddof=1) / y.size)
    if se == 0:
        return 0.0 if x.mean() == y.mean() else np.inf
    return float((x.mean() - y.mean()) / se)


def two_sample_cell_z(x, y, values) -> dict:
    """z-scores of P(X = v) - P(Y = v) for each v in values (pooled SE)."""
    x = np.asarray(x)
    y = np.asarray(y)
    out = {}
    for v in values:
        px, py = np.mean(x == v), np.mean(y == v)
        p = (px * x.size + py * y.size) / (x.size + y.size)
        se = np.sqrt(p * (1 - p) * (1 / x.size + 1 / y.size))
        if se > 0:
            out[v] = (px - py) / se
    return out


def counts(items) -> Counter:
    return Counter(items)
