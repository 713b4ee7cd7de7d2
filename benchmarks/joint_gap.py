"""Where a belief network's HD gap to DP-GMM lies on real data: in the marginals or in the dependence
(issue 21; docs/derivations.md 3.20).

    python benchmarks/joint_gap.py DATASET:SPLIT [DATASET:SPLIT ...] [--draws 5]

Each cell fits Table 1's full-settings ICP on that split (its training subsample and chain seed, as
``benchmarks/pilot_length.py``; use development splits) and DP-GMM with Table 1's code and stream, draws
five times as many fantasy points as test points from each, and prints, by Table 1's Hellinger rule
(each figure the mean over ``--draws`` random subsets of as many points as the test half):

* the joint HD to the test half, as drawn and after a quantile map of each principal-axis coordinate
  of the fantasy data onto the training data's marginal on that axis (a diagnostic that makes the
  marginals right and keeps the fantasy data's dependence);
* the 1-D HD to the test half of each principal-axis marginal (smallest eigenvalue first), with the
  training half's own as the noise floor.

If the quantile map closes the gap, the marginals are what the model gets wrong; if it does not, the
dependence between the axes is.
"""

from __future__ import annotations

import argparse
import os
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from pilot_length import cell_network  # noqa: E402  (Table 1's belief-network cell, as the other scripts fit it)


def quantile_map(S, ref, V, mu, sd):
    """Each principal-axis coordinate of S mapped by rank onto ref's marginal on that axis."""
    Z, R = ((S - mu) / sd) @ V, ((ref - mu) / sd) @ V
    out = np.empty_like(Z)
    for j in range(Z.shape[1]):
        out[:, j] = np.quantile(R[:, j], (np.argsort(np.argsort(Z[:, j])) + 0.5) / len(Z))
    return (out @ V.T) * sd + mu


def main(argv=None) -> None:
    from chefs.bench.table1 import cell_rng, fit_dpgmm
    from chefs.evaluation import hellinger

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("cells", nargs="+", metavar="DATASET:SPLIT")
    ap.add_argument("--draws", type=int, default=5, help="random subsets per HD figure")
    ap.add_argument("--data-dir", default=os.environ.get("CHEFS_DATA"))
    args = ap.parse_args(argv)
    if args.draws < 1:
        raise ValueError(f"--draws must be positive, got {args.draws}")
    np.set_printoptions(precision=3, suppress=True, linewidth=160)
    for cell in args.cells:
        ds, split = cell.rsplit(":", 1)
        split = int(split)
        net, (train, test), *_ = cell_network(ds, split, {}, args.data_dir)  # Table 1's ICP cell
        n = test.shape[0]
        fits = {"ICP": net.sample(5 * n, rng=1),
                "DP-GMM": fit_dpgmm(train, test, 5 * n, cell_rng(split, "dpgmm"))[0]}
        mu, sd = train.mean(0), train.std(0)
        ev, V = np.linalg.eigh(np.cov(((train - mu) / sd).T))
        T = ((test - mu) / sd) @ V
        sub = np.random.default_rng(5)

        def joint(S):
            return np.mean([hellinger(S[sub.choice(len(S), n, replace=False)], test) for _ in range(args.draws)])

        def axes(S):
            Z = ((S - mu) / sd) @ V
            return np.array([np.mean([hellinger(Z[sub.choice(len(Z), n, replace=False), j:j + 1], T[:, j:j + 1])
                                      for _ in range(args.draws)]) for j in range(Z.shape[1])])

        print(f"{ds}, split {split} ({n} test points; eigenvalues {ev})")
        for name, S in fits.items():
            print(f"  {name:6s}: joint HD {joint(S):.3f}, marginals mapped to the training data's {joint(quantile_map(S, train, V, mu, sd)):.3f};"
                  f" 1-D HD per axis {axes(S)}")
        print(f"  training half: joint HD {hellinger(train[:n], test):.3f}; 1-D HD per axis "
              f"{np.array([hellinger(((train - mu) / sd @ V)[:, j:j + 1], T[:, j:j + 1]) for j in range(len(ev))])}",
              flush=True)


if __name__ == "__main__":
    main()
