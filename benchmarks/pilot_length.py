"""Table 1's ICP cells with other start-up settings, side by side (issue 21; docs/derivations.md 3.9).

    python benchmarks/pilot_length.py --out DIR [--datasets two-moons,pinwheel,ring] [--seeds 10,11,12]
        [--icp 'default={}' --icp 'long={"pilot_sweeps": 3000, "pilot_draws": 512}'] [--jobs 2]
        [--plot-only] [--force]

Every fit is the full-settings ICP cell of ``chefs bench table1`` (its split, training subsample
and chain seed; 3,000 sweeps, burn-in 1,500, thin 30, one chain) with the configuration's
``BeliefNetwork`` options on top (``--icp LABEL=JSON``, as in ``benchmarks/convergence.py``;
``{}`` is the library's default of the day: since stop 39 ``rotate="auto"``, which rotates iris,
abalone, cloud and wine, so earlier stops' default rows reproduce with ``{"rotate": false}``; since stop 49
the non-centred updates and 512 pilot draws, so stops 40-48's default rows reproduce with
``{"noncentred": false, "pilot_draws": 32}``). The
evaluation is Table 1's rule, not tuned: as many fantasy points as test points against the test
set (HD), and the mean held-out log-density per test point with 512 importance draws. CPU seconds:
process time of the fit in its own process (numba on one thread). DP-GMM (Table 1's code and
random stream) and, on the synthetic sets, the true held-out log-density are the references.
A configuration with ``"prior": "cibp"`` or ``"ecibp"`` runs that prior's cell instead (its chain
seed; the CSV's ``model`` column names the prior). ``"replicate": R`` (R > 0) fits the same split
with another chain seed (and fantasy and held-out draws), to measure how much a cell's numbers move
from chain to chain (stop 40).
``"observed_order": "free"`` (a measurement of this script, not a library option; stop 46,
docs/derivations.md 3.22) fits the ICP with the observed units' order values free and sampled, as
``chefs discover`` does, so that observed units may be parents of one another: 002's Table 1 keeps
them at 0, and that measurement found free orders worse in HD.

Use development splits (the default 10, 11, 12), not Table 1's 0-2, to choose between settings.

Writes ``DIR/pilot_length.csv`` (a row per fit, appended as each finishes: an interrupted run
continues where it stopped unless ``--force``), ``DIR/pilot_length.md`` (means per data set and
configuration, and on how many splits each configuration beats the first one) and
``DIR/pilot_length.png`` (HD and held-out per split, one panel per data set, the configurations
joined per split). ``--plot-only`` redraws the summary and the figure from the CSV.
"""

from __future__ import annotations

import argparse
import csv
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from convergence import parse_icp  # noqa: E402  (the same LABEL=JSON check)

FIELDS = ["dataset", "seed", "model", "config", "hellinger", "heldout_loglik", "cpu_seconds", "truth"]
DATASETS = ("two-moons", "pinwheel", "ring")
HELDOUT_DRAWS = 512


def cell_network(ds, seed, kw, data_dir, quick=False):
    """Fit one Table 1 belief-network cell (the ICP unless ``kw`` names a prior) with the options ``kw``, on
    split ``seed`` (its training subsample and chain seed; numba on one thread). Returns the fitted network,
    the split's ``(train, test)``, the cell's random stream after the chain seed was drawn from it (for the
    fantasy and held-out draws), the fit's CPU seconds, the settings and the prior's name
    (also ``benchmarks/joint_gap.py``)."""
    from chefs._threads import limit_threads
    from chefs.bench.table1 import _training_split, cell_rng, chain_settings
    from chefs.density import BeliefNetwork

    limit_threads(1)
    settings, _ = chain_settings(quick)
    train, test = _training_split(ds, seed, settings, data_dir)
    kw = dict(kw)
    model = kw.get("prior", "icp")
    replicate = int(kw.pop("replicate", 0))  # another chain seed on the same split (0: Table 1's own)
    net_class = BeliefNetwork
    if kw.pop("observed_order", None) == "free":  # the module docstring; the run's config shows the free orders
        class FreeOrders(BeliefNetwork):
            def _observed_orders(self, D):
                return None  # every order free, U(0, 1) a priori, sampled (as chefs.causal.CausalDiscovery)

        net_class = FreeOrders
    rng = cell_rng(seed, model, *([replicate] if replicate else []))
    opts = {"num_tries": settings["num_tries"], "margin": settings["margin"], "pilots": settings["pilots"], **kw}
    t0 = time.process_time()
    net = net_class(sweeps=settings["sweeps"], burn_in=settings["burn_in"], thin=settings["thin"],
                    seed=int(rng.integers(2**31)), progress=False, **opts).fit(train)
    return net, (train, test), rng, time.process_time() - t0, settings, model


def net_cell(ds, seed, label, kw, data_dir, quick=False):
    """One Table 1 belief-network cell (the ICP unless ``kw`` names a prior) with the options ``kw``: a CSV row."""
    from chefs.bench.table1 import evaluate_network
    from chefs.evaluation import hellinger

    net, (train, test), rng, cpu, settings, model = cell_network(ds, seed, kw, data_dir, quick)
    draws = settings["heldout_draws"] if quick else HELDOUT_DRAWS
    fantasy, ll, _ = evaluate_network(net, test, test.shape[0], rng, draws)
    keep = os.environ.get("PILOT_FANTASY_DIR")  # keep each fit's fantasy data (pooling chains afterwards)
    if keep:
        Path(keep).mkdir(parents=True, exist_ok=True)
        np.save(Path(keep) / f"{ds}-{seed}-{label}.npy", fantasy)
    return {"dataset": ds, "seed": seed, "model": model, "config": label, "hellinger": hellinger(fantasy, test),
            "heldout_loglik": ll, "cpu_seconds": cpu, "truth": ""}


def dpgmm_cell(ds, seed, data_dir, quick=False):
    from chefs.bench.table1 import _training_split, cell_rng, chain_settings, fit_dpgmm
    from chefs.datasets import DATASETS as SPECS, true_heldout_loglik
    from chefs.evaluation import hellinger

    settings, _ = chain_settings(quick)
    train, test = _training_split(ds, seed, settings, data_dir)
    rng = cell_rng(seed, "dpgmm")  # Table 1's DP-GMM stream
    t0 = time.process_time()
    fantasy, ll = fit_dpgmm(train, test, test.shape[0], rng)
    cpu = time.process_time() - t0
    truth = true_heldout_loglik(ds, seed) if SPECS[ds].kind == "synthetic" else ""
    return {"dataset": ds, "seed": seed, "model": "dpgmm", "config": "", "hellinger": hellinger(fantasy, test),
            "heldout_loglik": ll, "cpu_seconds": cpu, "truth": truth}


def run_fit(task, data_dir, quick):
    """A task of the run: ("dpgmm", ds, seed, "", {}) or ("net", ds, seed, label, kw)."""
    kind, ds, seed, label, kw = task
    return dpgmm_cell(ds, seed, data_dir, quick) if kind == "dpgmm" else net_cell(ds, seed, label, kw, data_dir, quick)


def read_rows(path):
    if not path.exists():
        return []
    with open(path, newline="") as fh:
        rows = list(csv.DictReader(fh))
    for r in rows:
        r["seed"] = int(r["seed"])
        for k in ("hellinger", "heldout_loglik", "cpu_seconds"):
            r[k] = float(r[k])
    return rows


def summary(rows, datasets, configs) -> str:
    labels = [c[0] for c in configs]
    out = ["| data set | model | splits | HD, mean | held-out, mean | HD better than "
           f"{labels[0]} | held-out better than {labels[0]} | CPU s, median |", "|---|---|---|---|---|---|---|---|"]
    for ds in datasets:
        first = {r["seed"]: r for r in rows if r["dataset"] == ds and r["config"] == labels[0]}
        for model, lab in [("net", lab) for lab in labels] + [("dpgmm", "")]:
            rs = [r for r in rows if r["dataset"] == ds and (r["model"] == "dpgmm") == (model == "dpgmm")
                  and r["config"] == lab]
            if not rs:
                continue
            paired = [r for r in rs if r["seed"] in first]
            hd = sum(r["hellinger"] < first[r["seed"]]["hellinger"] for r in paired)
            ll = sum(r["heldout_loglik"] > first[r["seed"]]["heldout_loglik"] for r in paired)
            name = f"{rs[0]['model']} {lab}" if model == "net" else "dpgmm"
            better = ("—", "—") if lab == labels[0] or model != "net" else (f"{hd} of {len(paired)}",
                                                                              f"{ll} of {len(paired)}")
            out.append(f"| {ds} | {name} | {len(rs)} | {np.mean([r['hellinger'] for r in rs]):.4f} | "
                       f"{np.mean([r['heldout_loglik'] for r in rs]):.3f} | {better[0]} | {better[1]} | "
                       f"{np.median([r['cpu_seconds'] for r in rs]):.0f} |")
        truth = [float(r["truth"]) for r in rows if r["dataset"] == ds and r["model"] == "dpgmm" and r["truth"] != ""]
        if truth:
            out.append(f"| {ds} | truth | {len(truth)} | | {np.mean(truth):.3f} | | | |")
    return "\n".join(out) + "\n"


def figure(rows, datasets, configs, path):
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    labels = [c[0] for c in configs]
    cols = min(len(datasets), 5)  # up to five data sets side by side, then another pair of rows
    bands = -(-len(datasets) // cols)
    fig, axes = plt.subplots(2 * bands, cols, figsize=(4.2 * cols, 6.5 * bands), squeeze=False)
    colors = plt.rcParams["axes.prop_cycle"].by_key()["color"]
    for ax in axes[2 * (bands - 1):, len(datasets) - cols * (bands - 1):].flat:  # the last band's empty places
        ax.set_visible(False)
    for n, ds in enumerate(datasets):
        band, j = divmod(n, cols)
        seeds = sorted({r["seed"] for r in rows if r["dataset"] == ds})
        x = {s: i for i, s in enumerate(seeds)}
        for k, (key, name) in enumerate((("hellinger", "HD (lower is better)"),
                                        ("heldout_loglik", "held-out log-density per point"))):
            ax = axes[2 * band + k, j]
            for s in seeds:  # the configurations of one split, joined
                ys = [r[key] for lab in labels for r in rows
                      if r["dataset"] == ds and r["seed"] == s and r["config"] == lab and r["model"] != "dpgmm"]
                if len(ys) > 1:
                    ax.plot([x[s]] * len(ys), ys, color="0.8", lw=1, zorder=1)
            for c, lab in enumerate(labels):
                pts = [(x[r["seed"]], r[key]) for r in rows
                       if r["dataset"] == ds and r["config"] == lab and r["model"] != "dpgmm"]
                if pts:
                    ax.scatter(*zip(*pts), color=colors[c % len(colors)], label=lab, zorder=2, s=28)
            ref = [(x[r["seed"]], r[key]) for r in rows if r["dataset"] == ds and r["model"] == "dpgmm"]
            if ref:
                ax.scatter(*zip(*ref), marker="_", s=240, color="k", label="DP-GMM", zorder=3)
            if key == "heldout_loglik":
                tr = [(x[r["seed"]], float(r["truth"])) for r in rows
                      if r["dataset"] == ds and r["model"] == "dpgmm" and r["truth"] != ""]
                if tr:
                    ax.scatter(*zip(*tr), marker="*", s=60, color="0.4", label="truth", zorder=3)
            ax.set_xticks(range(len(seeds)), [str(s) for s in seeds])
            ax.set_xlabel("split")
            ax.set_title(f"{ds}: {name}", fontsize=9)
            if n == 0 and k == 0:
                ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True)
    ap.add_argument("--datasets", default=",".join(DATASETS))
    ap.add_argument("--seeds", default="10,11,12", help="comma-separated splits (development splits by default)")
    ap.add_argument("--icp", action="append", default=None, metavar="LABEL=JSON",
                    help="a configuration: BeliefNetwork keyword arguments on top of Table 1's (repeatable; the "
                         "first is the one the others are compared with; default: default={} and "
                         "long={\"pilot_sweeps\": 3000, \"pilot_draws\": 512})")
    ap.add_argument("--jobs", type=int, default=1, help="fits at once, each in its own process")
    ap.add_argument("--quick", action="store_true",
                    help="a smoke run: Table 1's quick settings (80 sweeps, at most 600 training points, 32 draws); "
                         "its numbers mean nothing")
    ap.add_argument("--plot-only", action="store_true", help="redraw the summary and the figure from the CSV")
    ap.add_argument("--force", action="store_true", help="start a new CSV instead of continuing the old one")
    ap.add_argument("--data-dir", default=os.environ.get("CHEFS_DATA"))
    a = ap.parse_args(argv)
    try:
        from chefs.bench import check_names
        from chefs.datasets import DATASETS as SPECS

        configs = [parse_icp(t, extra=("replicate", "observed_order"))
                   for t in (a.icp or ['default={}', 'long={"pilot_sweeps": 3000, "pilot_draws": 512}'])]
        for lab, kw in configs:
            if kw.get("observed_order", "free") != "free":
                raise ValueError(f"--icp {lab}: observed_order takes only \"free\", got {kw['observed_order']!r}")
        if len({c[0] for c in configs}) < len(configs):
            raise ValueError(f"--icp labels must differ, got {[c[0] for c in configs]}")
        datasets = check_names([d for d in a.datasets.split(",") if d], tuple(SPECS), "--datasets", "data set")
        try:
            seeds = [int(s) for s in a.seeds.split(",")]
        except ValueError:
            seeds = []
        if not seeds or min(seeds) < 0 or len(set(seeds)) < len(seeds):
            raise ValueError(f"--seeds must be distinct non-negative integers, got {a.seeds!r}")
        if a.jobs < 1:
            raise ValueError(f"--jobs must be a positive integer, got {a.jobs}")
        if a.plot_only and not (Path(a.out) / "pilot_length.csv").exists():
            raise ValueError(f"--plot-only redraws {Path(a.out) / 'pilot_length.csv'}, which does not exist")
    except ValueError as err:
        print(f"pilot_length: error: {err}", file=sys.stderr)
        return 2
    out = Path(a.out)
    out.mkdir(parents=True, exist_ok=True)
    path = out / "pilot_length.csv"
    if a.force and not a.plot_only:
        path.unlink(missing_ok=True)
    rows = read_rows(path)
    if not a.plot_only:
        done = {(r["dataset"], r["seed"], r["model"], r["config"]) for r in rows}
        todo = [("dpgmm", ds, s, "", {}) for ds in datasets for s in seeds if (ds, s, "dpgmm", "") not in done]
        todo += [("net", ds, s, lab, kw) for ds in datasets for s in seeds for lab, kw in configs
                 if (ds, s, kw.get("prior", "icp"), lab) not in done]
        print(f"{len(rows)} rows kept, {len(todo)} fits to run with {a.jobs} process(es)", flush=True)
        new = not path.exists()
        with open(path, "a", newline="") as fh:
            w = csv.DictWriter(fh, fieldnames=FIELDS)
            if new:
                w.writeheader()

            def record(row):
                w.writerow(row)
                fh.flush()
                rows.append({**row, "seed": int(row["seed"])})
                print(f"  {row['dataset']} {row['seed']} {row['model']} {row['config']}: HD {row['hellinger']:.4f}, "
                      f"held-out {row['heldout_loglik']:.3f}, {row['cpu_seconds']:.0f} CPU s", flush=True)

            if a.jobs == 1:
                for t in todo:
                    record(run_fit(t, a.data_dir, a.quick))
            else:
                import concurrent.futures as cf
                import multiprocessing as mp

                with cf.ProcessPoolExecutor(a.jobs, mp_context=mp.get_context("spawn")) as ex:
                    futures = [ex.submit(run_fit, t, a.data_dir, a.quick) for t in todo]
                    for f in cf.as_completed(futures):
                        record(f.result())
    rows = [r for r in rows if r["dataset"] in datasets and r["seed"] in seeds]
    text = summary(rows, datasets, configs)
    (out / "pilot_length.md").write_text(
        f"Configurations: {'; '.join(f'{lab} = {json.dumps(kw)}' for lab, kw in configs)}; splits "
        f"{', '.join(map(str, seeds))}; held-out with {32 if a.quick else HELDOUT_DRAWS} draws"
        f"{'; --quick: a smoke run, numbers not meaningful' if a.quick else ''}.\n\n" + text)
    figure(rows, datasets, configs, out / "pilot_length.png")
    print(text)
    print(f"wrote {path}, {out / 'pilot_length.md'}, {out / 'pilot_length.png'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
