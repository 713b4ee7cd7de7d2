"""The README's main job at several chain seeds, with several sets of extra flags (issue 21's README target).

Runs ``chefs fit --data two-moons --sweeps 4000 --burn-in 2000 --thin 20 --seed S --out DIR/ARM-S --force FLAGS``
one fit at a time (the user's experience: numba's default threads on the whole machine), arms interleaved per seed
so that the machine's noise falls on all of them alike, and records each fit's printed Hellinger distance and
held-out value, its wall and CPU seconds (``DIR/results.csv``; an interrupted run resumes where it stopped). The
target is DP-GMM's HD times 1.2 (``--dpgmm-streams``: the mean over that many of Table 1's DP-GMM fits on split 0,
:func:`chefs.bench.table1.fit_dpgmm`). ``--plot FILE.png`` draws each fit's fantasy data (one draw, the fit's own
seed) in a grid, arms by rows; ``--plot-only`` redraws it from DIR.

    python benchmarks/readme_job.py --out DIR --seeds 5,6,7,8,9,10,11,12,13,14 \\
        --arm "default=--no-noncentred --pilot-draws 32" --arm "A=--noncentred --pilot-draws 32" \\
        --arm "B=--noncentred --pilot-draws 512" --plot FILE.png

Stop 48 ran it as rule 7 (docs/derivations.md 3.26), as ``--arm default= --arm A=--noncentred --arm "B=..."``:
B is the library's default since stop 49 (3.27), so the arms spell out stop 48's default as above.
"""

from __future__ import annotations

import argparse
import csv
import os
import re
import resource
import shlex
import subprocess
import sys
import time
from pathlib import Path

import numpy as np

COMMAND = ["fit", "--data", "two-moons", "--sweeps", "4000", "--burn-in", "2000", "--thin", "20"]
FIELDS = ["arm", "seed", "rc", "hd", "heldout", "wall_s", "cpu_s"]


def _children_cpu() -> float:
    r = resource.getrusage(resource.RUSAGE_CHILDREN)
    return r.ru_utime + r.ru_stime


def run(out: Path, seeds, arms: dict, log=print) -> list[dict]:
    out.mkdir(parents=True, exist_ok=True)
    path = out / "results.csv"
    rows = list(csv.DictReader(path.open())) if path.exists() else []
    done = {(r["arm"], int(r["seed"])) for r in rows}
    for s in seeds:
        for arm, flags in arms.items():
            if (arm, s) in done:
                continue
            cmd = ["chefs", *COMMAND, "--seed", str(s), "--out", str(out / f"{arm}-{s}"), "--force",
                   "--no-progress", *flags]
            c0, t0 = _children_cpu(), time.perf_counter()
            p = subprocess.run(cmd, capture_output=True, text=True, env=dict(os.environ))
            wall, cpu = time.perf_counter() - t0, _children_cpu() - c0
            (out / f"{arm}-{s}.log").write_text(p.stdout + p.stderr)
            hd = re.search(r"Hellinger\(fantasy, test\) = ([0-9.]+)", p.stdout)
            ho = re.search(r"per point: (-?[0-9.]+)", p.stdout)
            row = {"arm": arm, "seed": s, "rc": p.returncode, "hd": hd.group(1) if hd else "",
                   "heldout": ho.group(1) if ho else "", "wall_s": f"{wall:.1f}", "cpu_s": f"{cpu:.1f}"}
            new = not path.exists()
            with path.open("a", newline="") as fh:
                w = csv.DictWriter(fh, fieldnames=FIELDS)
                if new:
                    w.writeheader()
                w.writerow(row)
            rows.append({k: str(v) for k, v in row.items()})
            log(row)
    return rows


def dpgmm_target(streams: int) -> tuple[float, list[float]]:
    from chefs.bench.table1 import fit_dpgmm
    from chefs.datasets import load_split
    from chefs.evaluation import hellinger

    train, test = load_split("two-moons", seed=0)
    hds = [hellinger(fit_dpgmm(train, test, test.shape[0], np.random.default_rng(s))[0], test) for s in range(streams)]
    return 1.2 * float(np.mean(hds)), hds


def summary(rows, arms, target: float) -> str:
    lines = [f"target: HD <= {target:.4f} (1.2 x DP-GMM)", "",
             "| arm | seeds | HD per seed | mean HD | within target | held-out mean | median wall s | median CPU s |",
             "|---|---|---|---|---|---|---|---|"]
    for arm in arms:
        rs = sorted((r for r in rows if r["arm"] == arm and r["hd"]), key=lambda r: int(r["seed"]))
        if not rs:
            continue
        hd = [float(r["hd"]) for r in rs]
        lines.append(f"| {arm} | {rs[0]['seed']}-{rs[-1]['seed']} | {', '.join(f'{h:.3f}' for h in hd)} | "
                     f"{np.mean(hd):.4f} | {sum(h <= target for h in hd)} of {len(hd)} | "
                     f"{np.mean([float(r['heldout']) for r in rs]):.3f} | "
                     f"{np.median([float(r['wall_s']) for r in rs]):.0f} | {np.median([float(r['cpu_s']) for r in rs]):.0f} |")
    return "\n".join(lines)


def plot(out: Path, rows, arms, path, target: float) -> None:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    from chefs.density import BeliefNetwork

    seeds = sorted({int(r["seed"]) for r in rows})
    fig, axes = plt.subplots(len(arms), len(seeds), figsize=(1.9 * len(seeds), 2.0 * len(arms)), squeeze=False)
    test = None
    for i, arm in enumerate(arms):
        for j, s in enumerate(seeds):
            ax = axes[i, j]
            ax.set(xticks=[], yticks=[], xlim=(-1.4, 2.4), ylim=(-0.9, 1.4))
            run_dir = out / f"{arm}-{s}"
            r = next((r for r in rows if r["arm"] == arm and int(r["seed"]) == s and r["hd"]), None)
            if r is None or not (run_dir / "test.npy").exists():
                continue
            test = np.load(run_dir / "test.npy") if test is None else test
            X = BeliefNetwork.load(run_dir).sample(test.shape[0], rng=s)
            ax.scatter(X[:, 0], X[:, 1], s=0.3, alpha=0.4, color="C0" if float(r["hd"]) <= target else "C3")
            ax.set_title(f"seed {s}: HD {float(r['hd']):.3f}", fontsize=7)
            if j == 0:  # the arm's name and its flags
                ax.set_ylabel("\n".join([arm, *(" ".join(arms[arm]).replace(" --", "\n--").split("\n"))]).strip(),
                              fontsize=7)
    fig.suptitle(f"README job, fantasy data per chain seed\nblue: HD within 1.2 x DP-GMM = {target:.3f}; red: not",
                 fontsize=8)
    fig.tight_layout()
    fig.savefig(path, dpi=110)
    plt.close(fig)


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--seeds", required=True, help="comma-separated chain seeds")
    ap.add_argument("--arm", action="append", required=True, metavar="NAME=FLAGS",
                    help="an arm: its name and the extra flags of `chefs fit` (may be empty); repeat")
    ap.add_argument("--dpgmm-streams", type=int, default=5)
    ap.add_argument("--plot", type=Path, default=None)
    ap.add_argument("--plot-only", action="store_true", help="read DIR's results, fit nothing")
    args = ap.parse_args(argv)
    arms = {}
    for a in args.arm:
        name, sep, flags = a.partition("=")
        if not sep or not name:
            ap.error(f"--arm takes NAME=FLAGS, got {a!r}")
        arms[name] = shlex.split(flags)
    seeds = [int(s) for s in args.seeds.split(",")]
    if args.plot_only:
        rows = list(csv.DictReader((args.out / "results.csv").open()))
    else:
        rows = run(args.out, seeds, arms)
    rows = [r for r in rows if int(r["seed"]) in seeds and r["arm"] in arms]
    target, hds = dpgmm_target(args.dpgmm_streams)
    print(f"DP-GMM HD over {args.dpgmm_streams} streams: {', '.join(f'{h:.4f}' for h in hds)}")
    print(summary(rows, arms, target))
    if args.plot:
        plot(args.out, rows, arms, args.plot, target)
        print(f"wrote {args.plot}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
