"""Seconds per VB iteration of the out-tree estimator (paper 004) at T = 500, 1000, 2000.

Usage: python benchmarks/outtree.py [--repeats 3] [--sizes 500 1000 2000]
Data: 2-D, a smooth unimodal blob (standard normal with correlation), seed 0.
"""

from __future__ import annotations

import argparse
import time

import numpy as np

from chefs.outtree import MNIW, NIW
from chefs.outtree.vb import init_state, vb_step


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    args = ap.parse_args()
    rng = np.random.default_rng(0)
    for T in args.sizes:
        X = rng.normal(size=(T, 2)) @ np.array([[1.0, 0.5], [0.0, 0.8]])
        prior, root = MNIW.default_prior(X), NIW.from_data(X)
        log_rho = root.log_predictive(X)
        state = init_state(X, prior, root)
        state, _ = vb_step(X, state, prior, log_rho)  # warm-up (numba compile)
        times = []
        for _ in range(args.repeats):
            t0 = time.perf_counter()
            state, info = vb_step(X, state, prior, log_rho)
            times.append(time.perf_counter() - t0)
        print(f"T={T:5d}  median {np.median(times):.3f} s/iteration  "
              f"(repeats {', '.join(f'{t:.3f}' for t in times)})  ELBO {info.elbo_parameters:.2f}")


if __name__ == "__main__":
    main()
