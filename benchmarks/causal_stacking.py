"""Stacking the causal chains by their predictive densities (issue 23; docs/derivations.md 3.8).

    python benchmarks/causal_stacking.py BENCH_DIR [--seeds 10,...,19] [--draws 50] [--num-is 128]
        [--cache DIR] [--sachs]

``BENCH_DIR`` is the output of ``chefs bench causal`` (its ``runs/seedS`` run directories; nothing is
refitted). The chains of a causal run stay in the modes their starts put them in, so the pooled
probabilities weigh each mode by its number of starts. Stacking (Yao, Vehtari & Gelman 2022, "Stacking
for non-mixing Bayesian computations") weighs chain k by w_k >= 0 (sum 1) maximising
sum_n log sum_k w_k exp(elpd_loo[k, n]), with elpd_loo[k, n] chain k's PSIS-LOO log predictive density of
training row n (arviz's ``loo`` and ``compare(method="stacking")``). Each row's log density under a kept
sample integrates the hidden units out by importance sampling (``chefs.models.predictive.log_density_unit``,
in the unit space the chains saw; the unit map's Jacobian is the same for every chain and cancels).

For each SEM: the weights, their effective number of chains 1 / sum w^2, the Spearman correlation of each
chain's elpd_loo with its own ancestral F1, and the count of rows whose Pareto k exceeds arviz's good_k; then the benchmark's metrics of the
equal-weight pooling and of the stacked one, and the calibration bins of both (``p_edge``, ``p_ancestor``
and ``p_confounded`` pooled, as the benchmark does). ``--cache DIR`` keeps each chain's log-density matrix
(``seedS-chainC.npy``) so that a rerun only recomputes the summaries.
"""

from __future__ import annotations

import argparse
import time
from pathlib import Path

import numpy as np


def chain_log_density(samples, U: np.ndarray, draws: int, num_is: int, rng) -> np.ndarray:
    """(draws, N) log densities of the training rows ``U`` (unit space) under ``draws`` evenly spaced
    ones of one chain's kept ``samples``."""
    from chefs.models.predictive import log_density_unit

    pick = np.unique(np.linspace(0, len(samples) - 1, min(draws, len(samples))).astype(int))
    return np.array([log_density_unit(samples[s], U, rng, num_is) for s in pick])


def stacking_weights(lp: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Stacking weights of the chains (``lp``: chain -> (draws, N) log densities), their elpd_loo and
    the number of rows whose Pareto k exceeds arviz's threshold for that many draws (``good_k``:
    min(1 - 1/log10(S), 0.7), 0.41 at S = 50) per chain, in the order of ``sorted(lp)``."""
    import warnings

    import arviz as az

    chains = sorted(lp)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # arviz warns about high Pareto k: counted (at its good_k) and reported
        data = {str(c): az.from_dict(posterior={"draw_index": np.arange(lp[c].shape[0])[None]},
                                     log_likelihood={"x": lp[c][None]}) for c in chains}
        loos = {c: az.loo(data[str(c)], pointwise=True) for c in chains}
        cmp = az.compare(data, ic="loo", method="stacking")
    w = np.array([float(cmp.loc[str(c), "weight"]) for c in chains])
    elpd = np.array([float(loos[c].elpd_loo) for c in chains])
    bad = np.array([int(np.sum(np.asarray(loos[c].pareto_k) > float(getattr(loos[c], "good_k", 0.7))))
                    for c in chains])
    return w / w.sum(), elpd, bad


def weighted_summary(per_chain: dict, weights: np.ndarray):
    """The chains' summaries pooled with ``weights`` (in the order of ``sorted(per_chain)``). Only the three
    probability arrays are weighted; ``confounders`` holds every chain's counts, unweighted (no metric of
    this script reads it)."""
    from chefs.causal import CausalSummary

    chains = sorted(per_chain)
    first = per_chain[chains[0]]
    mix = {k: sum(w * getattr(per_chain[c], k) for c, w in zip(chains, weights))
           for k in ("p_edge", "p_ancestor", "p_confounded")}
    confounders = np.concatenate([per_chain[c].confounders for c in chains])
    return CausalSummary(list(first.names), mix["p_edge"], mix["p_ancestor"], mix["p_confounded"], confounders,
                         int(confounders.size))


def main(argv=None) -> int:
    from scipy.stats import spearmanr

    from chefs.bench.causal import (auroc, calibration_pairs, calibration_table, icp_estimate, make_sem, metrics,
                                    precision_recall_f1, sem_settings)
    from chefs.causal import CausalDiscovery, CausalSummary

    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_dir")
    ap.add_argument("--seeds", default="10,11,12,13,14,15,16,17,18,19")
    ap.add_argument("--draws", type=int, default=50)
    ap.add_argument("--num-is", type=int, default=128)
    ap.add_argument("--cache", default=None)
    args = ap.parse_args(argv)
    if args.draws < 2 or args.num_is < 1:
        raise ValueError("--draws must be at least 2 and --num-is positive")
    cache = Path(args.cache) if args.cache else None
    if cache:
        cache.mkdir(parents=True, exist_ok=True)
    rows = {"equal": [], "stacked": []}
    calib = {"equal": [], "stacked": []}
    conf_auc = {"equal": [], "stacked": []}
    print("| seed | H | chains | effective chains | Spearman(elpd_loo, F1) | Pareto k > good_k (rows, all chains) | "
          "F1 equal / stacked | CPU s |")
    print("|---|---|---|---|---|---|---|---|")
    for seed in (int(s) for s in args.seeds.split(",")):
        t0 = time.process_time()
        D, H, N = sem_settings(seed, False)
        sem = make_sem(seed, D, H, N)
        run = Path(args.bench_dir) / "runs" / f"seed{seed}"
        net = CausalDiscovery.load(run)  # every chain's kept samples, read once
        _, per_chain = CausalSummary.from_samples(net.samples_, net.names_, net.sample_chains_)
        U = np.load(run / "train01.npy")
        lp = {}
        for c in sorted(per_chain):
            f = cache / f"seed{seed}-chain{c}.npy" if cache else None
            if f is not None and f.exists():
                lp[c] = np.load(f)
            else:
                mine = [s for s, k in zip(net.samples_, net.sample_chains_) if k == c]  # in the chain's order
                lp[c] = chain_log_density(mine, U, args.draws, args.num_is, np.random.default_rng([seed, c, 45]))
                if f is not None:
                    np.save(f, lp[c])
        w, elpd, bad = stacking_weights(lp)
        f1 = np.array([precision_recall_f1(per_chain[c].p_ancestor > 0.5, sem.ancestor)[2] for c in sorted(per_chain)])
        summaries = {"equal": net.summary_, "stacked": weighted_summary(per_chain, w)}
        for k, s in summaries.items():
            est = icp_estimate(s)
            m = metrics(est, sem)
            rows[k].append((H, m["shd"], m["anc_f1"], m["auroc"]))
            calib[k] += calibration_pairs(est.probs, sem)
            if H > 0:
                conf_auc[k].append(auroc(s.p_confounded, sem.confounded))
        print(f"| {seed} | {H} | {len(w)} | {1 / np.sum(w ** 2):.1f} | {spearmanr(elpd, f1)[0]:+.2f} | "
              f"{int(bad.sum())} | {rows['equal'][-1][2]:.3f} / {rows['stacked'][-1][2]:.3f} | "
              f"{time.process_time() - t0:.0f} |", flush=True)
    print()
    print("| pooling | SHD | F1 (H>0) | AUROC | p_confounded AUROC | ECE | bins within 0.1 |")
    print("|---|---|---|---|---|---|---|")
    tables = {}
    for k in rows:
        R = np.array(rows[k], float)
        h = R[:, 0] > 0
        tab = [c for c in calibration_table(calib[k]) if c["probability"] == "all"]
        tables[k] = tab
        n = sum(c["count"] for c in tab)
        ece = sum(c["count"] * abs(c["mean_predicted"] - c["observed_frequency"]) for c in tab if c["count"]) / n
        within = sum(1 for c in tab if c["count"] and abs(c["mean_predicted"] - c["observed_frequency"]) <= 0.1)
        print(f"| {k} | {R[:, 1].mean():.1f} | {R[:, 2].mean():.3f} ({R[h, 2].mean() if h.any() else float('nan'):.3f}) "
              f"| {R[:, 3].mean():.3f} | {np.mean(conf_auc[k]) if conf_auc[k] else float('nan'):.2f} | {ece:.3f} | "
              f"{within} of {sum(1 for c in tab if c['count'])} |")
    print()
    print("| bin | equal: count, predicted, true | stacked: count, predicted, true |")
    print("|---|---|---|")
    for a, b in zip(tables["equal"], tables["stacked"]):
        print(f"| {a['bin']} | {a['count']}, {a['mean_predicted']:.3f}, {a['observed_frequency']:.3f} | "
              f"{b['count']}, {b['mean_predicted']:.3f}, {b['observed_frequency']:.3f} |")
    return 0



if __name__ == "__main__":
    raise SystemExit(main())
