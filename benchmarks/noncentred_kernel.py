"""The non-centred updates in numba against the numpy code they replaced (stop 51; docs/derivations.md 3.24).

    python benchmarks/noncentred_kernel.py [--datasets two-moons,ring,pinwheel] [--split 46] [--sweeps 1500]

Two measurements in one run, on Table 1's training split ``--split`` of each data set (numba on one thread):

* **the update alone, on the same states:** a chain with the default settings (one start, no pilots) runs
  ``--sweeps`` sweeps; every 50th sweep the model is copied and ``NLGBN.noncentred_update`` (the numba kernel) and
  ``_noncentred_update_reference`` (the numpy code of stops 46-50) each update a copy from the same random
  stream, timed; the same draws are taken (the generators end equal; ``tests/test_noncentred.py`` checks it), so
  the two do the same work. Prints the median time of each and their ratio, and the share of the chain's CPU time
  the update took (the reference's share estimated from the ratio of the medians).
* **whole fits:** ``BeliefNetwork`` with the library's defaults (pilots included) and ``--sweeps`` sweeps, once
  with each implementation, one after the other; CPU seconds and their ratio. The kernel sums in another order, but a
  slice draw depends on its target only through accept/shrink decisions, so the chains stay the same unless a
  rounding difference flips one; the last column compares 500 fantasy points of the two fits.
"""

from __future__ import annotations

import argparse
import copy
import statistics
import time

import numpy as np


def main(argv=None) -> int:
    from chefs._threads import limit_threads
    from chefs.bench.table1 import _training_split, chain_settings
    from chefs.density import BeliefNetwork
    from chefs.models.nlgbn import NLGBN

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="two-moons,ring,pinwheel")
    ap.add_argument("--split", type=int, default=46)
    ap.add_argument("--sweeps", type=int, default=1500)
    args = ap.parse_args(argv)
    if args.sweeps < 100:
        raise ValueError(f"--sweeps must be at least 100, got {args.sweeps}")
    limit_threads(1)
    settings, _ = chain_settings(False)
    kernel = NLGBN.noncentred_update
    print("| data set | update: numba ms (median) | numpy ms | ratio | update's share of the fit's CPU (numba / numpy, estimated) | "
          "whole fit, CPU s: numba / numpy | ratio numpy / numba | 500 fantasy points of the two fits |")
    print("|---|---|---|---|---|---|---|---|")
    for ds in args.datasets.split(","):
        train, _ = _training_split(ds, args.split, settings, None)
        t_new, t_old = [], []
        spent = {"new": 0.0}

        def timed(self, rng, state):
            t0 = time.process_time()
            kernel(self, rng, state)
            spent["new"] += time.process_time() - t0
            if getattr(self, "_bench_count", 0) % 50 == 49:
                for fn, out in ((kernel, t_new), (NLGBN._noncentred_update_reference, t_old)):
                    m = copy.deepcopy(self)
                    t1 = time.perf_counter()
                    fn(m, np.random.default_rng(7), state)  # the graph is only read
                    out.append(time.perf_counter() - t1)
            self._bench_count = getattr(self, "_bench_count", 0) + 1

        BeliefNetwork(sweeps=20, burn_in=10, thin=5, seed=1, pilots=1, progress=False).fit(train[:100])  # compile
        NLGBN.noncentred_update = timed
        try:
            t0 = time.process_time()
            BeliefNetwork(sweeps=args.sweeps, burn_in=args.sweeps // 2, thin=30, seed=5, pilots=1,
                          progress=False).fit(train)
            chain_cpu = time.process_time() - t0
        finally:
            NLGBN.noncentred_update = kernel
        share_new = spent["new"] / chain_cpu
        old_total = spent["new"] * statistics.median(t_old) / statistics.median(t_new)
        share_old = old_total / (chain_cpu - spent["new"] + old_total)
        fits, fantasy = {}, {}
        for label, fn in (("numba", kernel), ("numpy", NLGBN._noncentred_update_reference)):
            NLGBN.noncentred_update = fn
            try:
                t0 = time.process_time()
                net = BeliefNetwork(sweeps=args.sweeps, burn_in=args.sweeps // 2, thin=30, seed=5,
                                    progress=False).fit(train)
                fits[label] = time.process_time() - t0
                fantasy[label] = net.sample(500, rng=np.random.default_rng(1))
            finally:
                NLGBN.noncentred_update = kernel
        d = np.abs(fantasy["numba"] - fantasy["numpy"]).max()
        same = "the same, bit for bit" if d == 0 else f"differ (max {d:.3g})"
        print(f"| {ds} | {1e3 * statistics.median(t_new):.2f} | {1e3 * statistics.median(t_old):.2f} | "
              f"{statistics.median(t_old) / statistics.median(t_new):.1f} | {share_new:.2f} / {share_old:.2f} | "
              f"{fits['numba']:.1f} / {fits['numpy']:.1f} | {fits['numpy'] / fits['numba']:.2f} | {same} |", flush=True)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
