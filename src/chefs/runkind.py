"""Which command wrote a run directory, so that a command handed another
command's run can say what it found and which commands read it."""

from __future__ import annotations

import json
import os
from pathlib import Path


def _json(path: Path):
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError):
        return None


def run_kind(run_dir) -> str | None:
    """The command that wrote ``run_dir``: ``"chefs fit"``, ``"chefs prior mcmc"``,
    ``"chefs cnn sample"``, ``"chefs outtree fit"``, or None (not recognised)."""
    run = Path(run_dir)
    config = _json(run / "config.json") if (run / "config.json").is_file() else None
    if isinstance(config, dict):
        if str(config.get("command", "")).startswith("chefs cnn"):
            return "chefs cnn sample"
        if config.get("kind") == "icp-mcmc":
            model = config.get("model")
            return "chefs fit" if isinstance(model, dict) and model.get("name") == "nlgbn" else "chefs prior mcmc"
    model = _json(run / "model.json") if (run / "model.json").is_file() else None
    if isinstance(model, dict) and model.get("format") == "chefs.outtree":
        return "chefs outtree fit"
    return None


_READERS = {
    "chefs fit": "read it with 'chefs summary|fantasy|plot|export {run}', continue it with 'chefs resume {run}'",
    "chefs prior mcmc": "read it with 'chefs summary|export {run}', continue it with 'chefs resume {run}'",
    "chefs cnn sample": "continue it with 'chefs cnn resume {run}' and summarise it with "
                        "'chefs cnn report {run} --out DIR'",
    "chefs outtree fit": "draw from it with 'chefs outtree sample {run} --num N' and score data with "
                         "'chefs outtree score {run} DATA'",
}


def other_run_message(run_dir, wanted: str) -> str | None:
    """``"RUN is a 'chefs fit' run, not a 'chefs cnn sample' run: read it with ..."``
    when ``run_dir`` was written by a command other than ``wanted`` (one of the
    kinds of :func:`run_kind`, or several separated by " or "), else None."""
    kind = run_kind(run_dir)
    if kind is None or kind in wanted.split(" or "):
        return None
    wanted_text = " or ".join(f"'{w}'" for w in wanted.split(" or "))
    return f"{run_dir} is a '{kind}' run, not a {wanted_text} run: {_READERS[kind].format(run=run_dir)}"


def refuse_file_as_dir(path, flag: str = "--out") -> None:
    """An output directory that exists as a regular file: one clear error instead
    of the system's "[Errno 17] File exists" or "[Errno 20] Not a directory"."""
    p = Path(path)
    if p.exists() and not p.is_dir():
        raise NotADirectoryError(f"{flag} takes a directory; {p} is a file")


def check_replaceable(path) -> None:
    """Before ``--force`` deletes the non-empty directory ``path``: refuse unless it is a run directory
    that a chefs command wrote (:func:`run_kind`), and refuse when it holds the current directory. A
    mistyped ``--out`` (a project folder, ``.``) must never be wiped."""
    p = Path(path).resolve()
    cwd = Path(os.getcwd()).resolve()
    if cwd == p or p in cwd.parents:
        raise ValueError(f"refusing to delete {path}: it holds the current directory; choose another --out")
    if run_kind(p) is None:
        what = ("its config.json is not a chefs run's (damaged?)" if (p / "config.json").is_file()
                else "it has no run config.json")
        raise ValueError(f"{path} is not empty and is not a chefs run directory ({what}); refusing to delete it "
                         "with --force: choose a new or empty --out, or remove it yourself")


def refuse_inputs_inside(out, paths) -> None:
    """``--force`` would delete ``out``: refuse when an input lies inside it. ``paths``: (what, path) pairs
    (what: the flag or variable that names it, such as "--data" or "CHEFS_DATA"); None paths are skipped."""
    o = Path(out).resolve()
    for what, q in paths:
        if q is None or str(q) == "":
            continue
        q = Path(q)
        if q.exists() and (o == q.resolve() or o in q.resolve().parents):
            raise ValueError(f"{what} {q} lies inside --out {out}, which --force would delete; move the data or "
                             "choose another --out")
