"""A fitted belief network beside the density estimators users already have (``chefs compare RUN``).

For a run of ``chefs fit`` on a named data set (which keeps its test split in the run directory):

* each model's **Hellinger distance** to the test data, Table 1's rule (:func:`chefs.evaluation.hellinger` of as
  many fantasy points as test points against the test points), and its **held-out log-likelihood** per point;
* the peers, fitted to the run's own training data by Table 1's code and random streams
  (:func:`chefs.bench.table1.fit_dpgmm`, :func:`chefs.bench.table1.fit_kde`): scikit-learn's Dirichlet-process
  Gaussian mixture and a kernel density estimate with its bandwidth chosen by 5-fold cross-validation. On a split
  that Table 1's full settings use whole (every set but the quick settings' subsamples), their numbers are Table
  1's cells of that split;
* on the synthetic sets, the **truth**: a fresh draw of the generator against the test data (the rule's noise floor)
  and the generator's own mean log-density of the test points (the best held-out value a model can reach on
  average);
* the CPU seconds of each: the peers' fits timed here, the belief network's from the ``chefs fit`` command that made
  the run (``fit.json``; not known for runs made before it was written, fits that did not run to their end in one
  command, or chains on a Dask cluster).

The belief network's fantasy data use the run's own seed, so its HD is the one ``chefs fit`` printed. Nothing in
the run is changed; the table and a picture go to their own directory.
"""

from __future__ import annotations

import csv
import json
import math
import time
from pathlib import Path

import numpy as np

#: the estimators ``chefs compare`` fits beside the run, in Table 1's names
PEERS = ("dpgmm", "kde")
FIT_FILE = "fit.json"  # written by `chefs fit`: the data set, its split seed, the command's CPU and wall seconds
COLUMNS = ("model", "hellinger", "heldout_loglik", "cpu_seconds", "note")


def fit_record(run_dir) -> dict:
    """``RUN/fit.json`` as a dict (empty for runs made before ``chefs fit`` wrote it)."""
    p = Path(run_dir) / FIT_FILE
    return json.loads(p.read_text()) if p.is_file() else {}


class FitClock:
    """Wall and CPU seconds since it was made: CPU of this process and of its finished child processes
    (the chains of ``--chains`` > 1 run in worker processes, which the fit reaps before it returns)."""

    def __init__(self):
        self._wall, self._cpu = time.perf_counter(), self._cpu_now()

    @staticmethod
    def _cpu_now() -> float:
        import resource

        return sum(r.ru_utime + r.ru_stime for r in (resource.getrusage(resource.RUSAGE_SELF),
                                                      resource.getrusage(resource.RUSAGE_CHILDREN)))

    def seconds(self) -> tuple[float, float]:
        return time.perf_counter() - self._wall, self._cpu_now() - self._cpu


def write_fit_record(run_dir, data: str, split_seed: int | None, clock: FitClock, timed: str | None) -> None:
    """``RUN/fit.json``: the data set, its split seed (None: a CSV fitted on all its rows), and, when ``timed`` is
    None, the fit's wall and CPU seconds; otherwise ``timed`` says why they are not known."""
    wall, cpu = clock.seconds()
    record = {"data": data, "split_seed": split_seed}
    if timed is None:
        record.update(wall_seconds=round(wall, 2), cpu_seconds=round(cpu, 2))
    else:
        record["untimed"] = timed
    (Path(run_dir) / FIT_FILE).write_text(json.dumps(record) + "\n")


def peer_rows(train: np.ndarray, test: np.ndarray, split_seed: int = 0, peers=PEERS, name: str | None = None):
    """DP-GMM and KDE fitted to ``train``, scored on ``test``, timed; plus the truth's row when ``name`` is a
    synthetic data set. Returns ``(rows, fantasies)``: dicts with :data:`COLUMNS`, and each model's fantasy
    points (as many as test points) by model name. The random streams are Table 1's for split ``split_seed``,
    so the numbers equal its cells on the same training data."""
    from ..datasets import DATASETS, resolve_name, synthetic, true_log_density
    from ..evaluation import hellinger
    from .table1 import cell_rng, fit_dpgmm, fit_kde

    from . import check_names

    fits = {"dpgmm": fit_dpgmm, "kde": fit_kde}
    rows, fantasies = [], {}
    for model in check_names(peers, PEERS, "peers", "peer"):
        rng = cell_rng(split_seed, model)  # Table 1's stream of the model
        t0 = time.process_time()
        fantasy, ll = fits[model](train, test, test.shape[0], rng)
        rows.append({"model": model, "hellinger": hellinger(fantasy, test), "heldout_loglik": ll,
                     "cpu_seconds": time.process_time() - t0, "note": ""})
        fantasies[model] = fantasy
    key = resolve_name(name) if name else None
    if key is not None and DATASETS[key].kind == "synthetic":
        fresh = synthetic.GENERATORS[key](test.shape[0], np.random.default_rng([split_seed, 99]))
        rows.append({"model": "truth", "hellinger": hellinger(fresh, test),
                     "heldout_loglik": float(np.mean(true_log_density(key, test))), "cpu_seconds": float("nan"),
                     "note": "HD: a fresh draw of the generator against the test data"})
        fantasies["truth"] = fresh
    return rows, fantasies


def compare_run(run_dir, peers=PEERS):
    """The run of ``chefs fit`` at ``run_dir`` beside ``peers`` (module docstring).

    Returns ``(rows, fantasies, test)``. Raises ``ValueError`` for what it cannot score: not a run of ``chefs fit``
    (or one of ``chefs discover``), a run without a test split (fitted on all rows of a CSV file), a conditional
    run (``--inputs``), a run whose chains have not finished."""
    from ..causal import is_causal_run
    from ..density import BeliefNetwork
    from ..evaluation import hellinger
    from ..runkind import other_run_message, run_kind

    run = Path(run_dir)
    if run_kind(run) != "chefs fit":
        raise ValueError(other_run_message(run, "chefs fit")
                         or f"{str(run)!r} is not a run directory of `chefs fit` (no config.json of one)")
    if is_causal_run(run):
        raise ValueError(f"{str(run)!r} is a run of `chefs discover`; `chefs compare` scores density estimates "
                         "against a test split (`chefs fit --data NAME`)")
    if not (run / "test.npy").is_file():
        raise ValueError(f"{str(run)!r} has no test split: `chefs compare` scores against the test half of a named "
                         "data set, and this run was fitted on all rows of a CSV file (fit on a named data set, or "
                         "on `chefs data show NAME --out-train F.csv`'s half, to compare)")
    if json.loads((run / "unitmap.json").read_text()).get("inputs"):
        raise ValueError(f"{str(run)!r} models p(outputs | inputs) (--inputs); the peers are joint densities, so "
                         "`chefs compare` needs a run without --inputs")
    config = json.loads((run / "config.json").read_text())
    unfinished = [c for c in range(int(config.get("chains", 1))) if not (run / f"chain-{c}" / "done").exists()]
    if unfinished:
        raise ValueError(f"{str(run)!r} is unfinished (chain(s) {unfinished}): `chefs resume {run}` finishes it, "
                         "then compare")
    net = BeliefNetwork.load(run)
    test = np.load(run / "test.npy")
    train = np.load(run / "train.npy")
    record = fit_record(run)
    name = (run / "dataset.txt").read_text().strip() if (run / "dataset.txt").is_file() else None
    # the run's own seed and `net.score`: the fantasy data and held-out value that `chefs fit` printed
    fantasy = net.sample(test.shape[0], rng=int(config.get("seed", 0)))
    prior = config.get("model", {}).get("structure_prior", {}).get("name", "icp")
    cpu = record.get("cpu_seconds")
    if cpu is not None:
        note = ""
    elif record:
        note = f"CPU of the fit not known: {record.get('untimed', 'not recorded')}"
    else:
        note = "CPU of the fit not known: a run made before `chefs fit` wrote fit.json"
    rows = [{"model": f"{prior} (this run)", "hellinger": hellinger(fantasy, test), "heldout_loglik": net.score(test),
             "cpu_seconds": float("nan") if cpu is None else float(cpu), "note": note}]
    peer, fantasies = peer_rows(train, test, int(record.get("split_seed") or 0), peers, name)
    if not record:
        for r in peer:
            r["note"] = (r["note"] + "; " if r["note"] else "") + "no fit.json: split seed 0 assumed for the streams"
    return rows + peer, {rows[0]["model"]: fantasy, **fantasies}, test


def format_table(rows) -> str:
    """The rows as a plain-text table."""
    def num(v, fmt):
        return "" if v is None or (isinstance(v, float) and math.isnan(v)) else format(v, fmt)

    width = max(len(r["model"]) for r in rows)
    lines = [f"{'model':<{width}}  {'HD':>7}  {'held-out/pt':>11}  {'CPU s':>7}"]
    for r in rows:
        lines.append(f"{r['model']:<{width}}  {num(r['hellinger'], '.4f'):>7}  {num(r['heldout_loglik'], '.4f'):>11}  "
                     f"{num(r['cpu_seconds'], '.1f'):>7}" + (f"  {r['note']}" if r["note"] else ""))
    return "\n".join(lines)


def write_compare(out, rows, fantasies, test, names=None) -> list[Path]:
    """``OUT/compare.csv`` (:data:`COLUMNS`) and ``OUT/compare.png``: the test data and each model's fantasy data
    on the same axes (two columns: the columns themselves; more: the test data's first two principal axes).
    Returns the paths written."""
    from ..plots import _mpl

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    with open(out / "compare.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows({k: "" if isinstance(v, float) and math.isnan(v) else v for k, v in r.items()} for r in rows)
    D = test.shape[1]
    if D <= 2:
        project, labels = (lambda X: X), list(names or [f"column {j}" for j in range(D)])
    else:
        mu = test.mean(axis=0)
        axes_ = np.linalg.svd(test - mu, full_matrices=False)[2][:2]
        project, labels = (lambda X: (X - mu) @ axes_.T), ["test data's principal axis 1", "principal axis 2"]
    panels = [("test data", test)] + [(r["model"], fantasies[r["model"]]) for r in rows if r["model"] in fantasies]
    pts = [project(X) for _, X in panels]
    both = np.vstack(pts)  # the same ranges in every panel (0.5-99.5 % of all points, so that a stray one
    lo, hi = np.percentile(both, 0.5, axis=0), np.percentile(both, 99.5, axis=0)  # does not squeeze the rest)
    pad = 0.05 * np.where(hi > lo, hi - lo, 1.0)
    by_model = {r["model"]: r for r in rows}
    plt = _mpl()
    fig, axs = plt.subplots(1, len(panels), figsize=(3.3 * len(panels), 3.5), squeeze=False)
    for ax, (title, _), P in zip(axs[0], panels, pts):
        if D == 1:
            ax.hist(P[:, 0], bins=np.linspace(lo[0] - pad[0], hi[0] + pad[0], 41))
        else:
            ax.scatter(P[:, 0], P[:, 1], s=1.5, alpha=0.4)
            ax.set(ylim=(lo[1] - pad[1], hi[1] + pad[1]))
        ax.set(xlim=(lo[0] - pad[0], hi[0] + pad[0]), xlabel=labels[0])
        r = by_model.get(title)
        ax.set_title(title if r is None else f"{title}\nHD {r['hellinger']:.3f}, held-out {r['heldout_loglik']:.2f}",
                     fontsize=9)
    if D > 1:
        axs[0][0].set_ylabel(labels[1])
    fig.tight_layout()
    fig.savefig(out / "compare.png", dpi=100)
    plt.close(fig)
    return [out / "compare.csv", out / "compare.png"]
