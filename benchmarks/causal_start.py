"""Figure of docs/results-causal.md (stop 41): the ICP's causal discovery from prior-draw starts against
starts at a residual-independence order, beside the peers.

Reads the outputs of two runs of the benchmark, for example::

    chefs bench causal --out NEW                                        # the defaults (stop 41)
    chefs bench causal --out OLD --methods icp --start prior --chains 2 # stops 34-40's runs
    python benchmarks/causal_start.py --old OLD --new NEW --out docs/figures/causal-start-stop41.png

docs/figures/causal-start-stop41.png: NEW from 2c68434, OLD from eaa7c30 with `--start prior` (2 chains then
the default; the same rows as stop 34's and as `--start prior --chains 2` later).

Left: ancestral F1 per SEM seed (0-9) of the ICP with each start and of the peers in NEW. Right: the
ICP's pooled probabilities (p_edge, p_ancestor, p_confounded) binned against how often the relation is
true, with the count of each bin (the calibration table of each run's causal.md).
"""

from __future__ import annotations

import argparse
import csv
import re
from pathlib import Path

import numpy as np


def read_cells(run: Path) -> list[dict]:
    with open(run / "causal.csv", newline="") as fh:
        return list(csv.DictReader(fh))


def read_calibration(run: Path) -> list[tuple[float, float, int]]:
    """(mean predicted, observed frequency, count) of the pooled ("all") bins of causal.md."""
    rows = []
    for line in (run / "causal.md").read_text().splitlines():
        m = re.match(r"\| all \| \[[^|]*\| (\d+) \| ([0-9.]+) \| ([0-9.]+) \|", line)
        if m:
            rows.append((float(m.group(2)), float(m.group(3)), int(m.group(1))))
    return rows


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--old", required=True, type=Path, help="benchmark output with --start prior")
    ap.add_argument("--new", required=True, type=Path, help="benchmark output with the defaults")
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--peers", default="resit,ges,pc,rcd,fci")
    args = ap.parse_args(argv)
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    old, new = read_cells(args.old), read_cells(args.new)
    seeds = sorted({int(r["seed"]) for r in new if r["seed"].isdigit()})
    series = [("ICP, --start prior (stop 34)", [r for r in old if r["method"] == "icp"]),
              ("ICP, default (stop 41)", [r for r in new if r["method"] == "icp"])]
    series += [(m.upper() if m != "resit" else "RESIT", [r for r in new if r["method"] == m])
               for m in args.peers.split(",")]
    fig, (ax, bx) = plt.subplots(1, 2, figsize=(13, 5.4), gridspec_kw={"width_ratios": [2.2, 1]})
    width = 0.8 / len(series)
    for k, (name, rows) in enumerate(series):
        f1 = {int(r["seed"]): float(r["anc_f1"]) for r in rows if r["seed"].isdigit() and r["anc_f1"] != ""}
        vals = [f1.get(s, np.nan) for s in seeds]
        mean = np.nanmean(vals)
        ax.bar(np.arange(len(seeds)) + (k - (len(series) - 1) / 2) * width, vals, width,
               label=f"{name} (mean {mean:.2f})")
    hidden = {int(r["seed"]): r["num_hidden"] for r in new if r["seed"].isdigit()}
    ax.set_xticks(np.arange(len(seeds)), [f"{s}\nH={hidden[s]}" for s in seeds])
    ax.set_xlabel("SEM seed (H = hidden confounders)")
    ax.set_ylabel("ancestral-relation F1")
    ax.set_ylim(0, 1.05)
    ax.legend(fontsize=8, ncol=4, loc="upper center", bbox_to_anchor=(0.5, -0.2))
    ax.set_title("Ancestral F1 per synthetic SEM")
    bx.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--")
    for name, run, mk in (("ICP, --start prior (stop 34)", args.old, "o"), ("ICP, default (stop 41)", args.new, "s")):
        cal = read_calibration(run)
        p, q, n = (np.array(v) for v in zip(*cal))
        bx.plot(p, q, marker=mk, label=name)
        for pi, qi, ni in zip(p, q, n):
            bx.annotate(str(ni), (pi, qi), textcoords="offset points", xytext=(4, 4), fontsize=7)
    bx.set_xlabel("posterior probability (bin mean)")
    bx.set_ylabel("fraction true")
    bx.set_xlim(0, 1)
    bx.set_ylim(0, 1)
    bx.set_title("Calibration, pooled (counts beside points)")
    bx.legend(fontsize=8, loc="upper left")
    fig.tight_layout()
    args.out.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(args.out, dpi=110)
    print(f"wrote {args.out}")


if __name__ == "__main__":
    main()
