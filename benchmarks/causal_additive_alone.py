"""The additive-noise surrogate of ``start="additive"`` read as a causal posterior by itself, no ICP (issue 23, stop 55).

    python benchmarks/causal_additive_alone.py [--seeds 10,11,...,19] [--chains 16] [--draws 25]

For each SEM of ``chefs bench causal``'s generator (full settings), ``--chains`` surrogates
(:class:`chefs.causal_additive.AdditiveOrderPosterior`): the first on the data, each other on the bootstrap
resample of the rows that chain c's start uses in ``CausalDiscovery`` (``[seed, 7919, c, 1]``, here with the
SEM's seed as the run's), ``--draws`` exact draws of an order and its parent sets from each, pooled. Prints each
SEM's ancestral F1 (relations at p > 0.5, the benchmark's rule) and CPU seconds, and the calibration table of
``p_edge`` and ``p_ancestor`` pooled over the SEMs (the benchmark's bins). ``--chains 1`` reads the surrogate's
posterior on the data alone. Hidden confounders are not in the surrogate: it has no ``p_confounded``.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from chefs.bench.causal import _closure, calibration_table, make_sem, sem_settings
from chefs.causal_additive import AdditiveOrderPosterior


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
        E, A = np.zeros((D, D)), np.zeros((D, D))
        t0 = time.process_time()
        for c in range(a.chains):
            X = sem.X if c == 0 else sem.X[np.random.default_rng([seed, 7919, c, 1]).integers(0, N, N)]
            post = AdditiveOrderPosterior(X, rng=seed)
            rng = np.random.default_rng([seed, c, 5])
            for _ in range(a.draws):
                order = post.sample_order(rng)
                M = np.zeros((D, D), bool)
                for k, i in post.sample_parents(order, rng):
                    M[k, i] = True
                E += M
                A += _closure(M)
        E /= a.chains * a.draws
        A /= a.chains * a.draws
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
