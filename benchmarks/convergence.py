"""Fit quality against CPU time (issue 21): Hellinger distance (HD) and held-out
log-likelihood of the ICP belief network, scikit-learn's DP-GMM and KDE, and the
true density, on ring, two-moons, pinwheel and iris.

    python benchmarks/convergence.py --out DIR [--icp 'old={}' --icp 'new={"kernel": "x"}']
        [--datasets ring,two-moons,pinwheel,iris] [--seeds 0,1,2] [--sweeps 6000] [--thin T]
        [--figure docs/figures/convergence.png] [--quick] [--force]

Writes ``DIR/convergence.csv`` (one row per evaluation), ``DIR/convergence.md``
(summary) and the figure (default ``DIR/convergence.png``; one panel per data set,
HD against CPU seconds on a log axis, and the held-out log-likelihood below).

The evaluation rule (fixed before any model's numbers were looked at; not tuned):

* Data: ``load_split(name, seed)``, as Table 1 (``--quick``: at most 300 training
  points, drawn as Table 1's quick cells draw them).
* Every evaluation is Table 1's (``chefs.bench.table1``): as many fantasy points as
  test points, ``hellinger(fantasy, test)`` with its defaults, and the mean
  held-out log-density per test point in data space (belief networks:
  ``evaluate_network``; DP-GMM and KDE: ``fit_dpgmm`` and ``fit_kde`` themselves,
  with Table 1's random streams, so their rows equal Table 1's).
* ICP (``--icp LABEL=JSON``, repeatable; JSON = keyword arguments of
  ``chefs.BeliefNetwork``, default ``default={}``, the library's defaults of the day: since
  stop 39 they rotate iris's unit map, so earlier stops' iris rows reproduce with
  ``{"rotate": false}``; since stop 49 they include the non-centred updates and 512 pilot
  draws, so stops 40-48's rows reproduce with ``{"noncentred": false, "pilot_draws": 32}``): one chain per (configuration, data set, seed), ``--sweeps`` sweeps, every ``--thin``-th sample stored from the
  first sweep on (``burn_in=0``; the structure warm-up is what a run with half the
  sweeps as burn-in gets, ``min(300, sweeps // 4)``, unless the JSON sets it). At
  checkpoint ``s`` the posterior is the stored samples of sweeps ``(s/2, s]``: what a
  run stopped at ``s`` with Table 1's burn-in rule (half the sweeps) would keep.
  Checkpoints: ``sweeps * 2^(-j/2)``, rounded to the thinning, down to 4 thinning
  intervals. A JSON ``burn_in`` B stores nothing before B (windows start there).
* CPU seconds: process time (all threads of this process: numba's and BLAS's) of
  the fit alone. ICP: from the start of ``fit`` to the end of sweep ``s`` (after
  a warm-up fit that compiles the numba kernels, so compilation is not counted);
  its evaluations are not counted. DP-GMM and KDE: the whole ``fit_dpgmm`` /
  ``fit_kde`` call (their fantasy draws and scoring included; small).
* Truth (synthetic sets): HD between a fresh draw of the generator (as many points
  as the test set) and the test set, which is the rule's noise floor, and the true
  mean log p(test) (``chefs.datasets.true_heldout_loglik``).
* Time to reach: per seed, the threshold is 1.2 x DP-GMM's HD on that split; an
  ICP configuration reaches it at the CPU time of its first checkpoint at or below
  it; DP-GMM and KDE at their fit's CPU time if their HD is at or below it. The
  summary gives the median over the seeds that reach it and how many do.

Run only what is measured: the full default (4 data sets x 3 seeds, 6,000 sweeps per
ICP configuration) takes about an hour per configuration on the 2-core machine;
``--quick`` (60 sweeps, 300 training points, seed 0) checks the pipeline in a minute
or two and its numbers mean nothing.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import re
import sys
import tempfile
import textwrap
import time
from pathlib import Path

import numpy as np

DATASETS = ("ring", "two-moons", "pinwheel", "iris")
CSV_FIELDS = ["dataset", "seed", "model", "config", "sweep", "samples", "cpu_seconds", "hellinger",
              "heldout_loglik", "note"]
FORBIDDEN = {"sweeps": "--sweeps", "thin": "--thin", "seed": "--seeds", "out": "the benchmark's run directory",
             "force": "the benchmark", "progress": "the benchmark (it times the sweeps)",
             "checkpoint_every": "the benchmark"}
THRESHOLD = 1.2  # x DP-GMM's HD (issue 21)
QUICK = {"sweeps": 60, "thin": 3, "max_train": 300, "seeds": (0,)}
FULL = {"sweeps": 6000, "thin": None, "max_train": None, "seeds": (0, 1, 2)}


def parse_icp(text: str, extra: tuple = ()) -> tuple[str, dict]:
    """``LABEL=JSON`` -> (label, BeliefNetwork keyword arguments), checked; ``extra``: keys the
    calling script reads itself (not passed to BeliefNetwork)."""
    label, sep, js = text.partition("=")
    label = label.strip()
    if not sep or not re.fullmatch(r"[A-Za-z0-9_.+-]+", label):
        raise ValueError(f"--icp takes LABEL=JSON with a label of letters, digits, '_.+-', got {text!r}")
    try:
        kw = json.loads(js)
    except json.JSONDecodeError as err:
        raise ValueError(f"--icp {label}: not JSON ({err.msg} at character {err.pos}): {js!r}") from None
    if not isinstance(kw, dict):
        raise ValueError(f"--icp {label}: the JSON must be an object of BeliefNetwork keyword arguments, got {js!r}")
    for key, who in FORBIDDEN.items():
        if key in kw:
            raise ValueError(f"--icp {label}: {key!r} is set by {who}, not in the JSON")
    if kw.get("chains", 1) != 1:
        raise ValueError(f"--icp {label}: one chain per fit (CPU time is measured in this process), got chains="
                         f"{kw['chains']!r}")
    from chefs.density import BeliefNetwork

    try:  # every option checked before anything runs
        BeliefNetwork(**{**{k: v for k, v in kw.items() if k not in extra}, "sweeps": 10, "burn_in": 0,
                         "thin": 1})  # burn_in: checked against --sweeps
    except TypeError as err:
        raise ValueError(f"--icp {label}: {err}") from None
    return label, kw


def checkpoints(sweeps: int, thin: int, first: int = 0) -> list[int]:
    """Sweeps ``sweeps * 2^(-j/2)`` rounded to multiples of ``thin``, from ``4 thin`` up
    (and above ``first``, a configured burn-in), increasing."""
    out = set()
    j = 0
    while True:
        s = int(round(sweeps * 2 ** (-j / 2) / thin)) * thin
        if s < 4 * thin or s <= first:
            break
        out.add(min(s, sweeps))
        j += 1
    return sorted(out)


def icp_curve(train, test, seed, label, kw, sweeps, thin, log, heldout_draws=32):
    """Fit one chain with timed sweeps; evaluate the window of each checkpoint."""
    from chefs.bench.table1 import cell_rng, evaluate_network
    from chefs.density import MARGIN, BeliefNetwork
    from chefs.evaluation import hellinger
    from chefs.mcmc.diagnostics import chain_stores

    rng = cell_rng(seed, "icp")  # Table 1's ICP stream
    cpu = {}
    settings = {"num_tries": 4, "margin": MARGIN, "structure_warmup": min(300, sweeps // 4), **kw,
                "sweeps": sweeps, "burn_in": kw.get("burn_in", 0), "thin": thin, "chains": 1}
    with tempfile.TemporaryDirectory(prefix="chefs-convergence-") as out:
        net = BeliefNetwork(seed=int(rng.integers(2**31)), out=out, force=True, checkpoint_every=30.0,
                            progress=lambda sweep, state: cpu.__setitem__(sweep, time.process_time() - t0),
                            **settings)
        t0 = time.process_time()
        net.fit(train)
        stored = []
        for _, store in chain_stores(out):
            stored.extend((sweep, json.loads(g)) for sweep, g, *_ in store.rows())
            store.close()
        rows = []
        for k, s in enumerate(checkpoints(sweeps, thin, settings["burn_in"])):
            window = [g for sweep, g in stored if s / 2 < sweep <= s]
            if not window:
                continue
            net.samples_ = window  # the posterior a run stopped at s with burn-in s/2 keeps
            fantasy, ll, note = evaluate_network(net, test, test.shape[0], np.random.default_rng([seed, 21, k]),
                                                 heldout_draws)
            rows.append({"model": "icp", "config": label, "sweep": s, "samples": len(window),
                         "cpu_seconds": cpu[s], "hellinger": hellinger(fantasy, test), "heldout_loglik": ll,
                         "note": note})
        log(f"    icp {label}: {sweeps} sweeps in {cpu[sweeps]:.1f} CPU s ({sweeps / cpu[sweeps]:.1f} sweeps per "
            f"CPU s); final HD {rows[-1]['hellinger']:.4f}, held-out {rows[-1]['heldout_loglik']:.3f}")
    return rows


def warm_up(configs, train):
    """A short fit per configuration, so that numba's compilation is not timed."""
    from chefs.density import BeliefNetwork

    for _, kw in configs:
        with tempfile.TemporaryDirectory(prefix="chefs-warmup-") as out:
            settings = {**kw, "sweeps": 20, "burn_in": 10, "thin": 5, "structure_warmup": 2}
            BeliefNetwork(out=out, force=True, progress=False, **settings).fit(train[:100])


def reference_rows(name, train, test, seed):
    """DP-GMM and KDE with Table 1's code and streams, timed; the truth's row (``chefs compare``'s rows)."""
    from chefs.bench.compare import peer_rows

    rows, _ = peer_rows(train, test, seed, name=name)
    return [{**r, "config": "", "sweep": "", "samples": "",
             "cpu_seconds": "" if r["model"] == "truth" else r["cpu_seconds"]} for r in rows]


def run(out, datasets, seeds, configs, sweeps, thin, max_train, data_dir=None, log=print, heldout_draws=32):
    from chefs.datasets import load_split

    out.mkdir(parents=True, exist_ok=True)
    path = out / "convergence.csv"
    rows = []
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=CSV_FIELDS)
        w.writeheader()
        warmed = False
        for name in datasets:
            for seed in seeds:
                train, test = load_split(name, seed=seed, data_dir=data_dir)
                if max_train and train.shape[0] > max_train:  # as Table 1's quick cells subsample
                    train = train[np.random.default_rng([seed, 1]).choice(train.shape[0], max_train, replace=False)]
                if not warmed:
                    warm_up(configs, train)
                    warmed = True
                log(f"  {name} seed {seed}: {train.shape[0]} training, {test.shape[0]} test points")
                new = reference_rows(name, train, test, seed)
                for label, kw in configs:
                    new += icp_curve(train, test, seed, label, kw, sweeps, thin, log, heldout_draws)
                for r in new:
                    r.update(dataset=name, seed=seed)
                    if r["model"] != "icp":
                        log(f"    {r['model']}: HD {r['hellinger']:.4f}, held-out {r['heldout_loglik']:.3f}"
                            + (f" ({r['cpu_seconds']:.1f} CPU s)" if r["cpu_seconds"] != "" else ""))
                    w.writerow(r)
                fh.flush()
                rows += new
    return rows


def time_to_reach(rows, name, model, config, seeds):
    """Per seed, the CPU seconds at which ``model`` first has HD <= 1.2 x DP-GMM's (None: never)."""
    out = []
    for seed in seeds:
        ref = [r for r in rows if r["dataset"] == name and r["seed"] == seed and r["model"] == "dpgmm"]
        mine = sorted((r for r in rows if r["dataset"] == name and r["seed"] == seed and r["model"] == model
                       and r["config"] == config), key=lambda r: float(r["cpu_seconds"]))
        if not ref or not mine:
            continue
        limit = THRESHOLD * float(ref[0]["hellinger"])
        hit = [float(r["cpu_seconds"]) for r in mine if float(r["hellinger"]) <= limit]
        out.append(hit[0] if hit else None)
    return out


def summary(rows, datasets, seeds, configs, header) -> str:
    def final(name, model, config, key):
        v = []
        for seed in seeds:
            mine = [r for r in rows if r["dataset"] == name and r["seed"] == seed and r["model"] == model
                    and r["config"] == config]
            if mine:
                v.append(float(max(mine, key=lambda r: float(r["cpu_seconds"] or 0))[key]))
        return v

    def fmt(v, digits=4):
        if not v:
            return "—"
        return f"{np.mean(v):.{digits}f} ± {np.std(v):.{digits}f}" if len(v) > 1 else f"{v[0]:.{digits}f}"

    models = [("icp", label) for label, _ in configs] + [("dpgmm", ""), ("kde", ""), ("truth", "")]
    name_of = lambda m, c: f"icp {c}" if m == "icp" else m
    lines = ["# Convergence: HD and held-out log-likelihood against CPU time", "", header, "",
             f"## CPU seconds to reach {THRESHOLD} x DP-GMM's HD (median over the seeds that reach it; "
             "how many of them do)", "", "| model | " + " | ".join(datasets) + " |",
             "|---|" + "---|" * len(datasets)]
    for m, c in models:
        if m == "truth":
            continue
        cells = []
        for name in datasets:
            t = time_to_reach(rows, name, m, c, seeds)
            hit = [x for x in t if x is not None]
            cells.append(f"{np.median(hit):.1f} s ({len(hit)}/{len(t)})" if hit else f"not reached (0/{len(t)})"
                         if t else "—")
        lines.append(f"| {name_of(m, c)} | " + " | ".join(cells) + " |")
    for key, title in (("hellinger", "Final HD (mean ± sd over seeds; ICP: its last checkpoint)"),
                       ("heldout_loglik", "Final held-out log-likelihood per point")):
        lines += ["", f"## {title}", "", "| model | " + " | ".join(datasets) + " |", "|---|" + "---|" * len(datasets)]
        for m, c in models:
            lines.append(f"| {name_of(m, c)} | " + " | ".join(fmt(final(n, m, c, key)) for n in datasets) + " |")
    lines += ["", "The truth's HD is a fresh draw of the generator against the test set (the rule's noise floor); "
              "its held-out value is the true mean log p(test)."]
    return "\n".join(lines) + "\n"


def figure(rows, datasets, seeds, configs, path, title):
    from chefs.plots import _mpl

    plt = _mpl()
    fig, axes = plt.subplots(2, len(datasets), figsize=(4.2 * len(datasets), 7.4), squeeze=False)
    for j, name in enumerate(datasets):
        for k, (key, ax) in enumerate((("hellinger", axes[0, j]), ("heldout_loglik", axes[1, j]))):
            for i, (label, _) in enumerate(configs):
                per_seed = []
                for seed in seeds:
                    mine = sorted((r for r in rows if r["dataset"] == name and r["seed"] == seed and r["model"] == "icp"
                                   and r["config"] == label), key=lambda r: int(r["sweep"]))
                    if mine:
                        x = [float(r["cpu_seconds"]) for r in mine]
                        y = [float(r[key]) for r in mine]
                        ax.plot(x, y, color=f"C{i}", alpha=0.35, lw=0.8)
                        per_seed.append((x, y))
                if per_seed:
                    n = min(len(x) for x, _ in per_seed)  # the same checkpoints in every seed
                    ax.plot(np.mean([x[:n] for x, _ in per_seed], axis=0), np.mean([y[:n] for _, y in per_seed], axis=0),
                            "o-", color=f"C{i}", ms=3, label=f"ICP {label}")
            for model, marker, color in (("dpgmm", "s", "k"), ("kde", "^", "C7")):
                pts = [(float(r["cpu_seconds"]), float(r[key])) for r in rows
                       if r["dataset"] == name and r["model"] == model]
                if pts:
                    ax.scatter(*zip(*pts), marker=marker, color=color, label=model.upper().replace("DPGMM", "DP-GMM"),
                               zorder=3)
            truth = [float(r[key]) for r in rows if r["dataset"] == name and r["model"] == "truth"]
            if truth:
                ax.axhline(np.mean(truth), color="C2", ls="--", lw=1,
                           label="truth (HD: fresh draw)" if key == "hellinger" else "truth")
            dp = [float(r["hellinger"]) for r in rows if r["dataset"] == name and r["model"] == "dpgmm"]
            if key == "hellinger" and dp:
                ax.axhline(THRESHOLD * np.mean(dp), color="k", ls=":", lw=1, label=f"{THRESHOLD} x DP-GMM")
            ax.set_xscale("log")
            ax.set_xlabel("CPU seconds")
            ax.set_ylabel("Hellinger distance" if key == "hellinger" else "held-out log-lik per point")
            if k == 0:
                ax.set_title(name)
        axes[0, j].legend(fontsize=7)
    fig.suptitle(title, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=100)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="directory for convergence.csv, convergence.md and the figure")
    ap.add_argument("--icp", action="append", default=None, metavar="LABEL=JSON",
                    help="an ICP configuration: a label and BeliefNetwork keyword arguments as JSON; repeatable "
                         "(default: default={})")
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--seeds", default=None, help="comma-separated split seeds (default 0,1,2; --quick: 0)")
    ap.add_argument("--sweeps", type=int, default=None, help="sweeps per ICP chain (default 6000; --quick: 60)")
    ap.add_argument("--thin", type=int, default=None, help="store every THIN-th sweep (default sweeps // 200)")
    ap.add_argument("--figure", default=None, help="figure path (default OUT/convergence.png)")
    ap.add_argument("--quick", action="store_true", help="a smoke run: 60 sweeps, 300 training points, seed 0")
    ap.add_argument("--heldout-draws", type=int, default=32,
                    help="importance draws per test point and posterior sample in the ICP's held-out estimate "
                         "(default 32, as in the runs so far, which biases it low by 0.015-0.08 nats per point on "
                         "the synthetic sets; Table 1's full settings use 512: docs/derivations.md 3.9)")
    ap.add_argument("--data-dir", default=os.environ.get("CHEFS_DATA"))
    ap.add_argument("--force", action="store_true", help="replace an existing OUT/convergence.csv")
    a = ap.parse_args(argv)
    try:
        base = QUICK if a.quick else FULL
        configs = [parse_icp(t) for t in (a.icp or ["default={}"])]
        labels = [c[0] for c in configs]
        if len(set(labels)) < len(labels):
            raise ValueError(f"--icp labels must differ, got {labels}")
        from chefs.bench import check_names

        datasets = check_names([d for d in a.datasets.split(",") if d], DATASETS, "--datasets", "data set")
        try:
            seeds = base["seeds"] if a.seeds is None else tuple(int(s) for s in a.seeds.split(","))
        except ValueError:
            seeds = ()
        if not seeds or min(seeds) < 0 or len(set(seeds)) < len(seeds):
            raise ValueError(f"--seeds must be distinct non-negative integers, got {a.seeds!r}")
        sweeps = base["sweeps"] if a.sweeps is None else a.sweeps
        thin = a.thin if a.thin is not None else base["thin"] or max(1, sweeps // 200)
        if sweeps < 1 or thin < 1 or sweeps < 8 * thin:
            raise ValueError(f"need sweeps >= 8 x thin >= 8 (two checkpoints at least), got sweeps {sweeps}, "
                             f"thin {thin}")
        for label, kw in configs:
            b = kw.get("burn_in", 0)
            if isinstance(b, bool) or not isinstance(b, int) or not 0 <= b <= sweeps - 4 * thin:
                raise ValueError(f"--icp {label}: burn_in must be an integer in [0, sweeps - 4 x thin] = "
                                 f"[0, {sweeps - 4 * thin}] so that a checkpoint has samples, got {b!r}")
        if a.heldout_draws < 1:
            raise ValueError(f"--heldout-draws must be a positive integer, got {a.heldout_draws}")
        out = Path(a.out)
        if (out / "convergence.csv").exists() and not a.force:
            raise ValueError(f"{out / 'convergence.csv'} exists; use --force to replace it")
    except ValueError as err:
        print(f"convergence: error: {err}", file=sys.stderr)
        return 2
    import numba

    header = (f"{'--quick: a smoke run, numbers not meaningful; ' if a.quick else ''}{sweeps} sweeps per ICP chain, "
              f"thin {thin}; seeds {', '.join(map(str, seeds))}; training points: "
              f"{base['max_train'] or 'all'}; held-out importance draws {a.heldout_draws}; numba threads {numba.get_num_threads()}; "
              f"ICP configurations: {'; '.join(f'{lab} = {json.dumps(kw)}' for lab, kw in configs)}.")
    print(header)
    t0 = time.perf_counter()
    rows = run(out, datasets, seeds, configs, sweeps, thin, base["max_train"], a.data_dir,
               heldout_draws=a.heldout_draws)
    (out / "convergence.md").write_text(summary(rows, datasets, seeds, configs, header))
    fig = Path(a.figure) if a.figure else out / "convergence.png"
    figure(rows, datasets, seeds, configs, fig, "\n".join(textwrap.wrap(header, 40 * len(datasets))))
    print(f"wrote {out / 'convergence.csv'}, {out / 'convergence.md'}, {fig} ({time.perf_counter() - t0:.0f} s wall)")
    print((out / "convergence.md").read_text())
    return 0


if __name__ == "__main__":
    sys.exit(main())
