"""Speed of the ICP prior at D = 10, alpha = gamma = phi = 1 (issue target:
>= 5,000 chefs-process draws/s and >= 50,000 density evaluations/s on one core).

Prints the median over repeats of draws per second (DAG objects included) and
density evaluations per second (graphs already in memory, no JSON parsing).
"""

import statistics
import time

import numpy as np

from chefs import ICP


def rate(fn, seconds=1.0):
    n = 0
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds:
        fn()
        n += 1
    return n / (time.perf_counter() - t0)


def main(repeats: int = 5):
    prior = ICP(1.0, 1.0, 1.0)
    rng = np.random.default_rng(0)
    prior.sample(rng, 10)  # compile
    graphs = [prior.sample(rng, 10) for _ in range(1000)]
    prior.log_prob(graphs[0])
    it = iter(range(10**12))

    def one_lp():
        prior.log_prob(graphs[next(it) % 1000])

    draws = [rate(lambda: prior.sample(rng, 10)) for _ in range(repeats)]
    dens = [rate(one_lp) for _ in range(repeats)]
    k = np.mean([g.num_nodes for g in graphs])
    print(f"graphs: D=10, mean K+ = {k:.1f}")
    print(f"chefs-process draws/s      median {statistics.median(draws):10.0f}  (runs: {', '.join(f'{x:.0f}' for x in draws)})")
    print(f"density evaluations/s      median {statistics.median(dens):10.0f}  (runs: {', '.join(f'{x:.0f}' for x in dens)})")
    finite = [rate(lambda: prior.sample(rng, 10, method='finite', finite_K=1000), 0.5) for _ in range(3)]
    print(f"finite-model draws/s (K=1000) median {statistics.median(finite):7.0f}")


if __name__ == "__main__":
    main()
