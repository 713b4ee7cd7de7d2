"""Issue 21's ring target: does any chain end with ring's two columns modelled as independent?

    python benchmarks/ring_chains.py --out FILE.csv [--splits 0,1,2,3] [--chains 3] [--jobs 2] [--icp JSON]

Fits Table 1's full-settings ICP cell on ring (``benchmarks/pilot_length.py``'s ``cell_network``: the split's
training subsample, 3,000 sweeps, burn-in 1,500, thin 30, one chain) at each split and ``--chains`` chain seeds
(``{"replicate": r}``, r = 0 .. chains - 1; replicate 0 is Table 1's own chain), with the library's default of the
day plus ``--icp`` (``BeliefNetwork`` keyword arguments as JSON). Per chain: the Hellinger distance and the held-out
log-likelihood per test point (512 draws, Table 1's rule), the true density's held-out value, the fraction of kept
samples in which some hidden unit is an ancestor of both columns (:func:`shared_fraction`), the mean number of hidden
units, the fit's CPU seconds, and the settings the fit resolved (``noncentred``, ``pilot_draws``, and
``pilot_structures``: whether its pilots had their own starting structures). A chain "ends with the columns modelled
as independent" when that fraction is below one half. Stop 49 ran it with the default of that stop (docs/derivations.md 3.27: none of 12; one two-unit blob).
"""

from __future__ import annotations

import argparse
import csv
import json
import sys
from concurrent.futures import ProcessPoolExecutor
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))

FIELDS = ["split", "replicate", "hellinger", "heldout_loglik", "truth", "shared_fraction", "hidden_mean",
          "cpu_seconds", "noncentred", "pilot_draws", "pilot_structures"]


def shared_fraction(samples) -> tuple[float, float]:
    """Over posterior samples of a two-column network (graph dicts with ``theta``, ``observed`` and ``edges``): the
    fraction in which some hidden unit is an ancestor of both columns, and the mean number of hidden units. That is
    :func:`chefs.causal.relations`'s ``confounded`` pair (hidden-only paths to both columns), which here is any
    hidden common ancestor: a density network's observed units have no children."""
    from chefs.causal import relations

    if not samples:
        raise ValueError("no samples")
    shared, hidden = [], []
    for g in samples:
        if int(np.sum(g["observed"])) != 2:
            raise ValueError(f"a ring network has two observed units, this sample {int(np.sum(g['observed']))}")
        shared.append(bool(relations(g)[2][0, 1]))
        hidden.append(len(g["observed"]) - 2)
    return float(np.mean(shared)), float(np.mean(hidden))


def chain_row(task) -> dict:
    split, rep, icp, data_dir, quick = task
    from pilot_length import cell_network

    from chefs.bench.table1 import evaluate_network
    from chefs.datasets import true_heldout_loglik
    from chefs.evaluation import hellinger
    from chefs.mcmc.run import load_spec

    kw = dict(icp, **({"replicate": rep} if rep else {}))
    net, (train, test), rng, cpu, settings, _ = cell_network("ring", split, kw, data_dir, quick)
    fantasy, ll, _ = evaluate_network(net, test, test.shape[0], rng, settings["heldout_draws"] if quick else 512)
    frac, hidden = shared_fraction(net.samples_)
    return {"split": split, "replicate": rep, "hellinger": hellinger(fantasy, test), "heldout_loglik": ll,
            "truth": true_heldout_loglik("ring", split), "shared_fraction": frac, "hidden_mean": hidden,
            "cpu_seconds": cpu, "noncentred": net.noncentred, "pilot_draws": net.pilot_draws,
            "pilot_structures": "pilot_graphs" in load_spec(net.run_dir_)}


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", required=True, help="CSV file, one row per chain")
    ap.add_argument("--splits", default="0,1,2,3")
    ap.add_argument("--chains", type=int, default=3)
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--icp", default="{}", help="BeliefNetwork keyword arguments as JSON")
    ap.add_argument("--data-dir", default=None)
    ap.add_argument("--quick", action="store_true", help="Table 1's quick settings (a smoke run)")
    a = ap.parse_args(argv)
    icp = json.loads(a.icp)
    if not isinstance(icp, dict):
        raise SystemExit("--icp must be a JSON object")
    if a.chains < 1 or a.jobs < 1:
        raise SystemExit("--chains and --jobs must be positive")
    tasks = [(int(s), r, icp, a.data_dir, a.quick) for s in a.splits.split(",") for r in range(a.chains)]
    rows = []
    with ProcessPoolExecutor(a.jobs) as ex, open(a.out, "w", newline="") as fh:
        w = csv.DictWriter(fh, FIELDS)
        w.writeheader()
        for row in ex.map(chain_row, tasks):
            w.writerow(row)
            fh.flush()
            rows.append(row)
            print(f"split {row['split']} chain {row['replicate']}: HD {row['hellinger']:.4f}, held-out "
                  f"{row['heldout_loglik']:.3f} (truth {row['truth']:.3f}), hidden common ancestor in "
                  f"{row['shared_fraction']:.0%} of samples, {row['hidden_mean']:.1f} hidden units", flush=True)
    independent = sum(r["shared_fraction"] < 0.5 for r in rows)
    gaps = [r["truth"] - r["heldout_loglik"] for r in rows]
    print(f"{independent} of {len(rows)} chains end with the columns modelled as independent; "
          f"{sum(r['hellinger'] > 0.2 for r in rows)} above HD 0.2; {sum(g <= 0.05 for g in gaps)} within 0.05 nats "
          f"per point of the truth")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
