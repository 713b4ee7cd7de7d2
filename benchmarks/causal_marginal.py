"""The model's own marginal likelihood of the chains' observed-only states, against the true DAG (issue 23, stop 52).

    python benchmarks/causal_marginal.py BENCH_DIR [--seeds 30,31,...]

``BENCH_DIR`` is the output of ``chefs bench causal --out BENCH_DIR`` (nothing is refitted; the SEMs are rebuilt
from their seeds). For each chain, the observed-only part of its last kept state (its edges among the observed
variables; hidden units left out) is scored by the belief network's marginal likelihood with every unit observed
(``chefs.causal_order.OrderScorer.dag_score``: b, W, rho integrated, and the weight variance v under the causal
default's 1/v ~ Gamma(1, 1)), and set against the true DAG's score and the chain's own ancestral F1. The score is
the model's exact marginal likelihood only for states without hidden units (the ``hidden`` column), and leaves the
ICP's structure prior out. The last line gives, per SEM with at least four chains without hidden units, the
Spearman correlation of the score with the F1 over those chains (docs/derivations.md 3.8, stop 52).
"""
from __future__ import annotations

import argparse
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from chefs.bench.causal import make_sem, sem_settings
from chefs.causal import CausalDiscovery, relations
from chefs.causal_order import OrderScorer


def observed_dag(sample, D):
    obs = np.flatnonzero(np.asarray(sample["observed"], bool))
    col = {int(n): c for c, n in enumerate(obs)}
    A = np.zeros((D, D), bool)
    for p, q in sample["edges"]:
        if int(p) in col and int(q) in col:
            A[col[int(p)], col[int(q)]] = True
    return A, len(sample["observed"]) - obs.size


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_dir")
    ap.add_argument("--seeds", default=None, help="comma-separated SEM seeds (default: every runs/seedS)")
    args = ap.parse_args(argv)
    runs = sorted(Path(args.bench_dir).glob("runs/seed*"), key=lambda p: int(p.name[4:]))
    if args.seeds:
        keep = {int(s) for s in args.seeds.split(",")}
        runs = [r for r in runs if int(r.name[4:]) in keep]
    if not runs:
        raise SystemExit(f"no runs/seedS directories in {args.bench_dir}")
    rhos = []
    for rd in runs:
        seed = int(rd.name[4:])
        D, H, N = sem_settings(seed, False)
        sem = make_sem(seed, D, H, N)
        scorer = OrderScorer(np.load(rd / "train01.npy"), weight_prior=(1.0, 1.0))
        truth = scorer.dag_score(sem.edges)
        print(f"seed {seed} (D={D}, H={H}, N={N}): true DAG {truth:.1f} ({int(sem.edges.sum())} edges)")
        cd = CausalDiscovery.load(rd, chains=None)
        chains = np.asarray(cd.sample_chains_)
        rows = []
        for c in np.unique(chains):
            sample = cd.samples_[int(np.flatnonzero(chains == c)[-1])]
            A, hidden = observed_dag(sample, D)
            anc = relations(sample)[1]
            f1 = 2 * (anc & sem.ancestor).sum() / max(anc.sum() + sem.ancestor.sum(), 1)
            score = scorer.dag_score(A) - truth
            rows.append((hidden, score, f1))
            print(f"  chain {c:2d}: hidden {hidden}, edges {int(A.sum()):2d}, score - truth {score:+9.1f}, "
                  f"ancestral F1 {f1:.2f}", flush=True)
        plain = [r for r in rows if r[0] == 0]
        if len(plain) >= 4:
            rho = spearmanr([r[1] for r in plain], [r[2] for r in plain]).correlation
            rhos.append(rho)
            print(f"  Spearman (score, F1) over the {len(plain)} chains without hidden units: {rho:+.2f}")
    if rhos:
        print(f"mean Spearman over {len(rhos)} SEMs: {np.mean(rhos):+.2f} (range {min(rhos):+.2f} to {max(rhos):+.2f})")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
