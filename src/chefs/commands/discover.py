"""``chefs discover``: causal discovery with hidden common causes (issue 23), a thin
layer over :class:`chefs.causal.CausalDiscovery`.

``register`` adds the top-level sub-command only, so it does not depend on the order in which
``chefs.cli`` imports the modules of :mod:`chefs.commands`; ``chefs bench causal`` is added by
``commands/bench.py`` calling :func:`register_bench` explicitly.
"""

from __future__ import annotations

import argparse
from pathlib import Path

from ._util import (check_run_out, nonneg_int, positive_float, positive_int, print_chain_comparison,
                    weight_prior_arg)


def register(sub) -> None:
    from ..causal import (CAUSAL_ALPHA, CAUSAL_CHAINS, CAUSAL_LIKELIHOOD_POWER, CAUSAL_MARGIN, CAUSAL_PHI,
                          CAUSAL_SAMPLE_HYPER, CAUSAL_WEIGHT_PRIOR, MAX_COLUMNS, START, STARTS)

    d = sub.add_parser("discover", help="posterior over causal graphs with hidden common causes (ICP belief network "
                                        "with free observed orders)")
    d.add_argument("--data", required=True,
                   help="a data set name (chefs data list; all its rows) or a CSV file of numbers (a header row names "
                        "the columns)")
    d.add_argument("--data-dir", default=None, help="directory with the UCI/R files (default: $CHEFS_DATA)")
    d.add_argument("--out", required=True, help="run directory")
    d.add_argument("--chains", type=positive_int, default=CAUSAL_CHAINS,
                   help="chains, each from its own start (see --start; with 'residual', chains 1, 2, ... order "
                        "bootstrap resamples), so that `chefs summary` shows whether they disagree (default "
                        f"{CAUSAL_CHAINS}; stop 43 ran 8, stops 41-42 4, stops 34-40 2)")
    d.add_argument("--sweeps", type=positive_int, default=2000)
    d.add_argument("--burn-in", type=nonneg_int, default=None,
                   help="sweeps discarded at the start of each chain (default: half of --sweeps, 1000 at the default "
                        "2000)")
    d.add_argument("--thin", type=positive_int, default=10)
    d.add_argument("--seed", type=nonneg_int, default=0)
    d.add_argument("--alpha", type=positive_float, default=CAUSAL_ALPHA,
                   help="the ICP's alpha: its start, or its value where --sample-hyper leaves it out")
    d.add_argument("--gamma", type=positive_float, default=1.0,
                   help="the ICP's gamma: its start, or its value where --sample-hyper leaves it out")
    d.add_argument("--phi", type=positive_float, default=CAUSAL_PHI,
                   help="the ICP's phi: its start, or its value where --sample-hyper leaves it out")
    d.add_argument("--sample-hyper", type=_hyper_names, default=None, metavar="NAMES",
                   help="which of alpha, gamma, phi are sampled (comma-separated, or 'none'; default: "
                        f"{','.join(CAUSAL_SAMPLE_HYPER)}, chefs.causal.CAUSAL_SAMPLE_HYPER)")
    d.add_argument("--fixed-hyper", action="store_true", help="keep alpha, gamma, phi fixed (--sample-hyper none)")
    d.add_argument("--margin", type=float, default=CAUSAL_MARGIN,
                   help="unit-map margin: each column's range goes onto [MARGIN, 1 - MARGIN] (default: "
                        f"{CAUSAL_MARGIN}, that of docs/results-causal.md)")
    d.add_argument("--likelihood-power", type=float, default=CAUSAL_LIKELIHOOD_POWER, metavar="ETA",
                   help="the observed units' likelihood raised to ETA in (0, 1]: a power posterior (default 1, the "
                        "posterior itself; 0.1 is surer of fewer relations and finds no latent common causes; "
                        "docs/derivations.md 3.19)")
    d.add_argument("--weight-prior", type=weight_prior_arg, default=CAUSAL_WEIGHT_PRIOR, metavar="SHAPE,RATE",
                   help="Gamma prior on the edge weights' precision, sampled (default: "
                        f"{_shape_rate(CAUSAL_WEIGHT_PRIOR)}, chefs.causal.CAUSAL_WEIGHT_PRIOR; 'none': "
                        "weights ~ N(0, 1) fixed, as before stop 44)")
    d.add_argument("--pilots", type=positive_int, default=1, metavar="P",
                   help="multi-start pilots per chain (docs/derivations.md 3.7)")
    d.add_argument("--start", choices=STARTS, default=START,
                   help="where each chain's observed orders begin: 'auto' (default since stop 56: "
                        "'additive-order' on at most 14 columns, 'residual' on more) or 'residual' (a "
                        "residual-independence ordering of the data, chain 0 on the data and the others on "
                        "bootstrap resamples; the default until stop 56) or "
                        "'prior' (a random prior draw per chain; with --chains 2, the runs of stops 34-40) or "
                        "'marginal' (the residual order improved by the observed-only model's marginal likelihood, "
                        "with its best parent sets as start edges; docs/derivations.md 3.8, stop 52) or "
                        "'additive' (an order and parent sets drawn from an additive-noise model's posterior on "
                        "the chain's rows, at most 14 columns; stop 55) or 'additive-order' (that order alone, "
                        "without the parent sets as start edges; stop 56)")
    d.add_argument("--warmup", type=nonneg_int, default=None,
                   help="first sweeps with the structure held fixed (default: burn-in / 2, at most 300)")
    d.add_argument("--num-tries", type=positive_int, default=4, help="tries of the multiple-try Metropolis update")
    d.add_argument("--noncentred", action=argparse.BooleanOptionalAction, default=None,
                   help="after each sweep's Gibbs updates, update every hidden unit's precision and incoming scale "
                        "with its standardised noise held fixed (an exact kernel, as chefs fit --noncentred; "
                        "docs/derivations.md 3.24); default: causal discovery's, off "
                        "(chefs.causal.CAUSAL_NONCENTRED; stop 47)")
    d.add_argument("--relocate", action=argparse.BooleanOptionalAction, default=None,
                   help="add the relocation move: an observed variable moved to a fresh place in the order with "
                        "its edges to the other variables redrawn (an exact kernel; docs/derivations.md 3.8, "
                        "'Relocation'); default: off (chefs.causal.CAUSAL_RELOCATE)")
    d.add_argument("--threshold", type=float, default=0.5,
                   help="posterior probability above which an edge enters summary.graphml")
    d.add_argument("--max-columns", type=positive_int, default=MAX_COLUMNS,
                   help="refuse data with more columns than this")
    d.add_argument("--checkpoint-every", type=positive_float, default=10.0, help="seconds between checkpoints")
    d.add_argument("--no-progress", action="store_true")
    d.add_argument("--force", action="store_true", help="overwrite an existing run directory")
    d.set_defaults(func=cmd_discover)


def _hyper_names(text: str) -> tuple:
    from ..density import check_sample_hyper

    if text.strip() == "none":
        return ()
    try:
        names = check_sample_hyper(text)
    except ValueError as err:
        raise argparse.ArgumentTypeError(f"{err}; or 'none'") from None
    if not names:  # an empty list is a typo, not a request to sample nothing ('none' says that)
        raise argparse.ArgumentTypeError("give names among alpha, gamma, phi, or 'none'")
    return names


def _shape_rate(prior) -> str:
    return "none" if prior is None else ",".join(f"{v:g}" for v in prior)


def load_columns(spec: str, data_dir=None):
    """(X, names) of a CSV file (header names, else None) or a whole named data set."""
    from ._util import data_column_names, load_data_spec

    X = load_data_spec(spec, data_dir=data_dir)
    return X, data_column_names(spec)


def _sampled(args) -> tuple:
    from ..causal import CAUSAL_SAMPLE_HYPER

    if args.fixed_hyper and args.sample_hyper:
        raise ValueError("--fixed-hyper samples none of alpha, gamma, phi and --sample-hyper names some: give one")
    if args.fixed_hyper:
        return ()
    return CAUSAL_SAMPLE_HYPER if args.sample_hyper is None else args.sample_hyper


def cmd_discover(args) -> int:
    from ..causal import (EDGES_FILE, GRAPHML_FILE, PICTURE_FILE, SUMMARY_FILE, CausalDiscovery,
                          check_causal_data)
    out = Path(args.out)
    check_run_out(out, args.force, args.data, args.data_dir, f" or `chefs resume {out}`")
    if not 0 <= args.threshold < 1:
        raise ValueError(f"--threshold must be in [0, 1), got {args.threshold}")
    X, names = load_columns(args.data, args.data_dir)
    X, names = check_causal_data(X, names, max_columns=args.max_columns)  # before anything is written
    burn_in = args.sweeps // 2 if args.burn_in is None else args.burn_in
    net = CausalDiscovery(sweeps=args.sweeps, burn_in=burn_in, thin=args.thin, chains=args.chains, seed=args.seed,
                          alpha=args.alpha, gamma=args.gamma, phi=args.phi, sample_hyper=_sampled(args),
                          margin=args.margin, pilots=args.pilots, structure_warmup=args.warmup, start=args.start,
                          num_tries=args.num_tries, threshold=args.threshold, out=out, force=args.force,
                          progress=False if args.no_progress else None, checkpoint_every=args.checkpoint_every,
                          likelihood_power=args.likelihood_power, weight_prior=args.weight_prior,
                          **({} if args.noncentred is None else {"noncentred": args.noncentred}),
                          **({} if args.relocate is None else {"relocate": args.relocate}))
    net.fit(X, names=names)
    from ..mcmc.diagnostics import write_netcdf

    write_netcdf(out)
    report(net, out)
    print(f"wrote {out / EDGES_FILE}, {out / SUMMARY_FILE}, {out / PICTURE_FILE}, {out / GRAPHML_FILE}, "
          f"traces.nc ({net.fit_seconds_:.0f} s of sampling)")
    print_chain_comparison(out)
    return 0


def report(net, out) -> None:
    """Print the most probable relations and the confounder-count posterior."""
    s = net.summary_
    rows = sorted(s.rows(), key=lambda r: -max(r["p_edge"], r["p_confounded"]))
    print(f"{out}: {len(s.names)} variables, {s.num_samples} posterior samples")
    if s.se is None:
        print(f"{'source':>12} {'target':>12} {'p_edge':>7} {'p_anc':>7} {'p_conf':>7}")
        for r in rows[:20]:
            print(f"{r['source']:>12} {r['target']:>12} {r['p_edge']:7.3f} {r['p_ancestor']:7.3f} "
                  f"{r['p_confounded']:7.3f}")
    else:  # each probability with its standard error across the chains (chefs.causal.chain_errors)
        print(f"{'source':>12} {'target':>12} {'p_edge (se)':>13} {'p_anc (se)':>13} {'p_conf (se)':>13}")
        for r in rows[:20]:
            cells = " ".join(f"{r[k]:6.3f} ({r[k + '_se']:.2f})" for k in ("p_edge", "p_ancestor", "p_confounded"))
            print(f"{r['source']:>12} {r['target']:>12} {cells}")
        print("(se: the Monte Carlo standard error of each probability across the chains; where it is large the "
              "chains disagree)")
    dist = s.confounder_distribution()
    print("hidden common causes (hidden units reaching >= 2 variables through hidden units): "
          + ", ".join(f"{k}: {p:.3f}" for k, p in sorted(dist.items())))
    from ..mcmc.run import load_spec

    dis = getattr(net, "disagreement_", None) or {}
    missing = sorted(set(range(load_spec(out)["chains"])) - {int(c) for c in getattr(net, "sample_chains_", ())})
    if missing and getattr(net, "sample_chains_", None):
        print(f"chain(s) {', '.join(map(str, missing))} of the run kept no sample: the summaries and any comparison "
              "of chains leave them out")
    if dis:
        counts = ", ".join(f"{dis[k]} ({k})" for k in ("p_edge", "p_ancestor", "p_confounded"))
        n = dis["samples"]
        per = "" if len(set(n.values())) == 1 else f" (kept samples per chain: {n})"
        if any(dis[k] for k in ("p_edge", "p_ancestor", "p_confounded")):
            print(f"the {len(dis['chains'])} chains{per} disagree by more than {dis['threshold']} on {counts} of "
                  f"{dis['pairs']} ordered pairs: there the pooled probabilities mix the chains' answers by chain "
                  "count; compare them (CausalDiscovery.load(RUN, chains=[i])) and see docs/derivations.md 3.8 "
                  "(longer chains did not make them agree)")
        else:
            print(f"the {len(dis['chains'])} chains{per} agree within {dis['threshold']} on every pair")


def register_bench(bench_subparsers) -> None:
    """``chefs bench causal`` under the ``bench`` parser's sub-commands."""
    from ..bench.causal import METHODS
    from ..causal import CAUSAL_CHAINS, CAUSAL_WEIGHT_PRIOR, START, STARTS

    c = bench_subparsers.add_parser("causal", help="causal discovery against PC, FCI, GES, DirectLiNGAM, RCD and RESIT on "
                                                   "synthetic nonlinear SEMs with hidden confounders")
    c.add_argument("--out", required=True, help="output directory (causal.csv, causal.md, pictures, runs/)")
    c.add_argument("--quick", action="store_true", help="three small SEMs and short chains (a smoke run)")
    c.add_argument("--methods", default=",".join(METHODS), help="comma-separated subset of the methods")
    c.add_argument("--seeds", default=None, help="comma-separated SEM seeds (default: 0-9 full, 0-2 quick)")
    c.add_argument("--no-real", action="store_true",
                   help="leave out the real data (Sachs et al. 2005, read from the cdt package when installed)")
    c.add_argument("--force", action="store_true", help="replace an existing OUT/causal.csv (and start afresh)")
    c.add_argument("--resume", action="store_true",
                   help="finish an interrupted run in OUT: keep the cells in OUT/causal-cells.jsonl (written as each "
                        "cell finishes) and run the others, with the same options")
    c.add_argument("--start", choices=STARTS, default=START,
                   help="where the ICP's chains start (as chefs discover --start; '--start prior --chains 2' "
                        "reproduces stops 34-40)")
    c.add_argument("--chains", type=positive_int, default=None,
                   help=f"the ICP's chains (default: {CAUSAL_CHAINS} in the full run, 1 with --quick)")
    c.add_argument("--margin", type=float, default=None,
                   help="the ICP's unit-map margin (default: chefs.causal.CAUSAL_MARGIN, 0.3; stop 42 measured 0.1, "
                        "docs/derivations.md 3.8)")
    c.add_argument("--likelihood-power", type=float, default=None, metavar="ETA",
                   help="the ICP's likelihood power (default 1, as chefs discover; docs/derivations.md 3.19)")
    c.add_argument("--weight-prior", type=weight_prior_arg, default=CAUSAL_WEIGHT_PRIOR, metavar="SHAPE,RATE",
                   help="the ICP's prior on the weights' precision (default: "
                        f"{_shape_rate(CAUSAL_WEIGHT_PRIOR)}, as chefs discover; 'none': "
                        "weights ~ N(0, 1) fixed, stops 26-43)")
    c.add_argument("--noncentred", action=argparse.BooleanOptionalAction, default=None,
                   help="the ICP with (or without) the non-centred updates, as chefs discover --noncentred "
                        "(default: causal discovery's, off)")
    c.add_argument("--relocate", action=argparse.BooleanOptionalAction, default=None,
                   help="the ICP with (or without) the relocation move, as chefs discover --relocate "
                        "(default: causal discovery's, off)")
    c.set_defaults(func=cmd_bench_causal)


def cmd_bench_causal(args) -> int:
    from ..bench.causal import run_benchmark

    methods = tuple(m.strip() for m in args.methods.split(",") if m.strip())
    seeds = None
    if args.seeds is not None:
        try:
            seeds = [int(s) for s in args.seeds.split(",") if s.strip()]
        except ValueError:
            raise ValueError(f"--seeds takes comma-separated non-negative integers, got {args.seeds!r}") from None
        if not seeds or min(seeds) < 0:
            raise ValueError(f"--seeds takes comma-separated non-negative integers, got {args.seeds!r}")
    run_benchmark(args.out, quick=args.quick, methods=methods, seeds=seeds, force=args.force, real=not args.no_real,
                  start=args.start, chains=args.chains, margin=args.margin, likelihood_power=args.likelihood_power,
                  weight_prior=args.weight_prior, noncentred=args.noncentred, relocate=args.relocate,
                  resume=args.resume)
    out = Path(args.out)
    print(f"wrote {out / 'causal.csv'}, {out / 'causal.md'}")
    print((out / "causal.md").read_text())
    return 0
