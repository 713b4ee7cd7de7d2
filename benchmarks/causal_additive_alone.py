"""The additive-noise surrogate of ``start="additive"`` read as a causal posterior by itself, no ICP (issue 23, stop 55).

    python benchmarks/causal_additive_alone.py [--seeds 10,11,...,19] [--chains 16] [--draws 25]

For each SEM of ``chefs bench causal``'s generator (full settings), :func:`chefs.causal_additive.bagged_relations`
with ``--chains`` surrogates and ``--draws`` draws from each, the SEM's seed as the run's (so chain c's rows are those
of chain c's start in ``CausalDiscovery``): what ``chefs bench causal --methods additive`` reads, at its defaults 16
and 25. Prints each
SEM's ancestral F1 (relations at p > 0.5, the benchmark's rule) and CPU seconds, and the calibration table of
``p_edge`` and ``p_ancestor`` pooled over the SEMs (the benchmark's bins). ``--chains 1`` reads the surrogate's
posterior on the data alone. Hidden confounders are not in the surrogate: it has no ``p_confounded``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from chefs.bench.causal import calibration_table, make_sem, sem_settings
from chefs.causal_additive import bagged_relations


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--seeds", default="10,11,12,13,14,15,16,17,18,19")
    ap.add_argument("--chains", type=int, default=16)
    ap.add_argument("--draws", type=int, default=25)
    a = ap.parse_args(argv)
    calib = []
    f1s = []
    for seed in [int(s) for s in a.seeds.split(",")]:
        D, H, N = sem_settings(seed, False)
        sem = make_sem(seed, D, H, N)
        t0 = time.process_time()
        E, A = bagged_relations(sem.X, a.chains, a.draws, seed)
        off = ~np.eye(D, dtype=bool)
        calib += [("p_edge", float(q), bool(t)) for q, t in zip(E[off], sem.edges[off])]
        calib += [("p_ancestor", float(q), bool(t)) for q, t in zip(A[off], sem.ancestor[off])]
        est = (A > 0.5) & off
        tp, fp, fn = (est & sem.ancestor).sum(), (est & ~sem.ancestor).sum(), (~est & sem.ancestor & off).sum()
        f1s.append(2 * tp / max(2 * tp + fp + fn, 1))
        print(f"seed {seed} (D={D}, H={H}, N={N}): ancestral F1 {f1s[-1]:.3f}, {time.process_time() - t0:.1f} CPU s",
              flush=True)
    print(f"mean ancestral F1 {np.mean(f1s):.3f}\n")
    print("| probability | bin | count | mean predicted | observed frequency |")
    print("|---|---|---|---|---|")
    for r in calibration_table(calib):
        if r["count"]:
            print(f"| {r['probability']} | {r['bin']} | {r['count']} | {r['mean_predicted']:.3f} | "
                  f"{r['observed_frequency']:.3f} |")

if __name__ == "__main__":
    main()
