"""Reading the real data files and user CSV files.

Each real data set of Table 1 has a parser for its original file format (see
``/work/shared/data/SOURCES.md`` for where each file came from); user data
come in as a CSV of numbers read by :func:`read_csv`.
"""

from __future__ import annotations

import os
import re
from pathlib import Path

import numpy as np

__all__ = [
    "DATA_ENV",
    "read_csv",
    "data_dirs",
    "parse_geyser",
    "parse_yeast",
    "parse_abalone",
    "parse_cloud",
    "parse_wine",
    "ABALONE_SEX_CODES",
]

DATA_ENV = "CHEFS_DATA"
"""Environment variable naming the data directory."""

ABALONE_SEX_CODES = {"I": 0.0, "F": 1.0, "M": 2.0}
"""Ordinal coding of abalone sex: infant < female < male (infants first, as
the immature stage; the order of F and M is a convention)."""


def data_dirs(data_dir=None) -> list[Path]:
    """The directories searched for data files, in order.

    Parameters
    ----------
    data_dir : str or path-like, optional
        An explicit directory (``--data-dir``); searched first.

    Returns
    -------
    list of pathlib.Path
        ``data_dir`` (if given) then ``$CHEFS_DATA`` (if set).
    """
    out = []
    if data_dir is not None:
        d = Path(data_dir).expanduser()
        if not d.is_dir():  # a typo in --data-dir should not silently fall back to $CHEFS_DATA
            raise ValueError(f"data directory {d} does not exist or is not a directory")
        out.append(d)
    env = os.environ.get(DATA_ENV)
    if env:
        p = Path(env).expanduser()
        if p not in out:
            out.append(p)
    return out


def _read_text(path) -> str:
    path = Path(path)
    if not path.exists():
        raise FileNotFoundError(f"no such file: {path}")
    if path.is_dir():
        raise IsADirectoryError(f"{path} is a directory, expected a data file")
    try:
        return path.read_text(encoding="utf-8")
    except UnicodeDecodeError:
        raise ValueError(f"{path} is not a text file (not UTF-8)") from None


def _split_fields(line: str, delimiter: str | None) -> list[str]:
    if delimiter is None:
        return line.split()
    return [f.strip() for f in line.split(delimiter)]


def _sniff_delimiter(line: str) -> str | None:
    for d in (",", ";", "\t"):
        if d in line:
            return d
    return None  # runs of white space


def _to_float(text: str) -> float | None:
    try:
        return float(text)
    except ValueError:
        return None


#: the largest magnitude a data value may have: squares and sums of squares of larger ones overflow a double
MAX_ABS_VALUE = 1e150


def read_csv(path, scoring: bool = False) -> np.ndarray:
    """Read and validate a CSV file of numbers.

    The delimiter is the first of ``,``, ``;`` or TAB found in the first
    non-blank line, else runs of white space. The first non-blank line is a
    header when any of its fields is not a number. Blank lines are skipped.

    Parameters
    ----------
    path : str or path-like
        The file.
    scoring : bool
        A file of points to score or compare, not a training set: one row is
        enough and constant columns are allowed.

    Returns
    -------
    numpy.ndarray, shape (n, d), float64

    Raises
    ------
    ValueError
        Naming the problem and where: a non-numeric field (line and column),
        a row with the wrong number of fields, NaN or infinite values, a
        constant column, fewer than two rows (these two only unless
        ``scoring``), no data at all.
    FileNotFoundError
        When the file does not exist.
    """
    text = _read_text(path)
    lines = [(i + 1, ln.strip()) for i, ln in enumerate(text.splitlines())]
    lines = [(i, ln) for i, ln in lines if ln]
    if not lines:
        raise ValueError(f"{path}: the file is empty")
    delimiter = _sniff_delimiter(lines[0][1])
    first = _split_fields(lines[0][1], delimiter)
    names = None
    if any(_to_float(f) is None for f in first):
        names = [f.strip().strip('"').strip("'") for f in first]
        lines = lines[1:]
    if not lines:
        raise ValueError(f"{path}: no data rows after the header line")
    width = len(names) if names is not None else len(first)

    def colname(j: int) -> str:
        if names is not None and names[j]:
            return f"column {j + 1} ({names[j]!r})"
        return f"column {j + 1}"

    rows = []
    for lineno, ln in lines:
        fields = _split_fields(ln, delimiter)
        if len(fields) != width:
            raise ValueError(f"{path}: line {lineno} has {len(fields)} fields, expected {width}")
        row = []
        for j, f in enumerate(fields):
            v = _to_float(f)
            if v is None:
                raise ValueError(f"{path}: line {lineno}, {colname(j)}: {f!r} is not a number")
            if not np.isfinite(v):
                kind = "NaN" if np.isnan(v) else "an infinite value"
                raise ValueError(f"{path}: line {lineno}, {colname(j)}: {kind} ({f!r}); remove or impute it")
            if abs(v) > MAX_ABS_VALUE:
                raise ValueError(f"{path}: line {lineno}, {colname(j)}: {f!r} is too large to compute with "
                                 f"(|x| > {MAX_ABS_VALUE:.0e}); rescale the column")
            row.append(v)
        rows.append(row)
    x = np.asarray(rows, dtype=np.float64)
    if scoring:
        return x
    if x.shape[0] < 2:
        raise ValueError(f"{path}: only one data row; a density data set needs at least two")
    for j in range(x.shape[1]):
        if np.all(x[:, j] == x[0, j]):
            raise ValueError(f"{path}: {colname(j)} is constant ({x[0, j]:g}); drop it")
    return x


def csv_column_names(path) -> list[str] | None:
    """The header of a CSV file of numbers as :func:`read_csv` reads it (the first
    non-blank line, when any of its fields is not a number), or None."""
    for ln in _read_text(path).splitlines():
        if ln.strip():
            first = _split_fields(ln.strip(), _sniff_delimiter(ln.strip()))
            if any(_to_float(f) is None for f in first):
                return [f.strip().strip('"').strip("'") for f in first]
            return None
    return None


def _bad(path, what: str) -> ValueError:
    return ValueError(f"{path}: {what}; is this the right file (see SOURCES.md)?")


def parse_geyser(path) -> np.ndarray:
    """MASS ``geyser`` as exported by Rdatasets: keep ``waiting`` and ``duration``
    (2 columns, as in Table 1 of 002; docs/derivations-data.md section 1).

    Returns
    -------
    numpy.ndarray, shape (299, 2)
    """
    lines = [ln for ln in _read_text(path).splitlines() if ln.strip()]
    header = [h.strip().strip('"') for h in lines[0].split(",")] if lines else []
    try:
        iw, idur = header.index("waiting"), header.index("duration")
    except ValueError:
        raise _bad(path, "expected a header with columns 'waiting' and 'duration'") from None
    rows = []
    for k, ln in enumerate(lines[1:], start=2):
        f = ln.split(",")
        try:
            rows.append([float(f[iw]), float(f[idur])])
        except (ValueError, IndexError):
            raise _bad(path, f"line {k} is not a row of numbers") from None
    return np.asarray(rows, dtype=np.float64)


def parse_yeast(path) -> np.ndarray:
    """UCI yeast: the 8 numeric features (mcg, gvh, alm, mit, erl, pox, vac, nuc);
    the sequence name and the class are dropped (8 columns, as in Table 1 of 002;
    docs/derivations-data.md section 1).

    Returns
    -------
    numpy.ndarray, shape (1484, 8)
    """
    rows = []
    for k, ln in enumerate(_read_text(path).splitlines(), start=1):
        f = ln.split()
        if not f:
            continue
        if len(f) != 10:
            raise _bad(path, f"line {k} has {len(f)} fields, expected 10")
        try:
            rows.append([float(v) for v in f[1:9]])
        except ValueError:
            raise _bad(path, f"line {k} has a non-numeric feature") from None
    return np.asarray(rows, dtype=np.float64)


def parse_abalone(path) -> np.ndarray:
    """UCI abalone: sex coded as one ordinal column (I=0, F=1, M=2), then the 8
    numbers (length, diameter, height, whole, shucked, viscera and shell
    weights, rings): 9 columns, as in Table 1 of 002 (docs/derivations-data.md
    section 1).

    Returns
    -------
    numpy.ndarray, shape (4177, 9)
    """
    rows = []
    for k, ln in enumerate(_read_text(path).splitlines(), start=1):
        if not ln.strip():
            continue
        f = [v.strip() for v in ln.split(",")]
        if len(f) != 9:
            raise _bad(path, f"line {k} has {len(f)} fields, expected 9")
        if f[0] not in ABALONE_SEX_CODES:
            raise _bad(path, f"line {k}: sex {f[0]!r} is not one of M, F, I")
        try:
            rows.append([ABALONE_SEX_CODES[f[0]]] + [float(v) for v in f[1:]])
        except ValueError:
            raise _bad(path, f"line {k} has a non-numeric field") from None
    return np.asarray(rows, dtype=np.float64)


_CLOUD_ROW = re.compile(r"^ +-?[0-9]")


def parse_cloud(path) -> np.ndarray:
    """UCI cloud: both data blocks (DB #1 and DB #2, 1024 rows each) of the raw
    file, i.e. every line that starts with spaces then a number (10 columns, as in
    Table 1 of 002; docs/derivations-data.md section 1).

    Returns
    -------
    numpy.ndarray, shape (2048, 10)
    """
    rows = []
    for k, ln in enumerate(_read_text(path).splitlines(), start=1):
        if not _CLOUD_ROW.match(ln):
            continue
        f = ln.split()
        if len(f) != 10:
            raise _bad(path, f"line {k} has {len(f)} fields, expected 10")
        try:
            rows.append([float(v) for v in f])
        except ValueError:
            raise _bad(path, f"line {k} has a non-numeric field") from None
    return np.asarray(rows, dtype=np.float64)


def parse_wine(path) -> np.ndarray:
    """UCI wine quality, red: the 11 physico-chemical columns and ``quality`` (12 columns,
    as in Table 1 of 002; docs/derivations-data.md section 1).

    Returns
    -------
    numpy.ndarray, shape (1599, 12)
    """
    lines = [ln for ln in _read_text(path).splitlines() if ln.strip()]
    if not lines or "quality" not in lines[0]:
        raise _bad(path, "expected a ';'-separated header ending in \"quality\"")
    rows = []
    for k, ln in enumerate(lines[1:], start=2):
        f = ln.split(";")
        if len(f) != 12:
            raise _bad(path, f"line {k} has {len(f)} fields, expected 12")
        try:
            rows.append([float(v) for v in f])
        except ValueError:
            raise _bad(path, f"line {k} has a non-numeric field") from None
    return np.asarray(rows, dtype=np.float64)
