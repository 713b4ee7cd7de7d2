"""Density estimation with an ICP-structured nonlinear Gaussian belief network
(002 section 4.1), in the scikit-learn style::

    net = chefs.BeliefNetwork(sweeps=600, burn_in=300, seed=0).fit(X_train)
    fantasy = net.sample(2000)                 # fantasy data (posterior predictive)
    logp = net.score_samples(X_test)           # held-out log-density per point

Data are mapped into (0, 1) per column by :class:`UnitMap` (per principal axis
of the standardised data when it is rotated: ``rotate``; with the outer tails
compressed: ``tails``); densities reported
in data space include its Jacobian. Held-out log-densities are importance
sampling estimates (hidden units drawn from their prior, ancestrally) averaged
over posterior samples.
"""

from __future__ import annotations

import json
import math
import shutil
import tempfile
import warnings
import weakref
from dataclasses import dataclass
from pathlib import Path

import numpy as np
from scipy.special import logsumexp

from .datasets.files import MAX_ABS_VALUE
from .mcmc.chain import ChainConfig
from .mcmc.run import STOP_FILE, check_run_settings, create_run, load_spec, run_chains
# posterior samples as arrays, ancestral draws, importance-sampled densities (re-exported here)
from .models.predictive import SampleArrays, ancestral, log_density_unit, sample_arrays  # noqa: F401

#: default margin of the unit map (docs/derivations.md section 3.1: 0.1 fits the real data sets better and the
#: README's two-moons worse; measured again at stop 29 and kept)
MARGIN = 0.3
LEGACY_MARGIN = 0.3  # runs written before the margin was stored used this one
#: ``margin="auto"`` (an option; docs/derivations.md 3.18): AUTO_MARGIN_MANY on data with at least AUTO_MARGIN_COLUMNS
#: columns, AUTO_MARGIN_FEW on fewer. Stop 29 found 0.1 better on every real multi-column set before the rotation
#: existed; on top of the rotation (stop 42) it helps wine and abalone and hurts iris and cloud, so it is not the default
AUTO_MARGIN_COLUMNS = 3
AUTO_MARGIN_MANY = 0.1
AUTO_MARGIN_FEW = 0.3
PILOTS = 3  # default multi-start pilots per chain (docs/derivations.md section 3.7)
#: importance draws per training point in the pilots' score (docs/derivations.md 3.7 and 3.9: 32 misranks
#: states by hundreds of nats; 512 ranks them). 512 with the non-centred updates since stop 49 (NONCENTRED; 3.26, 3.27)
PILOT_DRAWS = 512
LEGACY_PILOT_DRAWS = 32  # runs written before the setting was stored, and the default until stop 49
#: default of ``pilot_structures``: each pilot after the first starts from its own draw of the starting structure
#: (docs/derivations.md 3.28). Off: rule 11 (stop 50) found it fixing ring's failed chains and lowering all three
#: priors' mean HD, but the ICP then ahead of both layered priors on 6 of 9 sets, not 7
PILOT_STRUCTURES = False
#: default of ``noncentred``: the non-centred updates of each hidden unit's precision and incoming scale (3.24),
#: on since stop 49 (rules 7-9, docs/derivations.md 3.26 and 3.27); off in causal discovery (3.8, stop 47)
NONCENTRED = True
#: default of ``rotate``: the unit map acts on the standardised data's principal axes (docs/derivations.md 3.14)
#: when the data have a thin axis (``"auto"``, :func:`thin_axis`; docs/derivations.md 3.15)
ROTATE = "auto"
#: ``rotate="auto"`` rotates data with at least THIN_AXIS_COLUMNS columns whose correlation matrix has an
#: eigenvalue below THIN_AXIS: a direction with less than a tenth of an average axis's variance
THIN_AXIS = 0.1
THIN_AXIS_COLUMNS = 3
#: default of ``tails``: compress the outer tails of the axes where the map is rotated (``"auto"``; stop 40's second
#: pre-registered rule, docs/derivations.md 3.17)
TAILS = "auto"
#: a tail is the training data beyond the TAIL_QUANTILE and 1 - TAIL_QUANTILE quantiles of an axis; the central
#: range between them goes onto [-1, 1] and each tail onto at most TAIL_LENGTH beside it (never stretched)
TAIL_QUANTILE = 0.001
TAIL_LENGTH = 0.1
#: rows a belief network needs to fit (as causal discovery's ``check_causal_data``): fewer leave the unit map's range
#: and every posterior to a handful of points (stop 45's CLI audit found a 2-row CSV accepted)
MIN_FIT_ROWS = 10
MIN_MARGIN = 1e-6  # below it 1 - margin rounds towards 1 and the logit of the data overflows


def check_weight_prior(weight_prior):
    """``weight_prior``: None (W ~ N(0, 1) fixed) or (shape, rate), two positive finite numbers, returned as a
    list of floats; anything else is a ``ValueError`` that echoes the value given."""
    if weight_prior is None:
        return None
    vals = None
    if not isinstance(weight_prior, (str, bytes)):
        try:
            vals = [float(v) for v in weight_prior]
        except (TypeError, ValueError):
            vals = None
    if vals is None or len(vals) != 2 or not all(v > 0 and np.isfinite(v) for v in vals):
        raise ValueError(f"weight_prior must be None or (shape, rate) with both > 0, got {weight_prior!r}")
    return vals


def check_pilot_structures(value) -> bool:
    """``pilot_structures`` as a bool; anything but True or False is refused."""
    from .models.nlgbn import check_flag

    return check_flag("pilot_structures", value)


def check_margin(margin, allow_auto: bool = True) -> float | str:
    """A unit-map margin: a number in [MIN_MARGIN, 0.5) (docs/derivations.md section 3.1), or
    ``"auto"`` (:func:`resolve_margin`) unless ``allow_auto`` is False."""
    if allow_auto and isinstance(margin, str) and margin == "auto":
        return "auto"
    if isinstance(margin, bool) or not isinstance(margin, (int, float, np.integer, np.floating)) \
            or not MIN_MARGIN <= float(margin) < 0.5:
        what = " or 'auto'" if allow_auto else ""
        raise ValueError(f"margin must be a number in [{MIN_MARGIN:g}, 0.5){what}, got {margin!r}")
    return float(margin)


def resolve_margin(margin, num_columns: int) -> float:
    """The margin a unit map of ``num_columns`` columns uses: ``margin`` itself when it is a
    number; for ``"auto"``, :data:`AUTO_MARGIN_MANY` with at least :data:`AUTO_MARGIN_COLUMNS`
    columns and :data:`AUTO_MARGIN_FEW` with fewer (docs/derivations.md 3.18)."""
    margin = check_margin(margin)
    if margin != "auto":
        return margin
    return AUTO_MARGIN_MANY if int(num_columns) >= AUTO_MARGIN_COLUMNS else AUTO_MARGIN_FEW


def check_rotate(rotate) -> bool | str:
    """The ``rotate`` setting of the unit map: True, False or ``"auto"`` (docs/derivations.md
    sections 3.14-3.15)."""
    if isinstance(rotate, str) and rotate == "auto":
        return "auto"
    if not isinstance(rotate, (bool, np.bool_)):
        raise ValueError(f"rotate must be True, False or 'auto', got {rotate!r}")
    return bool(rotate)


def check_tails(tails) -> bool | str:
    """The ``tails`` setting of the unit map: True, False or ``"auto"`` (docs/derivations.md 3.17)."""
    if isinstance(tails, str) and tails == "auto":
        return "auto"
    if not isinstance(tails, (bool, np.bool_)):
        raise ValueError(f"tails must be True, False or 'auto', got {tails!r}")
    return bool(tails)


def tail_knots(Z: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """The compressed-tails map of each column of ``Z`` (docs/derivations.md 3.17): knots
    ``(2, D)``, the TAIL_QUANTILE and 1 - TAIL_QUANTILE quantiles, and slopes ``(3, D)``
    below, between and above them. The central range goes onto [-1, 1] (slope ``2 / range``);
    each tail, from the quantile to the training extreme, onto ``TAIL_LENGTH`` beside it when
    that compresses it, and otherwise keeps the central slope. An axis whose central range is
    empty keeps one slope throughout (its knots are its extremes)."""
    lo, hi = Z.min(axis=0), Z.max(axis=0)
    qlo, qhi = np.quantile(Z, TAIL_QUANTILE, axis=0), np.quantile(Z, 1 - TAIL_QUANTILE, axis=0)
    empty = ~(qhi > qlo)
    qlo, qhi = np.where(empty, lo, qlo), np.where(empty, hi, qhi)
    mid = 2.0 / (qhi - qlo)
    with np.errstate(divide="ignore"):
        below = np.minimum(mid, TAIL_LENGTH / (qlo - lo))
        above = np.minimum(mid, TAIL_LENGTH / (hi - qhi))
    return np.stack([qlo, qhi]), np.stack([below, mid, above])


def thin_axis(X) -> bool:
    """``rotate="auto"``'s rule (docs/derivations.md 3.15): does ``X`` have at least
    :data:`THIN_AXIS_COLUMNS` columns and a principal axis of its standardised columns with
    variance below :data:`THIN_AXIS` (the smallest eigenvalue of the correlation matrix)?"""
    X = check_data(X)
    if X.shape[1] < THIN_AXIS_COLUMNS:
        return False
    const = np.flatnonzero(X.std(axis=0) == 0)
    if const.size:
        raise ValueError(f"column(s) {const.tolist()} are constant: they have no correlation")
    return _has_thin_axis(_standardise(X)[2])


def _standardise(X):
    """``(center, spread, (X - center) / spread)``: the training mean and standard deviation."""
    center, spread = X.mean(axis=0), X.std(axis=0)
    return center, spread, (X - center) / spread


def _has_thin_axis(S) -> bool:
    """:func:`thin_axis` on standardised columns ``S`` (``S.T @ S / n`` is their correlation matrix)."""
    return S.shape[1] >= THIN_AXIS_COLUMNS and bool(np.linalg.eigvalsh(S.T @ S / len(S))[0] < THIN_AXIS)


@dataclass
class UnitMap:
    """Per-column affine map of the training range onto [margin, 1 - margin], optionally after
    a rotation of the standardised data onto its principal axes and a compression of each
    axis's outer tails.

    003 section 4 scales the data onto the sigmoid's whole range; the margin and
    the Jacobian added to data-space densities are in docs/derivations.md section 3.1.
    With ``rotate=True`` (docs/derivations.md section 3.14) each column is first standardised
    by the training mean and standard deviation and the result rotated onto the eigenvectors of
    the training correlation matrix (``z = ((x - center) / spread) @ rotation``), and the range
    map acts on ``z``. The rotation is orthogonal, so the Jacobian adds ``-sum(log spread)`` only.
    With ``tails`` (docs/derivations.md section 3.17) each axis ``z`` first goes through a
    monotone piecewise-linear map (:func:`tail_knots`) that compresses its outer tails, so that
    one isolated extreme does not set the scale of the bulk; the Jacobian then differs from
    point to point (:meth:`log_jacobian_points`).
    """

    lo: np.ndarray
    hi: np.ndarray
    margin: float = MARGIN
    center: np.ndarray | None = None     # rotate=True: the training mean,
    spread: np.ndarray | None = None     # its standard deviation per column,
    rotation: np.ndarray | None = None   # and the (D, D) orthogonal matrix of principal axes
    knots: np.ndarray | None = None      # tails: (2, D) inner ends of the tails (tail_knots),
    slopes: np.ndarray | None = None     # and (3, D) slopes below, between and above them

    @classmethod
    def fit(cls, X: np.ndarray, margin: float = MARGIN, rotate: bool | str = False,
            tails: bool | str = False) -> "UnitMap":
        """The map of ``X``'s range; ``rotate``: True, False, or ``"auto"`` (rotate where
        :func:`thin_axis` holds and no direction is exactly flat, which ``rotate=True`` refuses);
        ``tails``: True, False, or ``"auto"`` (compress the tails where the map is rotated)."""
        margin = check_margin(margin)
        rotate = check_rotate(rotate)
        tails = check_tails(tails)
        X = check_data(X)
        margin = resolve_margin(margin, X.shape[1])
        lo, hi = X.min(axis=0), X.max(axis=0)
        const = np.flatnonzero(hi <= lo)
        if const.size:
            raise ValueError(f"column(s) {const.tolist()} are constant: a density over them is degenerate; drop them")
        Z, rot = X, {}
        if rotate is not False:
            center, spread, S = _standardise(X)
            if rotate is True or _has_thin_axis(S):
                rotation = principal_axes(S)
                R = S @ rotation
                zlo, zhi = R.min(axis=0), R.max(axis=0)
                flat = np.flatnonzero(zhi - zlo <= 1e-9 * np.maximum(1.0, np.abs(zhi).max()))
                if flat.size and rotate is True:
                    raise ValueError(f"the data have {flat.size} exactly collinear direction(s): a density over them "
                                     "is degenerate; drop the redundant column(s) or fit without rotate")
                if not flat.size:  # "auto" leaves what rotate=True refuses unrotated
                    Z, rot = R, {"center": center, "spread": spread, "rotation": rotation}
        if tails is True or (tails == "auto" and rot):
            knots, slopes = tail_knots(Z)
            if _num_compressed(slopes):  # with no tail to compress the map stays affine
                Z, rot = _compress(Z, knots, slopes), {**rot, "knots": knots, "slopes": slopes}
        return cls(Z.min(axis=0), Z.max(axis=0), margin, **rot)

    @property
    def rotated(self) -> bool:
        return self.rotation is not None

    @property
    def tailed(self) -> bool:
        """Are the axes' outer tails compressed (``tails``)?"""
        return self.knots is not None

    @property
    def compressed_tails(self) -> int:
        """How many outer tails (two per axis at most) the map compresses."""
        return _num_compressed(self.slopes) if self.tailed else 0

    @property
    def scale(self) -> np.ndarray:
        return (1 - 2 * self.margin) / (self.hi - self.lo)

    def _axes(self, X):
        """The axes the range map acts on, before the tails' compression."""
        X = np.asarray(X, float)
        return ((X - self.center) / self.spread) @ self.rotation if self.rotated else X

    def forward(self, X):
        Z = self._axes(X)
        if self.tailed:
            Z = _compress(Z, self.knots, self.slopes)
        return self.margin + (Z - self.lo) * self.scale

    def inverse(self, U):
        Z = self.lo + (np.asarray(U, float) - self.margin) / self.scale
        if self.tailed:
            Z = _expand(Z, self.knots, self.slopes)
        if self.rotated:
            return (Z @ self.rotation.T) * self.spread + self.center
        return Z

    def log_jacobian(self, columns=None) -> float:
        """``log |d forward / d x|`` of a map whose Jacobian is the same for every point (no
        ``tails``: :meth:`log_jacobian_points`); over ``columns`` only (a conditional model's
        outputs) when given, which a rotated map cannot split."""
        if self.tailed:
            raise ValueError("a unit map with compressed tails has a Jacobian per point: use log_jacobian_points")
        if columns is None:
            return self._log_jacobian_affine()
        if self.rotated:
            raise ValueError("a rotated unit map mixes the columns: its Jacobian has no per-column part")
        return float(np.sum(np.log(self.scale[list(columns)])))

    def log_jacobian_points(self, X, columns=None) -> np.ndarray:
        """``log |d forward / d x|`` at each row of ``X`` (over ``columns`` only when given,
        as :meth:`log_jacobian`)."""
        X = np.atleast_2d(np.asarray(X, float))
        if not self.tailed:
            return np.full(X.shape[0], self.log_jacobian(columns))
        if columns is not None:
            raise ValueError("a unit map with compressed tails has no per-column Jacobian: fit with tails=False")
        return self._log_jacobian_affine() + _log_slope(self._axes(X), self.knots, self.slopes)

    def _log_jacobian_affine(self) -> float:
        """The range map's and the standardisation's part of the Jacobian (the same for every point)."""
        return float(np.sum(np.log(self.scale)) - (np.sum(np.log(self.spread)) if self.rotated else 0.0))

    def to_dict(self) -> dict:
        d = {"lo": self.lo.tolist(), "hi": self.hi.tolist(), "margin": self.margin}
        if self.rotated:
            d.update(center=self.center.tolist(), spread=self.spread.tolist(), rotation=self.rotation.tolist())
        if self.tailed:
            d.update(knots=self.knots.tolist(), slopes=self.slopes.tolist())
        return d

    @classmethod
    def from_dict(cls, d) -> "UnitMap":
        keys = (("center", "spread", "rotation") if "rotation" in d else ()) + (("knots", "slopes") if "knots" in d
                                                                                 else ())
        return cls(np.asarray(d["lo"], float), np.asarray(d["hi"], float),
                   check_margin(d.get("margin", LEGACY_MARGIN), allow_auto=False), **{k: np.asarray(d[k], float) for k in keys})


def _num_compressed(slopes) -> int:
    """How many tails :func:`tail_knots`'s ``slopes`` compress (flatter than the central slope)."""
    return int((slopes[[0, 2]] < slopes[1]).sum())


def _compress(Z, knots, slopes):
    """:func:`tail_knots`'s map of each column of ``Z``: the central range onto [-1, 1]."""
    (qlo, qhi), (below, mid, above) = knots, slopes
    return np.where(Z < qlo, -1 + (Z - qlo) * below, np.where(Z > qhi, 1 + (Z - qhi) * above, -1 + (Z - qlo) * mid))


def _expand(Y, knots, slopes):
    """The inverse of :func:`_compress`."""
    (qlo, qhi), (below, mid, above) = knots, slopes
    return np.where(Y < -1, qlo + (Y + 1) / below, np.where(Y > 1, qhi + (Y - 1) / above, qlo + (Y + 1) / mid))


def _log_slope(Z, knots, slopes):
    """``sum over columns of log`` :func:`_compress`'s slope at each row of ``Z``."""
    (qlo, qhi), (below, mid, above) = knots, slopes
    return np.log(np.where(Z < qlo, below, np.where(Z > qhi, above, mid))).sum(axis=-1)


def principal_axes(Z: np.ndarray) -> np.ndarray:
    """Eigenvectors of ``Z``'s covariance as columns, largest variance first, each with its
    largest-magnitude entry positive (so that the map does not depend on the sign conventions
    of the linear-algebra library)."""
    _, V = np.linalg.eigh(np.cov(Z, rowvar=False).reshape(Z.shape[1], Z.shape[1]))
    V = V[:, ::-1]
    idx = np.argmax(np.abs(V), axis=0)
    return V * np.sign(V[idx, np.arange(V.shape[1])])


def check_sample_hyper(sample_hyper) -> tuple:
    """``sample_hyper`` as the tuple of sampled hyperparameter names: True gives all three, False none, and a
    sequence of names (or one comma-separated string) those, in the order alpha, gamma, phi."""
    from .mcmc.hyper import HYPER_NAMES

    if isinstance(sample_hyper, (bool, np.bool_)):
        return HYPER_NAMES if sample_hyper else ()
    names = sample_hyper.split(",") if isinstance(sample_hyper, str) else sample_hyper
    try:
        names = {str(n).strip() for n in names} - {""}
    except TypeError:
        raise ValueError(f"sample_hyper must be True, False or names among {', '.join(HYPER_NAMES)}, "
                         f"got {sample_hyper!r}") from None
    bad = sorted(names - set(HYPER_NAMES))
    if bad:
        raise ValueError(f"sample_hyper: unknown hyperparameter(s) {', '.join(bad)} (choose among "
                         f"{', '.join(HYPER_NAMES)})")
    return tuple(n for n in HYPER_NAMES if n in names)


def check_data(X, num_columns: int | None = None) -> np.ndarray:
    """Validate a data matrix: numeric, finite, 2-D, >= 2 rows, right width."""
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError):
        raise ValueError("data must be numeric (a 2-D array of numbers)") from None
    if X.ndim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"data must be 2-D (rows = points, columns = variables), got shape {X.shape}")
    if X.shape[0] < 2:
        raise ValueError("data must have at least two rows")
    bad = ~np.isfinite(X)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"data contain NaN or infinite values (first at row {r}, column {c})")
    huge = np.abs(X) > MAX_ABS_VALUE
    if huge.any():  # ranges, squares and covariances of such values overflow
        r, c = np.argwhere(huge)[0]
        raise ValueError(f"data contain values too large to compute with (|x| > {MAX_ABS_VALUE:.0e}; first at row {r}, "
                         f"column {c}: {X[r, c]:.3g}); rescale the column")
    if num_columns is not None and X.shape[1] != num_columns:
        raise ValueError(f"data have {X.shape[1]} columns but the model was fitted on {num_columns}")
    return X


class BeliefNetwork:
    """ICP-structured NLGBN density estimator (fit / sample / score_samples):
    002 section 4.1, 003 sections 2 and 4; docs/derivations.md section 3.

    Parameters
    ----------
    prior : "icp"
        Structure prior (CIBP and ECIBP baselines plug in here).
    sweeps, burn_in, thin, chains, seed : int
        MCMC settings; kept samples are the posterior samples.
    alpha, gamma, phi : float
        Initial ICP hyperparameters (sampled unless ``sample_hyper=False``).
    sample_hyper : bool or sequence of names
        Which of the ICP's ``alpha``, ``gamma``, ``phi`` are sampled (under 002's hyperpriors): True (all
        three, the default), False (none), or some of them, e.g. ``("gamma",)``; the others stay at
        their given values.
    out : path or None
        Run directory. None: a temporary one, removed when the estimator is
        garbage-collected or the interpreter exits (pass ``out`` to keep the
        chains' checkpoints and samples). Refuses to overwrite an existing one
        unless ``force``.
    activation_update : "mtm", "slice" or "mtm+slice"
        How hidden activations are updated (``chefs.models.nlgbn.NLGBN``).
    num_tries : int
        Tries of the multiple-try Metropolis activation update.
    weight_prior : (shape, rate) or None
        Gamma prior on the precision of the edge weights, sampled by Gibbs
        (003 section 3.4); None keeps W ~ N(0, 1).
    structure_warmup : int or None
        First sweeps with the structure and hyperparameters held fixed, so that
        the initial hidden units learn features before death moves can remove
        them (a start-up procedure; part of the burn-in). None: ``burn_in // 2``
        capped at 300.
    margin : float in (0, 0.5) or "auto"
        The unit map sends each column's training range (each principal
        axis's when rotated) onto [margin, 1 - margin] before the observed
        units' sigmoid; smaller values use more of its curvature (003 scales
        data onto the whole range) and leave less room for test points beyond
        the training range
        (docs/derivations.md section 3.1). ``"auto"``: 0.1 for data with three or
        more columns (input columns included), 0.3 for fewer (:func:`resolve_margin`,
        docs/derivations.md 3.18); the fitted map's ``map_.margin`` is the number used.
    hmc_steps : int
        Leapfrog steps of the joint non-centred HMC transition of the continuous
        state (biases, log precisions, weights, hidden noise), once per sweep; 0
        (default) leaves it off. Step size and mass matrix adapt during the burn-in
        only (docs/derivations.md section 3.6; 002's future work).
    likelihood_power : float in (0, 1]
        The observed units' likelihood raised to this power: 1 (default) samples the
        posterior; below 1 a power ("generalised") posterior, flatter where the model
        is misspecified (docs/derivations.md 3.19; causal discovery's default is 1, and
        stop 42 measured 0.1).
        The observed units' stored precisions are then ``power * rho``, and what the
        fit predicts (fantasy data, densities) uses them. Not with ``hmc_steps``.
    noncentred : bool
        After each sweep's Gibbs updates, two slice-sampling updates per hidden unit
        with a child, with its standardised noise held fixed: its precision, and a
        common scale of its bias and incoming weights (an exact kernel; docs/derivations.md
        section 3.24). It moves the direction along which the default two-moons chain
        leaves its blurred start (one unit's precision and incoming weights rising
        together, section 3.23), at about 1.5-2x the CPU. On by default since stop 49
        (:data:`NONCENTRED`, with 512 pilot draws: sections 3.26 and 3.27); False gives the
        earlier default's chains.
    pilots, pilot_sweeps : int
        Multi-start: each chain first runs ``pilots`` short chains of
        ``pilot_sweeps`` sweeps (default half the burn-in) from fresh starts and
        continues the one whose end state gives the training data the highest
        importance-sampled log-likelihood (a start-up heuristic; every kept sample
        comes from the unchanged sampler; docs/derivations.md section 3.7). 1: one
        start, as before.
    pilot_draws : int
        Importance draws per training point in the pilots' score (default 512,
        :data:`PILOT_DRAWS`; 32 until stop 49). At 32 the score can rank a pilot
        that has left the blurred region below one that has not; 512 ranks them
        right, and with the non-centred updates that matters (sections 3.26-3.27).
        Long pilots with 512 draws and without the updates (stop 31:
        ``pilots=3, pilot_sweeps=10000, pilot_draws=512``) brought two-moons to
        DP-GMM's HD in Table 1's cells, at about 5x the CPU time, and on
        development splits too: two-moons mean HD 0.066 against 0.081 (DP-GMM
        0.066), held-out better on every split of two-moons and pinwheel
        (docs/derivations.md section 3.12). Pilots of 3,000 sweeps with 512 draws
        raised pinwheel's held-out log-likelihood but did not help two-moons or
        ring, at 1.5-2.5x the CPU (section 3.9).
    pilot_structures : bool
        Each pilot after the first starts from its own draw of the starting
        structure (``init_hidden``'s draw on its own random stream) instead of the
        run's one structure, so that one poor structure cannot spoil every pilot
        of a chain (docs/derivations.md 3.28). It acts where the chains share one
        starting structure (density estimation, ``init_hidden`` > 0) and with
        ``pilots`` > 1, and changes nothing otherwise. Default
        :data:`PILOT_STRUCTURES`.
    init_activations : "projection" or "prior"
        How each chain's hidden activations start: soft half-space features of
        the data (the default; chains find the shared hidden units far more
        often) or draws from the prior given the initial structure. Only the
        start differs; the sampler and its target are the same
        (docs/derivations.md section 3.5).
    scheduler : str or None
        A Dask scheduler address (``tcp://HOST:8786``): each chain runs as a task
        on that cluster instead of in a local process, with the same numbers. The
        run directory (``out``) must be on a file system the workers share: they
        write the chains' checkpoints and samples there (checked before the run is
        created; see ``chefs.cluster``).
    rotate : True, False or "auto"
        True: standardise the columns and rotate them onto the training data's
        principal axes before the unit map, so that a thin direction (a nearly
        exact linear relation among columns) is an observed unit with its own
        noise (docs/derivations.md section 3.14). "auto" (the default): rotate
        when :func:`thin_axis` finds such a direction (at least 3 columns and a
        correlation-matrix eigenvalue below 0.1; section 3.15), never with
        ``inputs``. A rotated network cannot impute (``predict_missing``).
    tails : True, False or "auto"
        True: compress each axis's outer tails (beyond its 0.1% and 99.9%
        training quantiles) onto at most 0.1 beside the central range's [-1, 1]
        before the range map, so that an isolated extreme does not squeeze the
        bulk into a small part of the unit interval (docs/derivations.md section
        3.17). "auto" (the default, :data:`TAILS`): where the map is rotated.
        Never with ``inputs``. A network with compressed tails cannot impute.
    """

    #: the relocation move of causal discovery (:class:`chefs.causal.CausalDiscovery`'s ``relocate``); with the
    #: observed orders fixed, as here, it would have nothing to move
    relocate = False

    def __init__(self, prior: str = "icp", sweeps: int = 600, burn_in: int = 300, thin: int = 5, chains: int = 1,
                 seed: int = 0, alpha: float = 1.0, gamma: float = 1.0, phi: float = 1.0, sample_hyper=True,
                 num_tries: int = 4, out=None, force: bool = False, progress=None, checkpoint_every: float = 10.0,
                 init_hidden: float = 10.0, inputs=(), activation_update: str = "mtm",
                 structure_warmup: int | None = None, weight_prior=None, margin: float | str = MARGIN,
                 init_activations: str = "projection", hmc_steps: int = 0, pilots: int = PILOTS,
                 pilot_sweeps: int | None = None, scheduler: str | None = None, pilot_draws: int = PILOT_DRAWS,
                 rotate: bool | str = ROTATE, tails: bool | str = TAILS, likelihood_power: float = 1.0,
                 noncentred: bool = NONCENTRED, pilot_structures: bool = PILOT_STRUCTURES):
        if prior not in ("icp", "cibp", "ecibp"):
            raise ValueError(f"unknown prior {prior!r} (available: icp, cibp, ecibp)")
        self.prior = prior
        self.sweeps, self.burn_in, self.thin, self.chains, self.seed = sweeps, burn_in, thin, chains, seed
        self.alpha, self.gamma, self.phi = alpha, gamma, phi
        self.sample_hyper = check_sample_hyper(sample_hyper)
        self.num_tries = num_tries
        self.out, self.force, self.progress = out, force, progress
        self.checkpoint_every = checkpoint_every
        self.init_hidden = init_hidden
        from .models.nlgbn import ACTIVATION_UPDATES, INIT_ACTIVATIONS

        if init_activations not in INIT_ACTIVATIONS:
            raise ValueError(f"init_activations must be one of {INIT_ACTIVATIONS}, got {init_activations!r}")
        self.init_activations = init_activations
        if activation_update not in ACTIVATION_UPDATES:
            raise ValueError(f"activation_update must be one of {ACTIVATION_UPDATES}, got {activation_update!r}")
        self.activation_update = activation_update
        if structure_warmup is not None and (int(structure_warmup) != structure_warmup or structure_warmup < 0):
            raise ValueError(f"structure_warmup must be a non-negative integer or None, got {structure_warmup!r}")
        self.structure_warmup = min(300, burn_in // 2) if structure_warmup is None else int(structure_warmup)
        self.weight_prior = check_weight_prior(weight_prior)
        self.inputs = tuple(sorted(int(j) for j in inputs))
        self.margin = check_margin(margin)
        if isinstance(hmc_steps, bool) or int(hmc_steps) != hmc_steps or hmc_steps < 0:
            raise ValueError(f"hmc_steps must be a non-negative integer (0: no HMC), got {hmc_steps!r}")
        self.hmc_steps = int(hmc_steps)
        from .models.nlgbn import check_likelihood_power, check_noncentred

        self.likelihood_power = check_likelihood_power(likelihood_power, self.hmc_steps)
        self.noncentred = check_noncentred(noncentred)
        for name, v, lo in (("pilots", pilots, 1), ("pilot_sweeps", pilot_sweeps, 1), ("pilot_draws", pilot_draws, 1)):
            if v is not None and (isinstance(v, bool) or int(v) != v or v < lo):
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        self.pilots = int(pilots)
        self.pilot_sweeps = max(1, burn_in // 2) if pilot_sweeps is None else int(pilot_sweeps)
        self.pilot_draws = int(pilot_draws)
        self.pilot_structures = check_pilot_structures(pilot_structures)
        self.scheduler = scheduler
        self.rotate = check_rotate(rotate)
        self.tails = check_tails(tails)

    # -------------------------------------------------------------- fit
    def fit(self, X) -> "BeliefNetwork":
        """Sample the posterior over structures, parameters and activations given ``X``
        (002 sections 3 and 4.1; docs/derivations.md sections 2 and 3.2)."""
        X = check_data(X)
        if X.shape[0] < MIN_FIT_ROWS:
            raise ValueError(f"a belief network needs at least {MIN_FIT_ROWS} rows (data points) to fit, got {X.shape[0]}")
        # the run's sizes first (the chain count before the per-chain starts are drawn), so that a bad burn-in
        # is refused before any warning about them
        check_run_settings(self.sweeps, self.burn_in, self.thin, self.chains, self.seed, self.checkpoint_every)
        if self.structure_warmup >= self.sweeps:
            warnings.warn(f"structure_warmup ({self.structure_warmup}) covers all {self.sweeps} sweeps: the structure "
                          "stays at its start", UserWarning, stacklevel=2)
        if self.rotate is True and self.inputs:
            raise ValueError("rotate mixes the columns, so it cannot keep input columns apart: fit a conditional "
                             "model (inputs) with rotate=False")
        if self.tails is True and self.inputs:
            raise ValueError("compressed tails give the columns a Jacobian per point that a conditional model "
                             "(inputs) cannot use: fit it with tails=False")
        self.map_ = UnitMap.fit(X, self.margin, False if self.inputs else self.rotate,
                                False if self.inputs else self.tails)
        D = X.shape[1]
        bad = [j for j in self.inputs if not 0 <= j < D]
        if bad or len(self.inputs) >= D:
            raise ValueError(f"inputs must be column indices in [0, {D}) leaving at least one output, got {self.inputs}")
        if self.prior != "icp" and self.inputs:
            raise ValueError("inputs at theta = 1 need the ICP prior (the CIBP/ECIBP keep observed units at the bottom)")
        orders = self._observed_orders(D)
        layered = self.prior != "icp"
        config = ChainConfig(D, orders, self.alpha, self.gamma, self.phi,
                             # checked again here: an estimator pickled before names were allowed holds a bool
                             sample_hyper=check_sample_hyper(self.sample_hyper) if not layered else (),
                             weights=(1.0, 1.0, 0.0, 0.0) if layered else (1.0, 1.0, 1.0, 1.0),
                             structure_warmup=self.structure_warmup)
        executor = client = None
        if self.scheduler is not None:  # reached and checked before anything is written
            from .cluster import check_shared_dir
            from .mcmc.run import make_executor

            executor, client = make_executor(self.chains, self.scheduler)
        try:
            if client is not None:
                check_shared_dir(client, self.out or tempfile.gettempdir(),
                                 "the chains write their checkpoints and samples into the run directory")
            self._create_and_run(X, config, layered, D, executor)
        finally:
            if client is not None:
                executor.shutdown(wait=False)
                client.close()
        stopped = [r["chain"] for r in self.chain_results_ if r.get("stopped")]
        if stopped:  # a stop file (RUN/stop) ended them: what they kept so far is used
            warnings.warn(f"chain(s) {stopped} stopped before their last sweep (the stop file "
                          f"{self.run_dir_ / STOP_FILE}); `chefs resume {self.run_dir_}` continues the run",
                          UserWarning, stacklevel=2)
        self._load_samples()
        return self

    def _create_and_run(self, X, config, layered: bool, D: int, executor) -> None:
        """Create the run directory and run its chains (on ``executor`` when given)."""
        out = self.out
        old = self.__dict__.pop("_tmp_cleanup", None)
        if old is not None:  # a refit replaces the previous temporary run
            old()
        if out is None:  # a temporary run directory lives as long as the estimator
            out = tempfile.mkdtemp(prefix="chefs-fit-")
            self._tmp_cleanup = weakref.finalize(self, shutil.rmtree, out, ignore_errors=True)
        model = {"name": "nlgbn", "data": "train01.npy", "num_tries": self.num_tries,
                 "activation_update": self.activation_update, "weight_prior": self.weight_prior,
                 "init_activations": self.init_activations,
                 "hmc_steps": self.hmc_steps, "hmc_adapt": self.burn_in,
                 "pilots": self.pilots, "pilot_sweeps": self.pilot_sweeps, "pilot_draws": self.pilot_draws}
        if self.likelihood_power != 1.0:  # (runs without the key: the posterior itself)
            model["likelihood_power"] = self.likelihood_power
        if self.noncentred:  # (runs without the key: no non-centred updates)
            model["noncentred"] = True
        if self.relocate:  # causal discovery's relocation move (runs without the key: none)
            model["relocate"] = True
        if layered:
            model["structure_prior"] = {"name": self.prior}
        per_chain = self._initial_graphs(D)
        init = None if per_chain is not None else self._initial_graph(D)
        pilot_graphs = None
        if self.pilot_structures and self.pilots > 1 and init is not None:  # (runs without the key: shared)
            model["pilot_structures"] = True
            pilot_graphs = [[self._initial_graph(D, pilot=(c, p)) for p in range(1, self.pilots)]
                            for c in range(int(self.chains))]

        def write_files(run):  # before config.json (create_run): a run never lacks its data
            np.save(run / "train01.npy", self.map_.forward(X))
            np.save(run / "train.npy", X)
            (run / "unitmap.json").write_text(json.dumps({**self.map_.to_dict(), "inputs": list(self.inputs)}))
            self._write_run_files(run)

        run = create_run(out, config, self.sweeps, self.burn_in, self.thin, self.chains, self.seed,
                         self.checkpoint_every, model=model, force=self.force, initial_graph=init,
                         initial_graphs=per_chain, pilot_graphs=pilot_graphs, write_files=write_files)
        if self.before_sampling is not None:
            self.before_sampling(Path(run))
        self.run_dir_ = Path(run)  # set before sampling: callers can tell that the run exists
        import time

        t0 = time.perf_counter()
        self.chain_results_ = run_chains(run, executor=executor, progress=self.progress)
        self.fit_seconds_ = time.perf_counter() - t0

    #: None, or a callable given the run directory once it exists, before the chains start: ``chefs fit`` writes the
    #: test split, the data's names and a provisional fit record there, so that a fit killed while sampling
    #: (SIGKILL, out of memory) still leaves them for ``chefs resume``, ``plot`` and ``compare``.
    before_sampling = None

    def _write_run_files(self, run) -> None:
        """Extra files a subclass writes into a fresh run directory before sampling (none here)."""

    def _observed_orders(self, D: int):
        """The observed units' order values: 0 (inputs at 1). ``chefs.causal.CausalDiscovery``
        returns None (every order free, sampled; docs/derivations.md section 3.8)."""
        return [1.0 if j in self.inputs else 0.0 for j in range(D)]

    def _initial_graphs(self, D: int):
        """One starting structure per chain, or None: every chain starts from the one
        structure of :meth:`_initial_graph` (density estimation; ``chefs.causal``
        draws one per chain)."""
        return None

    def _initial_graph(self, D: int, chain: int = 0, observed_order=None, pilot=None):
        """Starting structure: a draw from the ICP with gamma chosen so that the
        expected number of hidden units is about ``init_hidden`` (first layer),
        every hidden unit connected to the data; None for an empty start.
        The start does not change the target, only how fast the chain gets there.
        ``chain`` > 0 draws another structure (its own random stream); chain 0's is the
        structure that every chain shares when :meth:`_initial_graphs` gives None.
        ``observed_order``: the observed units' order values to draw it at (default
        :meth:`_observed_orders`; the ICP marks given values as fixed). ``pilot``: a pair
        (chain, pilot) whose own structure to draw (``pilot_structures``; its own stream)."""
        if not self.init_hidden:
            return None
        from .priors.icp import ICP

        if pilot is not None:
            rng = np.random.default_rng([self.seed, 7919, 104729, int(pilot[0]), int(pilot[1])])
        else:
            rng = np.random.default_rng([self.seed, 7919] if chain == 0 else [self.seed, 7919, chain])
        if self.prior != "icp":
            from .mcmc.run import make_structure_prior

            return make_structure_prior({"name": self.prior}).sample(rng, D, max_nodes=20 * (D + 50))
        alpha = 1.0
        gamma = self.init_hidden / (alpha * sum(1.0 / (alpha + r) for r in range(D)))
        orders = self._observed_orders(D) if observed_order is None else observed_order
        return ICP(alpha, gamma, self.phi).sample(rng, D, observed_order=orders, max_nodes=20 * (D + 50))

    def __getstate__(self):
        # a copy does not own the temporary run directory (its finalizer stays with the original)
        return {k: v for k, v in self.__dict__.items() if k != "_tmp_cleanup"}

    @classmethod
    def load(cls, run_dir, chains=None) -> "BeliefNetwork":
        """A fitted estimator from an existing run directory.

        ``chains``: the chains whose kept samples to use (indices; default all, pooled).
        Leaving out a chain that ``chefs summary`` reports as behind (stuck in a poorer
        mode) changes the estimate from the pooled chains to the chosen ones."""
        spec = load_spec(run_dir)
        if spec.get("model", {}).get("name") != "nlgbn":
            from .runkind import other_run_message

            raise ValueError(other_run_message(run_dir, "chefs fit") or f"{run_dir} is not a density-estimation run")
        net = cls(sweeps=spec["sweeps"], burn_in=spec["burn_in"], thin=spec["thin"], chains=spec["chains"],
                  seed=spec["seed"], out=run_dir)
        net.run_dir_ = Path(run_dir)
        um = json.loads((Path(run_dir) / "unitmap.json").read_text())
        net.map_ = UnitMap.from_dict(um)
        net.margin = net.map_.margin
        net.rotate = net.map_.rotated
        net.tails = net.map_.tailed
        net.inputs = tuple(um.get("inputs", ()))
        net.likelihood_power = float(spec["model"].get("likelihood_power", 1.0))
        net.noncentred = bool(spec["model"].get("noncentred", False))  # (runs without the key had none)
        net.relocate = bool(spec["model"].get("relocate", False))
        net.pilots = int(spec["model"].get("pilots", 1))  # the run's start-up, so that a refit repeats it
        if "pilot_sweeps" in spec["model"]:
            net.pilot_sweeps = int(spec["model"]["pilot_sweeps"])
        net.pilot_draws = int(spec["model"].get("pilot_draws", LEGACY_PILOT_DRAWS))
        net.pilot_structures = bool(spec["model"].get("pilot_structures", False))
        # the run's start, so that a refit repeats it (runs written before the key started from the prior, as
        # models.nlgbn.model_from_spec reads them)
        net.init_activations = spec["model"].get("init_activations", "prior")
        net.weight_prior = check_weight_prior(spec["model"].get("weight_prior"))  # the run's, not the class default
        net.prior = (spec["model"].get("structure_prior") or {}).get("name", "icp")  # a CIBP/ECIBP run stays one
        cfg = spec.get("config", {})  # the run's hyperparameter settings, so that a refit repeats them
        net.alpha, net.gamma, net.phi = (float(cfg.get(k, 1.0)) for k in ("alpha", "gamma", "phi"))
        net.sample_hyper = check_sample_hyper(cfg.get("sample_hyper", True))
        net._load_samples(chains)
        return net

    def _load_samples(self, chains=None) -> None:
        from .mcmc.diagnostics import chain_stores

        if chains is not None:
            chains = sorted({int(c) for c in chains})
            n = load_spec(self.run_dir_)["chains"]
            bad = [c for c in chains if not 0 <= c < n]
            if not chains or bad:
                raise ValueError(f"chains must be indices between 0 and {n - 1} (the run has {n} chain(s)), "
                                 f"got {bad or 'none'}")
        self.samples_ = []
        self.sample_chains_ = []  # the chain of each kept sample, in the order of samples_
        for c, store in chain_stores(self.run_dir_):
            if chains is None or c in chains:
                n = len(self.samples_)
                self.samples_.extend(json.loads(t) for t in store.graphs())
                self.sample_chains_.extend([c] * (len(self.samples_) - n))
            store.close()
        if not self.samples_:
            raise ValueError("no posterior samples were kept" + (f" in chain(s) {chains}" if chains else "")
                             + ": increase sweeps or lower burn-in/thin")

    # ------------------------------------------------------------ use
    def sample(self, n: int, rng=None, inputs=None) -> np.ndarray:
        """Fantasy data: for each point a posterior sample is picked uniformly and one
        point drawn from it by ancestral sampling, mapped back to data space (as in
        002 section 4.1).

        For a conditional model (``inputs`` columns at theta = 1), pass the input
        rows (n, len(inputs)) or full rows whose input columns are used."""
        rng = np.random.default_rng(rng)
        n = int(n)
        D = self.map_.lo.size
        given_cols = None
        if self.inputs:
            if inputs is None:
                raise ValueError("this model is conditional: pass the input values (inputs=...)")
            inputs = np.asarray(inputs, float)
            if inputs.ndim == 1:
                inputs = inputs[:, None]
            if inputs.shape[1] == D:
                inputs = inputs[:, list(self.inputs)]
            if inputs.shape != (n, len(self.inputs)):
                raise ValueError(f"inputs must have shape ({n}, {len(self.inputs)})")
            full = np.zeros((n, D))
            full[:, list(self.inputs)] = inputs
            given_cols = self.map_.forward(full)
        picks = rng.integers(0, len(self.samples_), size=n)
        out = np.empty((n, D))
        for s in np.unique(picks):
            idx = np.flatnonzero(picks == s)
            given = {j: given_cols[idx, j] for j in self.inputs} if given_cols is not None else None
            U = ancestral(self.samples_[s], idx.size, rng, given)
            obs = np.asarray(self.samples_[s]["observed"])
            out[idx] = self.map_.inverse(U[obs].T)
        return out

    def score_samples(self, X, rng=0, num_is: int = 64, max_samples: int = 50) -> np.ndarray:
        """Held-out log-density of each row (data space), averaged over up to
        ``max_samples`` posterior samples (evenly spaced); importance sampling and
        the unit map's Jacobian as in docs/derivations.md sections 3.1 and 3.3."""
        X = check_data(X, self.map_.lo.size)
        rng = np.random.default_rng(rng)
        U = self.map_.forward(X)
        pick = np.unique(np.linspace(0, len(self.samples_) - 1, min(max_samples, len(self.samples_))).astype(int))
        lp = np.array([log_density_unit(self.samples_[s], U, rng, num_is, self.inputs) for s in pick])
        outs = [j for j in range(self.map_.lo.size) if j not in self.inputs] if self.inputs else None
        jac = self.map_.log_jacobian_points(X, outs)
        return logsumexp(lp, axis=0) - math.log(pick.size) + jac

    def diagnostics(self) -> dict:
        """Acceptance rate per move (edge, birth/death, order, depth, activations, HMC)
        and effective samples per minute of K+ and of the log-likelihood."""
        import arviz as az

        from .mcmc.diagnostics import traces

        tr = traces(self.run_dir_)
        minutes = max(getattr(self, "fit_seconds_", float("nan")), 1e-9) / 60
        out = {"acceptance": {}, "proposals": {}}
        from .models.nlgbn import MOVE_NAMES as names
        for r in getattr(self, "chain_results_", []):
            for n, a, k in zip(names, r["acceptance"], r.get("proposals", [None] * len(names))):
                out["acceptance"].setdefault(n, []).append(a)
                out["proposals"].setdefault(n, []).append(k)
        for var in ("num_nodes", "log_lik"):
            x = tr[var]
            ess = float(az.ess(x)) if x.shape[1] >= 4 and np.ptp(x) > 0 else float("nan")
            out[f"ess_{var}"] = ess
            out[f"ess_{var}_per_minute"] = ess / minutes
        return out

    def score(self, X) -> float:
        return float(np.mean(self.score_samples(X)))

    def predict_missing(self, X, mask, num_sweeps: int = 100, burn_in: int | None = None, rng=0,
                        max_samples: int | None = 50, num_tries: int = 4, progress: bool = False) -> np.ndarray:
        """Posterior-predictive mean of the missing entries of ``X`` given its observed ones.

        ``mask`` is a boolean array of X's shape, **True = missing**; X's values at
        missing entries are ignored (NaN is fine there), observed entries must be
        finite, inside the model's support, and are returned unchanged. For each of
        up to ``max_samples`` posterior samples (evenly spaced) a Gibbs sampler over
        (hidden activations, missing values) runs ``num_sweeps`` sweeps (the first
        ``burn_in``, default num_sweeps // 5, discarded); the result averages
        E[x_miss | hidden, sample] over sweeps and samples. Input columns of a
        conditional model cannot be missing. See :mod:`chefs.impute` and
        docs/derivations-reconstruct.md.
        """
        from .impute import predict_missing

        return predict_missing(self, X, mask, num_sweeps=num_sweeps, burn_in=burn_in, rng=rng,
                               max_samples=max_samples, num_tries=num_tries, progress=progress)
