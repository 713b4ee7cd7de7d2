"""``OutTree``: the tdid nonparametric density estimator of paper 004.

Fit by variational Bayes (004, sec. 3), then score and sample new points with
the matrix-tree predictive (004, sec. 2; see :mod:`chefs.outtree.predictive`).
A fitted model is saved as ``model.json`` + ``arrays.npz`` (no pickle).
"""

from __future__ import annotations

import json
import os
import tempfile
import time
import warnings
import zipfile
from pathlib import Path

import numpy as np

from .gaussian import MNIW, NIW
from .predictive import Predictive
from .vb import VBInfo, run_vb

__all__ = ["OutTree", "validate_data"]

FORMAT_VERSION = 3
# version 2 (before 2026-11-24) stored a normaliser that, on fits with a weakly coupled
# training point, came from the fast scorer later found wrong there (derivations-outtree
# sec. 10): such a run's normaliser is estimated again on load
_READS_VERSIONS = (2, 3)


def validate_data(X, *, name: str = "X", min_rows: int = 1, dim: int | None = None) -> np.ndarray:
    """Return ``X`` as a finite 2-D float array or raise ``ValueError`` saying what to fix."""
    try:
        X = np.asarray(X, dtype=float)
    except (TypeError, ValueError) as err:
        raise ValueError(f"{name} must be numeric: {err}") from None
    if X.ndim == 1 and dim == 1:
        X = X[:, None]
    if X.ndim != 2:
        raise ValueError(f"{name} must be a 2-D array (rows = points), got shape {X.shape}")
    if X.shape[0] < min_rows:
        raise ValueError(f"{name} needs at least {min_rows} rows, got {X.shape[0]}")
    if X.shape[1] < 1:
        raise ValueError(f"{name} has no columns")
    if dim is not None and X.shape[1] != dim:
        raise ValueError(f"{name} has {X.shape[1]} columns but the model was fitted on {dim}")
    bad = ~np.isfinite(X)
    if bad.any():
        r, c = np.argwhere(bad)[0]
        raise ValueError(f"{name} contains NaN or inf (first at row {r}, column {c}); "
                         "remove or impute those values")
    return X


def _as_rng(rng) -> np.random.Generator:
    if isinstance(rng, np.random.Generator):
        return rng
    if rng is None or isinstance(rng, (int, np.integer)):
        return np.random.default_rng(rng)
    raise ValueError("rng must be a numpy.random.Generator, an int seed or None")


NORMALIZER_REL_SE_WARN = 0.25  # relative SE of c(X) above which fit warns
COLLINEAR_EIG = 1e-8  # fit refuses data whose correlation matrix has a smaller eigenvalue (Table 1's smallest: 9e-4)


class OutTree:
    """Out-tree (tdid) density estimator with variational Bayes (Jebara, paper 004).

    Parameters
    ----------
    iters : int
        Maximum number of VB iterations.
    tol : float
        Stop when the relative change of the ELBO is below ``tol``.
    noise_scale : float
        Prior mean of the conditional noise standard deviation, as a fraction
        of the data standard deviation (weak prior, ``nu = d + 2``).
    normalizer_samples : int
        Importance samples for the predictive normaliser ``c(X)``.

    Attributes (after ``fit``)
    --------------------------
    elbo_ : list of float — ELBO after each parameter update.
    infos_ : list of :class:`~chefs.outtree.vb.VBInfo`.
    q_c_ : MNIW posterior over ``(A, c, Sigma)``.
    """

    def __init__(self, iters: int = 12, tol: float = 5e-4, noise_scale: float = 0.1,
                 normalizer_samples: int = 1024):
        if int(iters) < 1:
            raise ValueError("iters must be a positive integer")
        if not tol > 0:
            raise ValueError("tol must be positive")
        if not noise_scale > 0:
            raise ValueError("noise_scale must be positive")
        if int(normalizer_samples) < 2:
            raise ValueError("normalizer_samples must be at least 2")
        self.iters = int(iters)
        self.tol = float(tol)
        self.noise_scale = float(noise_scale)
        self.normalizer_samples = int(normalizer_samples)
        self._pred: Predictive | None = None

    # ------------------------------------------------------------------
    def fit(self, X, rng=None, callback=None) -> "OutTree":
        """Fit by VB (004 sec. 3), then prepare the predictive and its normaliser.

        Parameters
        ----------
        X : (T, d) array, T >= 2, finite.
        rng : numpy.random.Generator or int seed, used for the importance-sampling
            normaliser only (the VB fit itself is deterministic).
        callback : optional function called with each :class:`VBInfo`.
        """
        X = validate_data(X, min_rows=2)
        rng = _as_rng(rng)
        if np.allclose(X, X[0]):
            raise ValueError("all rows of X are identical; the out-tree model needs spread data")
        t0 = time.perf_counter()
        # Standardise every column (derivations, sec. 8): the model is fitted to
        # Y = (X - shift) / scale and densities are mapped back with the log-Jacobian.
        self.shift_ = X.mean(axis=0)
        sd = X.std(axis=0)
        if not np.all(sd > 0):
            j = int(np.argmin(sd))
            raise ValueError(f"column {j} of X is constant; drop it before fitting")
        self.scale_ = sd
        Y = self._standardise(X)
        if Y.shape[1] > 1:
            # the Gaussian conditionals need full-rank data: on a subspace the fitted noise covariance
            # is singular and the "density" grows without bound (+10 nats per point on x3 = x1 + x2)
            lam = float(np.linalg.eigvalsh(np.corrcoef(Y.T)).min())
            if not lam > COLLINEAR_EIG:
                why = (f"{X.shape[0]} points in {X.shape[1]} dimensions" if X.shape[0] <= X.shape[1]
                       else f"smallest eigenvalue of their correlation matrix {lam:.1e}")
                raise ValueError(f"the columns of X are linearly dependent ({why}); the out-tree's Gaussian "
                                 "conditionals need full-rank data: drop a redundant column or add points")
        self.prior_ = MNIW.default_prior(Y, self.noise_scale)
        self.root_ = NIW.from_data(Y)
        state, infos = run_vb(Y, self.prior_, self.root_, iters=self.iters, tol=self.tol,
                              callback=callback)
        self.q_c_ = state.q_c
        self.infos_: list[VBInfo] = infos
        self.elbo_ = [i.elbo_parameters for i in infos]
        self.X_ = X
        self._root_hint = int(np.argmax(state.q_root))
        self._build_predictive()
        self._pred.estimate_normalizer(self.normalizer_samples, rng)
        if not self._pred.log_norm_se <= NORMALIZER_REL_SE_WARN:
            warnings.warn(f"the importance-sampling estimate of the predictive normaliser is unreliable (relative "
                          f"standard error {self._pred.log_norm_se:.2f}): held-out log-densities may be overstated; "
                          "see docs/derivations-outtree.md section 10", RuntimeWarning, stacklevel=2)
        self.fit_seconds_ = time.perf_counter() - t0
        return self

    def _standardise(self, X) -> np.ndarray:
        return (X - self.shift_) / self.scale_

    @property
    def log_jacobian_(self) -> float:
        """``log |dY/dX| = -sum log scale``: added to densities of standardised points."""
        return -float(np.sum(np.log(self.scale_)))

    def _build_predictive(self):
        B, Sigma = self.q_c_.point_estimate()
        self._pred = Predictive(self._standardise(self.X_), B, Sigma, self.root_,
                                root_hint=getattr(self, "_root_hint", None))

    def _check_fitted(self):
        if self._pred is None:
            raise ValueError("this OutTree is not fitted yet; call fit(X) first")

    @property
    def n_features_(self) -> int:
        self._check_fitted()
        return self.X_.shape[1]

    @property
    def log_normalizer_(self) -> tuple[float, float]:
        """``(log c(X), relative standard error)`` of the predictive normaliser
        (docs/derivations-outtree.md section 6)."""
        self._check_fitted()
        return self._pred.log_norm, self._pred.log_norm_se

    # ------------------------------------------------------------------
    def log_ratio(self, X) -> np.ndarray:
        """Exact ``log p(X_train, x) - log p(X_train)`` per row (unnormalised; 004 sec. 2,
        docs/derivations-outtree.md section 6)."""
        self._check_fitted()
        X = validate_data(X, min_rows=1, dim=self.n_features_)
        return self._pred.log_ratio(self._standardise(X)) + self.log_jacobian_

    def score_samples(self, X) -> np.ndarray:
        """Predictive log-density of each row, scored one at a time against the
        training set: ``log ratio(x) - log c(X_train)`` (docs/derivations-outtree.md
        section 6)."""
        self._check_fitted()
        X = validate_data(X, min_rows=1, dim=self.n_features_)
        return self._pred.log_density(self._standardise(X)) + self.log_jacobian_

    def score(self, X) -> float:
        """Mean predictive log-density of the rows of ``X``."""
        return float(np.mean(self.score_samples(X)))

    def sample(self, n: int, rng=None, candidates: int = 16, method: str = "sir") -> np.ndarray:
        """Draw ``n`` fantasy points from the predictive: sampling-importance-resampling
        with ``candidates`` proposals per point (``method="sir"``), or the iterated SIR
        chain that leaves the predictive exactly invariant (``method="isir"``; see
        :meth:`chefs.outtree.predictive.Predictive.sample`)."""
        self._check_fitted()
        if int(n) < 1:
            raise ValueError("n must be a positive integer")
        if int(candidates) < 1:
            raise ValueError("candidates must be a positive integer")
        Y = self._pred.sample(int(n), _as_rng(rng), int(candidates), method=method)
        return self.shift_ + Y * self.scale_

    # ------------------------------------------------------------------
    def save(self, run_dir, force: bool = False, extra: dict | None = None) -> Path:
        """Write ``model.json`` and ``arrays.npz`` into ``run_dir`` (open formats only).

        Refuses to overwrite an existing directory unless ``force``.
        """
        self._check_fitted()
        run = Path(run_dir)
        if run.exists() and not force:
            raise FileExistsError(f"{run} already exists; pass --force (force=True) to overwrite")
        if run.exists() and not run.is_dir():
            raise NotADirectoryError(f"{run} exists and is not a directory")
        run.mkdir(parents=True, exist_ok=True)
        q, p, r = self.q_c_, self.prior_, self.root_
        arrays = {"X": self.X_, "q_M": q.M, "q_V": q.V, "q_psi": q.psi,
                  "prior_M": p.M, "prior_V": p.V, "prior_psi": p.psi,
                  "root_mu0": r.mu0, "root_psi0": r.psi0,
                  "shift": self.shift_, "scale": self.scale_}
        meta = {
            "format": "chefs.outtree", "version": FORMAT_VERSION,
            "n_points": int(self.X_.shape[0]), "n_features": int(self.X_.shape[1]),
            "params": {"iters": self.iters, "tol": self.tol, "noise_scale": self.noise_scale,
                       "normalizer_samples": self.normalizer_samples},
            "q_nu": q.nu, "prior_nu": p.nu, "root_kappa0": r.kappa0, "root_nu0": r.nu0,
            "log_normalizer": self._pred.log_norm, "log_normalizer_rel_se": self._pred.log_norm_se,
            "elbo": self.elbo_,
            "elbo_structure": [i.elbo_structure for i in self.infos_],
            "fit_seconds": getattr(self, "fit_seconds_", None),
            "root_hint": int(self._pred.c),
        }
        if extra:
            meta.update(extra)
        # data first, metadata last; each via a temp file and an atomic rename
        fd, tmp = tempfile.mkstemp(dir=run, suffix=".npz.tmp")
        os.close(fd)
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, run / "arrays.npz")
        fd, tmp = tempfile.mkstemp(dir=run, suffix=".json.tmp")
        with os.fdopen(fd, "w") as fh:
            json.dump(meta, fh, indent=2)
        os.replace(tmp, run / "model.json")
        return run

    @classmethod
    def load(cls, run_dir) -> "OutTree":
        """Load a model written by :meth:`save` (recomputes the O(T^3) predictive)."""
        from ..runkind import other_run_message

        run = Path(run_dir)
        wrong = other_run_message(run, "chefs outtree fit")
        if wrong:  # a run of chefs fit, prior mcmc or cnn sample
            raise ValueError(wrong)
        if not (run / "model.json").is_file() or not (run / "arrays.npz").is_file():
            raise FileNotFoundError(f"{run} is not an outtree run (need model.json and arrays.npz)")
        try:
            meta = json.loads((run / "model.json").read_text())
        except json.JSONDecodeError as err:
            raise ValueError(f"{run}/model.json is not valid JSON ({err})") from None
        if not isinstance(meta, dict) or meta.get("format") != "chefs.outtree":
            raise ValueError(f"{run}/model.json is not a chefs outtree model")
        try:
            version = int(meta.get("version", 0))
        except (TypeError, ValueError):
            version = None
        if version not in _READS_VERSIONS:
            raise ValueError(f"{run}/model.json has format version {meta.get('version')}; "
                             f"this chefs reads versions {', '.join(map(str, _READS_VERSIONS))} (refit the model)")
        need = ("params", "q_nu", "prior_nu", "root_kappa0", "root_nu0", "root_hint", "elbo", "log_normalizer",
                "log_normalizer_rel_se")
        missing = [k for k in need if k not in meta]
        if missing:
            raise ValueError(f"{run}/model.json lacks {', '.join(missing)}; refit the model")
        try:
            with np.load(run / "arrays.npz", allow_pickle=False) as z:
                a = {k: z[k] for k in z.files}
        except (ValueError, OSError, zipfile.BadZipFile) as err:
            raise ValueError(f"{run}/arrays.npz is not a numpy archive of arrays ({type(err).__name__})") from None
        need = ("X", "q_M", "q_V", "q_psi", "prior_M", "prior_V", "prior_psi", "root_mu0", "root_psi0", "shift",
                "scale")
        missing = [k for k in need if k not in a]
        if missing:
            raise ValueError(f"{run}/arrays.npz lacks {', '.join(missing)}; refit the model")
        try:
            self = cls(**meta["params"])
        except TypeError as err:
            raise ValueError(f"{run}/model.json: bad params ({err})") from None
        self.X_ = a["X"]
        self.shift_, self.scale_ = a["shift"], a["scale"]
        self._root_hint = int(meta["root_hint"])
        self.q_c_ = MNIW(a["q_M"], a["q_V"], a["q_psi"], float(meta["q_nu"]))
        self.prior_ = MNIW(a["prior_M"], a["prior_V"], a["prior_psi"], float(meta["prior_nu"]))
        self.root_ = NIW(a["root_mu0"], float(meta["root_kappa0"]), a["root_psi0"],
                         float(meta["root_nu0"]))
        self.elbo_ = list(meta["elbo"])
        self.infos_ = []
        self.meta_ = meta
        self._build_predictive()
        self._pred.log_norm = float(meta["log_normalizer"])
        self._pred.log_norm_se = float(meta["log_normalizer_rel_se"])
        if version == 2 and self._pred.weak.any():
            warnings.warn(f"{run} was saved before the out-tree scorer fix of 2026-11-24 and its fit has a weakly "
                          "coupled training point, so its stored normaliser came from the faulty fast scorer; "
                          "estimating it again (seed 0; docs/derivations-outtree.md section 10)", RuntimeWarning,
                          stacklevel=2)
            self._pred.estimate_normalizer(self.normalizer_samples, np.random.default_rng(0))
        return self
