"""Hellinger distance between two sample sets (the metric of Table 1 of 001/002).

The papers (section 3 of 001, section 4.1 of 002, citing Boone et al. 2014)
estimate the Hellinger distance between two data sets by building a kernel
density estimate (KDE) from each set and computing the Bhattacharyya
coefficient ``BC = \\int sqrt(p q)`` by Monte Carlo, then ``HD = sqrt(1 - BC)``.
They do not state the bandwidth, the Monte Carlo design or the seed, so this
module fixes one rule (documented in ``docs/derivations-data.md``):

1. **Standardisation.** Both samples are shifted and scaled by the mean and
   standard deviation of the *pooled* sample (column by column). Because the
   kernels below use each sample's own covariance, the estimate is invariant to
   any per-column shift and scaling anyway; standardising only keeps the
   arithmetic well conditioned.
2. **Kernel and bandwidth.** Gaussian kernels with covariance
   ``H = f**2 * S``, where ``S`` is the sample's own covariance matrix (ddof=1)
   and ``f = n**(-1/(d+4))`` is Scott's factor (as in
   :class:`scipy.stats.gaussian_kde`).
3. **Monte Carlo.** Importance sampling from the mixture ``m = (p + q) / 2``
   of the two KDEs, stratified: ``num_mc // 2`` draws from ``p`` and the rest
   from ``q``. With ``w(x) = sqrt(p(x) q(x)) / m(x)``, which lies in [0, 1],
   ``BC = E_m[w] = (E_p[w] + E_q[w]) / 2`` is estimated without bias for the
   two KDEs, with a standard error from the two strata.
4. **Seed and symmetry.** Draws come from ``numpy.random.default_rng(seed)``.
   The two samples are put in a canonical order (by shape, then by a SHA-256
   digest of their bytes) before the streams are assigned, so
   ``hellinger(A, B) == hellinger(B, A)`` exactly.

The estimate is of the distance between the two KDEs, which differs from the
distance between the true densities by a smoothing bias (towards 0) and a
sampling-noise bias (away from 0): two independent samples of one distribution
give a positive "noise floor". See ``docs/derivations-data.md`` for measured
floors and the derivation of the test tolerances.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass

import numpy as np
from scipy.spatial.distance import cdist

__all__ = [
    "DEFAULT_NUM_MC",
    "MIN_NUM_MC",
    "HellingerEstimate",
    "hellinger",
    "hellinger_estimate",
    "gaussian_bhattacharyya",
    "gaussian_hellinger",
    "scott_factor",
]

DEFAULT_NUM_MC = 20000
"""Monte Carlo draws from the mixture of the two KDEs (half from each)."""
MIN_NUM_MC = 100  # fewer Monte Carlo draws are refused

_CHUNK_ELEMENTS = 4_000_000  # kernel evaluations held in memory at once


@dataclass(frozen=True)
class HellingerEstimate:
    """Result of :func:`hellinger_estimate` (the Hellinger distance of Table 1 of 001/002;
    docs/derivations-data.md section 4).

    Attributes
    ----------
    distance : float
        ``sqrt(max(0, 1 - bhattacharyya))``.
    bhattacharyya : float
        Monte Carlo estimate of the Bhattacharyya coefficient of the two KDEs.
    bhattacharyya_se : float
        Its Monte Carlo standard error (stratified, from the two strata).
    distance_se : float
        Delta-method standard error of ``distance``: ``bhattacharyya_se / (2 distance)``
        (``inf`` when the distance is 0).
    num_mc : int
        Number of Monte Carlo draws used.
    bandwidth_factors : tuple of float
        Scott's factors ``n**(-1/(d+4))`` of the first and second sample.
    """

    distance: float
    bhattacharyya: float
    bhattacharyya_se: float
    distance_se: float
    num_mc: int
    bandwidth_factors: tuple


def scott_factor(n: int, d: int) -> float:
    """Scott's bandwidth factor ``n**(-1/(d+4))`` (kernel covariance ``f**2 S``) of the KDEs behind
    Table 1's Hellinger distance (docs/derivations-data.md section 4)."""
    return float(n) ** (-1.0 / (d + 4))


def _as_sample(x, name: str) -> np.ndarray:
    try:
        a = np.asarray(x, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError(f"sample {name} must be an array of numbers") from None
    if a.ndim == 1:
        a = a[:, None]
    if a.ndim != 2:
        raise ValueError(f"sample {name} must be a 2-D array (rows = points), got {a.ndim} dimensions")
    if a.shape[1] < 1:
        raise ValueError(f"sample {name} has no columns")
    if not np.all(np.isfinite(a)):
        row, col = np.argwhere(~np.isfinite(a))[0]
        raise ValueError(f"sample {name} has a non-finite value at row {row}, column {col}")
    if a.shape[0] < a.shape[1] + 2:
        raise ValueError(
            f"sample {name} has {a.shape[0]} points in {a.shape[1]} dimensions; "
            f"a kernel density estimate needs at least {a.shape[1] + 2}"
        )
    return a


class _KDE:
    """Gaussian KDE with Scott's rule: kernel covariance ``f**2 * cov(X)``."""

    def __init__(self, x: np.ndarray, name: str):
        n, d = x.shape
        self.n, self.d = n, d
        self.factor = scott_factor(n, d)
        cov = np.atleast_2d(np.cov(x, rowvar=False))
        eig = np.linalg.eigvalsh(cov)
        chol = None
        if eig[0] > 1e-12 * eig[-1]:
            try:
                chol = np.linalg.cholesky(cov * self.factor**2)
            except np.linalg.LinAlgError:
                chol = None
        if chol is None:
            raise ValueError(
                f"sample {name} has a singular covariance matrix (a constant column or "
                "collinear columns); the kernel density estimate is undefined"
            )
        self.chol = chol
        self.points = x
        # Whitened sample: solve L y = x for every point.
        self.white = np.linalg.solve(chol, x.T).T
        self.log_norm = -0.5 * d * np.log(2 * np.pi) - np.sum(np.log(np.diag(chol))) - np.log(n)

    def sample(self, m: int, rng: np.random.Generator) -> np.ndarray:
        idx = rng.integers(0, self.n, size=m)
        z = rng.standard_normal((m, self.d))
        return self.points[idx] + z @ self.chol.T

    def logpdf(self, q: np.ndarray) -> np.ndarray:
        qw = np.linalg.solve(self.chol, q.T).T
        out = np.empty(q.shape[0])
        step = max(1, _CHUNK_ELEMENTS // self.n)
        for start in range(0, q.shape[0], step):
            sl = slice(start, start + step)
            d2 = cdist(qw[sl], self.white, "sqeuclidean")
            d2 *= -0.5
            total = np.exp(d2).sum(axis=1)
            with np.errstate(divide="ignore"):
                res = np.log(total)
            low = total < 1e-250  # underflow risk: redo those rows stably
            if np.any(low):
                rows = d2[low]
                top = rows.max(axis=1)
                res[low] = top + np.log(np.exp(rows - top[:, None]).sum(axis=1))
            out[sl] = res
        return out + self.log_norm


def _digest(a: np.ndarray) -> bytes:
    return hashlib.sha256(np.ascontiguousarray(a).tobytes()).digest()


def hellinger_estimate(A, B, seed: int = 0, num_mc: int = DEFAULT_NUM_MC) -> HellingerEstimate:
    """Hellinger distance between two sample sets, with its Monte Carlo error.

    See the module docstring for the fixed rule (pooled standardisation,
    Scott's-rule Gaussian KDEs, stratified importance sampling from the
    mixture of the two KDEs). Implements the HD of Table 1 of 001/002.

    Parameters
    ----------
    A, B : array_like, shape (n, d) and (m, d)
        The two samples (a 1-D array is read as one column).
    seed : int, optional
        Seed of the Monte Carlo draws.
    num_mc : int, optional
        Number of Monte Carlo draws (at least 100).

    Returns
    -------
    HellingerEstimate

    Raises
    ------
    ValueError
        For samples that are not finite 2-D arrays with the same number of
        columns, too few points, or a singular covariance.
    """
    a = _as_sample(A, "A")
    b = _as_sample(B, "B")
    if a.shape[1] != b.shape[1]:
        raise ValueError(f"the samples have different dimensions: A has {a.shape[1]} columns, B has {b.shape[1]}")
    if isinstance(num_mc, bool) or not isinstance(num_mc, (int, np.integer)) or num_mc < MIN_NUM_MC:
        raise ValueError(f"num_mc must be an integer >= {MIN_NUM_MC}, got {num_mc!r}")
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    # Canonical order: makes the estimate exactly symmetric in (A, B).
    if (a.shape, _digest(a)) > (b.shape, _digest(b)):
        a, b = b, a
    pooled = np.vstack([a, b])
    mean = pooled.mean(axis=0)
    sd = pooled.std(axis=0)
    if np.any(sd == 0):
        col = int(np.flatnonzero(sd == 0)[0])
        raise ValueError(f"column {col} is constant in both samples; the Hellinger distance is undefined")
    a = (a - mean) / sd
    b = (b - mean) / sd
    kde_a, kde_b = _KDE(a, "A"), _KDE(b, "B")
    rng = np.random.default_rng(int(seed))
    m_a = int(num_mc) // 2
    m_b = int(num_mc) - m_a
    strata = []
    for kde, m in ((kde_a, m_a), (kde_b, m_b)):
        x = kde.sample(m, rng)
        lp = kde_a.logpdf(x)
        lq = kde_b.logpdf(x)
        # log w = 0.5 (lp + lq) - log((p + q) / 2), always <= 0.
        logw = 0.5 * (lp + lq) - (np.logaddexp(lp, lq) - np.log(2.0))
        strata.append(np.exp(np.minimum(logw, 0.0)))
    w_a, w_b = strata
    bc = 0.5 * w_a.mean() + 0.5 * w_b.mean()
    se = 0.5 * np.sqrt(w_a.var(ddof=1) / m_a + w_b.var(ddof=1) / m_b)
    bc = float(min(bc, 1.0))
    hd = float(np.sqrt(max(0.0, 1.0 - bc)))
    hd_se = float(se / (2 * hd)) if hd > 0 else float("inf")
    return HellingerEstimate(
        distance=hd,
        bhattacharyya=bc,
        bhattacharyya_se=float(se),
        distance_se=hd_se,
        num_mc=int(num_mc),
        bandwidth_factors=(kde_a.factor, kde_b.factor),
    )


def hellinger(A, B, seed: int = 0, num_mc: int = DEFAULT_NUM_MC) -> float:
    """Hellinger distance between two sample sets (Table 1 of 001/002).

    ``HD = sqrt(1 - BC)`` with the Bhattacharyya coefficient of the two
    Scott's-rule Gaussian KDEs estimated by importance sampling from their
    mixture; see :func:`hellinger_estimate` for the rule and the standard error.

    Parameters
    ----------
    A, B : array_like, shape (n, d) and (m, d)
        The two samples (a 1-D array is read as one column).
    seed : int, optional
        Seed of the Monte Carlo draws.
    num_mc : int, optional
        Number of Monte Carlo draws.

    Returns
    -------
    float
        The estimated distance, in [0, 1].
    """
    return hellinger_estimate(A, B, seed=seed, num_mc=num_mc).distance


def _as_gaussian(mu, cov, name: str):
    mu = np.atleast_1d(np.asarray(mu, dtype=np.float64))
    cov = np.asarray(cov, dtype=np.float64)
    if mu.ndim != 1:
        raise ValueError(f"{name}: the mean must be a vector")
    d = mu.size
    if cov.ndim == 0:
        cov = cov.reshape(1, 1)
    if cov.shape != (d, d):
        raise ValueError(f"{name}: the covariance must have shape ({d}, {d}), got {cov.shape}")
    if not (np.all(np.isfinite(mu)) and np.all(np.isfinite(cov))):
        raise ValueError(f"{name}: mean and covariance must be finite")
    if not np.allclose(cov, cov.T, rtol=1e-10, atol=0):
        raise ValueError(f"{name}: the covariance must be symmetric")
    try:
        np.linalg.cholesky(cov)
    except np.linalg.LinAlgError:
        raise ValueError(f"{name}: the covariance must be positive definite") from None
    return mu, cov


def gaussian_bhattacharyya(mu1, cov1, mu2, cov2) -> float:
    """Closed-form Bhattacharyya coefficient of two Gaussians (docs/derivations-data.md section 4).

    ``BC = det(S1)^(1/4) det(S2)^(1/4) / det(S)^(1/2) * exp(-(mu1-mu2)' S^-1 (mu1-mu2) / 8)``
    with ``S = (S1 + S2) / 2``.

    Parameters
    ----------
    mu1, mu2 : array_like, shape (d,) or scalar
        Means.
    cov1, cov2 : array_like, shape (d, d) or scalar
        Covariance matrices (in 1-D a scalar is the *variance*).

    Returns
    -------
    float
    """
    mu1, cov1 = _as_gaussian(mu1, cov1, "first Gaussian")
    mu2, cov2 = _as_gaussian(mu2, cov2, "second Gaussian")
    if mu1.size != mu2.size:
        raise ValueError(f"the Gaussians have different dimensions ({mu1.size} and {mu2.size})")
    s = 0.5 * (cov1 + cov2)
    diff = mu1 - mu2
    maha = float(diff @ np.linalg.solve(s, diff))
    logdet = lambda m: np.linalg.slogdet(m)[1]  # noqa: E731
    log_bc = 0.25 * logdet(cov1) + 0.25 * logdet(cov2) - 0.5 * logdet(s) - maha / 8.0
    return float(np.exp(log_bc))


def gaussian_hellinger(mu1, cov1, mu2, cov2) -> float:
    """Closed-form Hellinger distance ``sqrt(1 - BC)`` of two Gaussians (docs/derivations-data.md section 4).

    Same normalisation as :func:`hellinger` (values in [0, 1]); see
    :func:`gaussian_bhattacharyya` for the arguments.

    Returns
    -------
    float
    """
    bc = gaussian_bhattacharyya(mu1, cov1, mu2, cov2)
    return float(np.sqrt(max(0.0, 1.0 - bc)))
