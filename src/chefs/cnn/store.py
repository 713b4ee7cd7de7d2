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
    chains/c<k>/     progress of chain k, written while it runs (what
                     ``chefs cnn resume`` continues from):
        state.json       the commit point, rewritten atomically after every
                         MH iteration: iteration, graph, log prior/evidence,
                         network ids, cost counters, the numpy bit generator
                         state after that iteration, line counts of the two
                         JSONL files and the name of the weights file
        state_<it>.npz   trained weights of the current state after iteration <it>
        samples.jsonl    recorded samples so far (lines past state.json's count are
                         ignored and cut on resume)
        infos.jsonl      one MH step diagnostic per line (same rule)
        nets/n<id>.npz   weights ("w/<name>") and test probabilities
                         ("test_proba") of each recorded network

Nothing is pickled (JSON and ``numpy.savez``; every ``numpy.load`` passes
``allow_pickle=False``). :func:`write_run` writes a whole run under a temporary
sibling name and renames it into place. The CLI instead creates ``RUN`` up front
(:func:`start_run`, ``config.json`` with ``"complete": false``), lets every chain
checkpoint into ``RUN/chains/`` and writes the four run files at the end
(:func:`finish_run`, each file renamed into place, ``config.json`` last), so an
interrupted run keeps its chains' progress. An existing ``RUN`` is only
replaced with ``force=True``.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import tempfile
from pathlib import Path

import numpy as np

from .._json import json_default

__all__ = ["write_run", "read_run", "start_run", "finish_run", "read_config", "chain_progress", "ChainCheckpoint", "RUN_FILES"]

RUN_FILES = ("config.json", "samples.jsonl", "weights.npz", "test_proba.npz")


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
    from ..runkind import refuse_file_as_dir

    refuse_file_as_dir(path)
    if path.exists():
        if not force:
            hint = (f", or continue it with 'chefs cnn resume {path}'"
                    if (path / "chains").is_dir() else "")
            raise FileExistsError(f"{path} already exists; pass --force to overwrite it{hint}")
        if not path.is_dir():
            raise NotADirectoryError(f"{path} exists and is not a directory")
        if any(path.iterdir()) and not (path / "config.json").is_file():
            raise ValueError(f"{path} is not empty and does not look like a run directory "
                             "(no config.json); refusing to delete it")
    return path


def _write_files(dest: Path, results, config: dict, y_test: np.ndarray, suffix: str = "") -> None:
    """Write the four run files into the directory ``dest`` (names + ``suffix``), config.json last."""
    weights, probas = {}, {"y_test": np.asarray(y_test, dtype=np.int64)}
    with open(dest / ("samples.jsonl" + suffix), "w", encoding="utf-8") as fh:
        for r in results:
            for rec in r.records:
                fh.write(json.dumps(_clean(rec), default=json_default, separators=(",", ":")))
                fh.write("\n")
            for nid, net in r.networks.items():
                for name, arr in net["weights"].items():
                    weights[f"c{r.chain}/n{nid}/{name}"] = np.asarray(arr)
                probas[f"c{r.chain}/n{nid}"] = np.asarray(net["test_proba"])
    with open(dest / ("weights.npz" + suffix), "wb") as fh:
        np.savez_compressed(fh, **weights)
    with open(dest / ("test_proba.npz" + suffix), "wb") as fh:
        np.savez_compressed(fh, **probas)
    cfg = dict(config)
    cfg["chains_summary"] = [{
        "chain": r.chain, "wall_seconds": r.wall_seconds, "train_steps": r.train_steps,
        "fits": r.fits, "warm_fits": r.warm_fits, "rng_state": r.rng_state,
        "moves": _move_table(r.infos), "trained_steps_per_iteration": _per_it(r),
        "iterations": len(r.infos), "samples": len(r.records),
    } for r in results]
    cfg["complete"] = True
    with open(dest / ("config.json" + suffix), "w", encoding="utf-8") as fh:
        json.dump(_clean(cfg), fh, default=json_default, indent=1)


def write_run(path, results, config: dict, y_test: np.ndarray, force: bool = False) -> Path:
    """Write the chain results (``ChainResult`` list) and ``config`` to ``path``."""
    path = check_target(path, force)
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = Path(tempfile.mkdtemp(prefix=f".{path.name}.", dir=path.parent))
    try:
        _write_files(tmp, results, config, y_test)
        if path.exists():
            shutil.rmtree(path)
        os.replace(tmp, path)
    except BaseException:
        shutil.rmtree(tmp, ignore_errors=True)
        raise
    return path


def start_run(path, config: dict, force: bool = False) -> Path:
    """Create the run directory ``path`` for a checkpointed run: ``config.json`` with ``"complete": false``.

    ``config`` must hold what ``chefs cnn resume`` needs to rebuild the run
    (data settings, chain settings, seed, number of chains). With ``force`` an
    existing run directory is deleted first.
    """
    path = check_target(path, force)
    if path.exists():
        shutil.rmtree(path)
    (path / "chains").mkdir(parents=True)
    write_config(path, dict(config, complete=False))
    return path


def write_config(path, config: dict) -> None:
    """Replace ``path/config.json`` atomically."""
    path = Path(path)
    tmp = path / "config.json.tmp"
    with open(tmp, "w", encoding="utf-8") as fh:
        json.dump(_clean(config), fh, default=json_default, indent=1)
    os.replace(tmp, path / "config.json")


def _refuse_other_run(path) -> None:
    """A run of ``chefs fit``, ``prior mcmc`` or ``outtree fit``: say so and name its commands."""
    from ..runkind import other_run_message

    wrong = other_run_message(path, "chefs cnn sample")
    if wrong:
        raise ValueError(wrong)


def read_config(path) -> dict:
    """``path/config.json`` of a run directory (complete or not)."""
    path = Path(path)
    if not path.is_dir():
        raise FileNotFoundError(f"no such run directory: {path}")
    _refuse_other_run(path)
    f = path / "config.json"
    if not f.is_file():
        raise ValueError(f"{path} is not a run directory (no config.json)")
    try:
        with open(f, encoding="utf-8") as fh:
            cfg = json.load(fh)
    except json.JSONDecodeError as err:
        raise ValueError(f"{f}: malformed JSON ({err.msg})") from None
    if not isinstance(cfg, dict):
        raise ValueError(f"{f}: expected a JSON object")
    return cfg


def finish_run(path, results, config: dict, y_test: np.ndarray) -> Path:
    """Write the four run files into the existing run directory ``path`` (``config.json`` last).

    Each file is written under a temporary name and renamed into place; the
    chains' checkpoints under ``path/chains`` are kept (a resume with more
    samples continues from them).
    """
    path = Path(path)
    _write_files(path, results, config, y_test, suffix=".tmp")
    for name in RUN_FILES[1:] + RUN_FILES[:1]:  # config.json last
        os.replace(path / (name + ".tmp"), path / name)
    return path


# ---------------------------------------------------------------- checkpoints
def chain_progress(path) -> dict:
    """``{chain: committed iterations}`` of the checkpoints under ``path/chains``."""
    out = {}
    root = Path(path) / "chains"
    if root.is_dir():
        for d in sorted(root.iterdir()):
            f = d / "state.json"
            if d.name.startswith("c") and d.name[1:].isdigit() and f.is_file():
                try:
                    with open(f, encoding="utf-8") as fh:
                        out[int(d.name[1:])] = int(json.load(fh)["iteration"])
                except (json.JSONDecodeError, KeyError, TypeError, ValueError):
                    raise ValueError(f"{f}: malformed checkpoint") from None
    return out


def _enc_float(x):
    x = float(x)
    return x if math.isfinite(x) else repr(x)  # 'inf', '-inf', 'nan'


def _dec_float(x):
    if x is None:
        return math.nan
    return float(x)


_INFO_FLOATS = ("log_ratio", "log_evidence_proposal", "log_accept", "seconds")


class ChainCheckpoint:
    """Progress of one chain in ``RUN/chains/c<k>/`` (see the module docstring).

    :meth:`commit` is the only commit point: lines appended to the JSONL files
    and network files written after the last commit are ignored (and
    overwritten) by :meth:`load`, so a chain killed at any moment resumes
    from its last completed iteration.
    """

    def __init__(self, root):
        self.root = Path(root)
        (self.root / "nets").mkdir(parents=True, exist_ok=True)

    # writing -------------------------------------------------------------
    def append_info(self, info: dict) -> None:
        d = dict(info)
        for k in _INFO_FLOATS:
            if k in d:
                d[k] = _enc_float(d[k])
        self._append("infos.jsonl", d)

    def append_record(self, rec: dict) -> None:
        self._append("samples.jsonl", _clean(rec))

    def _append(self, name, obj) -> None:
        with open(self.root / name, "a", encoding="utf-8") as fh:
            fh.write(json.dumps(obj, default=json_default, separators=(",", ":")))
            fh.write("\n")

    def save_network(self, net_id: int, weights: dict, test_proba: np.ndarray) -> None:
        arrays = {f"w/{k}": np.asarray(v) for k, v in weights.items()}
        arrays["test_proba"] = np.asarray(test_proba)
        self._save_npz(self.root / "nets" / f"n{int(net_id)}.npz", arrays)

    @staticmethod
    def _save_npz(dest: Path, arrays: dict) -> None:
        tmp = dest.with_name(dest.name + ".tmp")
        with open(tmp, "wb") as fh:
            np.savez(fh, **arrays)
        os.replace(tmp, dest)

    def commit(self, iteration: int, state, next_id: int, rng_state: dict, counters: dict,
               n_records: int, n_infos: int, wall_seconds: float) -> None:
        """Store the chain after ``iteration`` completed MH iterations (0: the initial state)."""
        wname = f"state_{int(iteration)}.npz"
        self._save_npz(self.root / wname, {f"w/{k}": np.asarray(v) for k, v in state.weights.items()})
        d = {
            "iteration": int(iteration), "dag": state.dag.to_dict(),
            "log_prior": _enc_float(state.log_prior), "log_evidence": _enc_float(state.log_evidence),
            "net_id": int(state.net_id), "next_id": int(next_id), "rng_state": rng_state,
            "counters": {k: int(v) for k, v in counters.items()}, "n_records": int(n_records),
            "n_infos": int(n_infos), "wall_seconds": float(wall_seconds), "weights_file": wname,
        }
        tmp = self.root / "state.json.tmp"
        with open(tmp, "w", encoding="utf-8") as fh:
            json.dump(d, fh, default=json_default, separators=(",", ":"))
        os.replace(tmp, self.root / "state.json")
        for f in self.root.glob("state_*.npz"):
            if f.name != wname:
                f.unlink(missing_ok=True)

    # reading -------------------------------------------------------------
    def load(self) -> dict | None:
        """The last committed progress, or None when the chain never committed.

        Returns a dict with the fields of :meth:`commit` plus ``weights`` (the
        state's arrays), ``records`` and ``infos`` (the committed lines) and
        ``networks`` (``net_id -> {"weights", "test_proba"}`` for the networks
        the records use). The JSONL files are cut back to the committed lines.
        """
        f = self.root / "state.json"
        if not f.is_file():
            return None
        try:
            with open(f, encoding="utf-8") as fh:
                d = json.load(fh)
        except json.JSONDecodeError as err:
            raise ValueError(f"{f}: malformed checkpoint ({err.msg})") from None
        for k in ("log_prior", "log_evidence"):
            d[k] = _dec_float(d[k])
        d["weights"] = self._load_npz(self.root / d["weights_file"], prefix="w/")
        d["records"] = self._lines("samples.jsonl", d["n_records"])
        infos = self._lines("infos.jsonl", d["n_infos"])
        for i in infos:
            for k in _INFO_FLOATS:
                if k in i:
                    i[k] = _dec_float(i[k])
        d["infos"] = infos
        nets = {}
        for rec in d["records"]:
            nid = int(rec["net_id"])
            if nid not in nets:
                z = self._load_npz(self.root / "nets" / f"n{nid}.npz")
                proba = z.pop("test_proba")
                nets[nid] = {"weights": {k[2:]: v for k, v in z.items()}, "test_proba": proba}
        d["networks"] = nets
        return d

    @staticmethod
    def _load_npz(path: Path, prefix: str = "") -> dict:
        if not path.is_file():
            raise ValueError(f"checkpoint file missing: {path}")
        with np.load(path, allow_pickle=False) as z:
            return {k[len(prefix):]: z[k] for k in z.files if k.startswith(prefix)}

    def _lines(self, name: str, n: int) -> list:
        path = self.root / name
        raw = []
        if n:
            with open(path, encoding="utf-8") as fh:
                for line in fh:
                    if len(raw) == n:
                        break
                    if not line.endswith("\n"):
                        break  # a line cut by an interruption
                    raw.append(line)
            if len(raw) < n:
                raise ValueError(f"{path}: {len(raw)} complete lines, the checkpoint expects {n}")
        try:
            out = [json.loads(line) for line in raw]
        except json.JSONDecodeError as err:
            raise ValueError(f"{path}: malformed JSON line ({err.msg})") from None
        tmp = path.with_name(name + ".tmp")
        with open(tmp, "w", encoding="utf-8") as fh:
            fh.writelines(raw)
        os.replace(tmp, path)
        return out


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
    _refuse_other_run(path)
    missing = [f for f in RUN_FILES if not (path / f).is_file()]
    if not missing and not read_config(path).get("complete", False):
        raise ValueError(f"{path} is not a complete run directory (its chains have not finished); "
                         f"continue it with 'chefs cnn resume {path}'")
    if missing:
        hint = (f"continue it with 'chefs cnn resume {path}'" if (path / "chains").is_dir()
                and (path / "config.json").is_file() else "create one with 'chefs cnn sample --out RUN'")
        raise ValueError(f"{path} is not a complete run directory (missing {', '.join(missing)}); {hint}")
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
