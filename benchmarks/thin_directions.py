"""How a fitted belief network's fantasy data spread along the training data's principal axes
(issue 21; docs/derivations.md 3.14).

    python benchmarks/thin_directions.py RUN:DATASET:SEED [RUN:DATASET:SEED ...] [--points 20000]

``RUN`` is a belief-network run directory of a Table 1 cell (``chefs bench table1 --out DIR``
keeps them in ``DIR/runs/DATASET-MODEL-SEED``; or ``benchmarks/pilot_length.py``'s), fitted on
that cell's training split. For each, prints the training data's eigenvalues (columns
standardised) and, along each eigenvector, the variance of the network's fantasy data, of
DP-GMM's (Table 1's code and stream) and of the test half, each divided by the training
variance; and the Hellinger distance (Table 1's rule) to the test half of the fantasy data and of
Gaussians with the first two moments of the fantasy data and of the training data.
"""

from __future__ import annotations

import argparse

import numpy as np


def main(argv=None) -> None:
    from chefs.bench.table1 import FULL, _training_split, cell_rng, fit_dpgmm
    from chefs.density import BeliefNetwork
    from chefs.evaluation.hellinger import hellinger

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells", nargs="+", metavar="RUN:DATASET:SEED")
    ap.add_argument("--points", type=int, default=20000, help="fantasy points for the variances")
    args = ap.parse_args(argv)
    np.set_printoptions(precision=3, suppress=True, linewidth=160)
    for cell in args.cells:
        run, ds, seed = cell.rsplit(":", 2)
        seed = int(seed)
        train, test = _training_split(ds, seed, FULL)
        net = BeliefNetwork.load(run)
        fan = net.sample(args.points, rng=1)
        dp, _ = fit_dpgmm(train, test, args.points, cell_rng(seed, "dpgmm"))
        mu, sd = train.mean(0), train.std(0)
        ev, V = np.linalg.eigh(np.cov(((train - mu) / sd).T))

        def ratio(S):
            return np.var(((S - mu) / sd) @ V, axis=0) / ev

        rng = np.random.default_rng(0)
        n = test.shape[0]
        gauss = {k: hellinger(rng.multivariate_normal(S.mean(0), np.cov(S.T), n), test)
                 for k, S in (("fantasy", fan), ("train", train))}
        print(f"{ds} seed {seed} ({run})")
        print("  training eigenvalues, smallest first   ", ev)
        print("  variance ratio: network's fantasy      ", ratio(fan))
        print("                  DP-GMM's fantasy       ", ratio(dp))
        print("                  test half              ", ratio(test))
        print(f"  HD to the test half: fantasy {hellinger(fan[:n], test):.3f}, Gaussian with the fantasy's moments "
              f"{gauss['fantasy']:.3f}, Gaussian with the training moments {gauss['train']:.3f}", flush=True)


if __name__ == "__main__":
    main()
