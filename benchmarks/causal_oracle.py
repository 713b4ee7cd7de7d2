"""Issue 23's hidden common causes, read from a start at the answer: do the chains keep a true hidden confounder?

    python benchmarks/causal_oracle.py [--seeds 10,11,13,14] [--chains 4] [--sweeps 2000] [--out DIR] [--plot FILE.png]
    python benchmarks/causal_oracle.py --read LINES.jsonl --plot FILE.png

A diagnostic that uses the answer (never a method). For each SEM seed of the benchmark's generator
(``chefs.bench.causal.make_sem`` at the full settings' sizes), two runs of :class:`chefs.CausalDiscovery` with the
benchmark's full chain settings (burn-in half the sweeps, thin 10) and its defaults otherwise, every chain started at

* ``truth``: the true structure: the observed units at the true causal order (``chefs.causal.order_values``), the
  true edges among them, and a hidden root unit as the common parent of each confounded pair (two confounders of
  one pair, which the generator can draw, are one unit here);
* ``truth-no-conf``: the same without the hidden units (what an observed-only start can hold at best).

The order values stay free and every move runs as in the default, so the chains may keep, drop or replace anything.
Per run: SHD and ancestral F1 (the benchmark's readings), the posterior of the number of latent common causes, and
for each truly confounded pair its ``p_confounded``, the probability of a direct edge in either direction, and
whether the two variables are also ancestrally related in the SEM. One JSON line per run on the standard output;
the runs' directories under ``--out`` (default: a temporary directory, removed). ``--plot``: each confounded pair's
``p_confounded`` against its ``p_edge`` in either direction, one panel per start (pairs also related in the SEM
hollow); ``--read``: plot the JSON lines of an earlier run instead of fitting.

Stop 57 ran it on development seeds 10 and 11 (seeds 13, 14, 15, 17, 18, 19 by its prototype, which builds the same
start: its seed-11 run reproduced the prototype's to every printed digit), the seeds of 10-19 with confounders
(docs/results-causal.md, stop 57). The start holds the structure only: weights, precisions and activations start as the
default's do (the activations projected from the data), and every chain starts at the same structure. The run
directories record the default's start name in ``causal-columns.json``: they are diagnostics, not runs to resume.
"""

from __future__ import annotations

import argparse
import json
import tempfile
from pathlib import Path

import numpy as np


def true_structure_start(sem, with_confounders: bool = True):
    """The DAG of the SEM's structure as a start (module docstring): observed node d is data column d, at the order
    value of its place in a topological order (roots highest); hidden node D + k is the k-th confounded pair's
    common parent, just above the higher of its two children."""
    from chefs.causal import order_values
    from chefs.graph import DAG

    D = sem.edges.shape[0]
    order = sorted(range(D), key=lambda j: int(sem.ancestor[:, j].sum()))  # ancestors come first
    theta = list(order_values(order, D))
    pa, ch = np.nonzero(sem.edges)
    parents, children = pa.tolist(), ch.tolist()
    observed = [True] * D
    if with_confounders:
        for a, b in confounded_pairs(sem):
            h = len(theta)
            # above both children; distinct, since observed order values are spaced 0.9 / (D - 1) >= 0.1 apart
            # (D <= 10) and a unit pushed past 0.99 (a pair with the first root, 0.95) takes the next free value
            # of 0.99, 0.991, ... (stop 57's runs hit the cap once, seed 19, at 0.99)
            t = max(theta[a], theta[b]) + 0.02 + 0.003 * h
            if t >= 0.99:
                t = 0.99 + 0.001 * sum(v >= 0.99 for v in theta[D:])
            theta.append(t)
            observed.append(False)
            parents += [h, h]
            children += [a, b]
    return DAG(np.array(theta), np.array(observed), parents, children)


def confounded_pairs(sem) -> list[tuple[int, int]]:
    """The pairs (a < b) of observed variables that share a hidden confounder in the SEM."""
    D = sem.edges.shape[0]
    return [(a, b) for a in range(D) for b in range(a + 1, D) if sem.confounded[a, b]]


def _oracle_class():
    from chefs.causal import CausalDiscovery

    class OracleStart(CausalDiscovery):
        """Every chain at :func:`true_structure_start` (the rest of the default unchanged)."""

        def __init__(self, sem, with_confounders, **kw):
            super().__init__(**kw)
            self._sem, self._with_confounders = sem, with_confounders

        def _initial_graphs(self, D):
            return [true_structure_start(self._sem, self._with_confounders)] * int(self.chains)

    return OracleStart


def run(seed: int, with_confounders: bool, chains: int, sweeps: int, out: Path) -> dict:
    from chefs.bench.causal import icp_estimate, make_sem, metrics, sem_settings

    D, H, N = sem_settings(seed, False)
    sem = make_sem(seed, D, H, N)
    start = "truth" if with_confounders else "truth-no-conf"
    cd = _oracle_class()(sem, with_confounders, sweeps=sweeps, burn_in=sweeps // 2, thin=10, chains=chains,
                         seed=seed, out=out / f"seed{seed}-{start}", force=True, progress=False)
    cd.fit(sem.X)
    est = icp_estimate(cd.summary_)
    m = metrics(est, sem)
    P = est.probs
    return {"seed": seed, "D": D, "H": H, "N": N, "start": start, "shd": int(m["shd"]),
            "anc_f1": round(float(m["anc_f1"]), 3),
            "latent_causes": {str(k): round(v, 4) for k, v in cd.summary_.confounder_distribution().items()},
            "confounded_pairs": [{"pair": [a, b], "p_confounded": round(float(P["p_confounded"][a, b]), 3),
                                  "p_edge_either": round(float(P["p_edge"][a, b] + P["p_edge"][b, a]), 3),
                                  "related": bool(sem.ancestor[a, b] or sem.ancestor[b, a])}
                                 for a, b in confounded_pairs(sem)]}


def plot(rows: list[dict], path) -> None:
    """The ``--plot`` figure of the report lines ``rows``."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    starts = ("truth", "truth-no-conf")
    titles = {"truth": "start: the true structure", "truth-no-conf": "start: the same without its hidden units"}
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), sharex=True, sharey=True)
    for ax, start in zip(axes, starts):
        pairs = [p for r in rows if r["start"] == start for p in r["confounded_pairs"]]
        for related, face in ((False, "C3"), (True, "none")):
            sel = [p for p in pairs if p["related"] == related]
            ax.scatter([p["p_edge_either"] for p in sel], [p["p_confounded"] for p in sel], s=40, facecolors=face,
                       edgecolors="C3", label="also ancestrally related" if related else "no observed relation")
        ax.set_title(f"{titles[start]} ({len(pairs)} pairs)", fontsize=10)
        ax.set_xlabel("P(direct edge), either direction")
        ax.set_xlim(-0.05, 1.05)
        ax.set_ylim(-0.05, 1.05)
        ax.grid(alpha=0.3)
    axes[0].set_ylabel("P(hidden common cause)")
    axes[0].legend(loc="lower left", fontsize=8)
    seeds = sorted({r["seed"] for r in rows})
    fig.suptitle(f"truly confounded pairs, SEM seeds {', '.join(map(str, seeds))}", fontsize=10)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--seeds", default="10,11,13,14")
    ap.add_argument("--chains", type=int, default=4)
    ap.add_argument("--sweeps", type=int, default=2000)
    ap.add_argument("--out", default=None)
    ap.add_argument("--plot", default=None)
    ap.add_argument("--read", default=None)
    args = ap.parse_args(argv)
    if args.chains < 1 or args.sweeps < 20:
        raise SystemExit("causal_oracle: --chains must be at least 1 and --sweeps at least 20")
    if args.read:
        if not args.plot:
            raise SystemExit("causal_oracle: --read needs --plot")
        plot([json.loads(s) for s in Path(args.read).read_text().splitlines() if s.strip()], args.plot)
        return
    seeds = [int(s) for s in args.seeds.split(",")]
    rows = []
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(args.out) if args.out else Path(tmp)
        for seed in seeds:
            for with_confounders in (True, False):
                rows.append(run(seed, with_confounders, args.chains, args.sweeps, out))
                print(json.dumps(rows[-1]), flush=True)
    if args.plot:
        plot(rows, args.plot)


if __name__ == "__main__":
    main()
