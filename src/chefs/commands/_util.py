"""Small helpers shared by the CLI modules."""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return v


def positive_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 1:
        raise argparse.ArgumentTypeError(f"expected a positive integer, got {text}")
    return v


def nonneg_int(text: str) -> int:
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < 0:
        raise argparse.ArgumentTypeError(f"expected a non-negative integer, got {text}")
    return v


def note_if_incomplete(run) -> None:
    """Tell the user (stderr) when a run's chains have not finished: results then
    cover only the sweeps done so far, and ``chefs resume RUN`` continues it."""
    from ..mcmc.run import load_spec

    run = Path(run)
    try:
        spec = load_spec(run)
    except (OSError, ValueError):
        return  # not a run directory: the command itself reports that
    chains = int(spec.get("chains", 1))
    unfinished = [c for c in range(chains) if not (run / f"chain-{c}" / "done").exists()]
    if unfinished:
        print(f"chefs: note: {run} is incomplete ({len(unfinished)} of {chains} chain(s) unfinished); results use the "
              f"sweeps done so far; `chefs resume {run}` continues it", file=sys.stderr)


def load_data_spec(spec: str, data_dir=None, seed: int = 0, download: bool = False, bare_split: str | None = None,
                   scoring: bool = False):
    """Data from a CSV file, ``NAME`` or ``NAME:train`` / ``NAME:test`` (the Table 1
    split with this seed). A bare NAME gives the whole data set, or the split
    ``bare_split`` when given ("train": what ``chefs fit`` trains on). ``scoring``:
    a CSV of points to score may have one row and constant columns."""
    from .. import datasets

    if os.path.isfile(spec):
        return datasets.read_csv(spec, scoring=scoring)
    name, _, part = spec.rpartition(":") if ":" in spec else (spec, "", "")
    if datasets.resolve_name(name) is None:
        raise ValueError(f"{spec!r} is neither a CSV file nor a data set name ({', '.join(datasets.DATASETS)})")
    part = part or bare_split or ""
    if part == "":
        return datasets.load(name, data_dir=data_dir, seed=seed, download=download)
    if part not in ("train", "test"):
        raise ValueError(f"{spec!r}: after ':' write train or test")
    train, test = datasets.load_split(name, seed=seed, data_dir=data_dir, download=download)
    return train if part == "train" else test


def refuse_existing(path, force: bool) -> None:
    """A data file that exists is replaced only with --force."""
    if Path(path).exists() and not force:
        raise FileExistsError(f"{path} exists; use --force to overwrite it")
