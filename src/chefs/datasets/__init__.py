"""The nine density data sets of Table 1 of 002 (section 4.1) and 001 (section 3).

============ ==== ========= ==============================================
name         dim  kind      source
============ ==== ========= ==============================================
ring         2    synthetic generator (:mod:`chefs.datasets.synthetic`)
two-moons    2    synthetic generator
pinwheel     2    synthetic generator
geyser       2    file      MASS ``geyser`` (Rdatasets CSV): waiting, duration
iris         4    file      scikit-learn's bundled copy of UCI Iris
yeast        8    file      UCI yeast, the 8 numeric features
abalone      9    file      UCI abalone, sex ordinal (I=0, F=1, M=2) + 8 numbers
cloud        10   file      UCI cloud, both blocks (2048 rows)
wine         12   file      UCI wine quality, red, with ``quality``
============ ==== ========= ==============================================

Files are looked up in ``data_dir`` (``--data-dir``), then ``$CHEFS_DATA``,
then the download cache; with ``download=True`` (or ``CHEFS_DOWNLOAD=1``) a
missing file is downloaded and checked against its SHA-256. Any CSV of
numbers can be given instead of a name (see :func:`read_csv`).

Splits (:func:`load_split`): the synthetic sets are 4000 i.i.d. points, the
first 2000 for training and the last 2000 for testing, as in the paper; the
real sets are permuted with the seed and split in half (the training half
gets the extra row when the count is odd). Discrete columns are dequantised
(:mod:`chefs.datasets.preprocess`) unless ``dequantize=False``. All
randomness comes from ``numpy.random.default_rng([seed, stream])`` with one
stream each for generation, dequantisation and the split permutation.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path
from typing import Callable

import numpy as np

from . import files, synthetic
from .download import cache_dir, download_enabled, fetch, sha256_file
from .files import data_dirs, read_csv
from .preprocess import dequantize as _dequantize
from .preprocess import discrete_steps

__all__ = [
    "DATASETS",
    "DatasetSpec",
    "SYNTHETIC_TRAIN",
    "SYNTHETIC_TEST",
    "load",
    "load_split",
    "locate",
    "read_csv",
    "discrete_steps",
    "resolve_name",
    "true_log_density",
    "true_heldout_loglik",
]

SYNTHETIC_TRAIN = 2000
"""Training points of each synthetic set (section 4.1 of 002)."""
SYNTHETIC_TEST = 2000
"""Test points of each synthetic set."""

_STREAM_GENERATE, _STREAM_DEQUANTIZE, _STREAM_SPLIT = 1, 2, 3


@dataclass(frozen=True)
class DatasetSpec:
    """Description of one data set of Table 1.

    Attributes
    ----------
    name : str
        Registry name.
    dimension : int
        Number of columns, as in Table 1.
    kind : str
        ``"synthetic"`` (generated) or ``"file"`` (read from a file; iris is
        read from scikit-learn's bundled copy and has ``filename=None``).
    filename : str or None
        Name of the data file in the data directory.
    description : str
        What the columns are.
    source : str
        Where the data come from.
    rows : int or None
        Expected number of rows (None for synthetic sets).
    sha256 : str or None
        Digest of the file (from ``SOURCES.md``), checked on download.
    urls : tuple of str
        Download mirrors (pinned to a commit where possible).
    columns : tuple of str
        Column names.
    """

    name: str
    dimension: int
    kind: str
    filename: str | None
    description: str
    source: str
    rows: int | None = None
    sha256: str | None = None
    urls: tuple = ()
    columns: tuple = ()
    parser: Callable | None = field(default=None, repr=False, compare=False)


_UCI = "https://archive.ics.uci.edu/ml/machine-learning-databases"
_GH = "https://raw.githubusercontent.com"

DATASETS: dict[str, DatasetSpec] = {
    "ring": DatasetSpec(
        "ring", 2, "synthetic", None,
        "noisy circle: angle U(0, 2pi), radius N(1, 0.1^2)",
        "generator (chefs.datasets.synthetic.ring)", columns=("x", "y"),
    ),
    "two-moons": DatasetSpec(
        "two-moons", 2, "synthetic", None,
        "two interleaved half circles with N(0, 0.1^2) noise",
        "generator (chefs.datasets.synthetic.two_moons)", columns=("x", "y"),
    ),
    "pinwheel": DatasetSpec(
        "pinwheel", 2, "synthetic", None,
        "5-arm pinwheel: radial sd 0.3, tangential sd 0.05, rate 0.25",
        "generator (chefs.datasets.synthetic.pinwheel)", columns=("x", "y"),
    ),
    "geyser": DatasetSpec(
        "geyser", 2, "file", "geyser.csv",
        "Old Faithful eruptions (MASS::geyser): waiting time and duration, minutes",
        "R MASS::geyser (Azzalini & Bowman 1990), Rdatasets CSV export",
        rows=299,
        sha256="691381248e0418ccbfc23cc5093e71220313ddb7ffb70e817e27a6dfb900fbcc",
        urls=(f"{_GH}/vincentarelbundock/Rdatasets/cc03c29690889dbe83089f5206e2422db8c3f71f/csv/MASS/geyser.csv",),
        columns=("waiting", "duration"),
        parser=files.parse_geyser,
    ),
    "iris": DatasetSpec(
        "iris", 4, "file", None,
        "Fisher's iris: sepal and petal length and width, cm (species dropped)",
        "UCI Iris, bundled with scikit-learn (sklearn.datasets.load_iris)",
        rows=150,
        columns=("sepal_length", "sepal_width", "petal_length", "petal_width"),
    ),
    "yeast": DatasetSpec(
        "yeast", 8, "file", "yeast.data",
        "protein localisation sites: the 8 numeric features (name and class dropped)",
        "UCI Yeast (Horton & Nakai 1996)",
        rows=1484,
        sha256="7cf61776fc04f527f93bf57a327b863893a1225d82df02d457e8950173218258",
        urls=(
            f"{_GH}/bellasaid/CMSE202/c664f5bd0b21044c4f1f0ee7ed211f30dc0b2d72/yeast.data",
            f"{_UCI}/yeast/yeast.data",
        ),
        columns=("mcg", "gvh", "alm", "mit", "erl", "pox", "vac", "nuc"),
        parser=files.parse_yeast,
    ),
    "abalone": DatasetSpec(
        "abalone", 9, "file", "abalone.data",
        "abalone: sex as one ordinal column (I=0, F=1, M=2) then the 8 numbers, rings included",
        "UCI Abalone (Nash et al. 1994)",
        rows=4177,
        sha256="de37cdcdcaaa50c309d514f248f7c2302a5f1f88c168905eba23fe2fbc78449f",
        urls=(f"{_UCI}/abalone/abalone.data",),
        columns=("sex", "length", "diameter", "height", "whole_weight",
                 "shucked_weight", "viscera_weight", "shell_weight", "rings"),
        parser=files.parse_abalone,
    ),
    "cloud": DatasetSpec(
        "cloud", 10, "file", "cloud.data",
        "cloud cover: both blocks of the raw UCI file (2 x 1024 rows, 10 features)",
        "UCI Cloud (Collard; donated by Taylor, 1989)",
        rows=2048,
        sha256="8a66607e0f4f05905213ca237ab9e793793f471c3e293ed1455cbdc8ba9e2731",
        urls=(
            f"{_GH}/Smendoza37/Cloud/4daabbcc8f3e454a22c4161c678d32a1cb66e4e0/cloudData.csv",
            f"{_UCI}/undocumented/taylor/cloud.data",
        ),
        columns=tuple(f"f{i}" for i in range(1, 11)),
        parser=files.parse_cloud,
    ),
    "wine": DatasetSpec(
        "wine", 12, "file", "winequality-red.csv",
        "red wine: 11 physico-chemical measurements and the quality score",
        "UCI Wine Quality, red (Cortez et al. 2009)",
        rows=1599,
        sha256="4a402cf041b025d4566d954c3b9ba8635a3a8a01e039005d97d6a710278cf05e",
        urls=(
            f"{_GH}/nurblieh/machine-learning/ef80d5088bb07af48a0da3ca3e8f4adb1b69a5cd/wine-quality/winequality-red.csv",
            f"{_UCI}/wine-quality/winequality-red.csv",
        ),
        columns=("fixed_acidity", "volatile_acidity", "citric_acid", "residual_sugar",
                 "chlorides", "free_sulfur_dioxide", "total_sulfur_dioxide", "density",
                 "pH", "sulphates", "alcohol", "quality"),
        parser=files.parse_wine,
    ),
}
"""The nine data sets of Table 1, by name, in the order of the table."""


def resolve_name(name: str) -> str | None:
    """Registry name for ``name`` (case and ``_``/``-`` insensitive), or None."""
    if not isinstance(name, str):
        return None
    key = name.strip().lower().replace("_", "-")
    if key == "twomoons" or key == "moons":
        key = "two-moons"
    return key if key in DATASETS else None


def _check_seed(seed) -> int:
    if isinstance(seed, bool) or not isinstance(seed, (int, np.integer)) or seed < 0:
        raise ValueError(f"seed must be a non-negative integer, got {seed!r}")
    return int(seed)


def _rng(seed: int, stream: int) -> np.random.Generator:
    return np.random.default_rng([seed, stream])


def locate(name: str, data_dir=None) -> Path | None:
    """Where the file of data set ``name`` is found, or None.

    Searched: ``data_dir``, ``$CHEFS_DATA``, then the download cache (a cached
    file counts only if its SHA-256 matches).

    Parameters
    ----------
    name : str
        A registry name with ``kind == "file"`` and a ``filename``.
    data_dir : path-like, optional
        Directory searched first.

    Returns
    -------
    pathlib.Path or None
    """
    spec = DATASETS[resolve_name(name) or name]
    if spec.filename is None:
        return None
    for d in data_dirs(data_dir):
        p = d / spec.filename
        if p.is_file():
            return p
    cached = cache_dir() / spec.filename
    if cached.is_file() and spec.sha256 and sha256_file(cached) == spec.sha256:
        return cached
    return None


def _missing(spec: DatasetSpec, data_dir) -> ValueError:
    where = ", ".join(str(d) for d in data_dirs(data_dir)) or "no data directory given"
    return ValueError(
        f"data set '{spec.name}' needs the file {spec.filename} (from {spec.source}): put it in a "
        f"directory and point CHEFS_DATA or --data-dir there (looked in: {where}), "
        f"or allow downloading (`chefs data ... --download`, download=True in Python, or CHEFS_DOWNLOAD=1)"
    )


def _read_named(spec: DatasetSpec, data_dir, download) -> np.ndarray:
    if spec.name == "iris":
        from sklearn.datasets import load_iris

        return np.asarray(load_iris().data, dtype=np.float64)
    path = locate(spec.name, data_dir)
    if path is None:
        if not download_enabled(download):
            raise _missing(spec, data_dir)
        path = fetch(spec.filename, spec.sha256, spec.urls)
    x = spec.parser(path)
    if x.shape != (spec.rows, spec.dimension):
        raise ValueError(
            f"{path}: expected {spec.rows} rows x {spec.dimension} columns for '{spec.name}', "
            f"got {x.shape[0]} x {x.shape[1]}; is this the file described in SOURCES.md?"
        )
    return x


def _raw(name_or_csv_path, data_dir, seed: int, download) -> tuple[np.ndarray, DatasetSpec | None]:
    key = resolve_name(name_or_csv_path) if isinstance(name_or_csv_path, str) else None
    if key is not None:
        spec = DATASETS[key]
        if spec.kind == "synthetic":
            gen = synthetic.GENERATORS[key]
            return gen(SYNTHETIC_TRAIN + SYNTHETIC_TEST, _rng(seed, _STREAM_GENERATE)), spec
        return _read_named(spec, data_dir, download), spec
    try:
        path = Path(name_or_csv_path)
    except TypeError:
        raise ValueError(f"expected a data set name or a CSV path, got {name_or_csv_path!r}") from None
    if not path.is_file():
        raise ValueError(
            f"{str(name_or_csv_path)!r} is neither a data set ({', '.join(DATASETS)}) nor an existing CSV file"
        )
    return read_csv(path), None


def load(name_or_csv_path, data_dir=None, seed: int = 0, dequantize: bool = True, *, download=None) -> np.ndarray:
    """Load a data set of Table 1 (or a CSV of numbers) as an ``n x d`` array.

    Parameters
    ----------
    name_or_csv_path : str or path-like
        A name of :data:`DATASETS` or the path of a CSV file of numbers.
    data_dir : path-like, optional
        Directory holding the data files (else ``$CHEFS_DATA``).
    seed : int, optional
        Seed of the generator (synthetic sets) and of the dequantisation noise.
    dequantize : bool, optional
        Add ``U(-h/2, h/2)`` noise to discrete columns (see
        :mod:`chefs.datasets.preprocess`).
    download : bool, optional
        Allow downloading a missing file (default: ``$CHEFS_DOWNLOAD``).

    Returns
    -------
    numpy.ndarray, shape (n, d), float64
        For the synthetic sets the 4000 points of the train and test sets
        (train first); for the others all rows of the file.

    Raises
    ------
    ValueError
        Unknown name, missing file (the message says where to put it), a file
        of the wrong shape, or bad values in a CSV.
    """
    seed = _check_seed(seed)
    x, _ = _raw(name_or_csv_path, data_dir, seed, download)
    if dequantize:
        x, _ = _dequantize(x, _rng(seed, _STREAM_DEQUANTIZE))
    return x


def load_split(
    name_or_csv_path, seed: int = 0, data_dir=None, dequantize: bool = True, *, download=None
) -> tuple[np.ndarray, np.ndarray]:
    """Seeded train/test split of a data set of Table 1 (or a CSV).

    Synthetic sets: the first 2000 of the 4000 i.i.d. points of :func:`load`
    train, the last 2000 test. Real sets and CSVs: a seeded permutation, the
    first ``ceil(n/2)`` rows train and the rest test.

    Parameters
    ----------
    name_or_csv_path, seed, data_dir, dequantize, download
        As in :func:`load`.

    Returns
    -------
    (numpy.ndarray, numpy.ndarray)
        ``(train, test)``; their rows together are exactly the rows of
        ``load(name_or_csv_path, data_dir, seed, dequantize)``.
    """
    seed = _check_seed(seed)
    x = load(name_or_csv_path, data_dir=data_dir, seed=seed, dequantize=dequantize, download=download)
    key = resolve_name(name_or_csv_path) if isinstance(name_or_csv_path, str) else None
    if key is not None and DATASETS[key].kind == "synthetic":
        return x[:SYNTHETIC_TRAIN].copy(), x[SYNTHETIC_TRAIN:].copy()
    n = x.shape[0]
    perm = _rng(seed, _STREAM_SPLIT).permutation(n)
    n_train = n - n // 2
    return x[perm[:n_train]], x[perm[n_train:]]


def true_log_density(name: str, X) -> np.ndarray:
    """Log-density of the generator of a synthetic data set at the points ``X``
    (:func:`chefs.datasets.synthetic.log_density`; docs/derivations-data.md
    section 1.1). ``load`` returns the generator's draws unchanged (no rescaling;
    dequantisation finds no ties in them), so this is the density of every split.

    Parameters
    ----------
    name : str
        ``ring``, ``two-moons`` or ``pinwheel`` (spellings as :func:`resolve_name`).
    X : array_like, shape (n, 2)
        Points.

    Returns
    -------
    numpy.ndarray, shape (n,)
    """
    key = resolve_name(name)
    if key is None or DATASETS[key].kind != "synthetic":
        raise ValueError(f"the true density is known only for the synthetic data sets "
                         f"({', '.join(synthetic.LOG_DENSITIES)}), not for {name!r}")
    return synthetic.log_density(key, X)


def true_heldout_loglik(name: str, seed: int = 0) -> float:
    """Mean true log-density per point of the test split of ``load_split(name, seed)``:
    the held-out log-likelihood of the generator itself, the ``truth`` row of Table 1
    (its expectation over splits is minus the differential entropy, the best any
    model can score on average).

    Parameters
    ----------
    name : str
        A synthetic data set.
    seed : int, optional
        Seed of the split.

    Returns
    -------
    float
    """
    key = resolve_name(name)
    if key is None or DATASETS[key].kind != "synthetic":
        raise ValueError(f"the true density is known only for the synthetic data sets "
                         f"({', '.join(synthetic.LOG_DENSITIES)}), not for {name!r}")
    _, test = load_split(key, seed=seed)
    return float(np.mean(true_log_density(key, test)))
