"""Structure moves per second of a prior-only chain around K+ = 50 (issue
target: >= 20,000 per second on one core).

One move = one edge update (Gibbs pass over the candidate parents of one
node), one birth/death proposal, one order proposal or one depth proposal,
accepted or not. gamma is calibrated so that E[K+] = 50 with D = 10 observed
nodes at theta = 0 and alpha = 1. Prints the median of 5 timed runs.
"""

import statistics
import time

import numpy as np

from chefs.mcmc.chain import ChainConfig, _null_moves, init_state
from chefs.priors.study import calibrate_gamma


def main(repeats: int = 5, moves: int = 200_000):
    rng = np.random.default_rng(0)
    cal = calibrate_gamma(50, 1.0, 10, rng, num=2000)
    gamma = cal["gamma"]
    config = ChainConfig(10, 0.0, 1.0, gamma, 1.0)
    state = init_state(config, rng)
    w = np.asarray(config.weights, float)
    _null_moves(state, w, 200_000)  # burn-in (and compilation)
    rates, sizes = [], []
    for _ in range(repeats):
        t0 = time.perf_counter()
        _null_moves(state, w, moves)
        rates.append(moves / (time.perf_counter() - t0))
        sizes.append(state.graph.num_nodes)
    acc = state.stats[:, 1] / np.maximum(state.stats[:, 0], 1)
    print(f"gamma = {gamma:.3f} (E[K+] = {cal['expected_nodes']:.1f} ± {cal['expected_nodes_se']:.1f}); "
          f"K+ at the timed points: {sizes}")
    print(f"structure moves/s  median {statistics.median(rates):10.0f}  (runs: {', '.join(f'{r:.0f}' for r in rates)})")
    print("acceptance: " + ", ".join(f"{n}={a:.3f}" for n, a in zip(("edge", "birth_death", "order", "depth"), acc)))


if __name__ == "__main__":
    main()
