"""Benchmark of the out-tree (tdid) estimator of paper 004.

Reports
1. seconds per VB iteration at T = 500, 1000, 2000 (median of ``--repeats``),
   on the first T training points of pinwheel;
2. total ``OutTree.fit`` time on the 2000 x 2 two-moons and pinwheel training sets
   (VB + predictive set-up + importance-sampling normaliser);
3. held-out mean log-likelihood (``score``), the number of held-out points
   scored by the exact leaf lower bound, scoring time, and the Hellinger
   distance (``chefs.evaluation.hellinger``) between 2000 fantasy points and the
   2000 test points, for pinwheel and two-moons (2000 train / 2000 test);
4. with ``--all``, held-out log-likelihoods on the other seven data sets too
   (ring, geyser, iris and the 8-12 dimensional yeast, abalone, cloud, wine);
5. with ``--direct``, seconds per point of the exact O(T^3) direct path
   (``Predictive.log_ratio_direct``, used for points near weakly coupled training
   points) with 1 and 2 threads, against the O(T^2 + k^3) fast path, in one run
   (pinwheel, first T = 1000 training points; medians of ``--repeats``);
6. with ``--subnormal``, seconds per point of the direct path with the GTH
   elimination scaled by ``2^gth_scale_exponent(T)`` (shipped) and unscaled (the
   old code, whose floor-level products went subnormal), on the fit of Table 1's
   seed-0 out-tree cell of each data set, in one run, with the largest difference of the two paths' log ratios
   (docs/derivations-outtree.md section 12);
7. with ``--tails``, seconds per point of the direct path on Table 1's weakly coupled
   out-tree fits (``--cells cloud:0,abalone:1,...``, each cell's own split and subsample),
   in one run and on one BLAS thread: as at stop 36 (every ``log Z_r`` by the column-wise
   back substitution, then summed), the whole elimination with the row-wise root-weighted
   total, and with the eliminated tails of section 14 (the default); with the number of
   nodes left per point and the largest difference from the stop-36 path.

Usage: CHEFS_DATA=/work/shared/data python benchmarks/outtree.py [--repeats 3] [--all] [--direct]
       [--subnormal [--datasets cloud,abalone,...]] [--tails [--cells cloud:0,...]]
"""

from __future__ import annotations

import argparse
import time
import warnings

import numpy as np

from chefs.datasets import load_split
from chefs.evaluation import hellinger
from chefs.outtree import MNIW, NIW, OutTree
from chefs.outtree.gaussian import gaussian_log_lik_matrix
from chefs.outtree.vb import init_state, vb_step


def per_iteration(sizes, repeats) -> None:
    train, _ = load_split("pinwheel")
    print("seconds per VB iteration (pinwheel, first T training points)", flush=True)
    for T in sizes:
        X = train[:T]
        prior, root = MNIW.default_prior(X), NIW.from_data(X)
        log_rho = root.log_predictive(X)
        state = init_state(X, prior, root)
        state, _ = vb_step(X, state, prior, log_rho)  # warm-up (numba compile)
        times = []
        for _ in range(repeats):
            t0 = time.perf_counter()
            state, info = vb_step(X, state, prior, log_rho)
            times.append(time.perf_counter() - t0)
        print(f"T={T:5d}  d=2  median {np.median(times):.3f} s/iteration  "
              f"(repeats {', '.join(f'{t:.3f}' for t in times)})  residual {info.max_residual:.1e}",
              flush=True)


def held_out(name: str, hell: bool) -> None:
    train, test = load_split(name)
    t0 = time.perf_counter()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # precision warnings on D >= 8
        model = OutTree().fit(train, rng=0)
    fit_s = time.perf_counter() - t0
    t0 = time.perf_counter()
    s = model.score_samples(test)
    score_s = time.perf_counter() - t0
    line = (f"{name:10s} train {train.shape} test {test.shape}  fit {fit_s:.1f} s "
            f"({len(model.elbo_)} VB iterations, ELBO {model.elbo_[-1]:.2f}, "
            f"log c {model.log_normalizer_[0]:.3f} +- {model.log_normalizer_[1]:.3f} rel)  "
            f"score {score_s:.1f} s  held-out mean log-lik {np.mean(s):.4f}  "
            f"finite {np.isfinite(s).all()}  lower-bound fallbacks {model._pred.n_fallback}  "
            f"direct-path points {model._pred.n_direct}")
    if hell:
        Y = model.sample(test.shape[0], rng=1)
        line += f"  Hellinger {hellinger(Y, test, seed=0):.4f}"
    print(line, flush=True)


def direct_path(repeats: int, T: int = 1000, points: int = 8) -> None:
    train, test = load_split("pinwheel")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model = OutTree(normalizer_samples=2).fit(train[:T], rng=0)
    P = model._pred
    xs = model._standardise(test[:points])
    P.log_ratio_direct(xs[:2])  # compile / warm caches
    rows = {}
    for label, threads in (("direct, 1 thread", 1), ("direct, 2 threads", 2)):
        P.direct_threads = threads
        rows[label] = [_timed(P.log_ratio_direct, xs) / points for _ in range(repeats)]
    rows["fast path"] = [_timed(P.log_ratio, xs) / points for _ in range(repeats)]
    base = np.median(rows["direct, 1 thread"])
    print(f"seconds per point (pinwheel, T={T}, {points} points, median of {repeats})", flush=True)
    for label, t in rows.items():
        print(f"  {label:18s} {np.median(t):.4f} s  ({base / np.median(t):.1f}x the 1-thread direct path)",
              flush=True)


def subnormal(datasets, repeats: int, T: int = 1000, points: int = 6) -> None:
    """The direct path with and without the power-of-two scale, on one BLAS thread."""
    from threadpoolctl import threadpool_limits

    from chefs.outtree import matrix_tree
    from chefs.outtree.predictive import Predictive

    shipped = matrix_tree.gth_scale_exponent
    print(f"direct path, seconds per point (T <= {T}, {points} test points, median of {repeats}, 1 thread)",
          flush=True)
    for name in datasets:
        with threadpool_limits(limits=1, user_api="blas"):
            model, xs = _table1_fit(name, 0, T)  # Table 1's seed-0 out-tree cell
            P = model._pred
            xs = xs[:points]
            times, values = {}, {}
            try:
                for label, exponent in (("scaled", shipped), ("unscaled", lambda n: 0)):
                    matrix_tree.gth_scale_exponent = exponent
                    # the full elimination per point: the eliminated tails (section 14) take their
                    # exponent from their own module, so they would not see the unscaled one
                    Q = Predictive(P.X, P.B, P.Sigma, P.root, root_hint=P.c, direct_threads=1,
                                   prefix_direct=False)
                    values[label] = Q.log_ratio_direct(xs)
                    times[label] = [_timed(Q.log_ratio_direct, xs) / points for _ in range(repeats)]
            finally:
                matrix_tree.gth_scale_exponent = shipped
        ts, tu = np.median(times["scaled"]), np.median(times["unscaled"])
        diff = np.max(np.abs(values["scaled"] - values["unscaled"]))
        print(f"  {name:9s} T={P.X.shape[0]:5d}  scaled {ts:.4f} s  unscaled {tu:.4f} s  ({tu / ts:.1f}x)  "
              f"max |log ratio difference| {diff:.1e}  weak points {int(P.weak.sum())}", flush=True)


def _table1_fit(name: str, seed: int, T: int = 1000):
    """The out-tree fit of Table 1's (name, seed) cell: its training split, its subsample of
    at most T points (the cell's own stream), and its test points (standardised)."""
    from chefs.bench.table1 import FULL, _training_split, cell_rng

    train, test = _training_split(name, seed, FULL)
    rng = cell_rng(seed, "outtree")
    tr = train if train.shape[0] <= T else train[rng.choice(train.shape[0], T, replace=False)]
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)
        model = OutTree(normalizer_samples=2).fit(tr, rng=0)
    return model, model._standardise(test)


def tails(cells, repeats: int, points: int = 8) -> None:
    """The direct path three ways on the fits of weakly coupled Table 1 cells (section 14)."""
    from scipy.special import logsumexp
    from threadpoolctl import threadpool_limits

    from chefs.outtree import matrix_tree
    from chefs.outtree import predictive as pr

    def stop36_total(B, m, log_rho):  # every log Z_r, then their sum against the root weights
        return float(logsumexp(log_rho + matrix_tree.log_partition_all_roots_scaled(B, m)))

    print(f"direct path, seconds per point ({points} test points, median of {repeats}, 1 BLAS thread)",
          flush=True)
    for cell in cells:
        name, seed = cell.split(":")
        with threadpool_limits(limits=1, user_api="blas"):
            model, xs = _table1_fit(name, int(seed))
            P = model._pred
            xs = xs[:points]
            times, values = {}, {}
            shipped = pr.log_total_all_roots_scaled
            for label, prefix, total in (("stop 36", False, stop36_total), ("row-wise total", False, shipped),
                                         ("eliminated tails", True, shipped)):
                pr.log_total_all_roots_scaled = total
                try:
                    Q = pr.Predictive(P.X, P.B, P.Sigma, P.root, root_hint=P.c, direct_threads=1,
                                      prefix_direct=prefix)
                    values[label] = Q.log_ratio_direct(xs)  # also builds the tails
                    times[label] = [_timed(Q.log_ratio_direct, xs) / points for _ in range(repeats)]
                finally:
                    pr.log_total_all_roots_scaled = shipped
            log_b = gaussian_log_lik_matrix(Q.X, xs, Q.B, Q.Sigma)
            left = [min(t.checkpoint(log_b[:, j] - Q.m <= matrix_tree.LOG_FLOOR) for t in Q._prefix) - 1
                    for j in range(points)]
        base = np.median(times["stop 36"])
        cols = "  ".join(f"{k} {np.median(v):.4f} s ({base / np.median(v):.1f}x)" for k, v in times.items())
        diff = max(np.max(np.abs(values[k] - values["stop 36"])) for k in values)
        print(f"  {name}:{seed} T={P.X.shape[0]} weak={bool(P.all_direct)}  {cols}  nodes left: median "
              f"{int(np.median(left))}  max |difference| {diff:.1e}", flush=True)


def _timed(f, x) -> float:
    t0 = time.perf_counter()
    f(x)
    return time.perf_counter() - t0


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--sizes", type=int, nargs="+", default=[500, 1000, 2000])
    ap.add_argument("--all", action="store_true", help="also score ring, geyser and iris")
    ap.add_argument("--direct", action="store_true", help="only time the direct path against the fast path")
    ap.add_argument("--subnormal", action="store_true",
                    help="only time the direct path with and without the elimination's power-of-two scale")
    ap.add_argument("--datasets", default="cloud,abalone,wine,yeast,pinwheel",
                    help="data sets for --subnormal (comma-separated)")
    ap.add_argument("--tails", action="store_true",
                    help="only time the direct path with and without its eliminated tails (section 14)")
    ap.add_argument("--cells", default="cloud:0,abalone:1,pinwheel:0,wine:1,yeast:1",
                    help="Table 1 (data set:seed) cells for --tails (comma-separated)")
    args = ap.parse_args()
    if args.tails:
        tails([c for c in args.cells.split(",") if c], args.repeats)
        return
    if args.subnormal:
        subnormal([d for d in args.datasets.split(",") if d], args.repeats)
        return
    if args.direct:
        direct_path(args.repeats)
        return
    per_iteration(args.sizes, args.repeats)
    for name in ["two-moons", "pinwheel"]:
        held_out(name, hell=True)
    if args.all:
        for name in ["ring", "geyser", "iris", "yeast", "wine", "cloud", "abalone"]:
            held_out(name, hell=name in ("ring", "geyser"))


if __name__ == "__main__":
    main()
