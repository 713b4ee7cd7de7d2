"""``chefs fit``, ``chefs fantasy``, ``chefs plot``, ``chefs compare``: density estimation with an
ICP-structured belief network."""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import numpy as np

from ..runkind import refuse_file_as_dir
from ._util import (chain_list, check_run_out, margin_arg, nonneg_int, note_if_incomplete, positive_float, positive_int,
                    print_chain_comparison, refuse_existing, to_stdout, weight_prior_arg, write_points)


def register(sub) -> None:
    from ..density import MARGIN
    from ..models.nlgbn import ACTIVATION_UPDATES, INIT_ACTIVATIONS

    f = sub.add_parser("fit", help="fit an ICP belief network (NLGBN) to data by MCMC")
    f.add_argument("--data", required=True, help="a data set name (chefs data list) or a CSV file of numbers")
    f.add_argument("--data-dir", default=None, help="directory with the UCI/R files (default: $CHEFS_DATA)")
    f.add_argument("--split-seed", type=nonneg_int, default=None,
                   help="named data sets only: seed of the train/test split (default 0); a CSV file is not split, "
                        "the fit trains on all its rows")
    f.add_argument("--prior", choices=["icp", "cibp", "ecibp"], default="icp", help="structure prior")
    f.add_argument("--sweeps", type=positive_int, default=600)
    f.add_argument("--burn-in", type=nonneg_int, default=300)
    f.add_argument("--thin", type=positive_int, default=5)
    f.add_argument("--chains", type=positive_int, default=1)
    f.add_argument("--seed", type=nonneg_int, default=0)
    f.add_argument("--alpha", type=positive_float, default=None, help="ICP only: initial alpha (default 1)")
    f.add_argument("--gamma", type=positive_float, default=None, help="ICP only: initial gamma (default 1)")
    f.add_argument("--phi", type=positive_float, default=None, help="ICP only: initial phi (default 1)")
    f.add_argument("--fixed-hyper", action="store_true",
                   help="ICP only: keep alpha, gamma, phi fixed (default: sampled; the CIBP/ECIBP always sample "
                        "their per-layer alpha, beta under top-hat priors)")
    f.add_argument("--inputs", default="", help="comma-separated column indices to condition on (observed at "
                   "theta = 1): the model becomes p(outputs | inputs)")
    f.add_argument("--activation-update", choices=list(ACTIVATION_UPDATES), default="mtm",
                   help="hidden activations: multiple-try Metropolis, slice sampling, or both")
    f.add_argument("--num-tries", type=positive_int, default=None,
                   help="tries of the multiple-try Metropolis update (default 4; not with --activation-update slice)")
    f.add_argument("--init-activations", choices=list(INIT_ACTIVATIONS), default="projection",
                   help="how the hidden activations start: soft half-space features of the data (default) or draws "
                        "from the prior (the older start; chains lose the shared hidden units more often)")
    f.add_argument("--hmc-steps", type=nonneg_int, default=None, metavar="L",
                   help="leapfrog steps of the joint non-centred HMC transition of the continuous state, once per "
                        "sweep (0: off; default: the library's, BeliefNetwork's hmc_steps); step size and mass "
                        "matrix adapt during the burn-in only")
    f.add_argument("--noncentred", action=argparse.BooleanOptionalAction, default=None,
                   help="after each sweep's Gibbs updates, update every hidden unit's precision and incoming scale "
                        "with its standardised noise held fixed (an exact kernel, about 1.5-2x the CPU; "
                        "docs/derivations.md 3.24); default: the library's (on since stop 49, "
                        "chefs.density.NONCENTRED); --no-noncentred gives the earlier default's chains")
    f.add_argument("--pilots", type=positive_int, default=None, metavar="P",
                   help="multi-start: each chain first runs P short pilot chains from fresh starts and continues "
                        "the one whose end state fits the training data best (importance-sampled log-likelihood); "
                        "default: the library's (BeliefNetwork's pilots)")
    f.add_argument("--pilot-sweeps", type=positive_int, default=None, metavar="S",
                   help="sweeps of each pilot chain (default: half the burn-in)")
    f.add_argument("--pilot-draws", type=positive_int, default=None, metavar="D",
                   help="importance draws per training point in the pilots' score (default: the library's, 512 "
                        "since stop 49, chefs.density.PILOT_DRAWS; 32 before, which can rank a pilot that left the "
                        "blur below one that did not: docs/derivations.md 3.9, 3.26)")
    f.add_argument("--pilot-structures", action=argparse.BooleanOptionalAction, default=None,
                   help="each pilot after the first starts from its own draw of the starting structure, not the "
                        "run's one structure (docs/derivations.md 3.28); default: the library's "
                        "(chefs.density.PILOT_STRUCTURES)")
    f.add_argument("--margin", type=margin_arg, default=None,
                   help="unit-map margin: each column's training range goes onto [MARGIN, 1 - MARGIN] before the "
                        f"observed units' sigmoid (default: {MARGIN}, chefs.density.MARGIN); auto: 0.1 with 3 or more "
                        "columns (inputs included), 0.3 with fewer. Whether 0.1 fits better depends on the data set: "
                        "docs/derivations.md 3.1 and 3.18")
    f.add_argument("--rotate", action=argparse.BooleanOptionalAction, default=None,
                   help="map the standardised data onto their principal axes before the unit map; --no-rotate: "
                        "never (needed for imputation). Default: when the data have a thin axis (3+ columns and a "
                        "correlation-matrix eigenvalue below 0.1; chefs.density.thin_axis, docs/derivations.md "
                        "3.14-3.15); not with --inputs")
    f.add_argument("--tails", action=argparse.BooleanOptionalAction, default=None,
                   help="compress each axis's outer tails (beyond its 0.1%% and 99.9%% training quantiles) before "
                        "the unit map, so that an isolated extreme does not squeeze the bulk; --no-tails: never. Default: "
                        "where the map is rotated (chefs.density.TAILS; docs/derivations.md 3.17); not with --inputs")
    f.add_argument("--warmup", type=nonneg_int, default=None,
                   help="first sweeps with the structure held fixed (default: burn-in / 2, at most 300)")
    f.add_argument("--weight-prior", type=weight_prior_arg, default=None, metavar="SHAPE,RATE",
                   help="a Gamma(SHAPE, RATE) prior on the weights' precision, sampled (default 'none': weights "
                        "~ N(0, 1) fixed, 002's prior; chefs discover samples 1,1 by default)")
    f.add_argument("--checkpoint-every", type=positive_float, default=10.0,
                   help="seconds between checkpoints (default: 10)")
    f.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="Dask scheduler address: run each chain as a task on that cluster (same numbers; --out on a "
                        "file system the workers share)")
    f.add_argument("--no-progress", action="store_true")
    f.add_argument("--force", action="store_true", help="overwrite an existing run directory")
    f.add_argument("--out", required=True, help="run directory")
    f.set_defaults(func=cmd_fit)

    fa = sub.add_parser("fantasy", help="fantasy data from a fitted run (posterior predictive draws)")
    fa.add_argument("run")
    fa.add_argument("--num", type=positive_int, default=2000)
    fa.add_argument("--seed", type=nonneg_int, default=0)
    fa.add_argument("--out", default=None, help="output CSV (default: standard output; - also means standard output)")
    fa.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    fa.add_argument("--chains", type=chain_list, default=None, metavar="I,J,...",
                    help="use only these chains' samples (default: all chains, pooled)")
    fa.set_defaults(func=cmd_fantasy)

    pl = sub.add_parser("plot", help="fantasy vs test data (Figure 4), trace plots, a posterior DAG")
    pl.add_argument("run")
    pl.add_argument("--out", default=None, help="output directory (default: RUN/plots)")
    pl.add_argument("--seed", type=nonneg_int, default=0)
    pl.add_argument("--chains", type=chain_list, default=None, metavar="I,J,...",
                    help="fantasy data from these chains' samples only (default: all chains, pooled)")
    pl.set_defaults(func=cmd_plot)

    from ..bench.compare import PEERS

    co = sub.add_parser("compare", help="a fitted run beside DP-GMM, KDE and (synthetic sets) the truth: HD, "
                        "held-out, CPU", description="The run's Hellinger distance to the test data and held-out "
                        "log-likelihood per point, beside scikit-learn's Dirichlet-process Gaussian mixture and a "
                        "cross-validated kernel density estimate fitted to the run's own training data by Table 1's "
                        "code, and, on the synthetic sets, the true density. Prints the table; writes compare.csv "
                        "and compare.png (test data and each model's fantasy data on the same axes). Needs a run "
                        "of `chefs fit` on a named data set (it keeps the test split).")
    co.add_argument("run")
    co.add_argument("--peers", type=_peer_list, default=PEERS, metavar="NAMES",
                    help=f"comma-separated estimators to fit beside the run (default {','.join(PEERS)})")
    co.add_argument("--out", default=None, help="output directory (default: RUN/compare)")
    co.set_defaults(func=cmd_compare)


def load_data(name: str, data_dir=None, seed: int = 0):
    """(train, test or None, label) for a data set name or a CSV path."""
    from ..datasets import DATASETS, load_split, read_csv, resolve_name

    key = resolve_name(name) if not Path(name).suffix else None
    if key is not None and key in DATASETS:
        train, test = load_split(key, seed=seed, data_dir=data_dir)
        return train, test, key
    path = Path(name)
    if not path.exists():
        raise ValueError(f"{name!r} is neither a data set name ({', '.join(DATASETS)}) nor an existing CSV file")
    return read_csv(path), None, path.stem


def _column_names(run, D: int) -> list[str] | None:
    """The column names saved with the run: a named data set's registry names or the
    training CSV's header (None for header-less files and older runs)."""
    p = Path(run) / "columns.json"
    names = json.loads(p.read_text()) if p.exists() else None
    return names if names and len(names) == D else None


def cmd_fit(args) -> int:
    from ..density import BeliefNetwork

    icp_only = [flag for flag, v in (("--alpha", args.alpha), ("--gamma", args.gamma), ("--phi", args.phi),
                                     ("--fixed-hyper", args.fixed_hyper or None)) if v is not None]
    if args.prior != "icp" and icp_only:
        raise ValueError(f"{', '.join(icp_only)} belong(s) to --prior icp; the {args.prior.upper()}'s per-layer "
                         "alpha and beta are sampled under their top-hat priors")
    if args.num_tries is not None and args.activation_update == "slice":
        raise ValueError("--num-tries belongs to --activation-update mtm or both: the slice update draws no tries")
    if args.pilots == 1:
        pilot_flags = [flag for flag, v in (("--pilot-sweeps", args.pilot_sweeps), ("--pilot-draws", args.pilot_draws),
                                            ("--pilot-structures", args.pilot_structures)) if v is not None]
        if pilot_flags:
            raise ValueError(f"{', '.join(pilot_flags)} belong(s) to --pilots P with P > 1: with one pilot the chain "
                             "starts where it would and no pilot is scored")
    alpha, gamma, phi = (1.0 if v is None else v for v in (args.alpha, args.gamma, args.phi))
    train, test, label = load_data(args.data, args.data_dir, 0 if args.split_seed is None else args.split_seed)
    if test is None and args.split_seed is not None:
        raise ValueError(f"--split-seed splits a named data set; the fit trains on all rows of the CSV file "
                         f"{args.data} (`chefs data show {args.data} --out-train F.csv` writes a seeded half of it)")
    out = Path(args.out)
    check_run_out(out, args.force, args.data, args.data_dir)
    net = BeliefNetwork(prior=args.prior, sweeps=args.sweeps, burn_in=args.burn_in, thin=args.thin, chains=args.chains,
                        seed=args.seed, alpha=alpha, gamma=gamma, phi=phi,
                        sample_hyper=not args.fixed_hyper, out=out, force=args.force,
                        progress=False if args.no_progress else None, checkpoint_every=args.checkpoint_every,
                        inputs=_columns(args.inputs), activation_update=args.activation_update,
                        init_activations=args.init_activations,
                        structure_warmup=args.warmup,
                        **({} if args.num_tries is None else {"num_tries": args.num_tries}),
                        weight_prior=args.weight_prior, scheduler=args.scheduler,
                        **({} if args.margin is None else {"margin": args.margin}),
                        **({} if args.rotate is None else {"rotate": args.rotate}),
                        **({} if args.tails is None else {"tails": args.tails}),
                        **({} if args.hmc_steps is None else {"hmc_steps": args.hmc_steps}),
                        **({} if args.noncentred is None else {"noncentred": args.noncentred}),
                        **({} if args.pilots is None else {"pilots": args.pilots}),
                        pilot_sweeps=args.pilot_sweeps,
                        **({} if args.pilot_draws is None else {"pilot_draws": args.pilot_draws}),
                        **({} if args.pilot_structures is None else {"pilot_structures": args.pilot_structures}))
    from ..bench.compare import FitClock, write_fit_record

    clock, untimed = FitClock(), "the fit did not run to its end (interrupted or failed; `chefs resume` finished it)"
    split_seed = None if test is None else (args.split_seed or 0)

    def write_records(run):  # before sampling (what a killed fit must still leave) and again at the end, timed
        _write_data_files(run, args.data, test, label)
        write_fit_record(run, label, split_seed, clock, untimed)

    net.before_sampling = write_records
    try:
        net.fit(train)
        stopped = [r["chain"] for r in getattr(net, "chain_results_", []) if r.get("stopped")]
        untimed = (f"chain(s) {stopped} stopped by the stop file" if stopped else
                   "the chains ran on a Dask cluster, whose workers' CPU this process cannot see" if args.scheduler
                   else None)
    finally:  # also on Ctrl-C or a crash once the run exists: `chefs resume` then has the test split and names
        if getattr(net, "run_dir_", None) is not None:  # not when the fit stopped before creating the run
            write_records(out)
    from ..mcmc.diagnostics import write_netcdf

    write_netcdf(out)  # scalar traces as ArviZ netCDF, like prior mcmc / resume runs
    sizes = [len(s["theta"]) for s in net.samples_]
    print(f"{label}: {train.shape[0]} training points, {len(net.samples_)} posterior samples, "
          f"K+ mean {np.mean(sizes):.1f} (min {min(sizes)}, max {max(sizes)})")
    if net.map_.rotated:
        print("unit map: the standardised columns rotated onto the training data's principal axes "
              f"({'--rotate' if args.rotate else 'a thin axis; --no-rotate keeps the columns'})")
    if net.map_.tailed:
        print(f"unit map: {net.map_.compressed_tails} outer tail(s) compressed beyond the 0.1% and 99.9% training quantiles "
              f"({'--tails' if args.tails else 'with the rotation; --no-tails keeps the map affine'})")
    elif args.tails:  # (--tails with --inputs is refused before the fit)
        print("unit map: --tails, but no tail beyond the 0.1% and 99.9% quantiles is longer than 5% of its axis's "
              "central range (with under 1,000 points those quantiles lie in the gaps between the most extreme "
              "values): the map stays affine")
    diag = net.diagnostics()
    def rate(k, v):  # n/a: a move the prior or the settings never propose (order/depth under the CIBP, slice)
        props = diag["proposals"].get(k) or []
        return "n/a" if props and all(p == 0 for p in props) else f"{np.mean(v):.3f}"

    acc = ", ".join(f"{k} {rate(k, v)}" for k, v in diag["acceptance"].items())
    print(f"acceptance: {acc}")

    def per_minute(key):  # NaN when fewer than 4 samples are kept or the trace is constant
        v = diag[key]
        return f"{v:.1f}" if np.isfinite(v) else "n/a (fewer than 4 kept samples, or a constant trace)"

    print(f"effective samples per minute: K+ {per_minute('ess_num_nodes_per_minute')}, "
          f"log-likelihood {per_minute('ess_log_lik_per_minute')} ({net.fit_seconds_:.0f} s of sampling)")
    print_chain_comparison(out)
    if test is not None:
        from ..evaluation import hellinger

        fantasy = net.sample(test.shape[0], rng=args.seed, inputs=test if net.inputs else None)
        what = "log p(outputs | inputs)" if net.inputs else "log-likelihood"
        print(f"held-out {what} per point: {net.score(test):.4f}")
        print(f"Hellinger(fantasy, test) = {hellinger(fantasy, test):.4f}   "
              f"baseline Hellinger(train, test) = {hellinger(train, test):.4f}")
    return 0


def _write_data_files(out: Path, data: str, test, label: str) -> None:
    """The data's column names, test split and label, next to the run."""
    from ..datasets import DATASETS
    from ..datasets.files import csv_column_names

    # a named data set (load_data returned its registry key): the registry's column names;
    # a CSV: its header, if it has one
    names = list(DATASETS[label].columns) if test is not None and label in DATASETS else csv_column_names(data)
    if names:  # fantasy CSVs and plots reuse the data's column names
        (out / "columns.json").write_text(json.dumps(names))
    if test is not None:
        np.save(out / "test.npy", test)
    (out / "dataset.txt").write_text(label + "\n")


def _peer_list(text: str) -> tuple:
    from ..bench import check_names
    from ..bench.compare import PEERS

    try:
        return tuple(check_names([t.strip() for t in text.split(",") if t.strip()], PEERS, "--peers", "peer"))
    except ValueError as e:
        raise argparse.ArgumentTypeError(str(e)) from None


def cmd_compare(args) -> int:
    from ..bench.compare import compare_run, format_table, write_compare

    run = Path(args.run)
    out = Path(args.out) if args.out else run / "compare"
    refuse_file_as_dir(out)
    rows, fantasies, test = compare_run(run, peers=args.peers)
    print(format_table(rows))
    for path in write_compare(out, rows, fantasies, test, _column_names(run, test.shape[1])):
        print(f"wrote {path}")
    return 0


def _columns(text: str):
    if not text:
        return ()
    try:
        return tuple(int(c) for c in text.split(","))
    except ValueError:
        raise ValueError(f"--inputs takes comma-separated column indices, got {text!r}") from None


def cmd_fantasy(args) -> int:
    from ..density import BeliefNetwork

    if not to_stdout(args.out):
        refuse_existing(args.out, args.force, run=args.run)
    net = BeliefNetwork.load(args.run, chains=args.chains)
    note_if_incomplete(args.run)
    given = None
    if net.inputs:
        run = Path(args.run)
        ref = np.load(run / "test.npy") if (run / "test.npy").exists() else np.load(run / "train.npy")
        given = ref[np.random.default_rng(args.seed).integers(0, ref.shape[0], args.num)]
    X = net.sample(args.num, rng=args.seed, inputs=given)
    write_points(args.out, X, _column_names(args.run, X.shape[1]))  # the data set's column names, when known
    if not to_stdout(args.out):
        print(f"wrote {args.num} fantasy points to {args.out}")
    return 0


def cmd_plot(args) -> int:
    from ..density import BeliefNetwork
    from ..graph import DAG
    from ..mcmc.diagnostics import structure_summary, trace_plot
    from ..plots import _mpl, save_dag_png

    run = Path(args.run)
    out = Path(args.out) if args.out else run / "plots"
    net = BeliefNetwork.load(run, chains=args.chains)  # before creating anything: a wrong path leaves no directory behind
    note_if_incomplete(run)
    refuse_file_as_dir(out)
    out.mkdir(parents=True, exist_ok=True)
    ref = np.load(run / "test.npy") if (run / "test.npy").exists() else np.load(run / "train.npy")
    fantasy = net.sample(ref.shape[0], rng=args.seed, inputs=ref if net.inputs else None)
    plt = _mpl()
    D = ref.shape[1]
    names = _column_names(run, D) or [f"column {j}" for j in range(D)]
    # consecutive column pairs (at most three panels), the last column included when D is odd
    if D == 1:
        pairs = [(0, 0)]
    else:
        pairs = [(j, j + 1) for j in range(0, D - 1, 2)]
        if D % 2:
            pairs.append((D - 2, D - 1))
        pairs = pairs[:3]
    both = np.vstack([ref, fantasy])
    lo, hi = both.min(axis=0), both.max(axis=0)
    pad = 0.03 * np.where(hi > lo, hi - lo, 1.0)
    fig, axes = plt.subplots(len(pairs), 2, figsize=(9, 4.2 * len(pairs)), squeeze=False)
    for r, (a, b) in enumerate(pairs):
        for c, (X, title) in enumerate(((ref, "test data" if (run / "test.npy").exists() else "training data"),
                                        (fantasy, "fantasy data (posterior)"))):
            ax = axes[r, c]
            if D == 1:
                ax.hist(X[:, 0], bins=np.linspace(lo[0] - pad[0], hi[0] + pad[0], 51))
            else:  # the same axis ranges in both panels, so that they can be compared
                ax.scatter(X[:, a], X[:, b], s=2, alpha=0.5)
                ax.set(xlabel=names[a], ylabel=names[b], xlim=(lo[a] - pad[a], hi[a] + pad[a]),
                       ylim=(lo[b] - pad[b], hi[b] + pad[b]))
            ax.set_title(title)
    fig.tight_layout()
    fig.savefig(out / "fantasy.png", dpi=110)
    plt.close(fig)
    trace_plot(run, out / "traces.png")
    rep = structure_summary(run)["representative"]
    save_dag_png(DAG.from_dict(rep), out / "posterior_dag.png", title="representative posterior graph")
    (out / "representative.json").write_text(json.dumps(rep))
    print(f"wrote {out / 'fantasy.png'}, {out / 'traces.png'}, {out / 'posterior_dag.png'}")
    return 0
