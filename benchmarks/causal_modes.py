"""Does a causal chain's mean log joint say how good its mode is? (issue 23; docs/derivations.md 3.8)

    python benchmarks/causal_modes.py BENCH_DIR [--seeds 10,...,19] [--top 4]

``BENCH_DIR`` is the output of ``chefs bench causal`` (its ``runs/seedS`` run directories; nothing is
refitted). For each SEM, each chain's mean log joint density and log-likelihood over its kept samples
(``chefs.mcmc.diagnostics.traces``) against that chain's own ancestral F1 (``p_ancestor`` > 0.5 of the
chain alone): the Spearman correlation, the spread of the chains' log joints, and the mean F1 of the
``--top`` chains by log joint against that of all chains; and, read directly, the highest chain by log
joint of each SEM alone: its ancestral F1 and the fraction true among its probabilities at or above 0.8
(``p_edge``, ``p_ancestor`` and ``p_confounded`` pooled, as the benchmark's top bin). The chains stay in the modes their starts put
them in (docs/derivations.md 3.8), so the pooled probabilities weigh each mode by its number of starts; a
sampler that mixed would weigh them by their posterior mass, of which the log joint is the first hint.
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv=None) -> int:
    from scipy.stats import spearmanr

    from chefs.bench.causal import calibration_pairs, icp_estimate, make_sem, precision_recall_f1, sem_settings
    from chefs.causal import CausalDiscovery
    from chefs.mcmc.diagnostics import chain_stores, traces

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_dir")
    ap.add_argument("--seeds", default="10,11,12,13,14,15,16,17,18,19")
    ap.add_argument("--top", type=int, default=4)
    args = ap.parse_args(argv)
    if args.top < 1:
        raise ValueError(f"--top must be positive, got {args.top}")
    print("| seed | chains | Spearman(log joint, F1) | Spearman(log-likelihood, F1) | log joint spread (nats) | "
          f"F1: top {args.top} by log joint | F1: all chains |")
    print("|---|---|---|---|---|---|---|")
    rho_j, rho_l, top, every, best_f1, best_top = [], [], [], [], [], []
    for seed in (int(s) for s in args.seeds.split(",")):
        sem = make_sem(seed, *sem_settings(seed, False))
        run = f"{args.bench_dir}/runs/seed{seed}"
        tr = traces(run)  # one row per chain with a sample store, in chain order
        ids = [c for c, _ in chain_stores(run)]
        lj, ll = tr["log_joint"].mean(axis=1), tr["log_lik"].mean(axis=1)
        summaries = [CausalDiscovery.load(run, chains=[c]).summary_ for c in ids]
        f1 = np.array([precision_recall_f1(s.p_ancestor > 0.5, sem.ancestor)[2] for s in summaries])
        best = np.argsort(-lj)[:args.top]
        best_top += [t for _, q, t in calibration_pairs(icp_estimate(summaries[int(np.argmax(lj))]).probs, sem)
                     if q >= 0.8]
        best_f1.append(f1[int(np.argmax(lj))])
        rho_j.append(spearmanr(lj, f1)[0])
        rho_l.append(spearmanr(ll, f1)[0])
        top.append(f1[best].mean())
        every.append(f1.mean())
        print(f"| {seed} | {lj.size} | {rho_j[-1]:+.2f} | {rho_l[-1]:+.2f} | {np.ptp(lj):.0f} | {top[-1]:.3f} | "
              f"{every[-1]:.3f} |")
    print(f"| mean | | {np.nanmean(rho_j):+.2f} | {np.nanmean(rho_l):+.2f} | | {np.mean(top):.3f} | {np.mean(every):.3f} |")
    print(f"\nThe highest chain by log joint of each SEM alone: ancestral F1 {np.mean(best_f1):.3f} (mean over the SEMs); "
          f"{len(best_top)} probabilities at or above 0.8, {100 * np.mean(best_top):.1f} % true.")
    return 0


if __name__ == "__main__":
    sys.exit(main())
