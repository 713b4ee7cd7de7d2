"""Where the causal posterior's middle bins come from: each chain's order against the truth (issue 23, stop 55).

    python benchmarks/causal_order_errors.py BENCH_DIR [--seeds 0,1,...,9]

``BENCH_DIR`` is the output of ``chefs bench causal --out BENCH_DIR`` (its ``runs/seedS`` run directories are read
back; nothing is refitted; the SEMs are rebuilt from their seeds by the benchmark's generator). It prints:

* **What the wrong middle probabilities are.** Every ordered pair (i, j) whose pooled ``p_edge`` or ``p_ancestor``
  lies in [0.2, 0.8), by what holds in the SEM: the relation itself (true), the reverse edge or ancestry, an
  indirect ancestry taken for an edge, a hidden common cause, a common observed ancestor, or nothing (and of those,
  the ones with a common observed descendant); and the same for the pairs at or above 0.8 (the top bin; stop 56).
* **Each chain's order error**: over the SEM's true ancestral pairs (i an ancestor of j), the fraction of the
  chain's kept samples with i placed below j (theta_i < theta_j, so that i cannot be j's ancestor), averaged over
  the samples.
* **Which chains assert the middle relations**: for each pair with pooled ``p_edge`` in [0.2, 0.8), the mean order
  error of the chains whose own ``p_edge`` is at least 0.5 against that of the others, for false and for true edges.
* **Whether the chains' log joint density ranks their orders**: the Spearman correlation, over a run's chains, of
  the order error with the mean log joint density (``chefs.mcmc.diagnostics.chain_comparison``), and the order error
  of the chain with the highest.
"""

from __future__ import annotations

import argparse
import collections
from pathlib import Path

import numpy as np
from scipy.stats import spearmanr

from chefs.bench.causal import make_sem, sem_settings
from chefs.causal import CausalDiscovery, CausalSummary
from chefs.mcmc.diagnostics import chain_comparison

KINDS = ("true", "reversed edge", "reversed ancestor", "indirect ancestor", "confounded", "common observed ancestor",
         "unrelated")


def kind(sem, key, i, j) -> str:
    truth = sem.edges if key == "p_edge" else sem.ancestor
    if truth[i, j]:
        return "true"
    if sem.edges[j, i]:
        return "reversed edge"
    if sem.ancestor[j, i]:
        return "reversed ancestor"
    if key == "p_edge" and sem.ancestor[i, j]:
        return "indirect ancestor"
    if sem.confounded[i, j]:
        return "confounded"
    if (sem.ancestor[:, i] & sem.ancestor[:, j]).any():
        return "common observed ancestor"
    return "unrelated"


def chain_readings(cd, sem):
    """{chain: (order error, its own p_edge)}; the chains' own summaries are ``CausalSummary.from_samples``'s."""
    pairs = np.argwhere(sem.ancestor)
    chains = np.asarray(cd.sample_chains_)
    _, per_chain = CausalSummary.from_samples(cd.samples_, cd.names_, chains)
    out = {}
    for c, summary in per_chain.items():
        errs = []
        for s in (s for s, k in zip(cd.samples_, chains) if k == c):
            th = np.asarray(s["theta"], float)[np.asarray(s["observed"], bool)]
            errs.append(float(np.mean([th[i] < th[j] for i, j in pairs])) if len(pairs) else 0.0)
        out[int(c)] = (float(np.mean(errs)), summary.p_edge)
    return out


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("bench_dir")
    ap.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9")
    a = ap.parse_args(argv)
    seeds = [int(s) for s in a.seeds.split(",")]
    composition = collections.Counter()
    totals = collections.Counter()
    top = collections.Counter()
    top_totals = collections.Counter()
    asserting = {"false": [], "true": []}
    print("| seed (D, H, N) | chains' order errors: min, median, max | Spearman(order error, log joint) | "
          "order error of the chain with the highest log joint |")
    print("|---|---|---|---|")
    for seed in seeds:
        D, H, N = sem_settings(seed, False)
        sem = make_sem(seed, D, H, N)
        run = Path(a.bench_dir) / "runs" / f"seed{seed}"
        cd = CausalDiscovery.load(run)
        per = chain_readings(cd, sem)
        off = ~np.eye(D, dtype=bool)
        for key in ("p_edge", "p_ancestor"):
            P = getattr(cd.summary_, key)
            for i, j in np.argwhere(off):
                if P[i, j] < 0.2:
                    continue
                counts, sums = (composition, totals) if P[i, j] < 0.8 else (top, top_totals)
                k = kind(sem, key, i, j)
                counts[(key, k)] += 1
                sums[key] += 1
                if k == "unrelated" and (sem.ancestor[i, :] & sem.ancestor[j, :]).any():
                    counts[(key, "unrelated, with a common observed descendant")] += 1
        P = cd.summary_.p_edge
        for i, j in np.argwhere(off):
            if 0.2 <= P[i, j] < 0.8:
                yes = [per[c][0] for c in per if per[c][1][i, j] >= 0.5]
                no = [per[c][0] for c in per if per[c][1][i, j] < 0.5]
                if yes and no:
                    asserting["true" if sem.edges[i, j] else "false"].append((np.mean(yes), np.mean(no)))
        lj = {r["chain"]: r["log_joint"] for r in chain_comparison(run)["chains"]}
        err = np.array([per[c][0] for c in sorted(per)])
        joint = np.array([lj[c] for c in sorted(per)])
        rho = spearmanr(err, joint)[0] if len(per) > 2 and np.ptp(err) > 0 else float("nan")
        print(f"| {seed} ({D}, {H}, {N}) | {err.min():.2f}, {np.median(err):.2f}, {err.max():.2f} | {rho:+.2f} | "
              f"{err[int(np.argmax(joint))]:.2f} |")
    print()
    for label, counts, sums in (("[0.2, 0.8)", composition, totals), ("[0.8, 1.0]", top, top_totals)):
        print(f"| probability | what holds in the SEM | pairs in {label} | share |")
        print("|---|---|---|---|")
        for key in ("p_edge", "p_ancestor"):
            for k in KINDS + ("unrelated, with a common observed descendant",):
                n = counts[(key, k)]
                if n:
                    print(f"| {key} | {k} | {n} | {n / sums[key]:.2f} |")
        print()
    print("| middle-bin p_edge pairs | pairs | mean order error: chains asserting / the others | asserting higher |")
    print("|---|---|---|---|")
    for k, v in asserting.items():
        if v:
            v = np.array(v)
            print(f"| {k} edges | {len(v)} | {v[:, 0].mean():.3f} / {v[:, 1].mean():.3f} | "
                  f"{(v[:, 0] > v[:, 1]).mean():.2f} |")


if __name__ == "__main__":
    main()
