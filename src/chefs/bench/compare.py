"""A fitted belief network beside the density estimators users already have (``chefs compare RUN``).

For a run of ``chefs fit`` on a named data set (which keeps its test split in the run directory):

* each model's **Hellinger distance** to the test data, Table 1's rule (:func:`chefs.evaluation.hellinger` of as
  many fantasy points as test points against the test points), and its **held-out log-likelihood** per point;
* the peers, fitted to the run's own training data by Table 1's code and random streams
  (:func:`chefs.bench.table1.fit_dpgmm`, :func:`chefs.bench.table1.fit_kde`): scikit-learn's Dirichlet-process
  Gaussian mixture and a kernel density estimate with its bandwidth chosen by 5-fold cross-validation;
* on the synthetic sets, the **truth**: a fresh draw of the generator against the test data (the rule's noise floor)
  and the generator's own mean log-density of the test points (the best held-out value a model can reach on
  average);
* the CPU seconds of each: the peers' fits timed here, the belief network's from the ``chefs fit`` command that made
  the run (``fit.json``; not known for runs made before it was written, or finished by ``chefs resume``).

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


def peer_rows(train: np.ndarray, test: np.ndarray, split_seed: int = 0, peers=PEERS, name: str | None = None):
    """DP-GMM and KDE fitted to ``train``, scored on ``test``, timed; plus the truth's row when ``name`` is a
    synthetic data set. Returns ``(rows, fantasies)``: dicts with :data:`COLUMNS`, and each model's fantasy
    points (as many as test points) by model name. The random streams are Table 1's for split ``split_seed``,
    so the numbers equal its cells on the same training data."""
    from ..datasets import DATASETS, resolve_name, synthetic, true_log_density
    from ..evaluation import hellinger
    from .table1 import MODELS, fit_dpgmm, fit_kde

    fits = {"dpgmm": fit_dpgmm, "kde": fit_kde}
    rows, fantasies = [], {}
    for model in peers:
        if model not in fits:
            raise ValueError(f"unknown peer {model!r}; choose from {', '.join(PEERS)}")
        rng = np.random.default_rng([split_seed, 1, 2 + MODELS.index(model)])  # Table 1's stream of the model
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


def compare_run(run_dir, peers=PEERS, num_is: int = 64):
    """The run of ``chefs fit`` at ``run_dir`` beside ``peers`` (module docstring).

    Returns ``(rows, fantasies, test)``. Raises ``ValueError`` for a run without a test split (fitted on a CSV
    file), a conditional run (``--inputs``), or a run that is not finished."""
    from ..density import BeliefNetwork
    from ..evaluation import hellinger

    run = Path(run_dir)
    if not (run / "config.json").is_file():
        raise ValueError(f"{str(run)!r} is not a run directory of `chefs fit` (no config.json)")
    if not (run / "test.npy").is_file():
        raise ValueError(f"{str(run)!r} has no test split: `chefs compare` scores against the test half of a named "
                         "data set, and this run was fitted on all rows of a CSV file (fit on a named data set, or "
                         "on `chefs data show NAME --out-train F.csv`'s half, to compare)")
    net = BeliefNetwork.load(run)
    if net.inputs:
        raise ValueError(f"{str(run)!r} models p(outputs | inputs) (--inputs); the peers are joint densities, so "
                         "`chefs compare` needs a run without --inputs")
    test = np.load(run / "test.npy")
    train = np.load(run / "train.npy")
    record = fit_record(run)
    config = json.loads((run / "config.json").read_text())
    name = (run / "dataset.txt").read_text().strip() if (run / "dataset.txt").is_file() else None
    fantasy = net.sample(test.shape[0], rng=int(config.get("seed", 0)))  # the fantasy `chefs fit` scored
    prior = config.get("model", {}).get("structure_prior", {}).get("name", "icp")
    cpu = record.get("cpu_seconds")
    rows = [{"model": f"{prior} (this run)", "hellinger": hellinger(fantasy, test),
             "heldout_loglik": float(np.mean(net.score_samples(test, num_is=num_is))),
             "cpu_seconds": float("nan") if cpu is None else float(cpu),
             "note": "" if cpu is not None else "CPU of the fit not recorded (an older run, or finished by resume)"}]
    peer, fantasies = peer_rows(train, test, int(record.get("split_seed", 0)), peers, name)
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
        w.writerows(rows)
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
