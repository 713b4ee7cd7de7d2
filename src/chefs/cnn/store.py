"""Run directories of the CNN architecture sampler.

Layout of ``RUN/``::

    config.json      settings, data description, per-chain costs and final RNG
                     states, "complete": true (written last)
    samples.jsonl    one recorded sample per line: the DAG's JSON fields
                     (theta, observed, edges, fixed; readable by
                     chefs.read_jsonl) plus chain, iteration, net_id, accuracy,
                     log_evidence, log_prior, move, accepted and the Figure 5
                     statistics of chefs.cnn.architecture_stats
    weights.npz      trained weights, key "c<chain>/n<net_id>/<parameter name>"
    test_proba.npz   test-set class probabilities, key "c<chain>/n<net_id>",
                     plus "y_test"

Nothing is pickled. The directory is written under a temporary sibling name
and renamed into place, so a crash never leaves a half-written run; an existing
``RUN`` is only replaced with ``force=True``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

__all__ = ["write_run", "read_run", "RUN_FILES"]

RUN_FILES = ("config.json", "samples.jsonl", "weights.npz", "test_proba.npz")


def _json_default(o):
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")


def _clean(v):
    """NaN/inf -> None so the JSON is standard."""
    if isinstance(v, float) and not math.isfinite(v):
        return None
    if isinstance(v, dict):
        return {k: _clean(x) for k, x in v.items()}
    if isinstance(v, list):
        return [_clean(x) for x in v]
    return v


def check_target(path, force: bool = False) -> Path:
    """Raise unless ``path`` can be (re)written: absent, or ``force`` and a run directory or empty."""
    path = Path(path)
    if path.exists():
        if not force:
            raise FileExistsError(f"{path} already exists; pass --force to overwrite it")
        if not path.is_dir():
            raise NotADirectoryError(f"{path} exists and is not a directory")
        if any(path.iterdir()) and not (path / "config.json").is_file():
            raise ValueError(f"{path} is not empty and does not look like a run directory "
                             "(no config.json); refusing to delete it")
    return path


def write_run(path, results, config: dict, y_test: np.ndarray, force: bool = False) -> Path:
    """Write the chain results (``ChainResult`` list) and ``config`` to ``path``."""
    path = check_target(path, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        weights, probas = {}, {"y_test": np.asarray(y_test, dtype=np.int64)}
        with open(tmp / "samples.jsonl", "w", encoding="utf-8") as fh:
            for r in results:
                for rec in r.records:
                    fh.write(json.dumps(_clean(rec), default=_json_default, separators=(",", ":")))
                    fh.write("\n")
                for nid, net in r.networks.items():
                    for name, arr in net["weights"].items():
                        weights[f"c{r.chain}/n{nid}/{name}"] = np.asarray(arr)
                    probas[f"c{r.chain}/n{nid}"] = np.asarray(net["test_proba"])
        np.savez_compressed(tmp / "weights.npz", **weights)
        np.savez_compressed(tmp / "test_proba.npz", **probas)
        cfg = dict(config)
        cfg["chains_summary"] = [{
            "chain": r.chain, "wall_seconds": r.wall_seconds, "train_steps": r.train_steps,
            "fits": r.fits, "warm_fits": r.warm_fits, "rng_state": r.rng_state,
            "moves": _move_table(r.infos), "trained_steps_per_iteration": _per_it(r),
        } for r in results]
        cfg["complete"] = True
        with open(tmp / "config.json", "w", encoding="utf-8") as fh:
            json.dump(_clean(cfg), fh, default=_json_default, indent=1)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def _per_it(r):
    n = len(r.infos)
    return r.train_steps / n if n else 0.0


def _move_table(infos) -> dict:
    out: dict = {}
    for i in infos:
        m = out.setdefault(i["move"], {"proposed": 0, "accepted": 0, "trained": 0, "impossible": 0})
        m["proposed"] += 1
        m["accepted"] += int(i["accepted"])
        m["trained"] += int(i["trained"])
        m["impossible"] += int(i["log_ratio"] == -math.inf)
    return out


def read_run(path) -> dict:
    """Load a run directory: ``{"config", "records", "proba", "y_test", "path"}``.

    ``proba`` maps ``(chain, net_id)`` to the test-set probabilities.
    Weights are not loaded (``numpy.load(path / "weights.npz")`` gives them).
    """
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"no such run directory: {path}")
    missing = [f for f in RUN_FILES if not (path / f).is_file()]
    if missing:
        raise ValueError(f"{path} is not a complete run directory (missing {', '.join(missing)}); "
                         "create one with 'chefs cnn sample --out RUN'")
    with open(path / "config.json", encoding="utf-8") as fh:
        config = json.load(fh)
    records = []
    with open(path / "samples.jsonl", encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, 1):
            if line.strip():
                try:
                    records.append(json.loads(line))
                except json.JSONDecodeError as err:
                    raise ValueError(f"{path / 'samples.jsonl'}:{lineno}: malformed JSON ({err.msg})") from None
    proba = {}
    with np.load(path / "test_proba.npz", allow_pickle=False) as z:
        y_test = z["y_test"]
        for k in z.files:
            if k != "y_test":
                c, n = k.split("/")
                proba[(int(c[1:]), int(n[1:]))] = z[k]
    return {"config": config, "records": records, "proba": proba, "y_test": y_test, "path": path}
