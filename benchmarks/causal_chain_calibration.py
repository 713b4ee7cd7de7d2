"""Calibration of the ICP's causal posteriors chain by chain, against the chains pooled (issue 23).

    python benchmarks/causal_chain_calibration.py BENCH_DIR [--seeds 0,1,...,9] [--chains 0,1,2,3] [--plot FILE.png]
        [--label TEXT]
    python benchmarks/causal_chain_calibration.py BENCH_DIR --pools 1,2,4,8,16 [--seeds ...] [--plot FILE.png]
    python benchmarks/causal_chain_calibration.py BENCH_DIR --compare DIR2[,DIR3...] [--labels A,B,...]
        [--seeds ...] [--plot FILE.png]

``BENCH_DIR`` is the output of ``chefs bench causal --out BENCH_DIR`` (its ``runs/seedS`` causal run
directories are read back with ``CausalDiscovery.load(run, chains=[c])``; nothing is refitted). The
SEMs are rebuilt from their seeds by the benchmark's own generator, so the truth is the benchmark's.
For each chain alone, and for all of them pooled, the script prints the benchmark's calibration
table (its bins, ``chefs.bench.causal.BINS``) of ``p_edge`` and ``p_ancestor`` over all ordered
pairs of the given seeds: the count, the mean probability and the observed frequency per bin.

``--pools K1,K2,...``: instead, the first K chains pooled for each K (chains 0..K-1 of a run with at
least max(K) chains; chain c's stream and start depend on the run's seed and c only, so they are the
chains of a K-chain run), with the benchmark's readings of each pool beside the table: SHD, ancestral F1
(on all SEMs and on those with hidden confounders), AUROC, the posterior mean number of latent common
causes, and the expected calibration error (count-weighted mean |mean predicted - observed frequency|
over the bins of all three probabilities pooled).

``--compare DIR2,...``: instead, whole runs side by side (every chain of each pooled, as the benchmark
reads them; ``DIR:K``, and ``BENCH_DIR:K``, read a directory's first K chains, as ``--pools K`` does): the
readings of ``--pools`` for ``BENCH_DIR`` and each further directory (runs of the same seeds with other
settings), plus the mean AUROC of ``p_confounded`` over the SEMs with hidden confounders;
``--labels`` names the rows (default: the directories), separated by commas, or by semicolons
when a name holds a comma.

``--plot``: a reliability diagram (observed frequency against mean probability per bin, the points sized
by their counts) of each chain alone and of the chains pooled, one panel per probability.

It separates two reasons a posterior can be miscalibrated: chains that disagree (then each chain
alone is sharp and the pool fills the middle bins) and a posterior that is itself overconfident
(then each chain alone already puts probability near 1 on relations that do not hold).
"""

from __future__ import annotations

import argparse
import sys

import numpy as np


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("bench_dir")
    ap.add_argument("--seeds", default="0,1,2,3,4,5,6,7,8,9")
    ap.add_argument("--chains", default="0,1,2,3")
    ap.add_argument("--pools", type=_chain_counts, default=None,
                    help="comma-separated K: the first K chains pooled, for each K (replaces --chains)")
    ap.add_argument("--compare", default=None, metavar="DIR2,...",
                    help="comma-separated further benchmark directories: whole runs side by side (replaces --chains)")
    ap.add_argument("--labels", default=None,
                    help="names of the --compare rows, BENCH_DIR's first, separated by commas (or by semicolons when "
                         "the names hold commas)")
    ap.add_argument("--plot", default=None, help="write a reliability diagram to this PNG file")
    ap.add_argument("--label", default=None, help="what the runs are, for the figure's title (default: BENCH_DIR)")
    args = ap.parse_args(argv)
    from chefs.bench.causal import calibration_pairs, calibration_table, icp_estimate, make_sem, sem_settings
    from chefs.causal import CausalDiscovery

    seeds = [int(s) for s in args.seeds.split(",")]
    if args.pools is not None and args.compare is not None:
        ap.error("--pools and --compare are two modes: give one")
    if args.compare is not None:
        dirs = [args.bench_dir] + [d for d in args.compare.split(",") if d]
        labels = dirs if args.labels is None else args.labels.split(";" if ";" in args.labels else ",")
        if len(labels) != len(dirs):
            ap.error(f"--labels names {len(labels)} row(s) for {len(dirs)} director{'y' if len(dirs) == 1 else 'ies'}")
        if len(set(labels)) != len(labels):
            ap.error("the rows of --compare need distinct names: give --labels")
        entries = []
        for label, d in zip(labels, dirs):
            d, k = _dir_and_chains(d)
            if k is not None and k < 1:
                ap.error(f"{d}:{k}: the number of chains must be positive")
            if k is not None:
                _need_chains(ap, d, k, seeds, f"{d}:{k}")
            entries.append((label, d, k))
        return pools(args, seeds, entries, compare=True)
    if args.pools is not None:
        _need_chains(ap, args.bench_dir, max(args.pools), seeds, "--pools")
        return pools(args, seeds, [(k, args.bench_dir, k) for k in args.pools])
    chains = [int(c) for c in args.chains.split(",")]
    groups = [[c] for c in chains] + [chains]
    print(f"Calibration per chain and pooled: {args.bench_dir}, seeds {seeds}\n")
    print("| chains | probability | bin | count | mean predicted | observed frequency |")
    print("|---|---|---|---|---|---|")
    curves = {}
    for group in groups:
        calib = []
        for seed in seeds:
            sem = make_sem(seed, *sem_settings(seed, False))
            s = CausalDiscovery.load(f"{args.bench_dir}/runs/seed{seed}", chains=group).summary_
            calib += calibration_pairs(icp_estimate(s).probs, sem, ("p_edge", "p_ancestor"))
        label = ", ".join(map(str, group)) if len(group) > 1 else f"{group[0]} alone"
        for key in ("p_edge", "p_ancestor"):  # the benchmark's own bins (chefs.bench.causal.calibration_table)
            rows = [(c["bin"], c["count"], c["mean_predicted"], c["observed_frequency"])
                    for c in calibration_table(calib) if c["probability"] == key]
            curves[(label, key)] = rows
            for b, n, pred, obs in rows:
                print(f"| {label} | {key} | {b} | {n} | {pred:.3f} | {obs:.3f} |".replace("nan", "n/a"))
    if args.plot:
        plot(curves, args.plot, f"{args.label or args.bench_dir}, seeds {_seed_label(seeds)}")
    return 0


def _seed_label(seeds) -> str:
    """'10-19' for consecutive seeds, else the list."""
    if list(seeds) == list(range(seeds[0], seeds[0] + len(seeds))):
        return f"{seeds[0]}-{seeds[-1]}"
    return ",".join(map(str, seeds))


def _need_chains(ap, bench_dir, k: int, seeds, what: str) -> None:
    """A one-line argparse error unless every seed's run in ``bench_dir`` has at least ``k`` chains (checked
    before any is read)."""
    from chefs.mcmc.run import load_spec

    for seed in seeds:
        have = int(load_spec(f"{bench_dir}/runs/seed{seed}")["chains"])
        if k > have:
            ap.error(f"{what} asks for {k} chains; runs/seed{seed} has {have}")


def _dir_and_chains(text: str) -> tuple[str, int | None]:
    """``DIR`` (every chain) or ``DIR:K`` (the first K chains)."""
    head, sep, tail = text.rpartition(":")
    if sep and head and tail.lstrip("-").isdigit():
        return head, int(tail)
    return text, None


def _chain_counts(text: str) -> list[int]:
    """``--pools``: positive integers, comma-separated; sorted, without repeats."""
    try:
        ks = sorted({int(k) for k in text.split(",")})
    except ValueError:
        raise argparse.ArgumentTypeError(f"takes comma-separated chain counts, got {text!r}") from None
    if not ks or ks[0] < 1:
        raise argparse.ArgumentTypeError(f"takes positive chain counts, got {text!r}")
    return ks


def pools(args, seeds, entries, compare: bool = False) -> int:
    """The benchmark's readings and calibration table of each entry ``(label, bench_dir, K)``: the first K chains of
    that directory's runs pooled (K None: every chain). ``compare``: rows named by label, with the AUROC of
    ``p_confounded`` (mean over the SEMs with hidden confounders) as a further column."""
    from chefs.bench.causal import (auroc, calibration_pairs, calibration_table, icp_estimate, make_sem, metrics,
                                    sem_settings)
    from chefs.causal import CausalDiscovery

    if compare:
        print(f"Whole runs side by side, seeds {seeds}\n")
        print("| run | SHD | ancestral F1 (H > 0) | AUROC | latent common causes: H > 0, H = 0 | AUROC of p_confounded "
              "(H > 0) | expected calibration error |")
        print("|---|---|---|---|---|---|---|")
    else:
        print(f"The first K chains pooled: {args.bench_dir}, seeds {seeds}\n")
        print("| K | SHD | ancestral F1 (H > 0) | AUROC | latent common causes: H > 0, H = 0 | "
              "expected calibration error |")
        print("|---|---|---|---|---|---|")
    tables, curves = {}, {}
    for label, bench_dir, k in entries:
        rows, calib, latent, conf_auroc = [], [], {True: [], False: []}, []
        for seed in seeds:
            D, H, N = sem_settings(seed, False)
            sem = make_sem(seed, D, H, N)
            chains = None if k is None else list(range(k))
            s = CausalDiscovery.load(f"{bench_dir}/runs/seed{seed}", chains=chains).summary_
            est = icp_estimate(s)
            sc = metrics(est, sem)
            rows.append((H > 0, sc["shd"], sc["anc_f1"], sc["auroc"]))
            calib += calibration_pairs(est.probs, sem)
            latent[H > 0].append(float(np.mean(s.confounders)))
            if H > 0:
                conf_auroc.append(auroc(s.p_confounded, sem.confounded))
        table = calibration_table(calib)
        every = [c for c in table if c["probability"] == "all" and c["count"]]
        ece = sum(c["count"] * abs(c["mean_predicted"] - c["observed_frequency"]) for c in every) / sum(
            c["count"] for c in every)
        conf = np.array([r[0] for r in rows])
        shd_, f1, au = (np.array([r[i] for r in rows], float) for i in (1, 2, 3))
        mean = lambda v: float(np.nanmean(v)) if len(v) else float("nan")  # noqa: E731
        extra = f" {mean(conf_auroc):.2f} |" if compare else ""
        print(f"| {label} | {shd_.mean():.1f} | {f1.mean():.3f} ({mean(f1[conf]):.3f}) | {np.nanmean(au):.3f} | "
              f"{mean(latent[True]):.2f}, {mean(latent[False]):.2f} |{extra} {ece:.3f} |".replace("nan", "n/a"))
        tables[label] = table
        name = label if compare else (f"first {k} pooled" if k > 1 else "chain 0 alone")
        for key in ("p_edge", "p_ancestor"):
            curves[(name, key)] = [(c["bin"], c["count"], c["mean_predicted"], c["observed_frequency"])
                                   for c in table if c["probability"] == key]
    head = "run" if compare else "K"
    print(f"\n| {head} | bin (all three probabilities) | count | mean predicted | observed frequency |")
    print("|---|---|---|---|---|")
    for label, table in tables.items():
        for c in table:
            if c["probability"] == "all":
                print(f"| {label} | {c['bin']} | {c['count']} | {c['mean_predicted']:.3f} | "
                      f"{c['observed_frequency']:.3f} |".replace("nan", "n/a"))
    if args.plot:
        title = f"{args.label or args.bench_dir}, seeds {_seed_label(seeds)}"
        if compare:
            plot_compare(curves, list(tables), args.plot, f"seeds {_seed_label(seeds)}")
        else:
            plot_pools(curves, [k for _, _, k in entries], args.plot, title)
    return 0


def plot_pools(curves, ks, path, title) -> None:
    import matplotlib.pyplot as plt

    series = []
    for colour, k in zip(plt.cm.viridis(np.linspace(0.0, 0.85, len(ks))), ks):
        label = f"first {k} pooled" if k > 1 else "chain 0 alone"
        series.append(({key: curves[(label, key)] for key in ("p_edge", "p_ancestor")},
                       dict(color=colour, lw=1.6, alpha=1.0, label=f"{k} chain{'s' if k > 1 else ''}"), 0.7))
    _reliability(path, f"Calibration of the ICP's causal probabilities against the number of chains pooled ({title}); "
                       "point area ~ count", series)


def plot_compare(curves, labels, path, title) -> None:
    import matplotlib.pyplot as plt

    series = [({key: curves[(label, key)] for key in ("p_edge", "p_ancestor")},
               dict(color=colour, lw=1.6, alpha=1.0, label=label), 0.7)
              for colour, label in zip(plt.cm.tab10(np.arange(len(labels)) % 10), labels)]
    _reliability(path, f"Calibration of the ICP's causal probabilities, runs side by side ({title}); "
                       "point area ~ count", series)


def plot(curves, path, title) -> None:
    series = []
    for label in dict.fromkeys(lab for lab, _ in curves):
        pooled = "alone" not in label
        style = dict(color="C3" if pooled else "C0", lw=2.2 if pooled else 0.8, alpha=1 if pooled else 0.6,
                     label=f"chains {label} pooled" if pooled else ("each chain alone" if label.startswith("0 ") else None))
        series.append(({key: curves[(label, key)] for key in ("p_edge", "p_ancestor")}, style, 0.8 if pooled else 0.4))
    _reliability(path, f"Calibration of the ICP's causal probabilities, chain by chain ({title}); point area ~ count",
                 series)


def _reliability(path, suptitle, series) -> None:
    """A reliability diagram per probability: each series is ({key: bin rows}, line style, point alpha)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 2, figsize=(10, 4.6), sharey=True)
    for ax, key in zip(axes, ("p_edge", "p_ancestor")):
        ax.plot([0, 1], [0, 1], color="0.6", lw=1, ls="--", label="calibrated")
        for rows_by_key, style, point_alpha in series:
            rows = [r for r in rows_by_key[key] if r[1]]
            x, y, n = [r[2] for r in rows], [r[3] for r in rows], [r[1] for r in rows]
            ax.plot(x, y, **style)
            ax.scatter(x, y, s=[6 + v / 3 for v in n], color=style["color"], alpha=point_alpha)
        ax.set_xlim(0, 1)
        ax.set_ylim(0, 1)
        ax.set_xlabel("mean probability in the bin")
        ax.set_title(key)
    axes[0].set_ylabel("fraction of the pairs that hold")
    axes[0].legend(loc="upper left", fontsize=8)
    fig.suptitle(suptitle, fontsize=9)
    fig.tight_layout()
    fig.savefig(path, dpi=120)
    plt.close(fig)


if __name__ == "__main__":
    sys.exit(main())
