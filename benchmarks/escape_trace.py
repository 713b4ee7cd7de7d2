"""The default two-moons chain's escape from the blur, state by state (issue 21; docs/derivations.md 3.23).

    python benchmarks/escape_trace.py [--sweeps 36000] [--every 100] [--block 1000] [--out DIR]

One chain, ``BeliefNetwork(pilots=1, seed=0, noncentred=False)`` on two-moons split 0 (the default chain of
``benchmarks/crisp_start.py``, with ``burn_in=0`` and every ``--every``-th state kept), then, per block
of ``--block`` sweeps, over the states kept in it:

* the hidden units (range), and how binary the root units are: the largest fraction, over the block's roots,
  of 4,000 draws from a root's prior with ``u`` in (0.01, 0.99) (near 0: a coin);
* the largest precision among the hidden units that have parents, and the largest |weight| into such a unit;
* the Hellinger distance (Table 1's rule) of 2,000 ancestral draws of the block's last state to the test split.

The run directory (``--out``, default a temporary one) keeps the chain's samples.
"""

from __future__ import annotations

import argparse
import json
import sqlite3
import sys
import tempfile
import time
from pathlib import Path

import numpy as np


def state_summary(graph: dict, rng) -> tuple[int, float, float, float]:
    """(hidden units, largest root middle fraction, largest non-root precision, largest |weight| into a non-root)."""
    from scipy.special import expit

    obs = np.asarray(graph["observed"], bool)
    rho = np.asarray(graph["precision"], float)
    b = np.asarray(graph["bias"], float)
    into = {i: [] for i in range(len(obs))}
    for (p, c), w in zip(graph["edges"], graph["weights"]):
        into[c].append(abs(w))
    hidden = np.flatnonzero(~obs)
    roots = [h for h in hidden if not into[h]]
    inner = [h for h in hidden if into[h]]
    mid = float("nan")
    for h in roots:  # the fraction of prior draws of u away from 0 and 1 (near 0: a coin)
        u = expit(b[h] + rng.normal(size=4000) / np.sqrt(rho[h]))
        mid = np.nanmax([mid, np.mean((u > 0.01) & (u < 0.99))])
    return (hidden.size, mid, max((rho[h] for h in inner), default=float("nan")),
            max((max(into[h]) for h in inner), default=float("nan")))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--sweeps", type=int, default=36000)
    ap.add_argument("--every", type=int, default=100)
    ap.add_argument("--block", type=int, default=1000)
    ap.add_argument("--out", type=Path, default=None, help="run directory to keep (default: a temporary one)")
    a = ap.parse_args(argv)
    if a.sweeps < 1 or a.every < 1 or a.block < a.every or a.block % a.every:
        print("escape_trace: error: --sweeps, --every >= 1 and --block a multiple of --every", file=sys.stderr)
        return 2
    from chefs.datasets import load_split
    from chefs.density import BeliefNetwork
    from chefs.evaluation.hellinger import hellinger
    from chefs.models.predictive import ancestral

    train, test = load_split("two-moons", seed=0)
    with tempfile.TemporaryDirectory() as tmp:
        out = a.out or Path(tmp) / "run"
        t0 = time.process_time()
        net = BeliefNetwork(sweeps=a.sweeps, burn_in=0, thin=a.every, seed=0, pilots=1, out=out, force=a.out is not None,
                            progress=False, noncentred=False).fit(train)  # 3.23's chain (the default until stop 49)
        print(f"two-moons split 0, one default chain: {a.sweeps} sweeps in {time.process_time() - t0:.0f} CPU s",
              flush=True)
        con = sqlite3.connect(net.run_dir_ / "chain-0" / "samples.sqlite")
        states = [(sw, json.loads(g)) for sw, g in con.execute("select sweep, graph from samples order by sweep")]
        con.close()
        rng = np.random.default_rng(0)
        print("\n| sweeps | hidden units | roots: largest fraction of u in (0.01, 0.99) | largest non-root precision "
              "| largest weight into it | HD (block's last state) |\n|---|---|---|---|---|---|")
        for lo in range(0, a.sweeps, a.block):
            block = [(sw, g) for sw, g in states if lo < sw <= lo + a.block]
            if not block:
                continue
            rows = np.array([state_summary(g, rng) for _, g in block])
            U = ancestral(block[-1][1], test.shape[0], np.random.default_rng(11))
            obs = np.asarray(block[-1][1]["observed"], bool)
            fantasy = net.map_.inverse(U[obs].T)
            print(f"| {lo + a.every}-{lo + a.block} | {rows[:, 0].min():.0f}-{rows[:, 0].max():.0f} "
                  f"| {np.nanmax(rows[:, 1]):.2f} | {np.nanmin(rows[:, 2]):.2f}-{np.nanmax(rows[:, 2]):.2f} "
                  f"| {np.nanmax(rows[:, 3]):.1f} | {hellinger(fantasy, test):.3f} |", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
