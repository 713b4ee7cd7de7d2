"""The chains' starts of causal discovery computed one after another against in a pool of processes (stop 54).

    python benchmarks/causal_starts.py [--columns 6,10,15] [--chains 16] [--rows 1000] [--seed 3] [--fit]

Before stop 54 every chain's start (its residual-independence order, ``chefs.causal.start_order``) was computed
in the main process, one chain after another, before any chain sampled; the chains then ran two at a time. Since
stop 54, when chain 0's order takes at least ``START_POOL_SECONDS``, chains 1, 2, ... are ordered in a pool of
local processes. For each column count, on the benchmark's SEM generator (``chefs.bench.causal.make_sem``, one
hidden confounder), this prints the wall and CPU seconds of ``CausalDiscovery._initial_graphs`` both ways and
whether the starts are equal edge for edge. ``--fit`` also times a whole default fit (16 chains, 2,000 sweeps) both
ways at the first column count and compares the two runs' ``edges.csv``.
"""

from __future__ import annotations

import argparse
import resource
import tempfile
import time
from pathlib import Path


def _cpu() -> float:
    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def main(argv=None) -> int:
    import chefs.causal as cc
    from chefs.bench.causal import make_sem
    from chefs.density import UnitMap

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--columns", default="6,10,15")
    ap.add_argument("--chains", type=int, default=cc.CAUSAL_CHAINS)
    ap.add_argument("--rows", type=int, default=1000)
    ap.add_argument("--seed", type=int, default=3)
    ap.add_argument("--fit", action="store_true")
    args = ap.parse_args(argv)
    columns = [int(c) for c in args.columns.split(",")]
    if args.chains < 2 or args.rows < 10 or min(columns) < 2:
        raise ValueError("--chains must be at least 2, --rows at least 10 and every --columns at least 2")
    print(f"| columns | rows | chains | one after another: wall s (CPU s) | pool: wall s (CPU s) | wall ratio | "
          f"starts equal |")
    print("|---|---|---|---|---|---|---|")
    for D in columns:
        X = make_sem(args.seed, D, 1, args.rows).X
        cd = cc.CausalDiscovery(seed=args.seed, chains=args.chains, progress=False, start="residual")
        cd.map_ = UnitMap.fit(X, cd.margin, False, False)
        cd._start_data = X
        res = {}
        for arm, threshold in (("serial", float("inf")), ("pool", cc.START_POOL_SECONDS)):
            cc.START_POOL_SECONDS = threshold
            w0, c0 = time.perf_counter(), _cpu()
            res[arm] = ([g.to_dict() for g in cd._initial_graphs(D)], time.perf_counter() - w0, _cpu() - c0,
                        cd.start_pool_)
        cc.START_POOL_SECONDS = threshold
        (gs, ws, cs, _), (gp, wp, cp, used) = res["serial"], res["pool"]
        pool = f"{wp:.1f} ({cp:.1f})" if used else f"not used: {wp:.1f} ({cp:.1f})"
        print(f"| {D} | {args.rows} | {args.chains} | {ws:.1f} ({cs:.1f}) | {pool} | {ws / wp:.2f} | "
              f"{'yes' if gs == gp else 'NO'} |", flush=True)
    if args.fit:
        D = columns[0]
        X = make_sem(args.seed, D, 1, args.rows).X
        default = cc.START_POOL_SECONDS
        out = {}
        with tempfile.TemporaryDirectory() as tmp:
            for arm, threshold in (("serial", float("inf")), ("pool", default)):
                cc.START_POOL_SECONDS = threshold
                run = Path(tmp) / arm
                w0, c0 = time.perf_counter(), _cpu()
                cc.CausalDiscovery(seed=args.seed, chains=args.chains, out=run, force=True, progress=False,
                                   start="residual").fit(X)
                out[arm] = ((run / "edges.csv").read_text(), time.perf_counter() - w0, _cpu() - c0)
            cc.START_POOL_SECONDS = default
        (es, ws, cs), (ep, wp, cp) = out["serial"], out["pool"]
        print(f"\nwhole default fit, {D} columns, {args.rows} rows, {args.chains} chains: one after another "
              f"{ws:.1f} s wall ({cs:.1f} CPU s), pool {wp:.1f} s wall ({cp:.1f} CPU s), ratio {ws / wp:.2f}; "
              f"edges.csv {'the same' if es == ep else 'DIFFERENT'}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
