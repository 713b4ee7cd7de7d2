"""The three synthetic 2-D density data sets of Table 1 of 001/002.

The papers show the sets (Fig. 4 of 002, Fig. 1 of 001) but give no
parameters; the ones below are fixed here and documented in
``docs/derivations-data.md``. Every point is drawn independently (the mixture
component of each point is random too), so the points are i.i.d. draws from a
fixed density and any split of them is a fair train/test split.

The true log-density of each generator (:func:`log_density`, per generator
:func:`ring_log_density`, :func:`two_moons_log_density`,
:func:`pinwheel_log_density`) is derived in ``docs/derivations-data.md``
section 1.1: closed form for the ring, one-dimensional quadrature for the two
moons, a sum over every preimage of the twist map for the pinwheel.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import logsumexp

__all__ = ["GENERATORS", "PARAMETERS", "LOG_DENSITIES", "ring", "two_moons", "pinwheel", "log_density",
           "ring_log_density", "two_moons_log_density", "pinwheel_log_density", "pinwheel_preimages"]

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
    """Points on a noisy circle (the ``ring`` set of Table 1 of 002, section 4.1;
    docs/derivations-data.md section 1).

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
    """Two interleaved half circles (the ``make_moons`` shape of scikit-learn; the ``two-moons`` set of
    Table 1 of 002, section 4.1; docs/derivations-data.md section 1).

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
    models with neural networks"; the ``pinwheel`` set of Table 1 of 002, section 4.1;
    docs/derivations-data.md section 1).

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


# ------------------------------------------------------------------ true densities
#
# The generators define their densities; docs/derivations-data.md section 1.1 derives
# each formula below. The log-densities are in the coordinates the generators return,
# which are the coordinates of ``chefs.datasets.load`` (no rescaling; dequantisation
# leaves the synthetic columns unchanged because they have no ties).

_LOG_2PI = math.log(2.0 * math.pi)

#: Gauss-Legendre nodes per panel and number of geometrically graded panels of the
#: two-moons arc integral (docs/derivations-data.md section 1.1: the innermost panel is
#: pi * 2**-GRADING wide, narrower than the noise's angular width for any point within
#: 1e6 of the moons).
_GL_NODES = 8
_GRADING = 16

#: Tail level of the pinwheel's exact evaluation: points farther from the origin than
#: ``1 + PINWHEEL_Z * (radial_sd + tangential_sd)`` carry probability below 1e-300 (each
#: Gaussian beyond 37.5 sd) and get log-density -inf (the number of preimages grows like
#: rate * exp(radius)).
PINWHEEL_Z = 37.5
_MAX_ROOTS = 2_000_000  # preimages per block of points in pinwheel_preimages (memory bound)


def _check_points(X) -> np.ndarray:
    try:
        X = np.asarray(X, dtype=np.float64)
    except (TypeError, ValueError):
        raise ValueError("points must be an array of numbers of shape (n, 2)") from None
    if X.ndim != 2 or X.shape[1] != 2:
        raise ValueError(f"points must have shape (n, 2) (one row per point), got shape {X.shape}")
    if not np.all(np.isfinite(X)):
        raise ValueError("points must be finite (no NaN or infinity)")
    return X


def _check_positive(**kw) -> None:
    for name, v in kw.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) \
                or not (np.isfinite(v) and v > 0):
            raise ValueError(f"{name} must be a positive finite number, got {v!r}")


def _check_finite(**kw) -> None:
    for name, v in kw.items():
        if isinstance(v, bool) or not isinstance(v, (int, float, np.integer, np.floating)) or not np.isfinite(v):
            raise ValueError(f"{name} must be a finite number, got {v!r}")


def _log_normal(x, mean, sd):
    return -0.5 * ((x - mean) / sd) ** 2 - math.log(sd) - 0.5 * _LOG_2PI


def ring_log_density(X, radius: float = 1.0, radial_sd: float = 0.1) -> np.ndarray:
    """Exact log-density of :func:`ring` (docs/derivations-data.md section 1.1).

    The map ``(r, t) -> (r cos t, r sin t)`` has Jacobian ``|r|``, and a point at
    distance ``rho > 0`` from the origin and angle ``phi`` has two preimages,
    ``(rho, phi)`` and ``(-rho, phi + pi)`` (a negative radius draw lands opposite
    its angle), so

    ``p(x) = [N(rho; radius, radial_sd^2) + N(-rho; radius, radial_sd^2)] / (2 pi rho)``.

    Parameters
    ----------
    X : array_like, shape (n, 2)
        Points.
    radius, radial_sd : float, optional
        The generator's parameters (:data:`PARAMETERS` ``["ring"]``).

    Returns
    -------
    numpy.ndarray, shape (n,)
        ``log p(x)`` per point (``+inf`` at the origin, where the density has an
        integrable singularity).
    """
    X = _check_points(X)
    _check_finite(radius=radius)
    _check_positive(radial_sd=radial_sd)
    rho = np.hypot(X[:, 0], X[:, 1])
    with np.errstate(divide="ignore"):
        return (np.logaddexp(_log_normal(rho, radius, radial_sd), _log_normal(-rho, radius, radial_sd))
                - _LOG_2PI - np.log(rho))


def _graded_nodes():
    """Nodes in (0, 1] and weights of the graded rule for ``int_0^1 f`` with the
    integrand's peak at 0: panels ``[2^-(j+1), 2^-j]`` (j < GRADING) and
    ``[0, 2^-GRADING]``, each with ``_GL_NODES`` Gauss-Legendre nodes."""
    z, w = np.polynomial.legendre.leggauss(_GL_NODES)
    edges = np.concatenate([[0.0], 2.0 ** -np.arange(_GRADING, -1, -1)])
    lo, hi = edges[:-1, None], edges[1:, None]
    nodes = (lo + (z[None, :] + 1.0) * (hi - lo) / 2.0).ravel()
    weights = (w[None, :] * (hi - lo) / 2.0).ravel()
    return nodes, weights


_ARC_NODES, _ARC_WEIGHTS = _graded_nodes()
_ARC_LOG_WEIGHTS = np.log(_ARC_WEIGHTS)


def _log_half_circle_integral(kappa, phi, start):
    """``log int_start^{start+pi} exp(-kappa (1 - cos(t - phi))) dt`` per point.

    The integrand peaks at the point ``t*`` of the arc nearest (around the circle) to
    ``phi``; the arc is split at ``t*`` and each part integrated with panels graded
    geometrically towards ``t*`` (:func:`_graded_nodes`), so the peak, of angular width
    ``kappa^-1/2``, is resolved for every ``kappa`` that occurs (docs/derivations-data.md
    section 1.1). ``1 - cos d`` is evaluated as ``2 sin^2(d / 2)``."""
    d = np.mod(phi - start, 2.0 * np.pi)  # peak's position from the arc's start, in [0, 2 pi)
    inside = d <= np.pi
    # outside the arc the nearer end is the peak of the integrand on the arc
    t_star = np.where(inside, d, np.where(d - np.pi < 2.0 * np.pi - d, np.pi, 0.0))
    parts = []
    for length, sign in ((t_star, -1.0), (np.pi - t_star, 1.0)):  # [0, t*] and [t*, pi], measured from t*
        s = t_star[:, None] + sign * length[:, None] * _ARC_NODES[None, :]  # arc coordinate of each node
        half = 0.5 * (s - d[:, None])
        with np.errstate(divide="ignore"):
            logw = _ARC_LOG_WEIGHTS[None, :] + np.log(length)[:, None]
        parts.append(logsumexp(-2.0 * kappa[:, None] * np.sin(half) ** 2 + logw, axis=1))
    return np.logaddexp(parts[0], parts[1])


def two_moons_log_density(X, noise_sd: float = 0.1) -> np.ndarray:
    """Log-density of :func:`two_moons` by one-dimensional quadrature
    (docs/derivations-data.md section 1.1).

    Each moon is a half circle of radius 1 with a uniform angle, convolved with
    ``N(0, noise_sd^2 I)``: the upper moon has centre ``(0, 0)`` and angles
    ``[0, pi]``, the lower ``(1 - cos t, 1/2 - sin t)`` has centre ``(1, 1/2)`` and
    angles ``[pi, 2 pi]``. With ``rho``, ``phi`` the polar coordinates of ``x`` about a
    moon's centre and ``kappa = rho / noise_sd^2``,

    ``p_moon(x) = exp(-(rho - 1)^2 / (2 noise_sd^2)) / (2 pi noise_sd^2)
    * (1/pi) int_arc exp(-kappa (1 - cos(t - phi))) dt``

    and ``p = (p_upper + p_lower) / 2``. The arc integral (an incomplete Bessel
    function) is computed in log space by graded Gauss-Legendre quadrature; its
    error is below 1e-12 relative (checked against adaptive quadrature in the tests).

    Parameters
    ----------
    X : array_like, shape (n, 2)
        Points.
    noise_sd : float, optional
        The generator's noise (:data:`PARAMETERS` ``["two-moons"]``).

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    X = _check_points(X)
    _check_positive(noise_sd=noise_sd)
    var = float(noise_sd) ** 2
    out = []
    for (cx, cy), start in (((0.0, 0.0), 0.0), ((1.0, 0.5), np.pi)):
        dx, dy = X[:, 0] - cx, X[:, 1] - cy
        rho = np.hypot(dx, dy)
        phi = np.arctan2(dy, dx)
        out.append(-(rho - 1.0) ** 2 / (2.0 * var) - math.log(2.0 * np.pi * var) - math.log(np.pi)
                   + _log_half_circle_integral(rho / var, phi, start))
    return np.logaddexp(out[0], out[1]) - math.log(2.0)


def _bisect(f, lo, hi, increasing, iterations: int = 64):
    """Vectorised bisection for a root of ``f`` in ``[lo, hi]`` where ``f`` is
    monotone (increasing where ``increasing`` is true, else decreasing); returns the
    final bracket ``(lo, hi)``."""
    lo, hi = lo.copy(), hi.copy()
    for _ in range(iterations):
        mid = 0.5 * (lo + hi)
        below = (f(mid) < 0.0) == increasing  # the root is above mid
        lo = np.where(below, mid, lo)
        hi = np.where(below, hi, mid)
    return lo, hi


BISECTIONS, NEWTONS = 24, 3


def _solve_monotone(f, fprime, lo, hi, increasing):
    """Root of a monotone ``f`` in ``[lo, hi]``: bisection to a bracket of width
    ``2^-40 (hi - lo)``, then two Newton steps kept inside the bracket."""
    lo, hi = _bisect(f, lo, hi, increasing, iterations=BISECTIONS)
    b = 0.5 * (lo + hi)
    for _ in range(NEWTONS):
        d = fprime(b)
        with np.errstate(divide="ignore", invalid="ignore"):
            step = np.where(d != 0.0, f(b) / d, 0.0)
        b = np.clip(b - step, lo, hi)
    return b


def pinwheel_preimages(X, num_arms: int = 5, radial_sd: float = 0.3, tangential_sd: float = 0.05,
                       rate: float = 0.25):
    """Every preimage ``(arm, u, v)`` of each point under the pinwheel map
    ``T_k(u, v) = R(2 pi k / num_arms + rate exp(u)) (u, v)``
    (docs/derivations-data.md section 1.1).

    ``T_k`` keeps the norm, so a preimage of ``x`` (polar ``rho``, ``psi``) is
    ``(u, v) = rho (cos b, sin b)`` with ``h(b) = b + rate exp(rho cos b)`` equal to
    ``psi - 2 pi k / num_arms`` modulo ``2 pi``; over all arms, ``h(b)`` on a level
    ``psi + 2 pi j / num_arms`` (j integer; the arm is ``-j mod num_arms``). ``h`` is
    increasing except, when ``rate rho max_b sin b exp(rho cos b) > 1``, on one
    interval ``(b1, b2)`` of ``(0, pi)`` where it decreases; on each monotone piece
    every level is met once and the root is found by bisection. The map is therefore
    not injective in general (folds where ``1 - rate exp(u) v = 0``), and this returns
    all preimages. Negative ``rate`` is the mirror image (``y -> -y``) of ``|rate|``.

    Parameters
    ----------
    X : array_like, shape (n, 2)
        Points.
    num_arms, radial_sd, tangential_sd, rate
        The generator's parameters (:data:`PARAMETERS` ``["pinwheel"]``).

    Returns
    -------
    dict of numpy.ndarray
        ``point`` (row of ``X``), ``arm``, ``u``, ``v`` and ``jacobian``
        (``1 - rate exp(u) v``, the determinant of ``T_k``'s derivative) of each
        preimage; the origin has the single preimage ``u = v = 0`` (listed once, arm
        0). Points beyond :data:`PINWHEEL_Z` (see :func:`pinwheel_log_density`) have
        none listed.
    """
    X = _check_points(X)
    if isinstance(num_arms, bool) or not isinstance(num_arms, (int, np.integer)) or num_arms < 1:
        raise ValueError(f"num_arms must be a positive integer, got {num_arms!r}")
    _check_positive(radial_sd=radial_sd, tangential_sd=tangential_sd)
    _check_finite(rate=rate)
    K, c = int(num_arms), float(rate)
    if c < 0:  # mirror image: T with rate -c is M T M with M = diag(1, -1) and arm k -> -k
        res = pinwheel_preimages(X * np.array([1.0, -1.0]), K, radial_sd, tangential_sd, -c)
        res["v"] = -res["v"]
        res["arm"] = np.mod(-res["arm"], K)
        return res
    rho = np.hypot(X[:, 0], X[:, 1])
    psi = np.arctan2(X[:, 1], X[:, 0])
    rho_max = 1.0 + PINWHEEL_Z * (radial_sd + tangential_sd)
    step = 2.0 * np.pi / K
    origin = np.flatnonzero(rho == 0.0)
    ok = np.flatnonzero((rho > 0.0) & (rho <= rho_max))
    r, ps = rho[ok], psi[ok]

    def h(b, rr):
        return b + c * np.exp(rr * np.cos(b))

    # monotone pieces of h on [0, 2 pi): h' = 1 - c rho sin(b) exp(rho cos b); s(b) = sin(b) exp(rho cos b)
    # is unimodal on (0, pi) with its maximum at cos b* = (sqrt(1 + 4 rho^2) - 1) / (2 rho)
    b_star = np.arccos((np.sqrt(1.0 + 4.0 * r**2) - 1.0) / (2.0 * r))
    fold = c * r * np.sin(b_star) * np.exp(r * np.cos(b_star)) > 1.0
    f_idx = np.flatnonzero(fold)
    rf = r[f_idx]

    def hprime(b):
        return 1.0 - c * rf * np.sin(b) * np.exp(rf * np.cos(b))

    b1 = np.mean(_bisect(hprime, np.zeros_like(rf), b_star[f_idx], increasing=False), axis=0)
    b2 = np.mean(_bisect(hprime, b_star[f_idx], np.full_like(rf, np.pi), increasing=True), axis=0)
    # pieces (point, start, end, increasing): one piece [0, 2 pi] without a fold, three with
    nf = np.flatnonzero(~fold)
    p_pt = np.concatenate([nf, f_idx, f_idx, f_idx])
    p_a = np.concatenate([np.zeros(nf.size), np.zeros(f_idx.size), b1, b2])
    p_b = np.concatenate([np.full(nf.size, 2.0 * np.pi), b1, b2, np.full(f_idx.size, 2.0 * np.pi)])
    p_inc = np.concatenate([np.ones(nf.size, bool), np.ones(f_idx.size, bool), np.zeros(f_idx.size, bool),
                            np.ones(f_idx.size, bool)])
    ha, hb = h(p_a, r[p_pt]), h(p_b, r[p_pt])
    # levels psi + j step in [min, max) of the piece's h; h(2 pi) = h(0) + 2 pi is excluded so
    # that b = 0 and b = 2 pi count once
    lo, hi = np.minimum(ha, hb), np.maximum(ha, hb)
    j0 = np.ceil((lo - ps[p_pt]) / step)
    j1 = np.ceil((hi - ps[p_pt]) / step)
    counts = np.maximum(j1 - j0, 0).astype(np.int64)
    point_l, arm_l, u_l, v_l = [], [], [], []
    starts = np.concatenate([[0], np.cumsum(counts)])
    first = 0
    while first < counts.size:  # blocks of pieces with at most _MAX_ROOTS preimages
        last = int(np.searchsorted(starts, starts[first] + _MAX_ROOTS, side="right")) - 1
        last = max(last, first + 1)
        sel = slice(first, last)
        n = counts[sel]
        rep = np.repeat(np.arange(first, last), n)
        offset = np.arange(rep.size) - np.repeat(starts[first:last] - starts[first], n)
        j = j0[rep] + offset
        pt = p_pt[rep]
        level = ps[pt] + j * step
        rr = r[pt]
        b = _solve_monotone(lambda x: h(x, rr) - level,
                            lambda x: 1.0 - c * rr * np.sin(x) * np.exp(rr * np.cos(x)),
                            p_a[rep], p_b[rep], p_inc[rep])
        point_l.append(ok[pt])
        arm_l.append(np.mod(-j, K).astype(np.int64))
        u_l.append(rr * np.cos(b))
        v_l.append(rr * np.sin(b))
        first = last
    point_l.append(origin)
    arm_l.append(np.zeros(origin.size, np.int64))
    u_l.append(np.zeros(origin.size))
    v_l.append(np.zeros(origin.size))
    u, v = np.concatenate(u_l), np.concatenate(v_l)
    return {"point": np.concatenate(point_l), "arm": np.concatenate(arm_l), "u": u, "v": v,
            "jacobian": 1.0 - c * np.exp(u) * v}


def pinwheel_log_density(X, num_arms: int = 5, radial_sd: float = 0.3, tangential_sd: float = 0.05,
                         rate: float = 0.25) -> np.ndarray:
    """Exact log-density of :func:`pinwheel`: change of variables summed over every
    preimage (docs/derivations-data.md section 1.1).

    ``p(x) = (1 / num_arms) sum_k sum_{(u, v): T_k(u, v) = x}
    N(u; 1, radial_sd^2) N(v; 0, tangential_sd^2) / |1 - rate exp(u) v|``,

    with the preimages of :func:`pinwheel_preimages` (at the origin the one
    preimage ``u = v = 0`` serves every arm). Points farther from the origin than
    ``1 + PINWHEEL_Z (radial_sd + tangential_sd)`` (14.1 with the fixed parameters),
    a region of probability below 1e-300, are not evaluated and get ``-inf``.

    Parameters
    ----------
    X : array_like, shape (n, 2)
        Points.
    num_arms, radial_sd, tangential_sd, rate
        The generator's parameters (:data:`PARAMETERS` ``["pinwheel"]``).

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    X = _check_points(X)
    pre = pinwheel_preimages(X, num_arms, radial_sd, tangential_sd, rate)
    terms = (_log_normal(pre["u"], 1.0, radial_sd) + _log_normal(pre["v"], 0.0, tangential_sd)
             - np.log(np.abs(pre["jacobian"])))
    at_origin = (pre["u"] == 0.0) & (pre["v"] == 0.0)
    terms = np.where(at_origin, terms + math.log(num_arms), terms)  # every arm's preimage is the origin
    return _group_logsumexp(pre["point"], terms, X.shape[0]) - math.log(num_arms)


def _group_logsumexp(group, values, n) -> np.ndarray:
    """``log sum exp`` of ``values`` within each group ``0..n-1`` (-inf for an empty one)."""
    top = np.full(n, -np.inf)
    np.maximum.at(top, group, values)
    shift = np.where(np.isfinite(top), top, 0.0)
    total = np.bincount(group, weights=np.exp(values - shift[group]), minlength=n)
    with np.errstate(divide="ignore"):
        return np.log(total) + shift


LOG_DENSITIES = {"ring": ring_log_density, "two-moons": two_moons_log_density, "pinwheel": pinwheel_log_density}
"""Name -> true log-density ``f(X) -> (n,)`` of the generator of :data:`GENERATORS`."""


def log_density(name: str, X) -> np.ndarray:
    """True log-density of a synthetic data set's generator at the points ``X``,
    with the fixed :data:`PARAMETERS` (docs/derivations-data.md section 1.1).

    Parameters
    ----------
    name : str
        ``"ring"``, ``"two-moons"`` or ``"pinwheel"``.
    X : array_like, shape (n, 2)
        Points, in the coordinates of :func:`chefs.datasets.load`.

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    if name not in LOG_DENSITIES:
        raise ValueError(f"no true density for {name!r}: it is known for the synthetic sets "
                         f"({', '.join(LOG_DENSITIES)})")
    return LOG_DENSITIES[name](X, **PARAMETERS[name])
