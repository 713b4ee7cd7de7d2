"""How often causal chains reverse an ancestral relation, at the posterior and at power posteriors (stop 54).

    python benchmarks/causal_switches.py [--seeds 60,61,62] [--powers 1,0.5] [--chains 4] [--sweeps 2000]

Stop 54 found every middle-bin probability of the causal benchmark to be one on which the chains disagree
(docs/results-causal.md): each chain keeps its own orientations. Parallel tempering (docs/derivations.md 3.29)
would help only if chains at a flatter target, the power posterior of ``likelihood_power`` < 1
(docs/derivations.md 3.19), reverse relations more often than at the posterior. For each SEM of the benchmark's
generator (``chefs.bench.causal.make_sem`` with ``sem_settings``) and each power, this fits ``CausalDiscovery``
with the default settings but ``--chains`` chains and ``likelihood_power``, and counts, between consecutive kept
samples of each chain, the **reversals**: ordered pairs whose ancestral relation turns from i -> j to j -> i
(through any units), and the changes of the observed variables' order. Printed per SEM and power: reversals and
order changes per 1,000 sweeps (mean over chains), the chains' disagreement (``chain_disagreement``: pairs of
``p_ancestor`` more than 0.2 apart) and the ancestral F1 of the pooled summary.
"""

from __future__ import annotations

import argparse
import tempfile
from pathlib import Path

import numpy as np


def main(argv=None) -> int:
    from chefs.bench.causal import _cpu_seconds, icp_estimate, make_sem, metrics, sem_settings
    from chefs.causal import CausalDiscovery, relations

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="60,61,62")
    ap.add_argument("--powers", default="1,0.5")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--sweeps", type=int, default=2000)
    args = ap.parse_args(argv)
    seeds = [int(s) for s in args.seeds.split(",")]
    powers = [float(p) for p in args.powers.split(",")]
    if args.chains < 2 or args.sweeps < 20 or not all(0 < p <= 1 for p in powers):
        raise ValueError("--chains must be at least 2, --sweeps at least 20 and every power in (0, 1]")
    thin = 10
    print("| SEM seed (D, H, N) | power | reversals per 1,000 sweeps | order changes per 1,000 sweeps | "
          "pairs of p_ancestor the chains disagree on | ancestral F1 | CPU s |")
    print("|---|---|---|---|---|---|---|")
    for seed in seeds:
        D, H, N = sem_settings(seed, False)
        sem = make_sem(seed, D, H, N)
        for power in powers:
            with tempfile.TemporaryDirectory() as tmp:
                t0 = _cpu_seconds()
                cd = CausalDiscovery(sweeps=args.sweeps, burn_in=args.sweeps // 2, thin=thin, chains=args.chains,
                                     seed=seed, likelihood_power=power, out=Path(tmp) / "run", progress=False,
                                     force=True).fit(sem.X)
                cpu = _cpu_seconds() - t0
            chains = np.asarray(cd.sample_chains_)
            rev, orders = [], []
            for c in np.unique(chains):
                samples = [s for s, k in zip(cd.samples_, chains) if k == c]
                anc = [relations(s)[1] for s in samples]
                obs = [np.asarray(s["observed"], bool) for s in samples]
                order = [tuple(np.argsort(-np.asarray(s["theta"])[o])) for s, o in zip(samples, obs)]
                span = (len(samples) - 1) * thin / 1000.0
                rev.append(sum(int(np.sum(a & b.T)) for a, b in zip(anc[:-1], anc[1:])) / span)
                orders.append(sum(a != b for a, b in zip(order[:-1], order[1:])) / span)
            f1 = metrics(icp_estimate(cd.summary_), sem)["anc_f1"]
            print(f"| {seed} ({D}, {H}, {N}) | {power:g} | {np.mean(rev):.2f} | {np.mean(orders):.2f} | "
                  f"{cd.disagreement_['p_ancestor']} of {cd.disagreement_['pairs']} | {f1:.3f} | {cpu:.0f} |",
                  flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
