"""How often an ICP belief-network chain finds the shared hidden units, for each
start of the hidden activations (``BeliefNetwork(init_activations=...)``).

For each chain seed and each start ("prior": ancestral draws from the prior;
"projection": soft half-space features of the data, the default), one chain with
Table 1's full settings (3,000 sweeps, 1,500 burn-in, thin 30, structure warm-up
300) on one split of a data set; prints the Hellinger distance of fantasy data
(as many points as the test set) to the test set, the mean augmented
log-likelihood and the mean number of hidden units and edges over the kept
samples, then the median HD per start. A chain "collapsed" when it ended with
the observed columns modelled as independent (no hidden unit with two observed
descendants), which on ring reads as HD > 0.2.

    python benchmarks/init.py --data ring --chains 1,2,3,4,5,6 [--jobs 2]

Each chain takes 1-2 minutes on ring. ``--jobs`` runs chains in processes (one
numba thread each).
"""

from __future__ import annotations

import argparse
import os
import statistics
import tempfile
from concurrent.futures import ProcessPoolExecutor


def one_chain(args):
    data, split_seed, chain_seed, init, data_dir = args
    import numpy as np

    from chefs.datasets import load_split
    from chefs.density import BeliefNetwork
    from chefs.evaluation.hellinger import hellinger
    from chefs.mcmc.diagnostics import traces

    train, test = load_split(data, seed=split_seed, data_dir=data_dir)
    with tempfile.TemporaryDirectory(prefix="chefs-init-") as out:
        net = BeliefNetwork(sweeps=3000, burn_in=1500, thin=30, seed=chain_seed, out=out, force=True,
                            progress=False, checkpoint_every=60.0, init_activations=init)
        net.fit(train)
        hd = hellinger(net.sample(test.shape[0], rng=np.random.default_rng([chain_seed, 5])), test)
        tr = traces(out)
        means = {k: float(np.mean(tr[k])) for k in ("log_lik", "num_hidden", "num_edges")}
    return chain_seed, init, hd, means


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--data", default="ring")
    ap.add_argument("--split-seed", type=int, default=0)
    ap.add_argument("--chains", default="1,2,3,4,5,6", help="comma-separated chain seeds")
    ap.add_argument("--inits", default="prior,projection")
    ap.add_argument("--jobs", type=int, default=1)
    ap.add_argument("--data-dir", default=os.environ.get("CHEFS_DATA"))
    a = ap.parse_args()
    jobs = [(a.data, a.split_seed, int(c), init, a.data_dir) for c in a.chains.split(",") for init in a.inits.split(",")]
    if a.jobs > 1:
        os.environ.setdefault("NUMBA_NUM_THREADS", "1")
        with ProcessPoolExecutor(a.jobs) as ex:
            results = list(ex.map(one_chain, jobs))
    else:
        results = [one_chain(j) for j in jobs]
    print(f"{'chain':>5s} {'start':>10s} {'HD':>7s} {'log_lik':>9s} {'hidden':>7s} {'edges':>6s}")
    for c, init, hd, m in results:
        print(f"{c:5d} {init:>10s} {hd:7.4f} {m['log_lik']:9.1f} {m['num_hidden']:7.1f} {m['num_edges']:6.1f}")
    for init in a.inits.split(","):
        hds = [r[2] for r in results if r[1] == init]
        print(f"{init}: median HD {statistics.median(hds):.4f} over {len(hds)} chains, "
              f"{sum(h > 0.2 for h in hds)} above 0.2")


if __name__ == "__main__":
    main()
