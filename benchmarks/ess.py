"""Sweeps per CPU-second and effective samples of the log joint density per
CPU-second (issue 21: "sweeps stay fast"), for ICP belief-network configurations
measured in one run.

    python benchmarks/ess.py [--datasets ring,two-moons] [--seed 0] [--sweeps 3000]
        [--config 'old={"noncentred": false, "pilot_draws": 32}' --config 'new={}' ...]

Each configuration fits one chain (Table 1's length by default, burn-in half the
sweeps, every sweep after the burn-in kept). CPU seconds are the process time of
the whole fit (pilots, warm-up and burn-in included), after a short warm-up fit
that compiles the numba kernels. ESS: ArviZ's bulk ESS of the kept log joint
density (log prior + augmented log-likelihood). Prints one line per (data set,
configuration) and the ratios against the first configuration.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import time

import numpy as np

#: stop 49's comparison: the earlier default against the default since stop 49 (the non-centred updates and 512
#: pilot draws; docs/derivations.md 3.27). Stop 25's was 'old={"pilots": 1}' 'pilots={"pilots": 3}'
#: 'hmc={"pilots": 1, "hmc_steps": 20}' with the centred chains of its day (add "noncentred": false to rerun it)
DEFAULT_CONFIGS = ('old={"noncentred": false, "pilot_draws": 32}', 'new={}')


def main(argv=None):
    import arviz as az

    from chefs.datasets import load_split
    from chefs.density import BeliefNetwork
    from chefs.mcmc.diagnostics import traces

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="ring,two-moons")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--sweeps", type=int, default=3000)
    ap.add_argument("--config", action="append", default=None, help="LABEL=JSON of BeliefNetwork arguments")
    args = ap.parse_args(argv)
    configs = [(c.partition("=")[0], json.loads(c.partition("=")[2])) for c in (args.config or DEFAULT_CONFIGS)]
    with tempfile.TemporaryDirectory() as tmp:
        train, _ = load_split("two-moons", seed=0)
        for _, kw in configs:  # compile every kernel the configurations use
            BeliefNetwork(sweeps=20, burn_in=10, thin=5, out=f"{tmp}/warm", force=True, progress=False,
                          **kw).fit(train[:200])
        for ds in args.datasets.split(","):
            train, _ = load_split(ds, seed=args.seed)
            base = None
            for label, kw in configs:
                t0 = time.process_time()
                net = BeliefNetwork(sweeps=args.sweeps, burn_in=args.sweeps // 2, thin=1, seed=100 + args.seed,
                                    out=f"{tmp}/{ds}-{label}", force=True, progress=False, **kw).fit(train)
                cpu = time.process_time() - t0
                total = args.sweeps + net.pilots * net.pilot_sweeps * (net.pilots > 1)
                x = np.asarray(traces(net.run_dir_)["log_joint"]).ravel()
                ess = float(az.ess(x))
                row = {"sweeps_per_s": total / cpu, "ess_per_s": ess / cpu}
                base = base or row
                print(f"{ds:10s} {label:8s} sweeps {total:6d}  CPU {cpu:7.1f} s  {row['sweeps_per_s']:6.1f} sweeps/s  "
                      f"ESS(log joint) {ess:7.1f}  {row['ess_per_s']:6.3f} ESS/s  "
                      f"ratios {row['sweeps_per_s'] / base['sweeps_per_s']:.2f} / {row['ess_per_s'] / base['ess_per_s']:.2f}",
                      flush=True)


if __name__ == "__main__":
    main()
