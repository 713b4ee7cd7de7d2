"""Small helpers shared by the CLI modules."""

from __future__ import annotations

import argparse
import math
import os
import sys
from pathlib import Path


def actions_of(sub, command: str):
    """The sub-parsers of the registered ``command`` (e.g. ``prior``), to add
    actions under it from another module (``chefs prior mcmc``)."""
    if command not in sub.choices:
        raise RuntimeError(f"chefs.commands.MODULES: {command!r} must come before the modules that add actions "
                           "under it")
    return next(a for a in sub.choices[command]._actions if isinstance(a, argparse._SubParsersAction))


def positive_float(text: str) -> float:
    try:
        v = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number, got {text!r}") from None
    if not v > 0 or v == float("inf"):
        raise argparse.ArgumentTypeError(f"expected a positive number, got {text}")
    return v


def weight_prior_arg(text: str):
    """``--weight-prior``: ``SHAPE,RATE`` (two positive numbers: the weights' precision ~ Gamma(shape, rate),
    sampled) or ``none`` (weights ~ N(0, 1) fixed)."""
    from ..density import check_weight_prior  # the estimators' own check

    if text.strip().lower() == "none":
        return None
    try:
        return tuple(check_weight_prior(text.split(",")))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected SHAPE,RATE (two positive numbers) or 'none', got {text!r}") \
            from None


def margin_arg(text: str) -> float | str:
    """``--margin``: a number (checked by the estimator) or ``auto``."""
    if text == "auto":
        return "auto"
    try:
        return float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected a number or 'auto', got {text!r}") from None


def int_at_least(text: str, lo: int, what: str | None = None) -> int:
    """An integer argument >= ``lo``; ``what`` names it in the error (default
    "an integer >= lo")."""
    try:
        v = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected an integer, got {text!r}") from None
    if v < lo:
        raise argparse.ArgumentTypeError(f"expected {what or f'an integer >= {lo}'}, got {text}")
    return v


def positive_int(text: str) -> int:
    return int_at_least(text, 1, "a positive integer")


def nonneg_int(text: str) -> int:
    return int_at_least(text, 0, "a non-negative integer")


#: spellings of a free observed order in ``--observed-order``
FREE_ORDER = ("free", "none", "nan", "")


def observed_order_arg(text: str):
    """``--observed-order``: one order value in [0, 1] for all observed nodes, or
    one per node (comma-separated); ``free`` leaves a node's order free (drawn
    from U(0, 1)). ``none``, ``nan`` and an empty field mean the same (the
    spellings ``chefs prior mcmc`` has always taken); anything else outside [0, 1],
    infinities included, is refused."""
    vals = []
    for part in text.split(","):
        part = part.strip()
        if part.lower() in FREE_ORDER:
            vals.append(None)
            continue
        try:
            v = float(part)
        except ValueError:
            v = math.nan
        if not 0 <= v <= 1:  # also NaN
            raise argparse.ArgumentTypeError(f"expected numbers in [0, 1] or 'free', got {part!r}")
        vals.append(v)
    return vals[0] if len(vals) == 1 else vals


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


def chain_list(text: str) -> list[int]:
    """``--chains 0,2``: comma-separated chain indices."""
    try:
        return [int(c) for c in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated chain indices (e.g. 0,2), got {text!r}") from None


def print_chain_comparison(run) -> None:
    """For a run of two or more chains: each chain's means side by side, and a note
    when they disagree (a chain stuck in a poorer mode, or not yet converged)."""
    from ..mcmc.diagnostics import BEHIND_SE, RHAT_WARN, chain_comparison

    cmp = chain_comparison(run)
    if len(cmp["chains"]) < 2:
        return
    print("per chain (means over kept samples; se = Monte Carlo SE of the mean):")
    print(f"  {'chain':>5} {'samples':>7} {'log_joint':>14} {'se':>9} {'log_lik':>14} {'hidden':>7} {'edges':>7}")
    for r in cmp["chains"]:
        print(f"  {r['chain']:>5} {r['samples']:>7} {r['log_joint']:>14.2f} {r['log_joint_se']:>9.2f} "
              f"{r['log_lik']:>14.2f} {r['num_hidden']:>7.1f} {r['num_edges']:>7.1f}")
    if cmp["behind"]:
        from ..runkind import run_kind

        ids = ",".join(map(str, cmp["behind"]))
        from ..causal import is_causal_run

        if is_causal_run(run):  # a causal run pools its chains' relations into edges.csv
            # stop 43: the chains' log joints do not rank their modes' truth, and longer chains did not move them
            what = ("in different modes. In causal discovery a higher log joint does not mark a truer mode "
                    "(docs/derivations.md 3.8), so keep the pooled summaries; more chains (--chains) sharpen them "
                    f"more than longer ones, and `CausalDiscovery.load('{run}', chains=[i])` reads a chain alone "
                    "for comparison")
        else:
            what = "in a poorer mode or not yet converged. Run longer"
            if run_kind(run) == "chefs fit":  # --chains belongs to fantasy/plot, which read density runs only
                keep = ",".join(str(r["chain"]) for r in cmp["chains"] if r["chain"] not in cmp["behind"])
                what += (f", or leave them out with `chefs fantasy {run} --chains {keep}` (an estimate from the "
                         "chosen chains instead of the pooled ones)")
        print(f"chefs: note: the chains disagree (R-hat of log_joint {cmp['rhat']:.2f} > {RHAT_WARN}): chain(s) "
              f"{ids} sit more than {BEHIND_SE:g} SE below chain {cmp['best']}, {what}", file=sys.stderr)


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


def data_column_names(spec: str) -> list[str] | None:
    """The column names of what :func:`load_data_spec` reads: a CSV file's header
    (None without one) or a data set's registry names."""
    from .. import datasets
    from ..datasets.files import csv_column_names

    if os.path.isfile(spec):
        return csv_column_names(spec)
    key = datasets.resolve_name(spec.rpartition(":")[0] if ":" in spec else spec)
    return list(datasets.DATASETS[key].columns) if key is not None else None


def write_points(out, X, names=None) -> None:
    """Sampled points as CSV, as ``chefs fantasy`` and ``chefs outtree sample``
    write them: a header of column names when they are known (none otherwise)
    and 8 significant digits; ``out`` None or ``-``: standard output."""
    import numpy as np

    header = ",".join(names) if names and len(names) == X.shape[1] else ""
    if not to_stdout(out):
        Path(out).parent.mkdir(parents=True, exist_ok=True)
    np.savetxt(sys.stdout if to_stdout(out) else out, X, delimiter=",", fmt="%.8g", header=header, comments="")
    sys.stdout.flush()


def to_stdout(out) -> bool:
    return out is None or str(out) == "-"


def data_file(spec: str, data_dir=None) -> Path | None:
    """The file a data SPEC reads: the CSV file itself, or a named data set's file as found (None for generated
    and bundled sets, a missing file, or a bad --data-dir, which the loader reports). A data set's name that
    happens to be a directory (--data geyser --out geyser) is not a file."""
    from ..datasets import DATASETS, locate, resolve_name

    if Path(spec).is_file():
        return Path(spec)
    if resolve_name(spec) in DATASETS:
        try:
            return locate(spec, data_dir)
        except ValueError:
            return None
    return None


def check_run_out(out: Path, force: bool, data: str, data_dir=None, hint: str = "") -> None:
    """``--out`` of a command that creates a run (fit, discover): a directory, refused when not empty unless
    ``force``; with ``force``, replaced only when it is a run directory that holds neither the current
    directory nor the data the command reads (``--data``'s file, ``--data-dir``, ``CHEFS_DATA``)."""
    from ..runkind import check_replaceable, refuse_file_as_dir, refuse_inputs_inside

    refuse_file_as_dir(out)
    if not (out.exists() and any(out.iterdir())):
        return
    if not force:
        raise FileExistsError(f"{out} exists and is not empty; use --force to overwrite it{hint}")
    csv = Path(data).is_file()  # a CSV is named by --data; a data set's file by the directory it was found in
    refuse_inputs_inside(out, [("--data", data if csv else None), ("--data-dir", data_dir),
                               ("CHEFS_DATA", os.environ.get("CHEFS_DATA")),
                               (f"the {data} data file", None if csv else data_file(data, data_dir))])
    check_replaceable(out)


def refuse_existing(path, force: bool, run=None) -> None:
    """A data file that exists is replaced only with --force; a directory is never a data file; and a file inside
    ``run`` (the run directory the command reads) is never replaced, --force or not (it could be the run's own)."""
    if Path(path).is_dir():
        raise IsADirectoryError(f"{path} is a directory; give a file name")
    if run is not None and Path(path).exists() and Path(run).resolve() in Path(path).resolve().parents:
        raise FileExistsError(f"{path} lies inside the run {run} that this command reads and exists; "
                              "give a new file name or one outside the run")
    if Path(path).exists() and not force:
        raise FileExistsError(f"{path} exists; use --force to overwrite it")
