"""Full NLGBN sweeps per second on two-moons (2000 points) with about 20 hidden
units (issue target: >= 20 sweeps/s on one core), and where the time goes.

A sweep: every hidden activation updated once (multiple-try Metropolis, 4
tries), every bias, weight and precision once, an edge-update pass over every
node, and a fixed number of birth/death, order and depth proposals.
Prints the median over 5 timed blocks and a per-part breakdown, for each
numba thread count given (``--threads 1,2``: the activation kernel runs blocks
of data points on numba's threads; same numbers for every count), and the
speed ratio between them measured in the same run.
"""

import statistics
import time

import numpy as np

from chefs import ICP
from chefs.datasets import load_split
from chefs.density import UnitMap
from chefs.mcmc.chain import ChainConfig, init_state
from chefs.models.nlgbn import NLGBN


def main(blocks: int = 5, sweeps: int = 10, threads: int | None = None):
    if threads is not None:
        import numba

        numba.set_num_threads(threads)
    train, _ = load_split("two-moons", seed=0)
    x01 = UnitMap.fit(train).forward(train)
    rng = np.random.default_rng(0)
    config = ChainConfig(2, 0.0, 1.0, 1.0, 1.0)
    # a structure with about 20 hidden units, fixed hyperparameters
    g = ICP(1.0, 6.0, 1.0).sample(rng, 2, observed_order=0.0)
    while not 18 <= g.num_hidden <= 22:
        g = ICP(1.0, 6.0, 1.0).sample(rng, 2, observed_order=0.0)
    state = init_state(config, rng, g)
    model = NLGBN(x01, state.graph.capacity, rng)
    model.init_from_state(state.graph, rng)
    hyper = state.hyper
    parts = {"activations": 0.0, "parameters": 0.0, "edges": 0.0, "birth/death+order+depth": 0.0}
    for _ in range(3):
        model.sweep(rng, state.graph, config, hyper)  # compile
    rates, sizes = [], []
    for _ in range(blocks):
        t0 = time.perf_counter()
        for _ in range(sweeps):
            g_ = state.graph
            a = time.perf_counter(); model.update_activations(rng, g_)
            b = time.perf_counter(); model.update_parameters(rng, g_, model.rho_prior)
            c = time.perf_counter(); model.edge_pass(rng, g_, hyper)
            d = time.perf_counter()
            for _ in range(model.structure_moves):
                model.birth_death(rng, g_, hyper)
                model.order_move(rng, g_, hyper)
                model.depth_move(rng, g_, hyper)
            e = time.perf_counter()
            parts["activations"] += b - a
            parts["parameters"] += c - b
            parts["edges"] += d - c
            parts["birth/death+order+depth"] += e - d
        rates.append(sweeps / (time.perf_counter() - t0))
        sizes.append(state.graph.num_hidden())
    total = sum(parts.values())
    print(f"two-moons, N = 2000, numba threads {threads or 'default'}, hidden units during the timed blocks: {sizes}")
    print(f"full sweeps/s  median {statistics.median(rates):.2f}  (blocks: {', '.join(f'{r:.2f}' for r in rates)})")
    for k, v in parts.items():
        print(f"  {k:28s} {100 * v / total:5.1f} %")
    return statistics.median(rates)


if __name__ == "__main__":
    import argparse

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--threads", default=None, help="comma-separated numba thread counts to compare, e.g. 1,2")
    args = ap.parse_args()
    counts = [int(t) for t in args.threads.split(",")] if args.threads else [None]
    runs = {}
    for t in counts:  # a count may be repeated (interleaved runs against machine noise)
        runs.setdefault(t, []).append(main(threads=t))
    if len(runs) > 1:
        med = {t: statistics.median(v) for t, v in runs.items()}
        base = med[counts[0]]
        print(f"median sweeps/s over runs against {counts[0]} thread(s):",
              ", ".join(f"{t}: {m:.2f} ({m / base:.2f}x)" for t, m in med.items()))
