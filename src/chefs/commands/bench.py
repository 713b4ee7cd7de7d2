"""``chefs bench table1``: reproduce Table 1 of the ICP paper."""

from __future__ import annotations

import argparse

from ._util import margin_arg, nonneg_int, positive_int


def register(sub) -> None:
    from ..density import MARGIN

    b = sub.add_parser("bench", help="benchmarks that reproduce the papers' tables")
    bs = b.add_subparsers(dest="bench_command", metavar="BENCH")
    t = bs.add_parser("table1", help="Table 1: Hellinger distance of fantasy data, nine data sets")
    t.add_argument("--out", required=True, help="output directory (table1.csv, table1.md, figures, runs/)")
    t.add_argument("--datasets", default=None, help="comma-separated (default: all nine)")
    t.add_argument("--models", default="icp,cibp,ecibp,kde,dpgmm,outtree",
                   help="comma-separated (default: all six)")
    t.add_argument("--seeds", type=positive_int, default=1, help="number of seeds (splits and chains)")
    t.add_argument("--first-seed", type=nonneg_int, default=0,
                   help="run seeds FIRST..FIRST+SEEDS-1 (split seeds over processes, then table1-merge)")
    t.add_argument("--chains", type=positive_int, default=1, help="MCMC chains per belief-network fit (pooled)")
    t.add_argument("--jobs", type=positive_int, default=None,
                   help="run the (data set, model, seed) cells in this many processes (default 1; same numbers)")
    t.add_argument("--scheduler", default=None, metavar="ADDR",
                   help="Dask scheduler address: run every (data set, model, seed) cell as a task on that cluster "
                        "(same numbers; the workers get the data as arrays; not with --jobs)")
    t.add_argument("--quick", action="store_true", help="short chains and subsampled training sets (~5 min)")
    t.add_argument("--sweeps", type=positive_int, default=None,
                   help="MCMC sweeps of the ICP, CIBP and ECIBP fits alike (default 3000, quick 80); longer chains "
                        "fit better (docs/results-table1.md)")
    t.add_argument("--burn-in", type=nonneg_int, default=None, help="sweeps dropped (default: half the sweeps)")
    t.add_argument("--thin", type=positive_int, default=None,
                   help="keep every THIN-th sweep after the burn-in (default: as many kept samples as the "
                        "settings' own, 50 full and 10 quick)")
    t.add_argument("--margin", type=margin_arg, default=None,
                   help="unit-map margin of the ICP, CIBP and ECIBP fits alike: each column's training range goes "
                        f"onto [MARGIN, 1 - MARGIN] (default: {MARGIN}, chefs.density.MARGIN); auto: 0.1 for data "
                        "sets with 3 or more columns, 0.3 for fewer (docs/derivations.md 3.18)")
    t.add_argument("--pilots", type=positive_int, default=None,
                   help="multi-start pilots per chain of the ICP, CIBP and ECIBP fits alike (default: "
                        "chefs.density.PILOTS; 1: the single start of runs before stop 25)")
    t.add_argument("--rotate", action=argparse.BooleanOptionalAction, default=None,
                   help="belief networks: the unit map on the standardised data's principal axes (rows labelled "
                        "',rotate'), or never (--no-rotate, unlabelled); default: each data set's thin-axis rule "
                        "decides (chefs.density.ROTATE = 'auto', rows labelled ',rotate=auto'; docs/derivations.md "
                        "3.15)")
    t.add_argument("--tails", action=argparse.BooleanOptionalAction, default=None,
                   help="belief networks: compress the outer tails of the unit map's axes (rows labelled ',tails'), "
                        "or never (--no-tails, unlabelled); default: where the map is rotated (chefs.density.TAILS = "
                        "'auto', rows labelled ',tails=auto'; docs/derivations.md 3.17)")
    t.add_argument("--noncentred", action=argparse.BooleanOptionalAction, default=None,
                   help="belief networks: after each sweep's Gibbs updates, update every hidden unit's precision and "
                        "incoming scale with its standardised noise held fixed (rows labelled ',noncentred'; "
                        "docs/derivations.md 3.24), or not (--no-noncentred, unlabelled); default: the library's, "
                        "on since stop 49 (chefs.density.NONCENTRED)")
    t.add_argument("--pilot-draws", type=positive_int, default=None, metavar="D",
                   help="belief networks: importance draws of the score that ranks each chain's pilots (default: "
                        "the library's, 512 since stop 49, chefs.density.PILOT_DRAWS; rows labelled ',pilot_draws=D' "
                        "unless 32, the default until stop 49, or with --pilots 1, when there is nothing to rank; "
                        "docs/derivations.md 3.26)")
    t.add_argument("--pilot-structures", action=argparse.BooleanOptionalAction, default=None,
                   help="belief networks: each pilot after the first starts from its own draw of the starting "
                        "structure (rows labelled ',pilot_structures'; docs/derivations.md 3.28), or every pilot "
                        "from the run's one structure (--no-pilot-structures, unlabelled, as before stop 50); "
                        "default: the library's (chefs.density.PILOT_STRUCTURES)")
    t.add_argument("--force", action="store_true", help="replace an existing OUT/table1.csv")
    t.add_argument("--resume", action="store_true",
                   help="finish an interrupted run: keep the rows in OUT/table1.csv and run only the missing "
                        "(data set, model, seed) rows (same settings needed; the result equals an uninterrupted run)")
    t.add_argument("--data-dir", default=None, help="UCI/R data files (default: $CHEFS_DATA)")
    t.set_defaults(func=cmd_table1)
    mg = bs.add_parser("table1-merge", help="merge table1.csv files of separate runs into one table")
    mg.add_argument("csv", nargs="+", help="table1.csv files")
    mg.add_argument("--out", required=True, help="output directory for the merged table1.csv and table1.md")
    mg.add_argument("--force", action="store_true", help="replace an existing OUT/table1.csv")
    mg.set_defaults(func=cmd_table1_merge)
    r = bs.add_parser("reconstruct", help="003 section 5 / Fig. 5a: reconstruct the hidden bottom half of 8x8 digits")
    r.add_argument("--out", required=True,
                   help="output directory (reconstruct.csv, reconstruct.md, reconstruct.png, runs/)")
    r.add_argument("--priors", default="cibp,icp", help="comma-separated structure priors (cibp, icp, ecibp)")
    r.add_argument("--sweeps", type=positive_int, default=None, help="MCMC sweeps per fit (default 2400, quick 300)")
    r.add_argument("--burn-in", type=nonneg_int, default=None, help="default: half the sweeps")
    r.add_argument("--num-train", type=positive_int, default=None, help="training images (default 500)")
    r.add_argument("--num-test", type=positive_int, default=None, help="test images (default 100)")
    r.add_argument("--impute-sweeps", type=positive_int, default=None, help="Gibbs sweeps per posterior sample")
    r.add_argument("--seed", type=nonneg_int, default=0)
    r.add_argument("--quick", action="store_true", help="short chains (~2 min for both priors)")
    r.add_argument("--data-dir", default=None, help="read digits.csv from here instead of scikit-learn's copy")
    r.add_argument("--force", action="store_true", help="replace an existing OUT/reconstruct.csv")
    r.set_defaults(func=cmd_reconstruct)
    from .discover import register_bench  # `bench causal` (issue 23), added here explicitly

    register_bench(bs)
    b.set_defaults(func=lambda args: (b.print_help(), 2)[1])


def _names(text: str) -> tuple[str, ...]:
    """A comma-separated list (empty items dropped: "" is the empty list)."""
    return tuple(n.strip() for n in text.split(",") if n.strip())


def cmd_table1(args) -> int:
    from ..bench.table1 import DATASETS, run_table1

    datasets = _names(args.datasets) if args.datasets is not None else DATASETS
    models = _names(args.models)
    seeds = tuple(range(args.first_seed, args.first_seed + args.seeds))
    path = run_table1(args.out, datasets, models, seeds, args.quick, args.data_dir, chains=args.chains,
                      jobs=args.jobs, force=args.force, sweeps=args.sweeps, burn_in=args.burn_in, thin=args.thin,
                      margin=args.margin, resume=args.resume, pilots=args.pilots, scheduler=args.scheduler,
                      rotate=args.rotate, tails=args.tails, noncentred=args.noncentred, pilot_draws=args.pilot_draws,
                      pilot_structures=args.pilot_structures)
    print(f"wrote {path}, {path.with_suffix('.md')}")
    print(path.with_suffix(".md").read_text())
    return 0


def cmd_table1_merge(args) -> int:
    from ..bench.table1 import merge_tables

    path = merge_tables(args.csv, args.out, force=args.force)
    print(f"wrote {path}, {path.with_suffix('.md')}")
    print(path.with_suffix(".md").read_text())
    return 0


def cmd_reconstruct(args) -> int:
    from ..bench.reconstruct import run_reconstruct

    priors = _names(args.priors)
    burn_in = args.burn_in
    if burn_in is None and args.sweeps is not None:
        burn_in = args.sweeps // 2
    path = run_reconstruct(args.out, priors, seed=args.seed, quick=args.quick, data_dir=args.data_dir,
                           sweeps=args.sweeps, burn_in=burn_in, num_train=args.num_train, num_test=args.num_test,
                           impute_sweeps=args.impute_sweeps, force=args.force)
    print(f"wrote {path}, {path.with_suffix('.md')}, {path.with_suffix('.png')}")
    print(path.with_suffix(".md").read_text())
    return 0
