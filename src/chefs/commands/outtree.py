"""``chefs outtree fit|sample|score``: the out-tree (tdid) density estimator of paper 004."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from ._util import data_column_names, load_data_spec, nonneg_int, positive_int, refuse_existing, to_stdout, write_points


def _fit(args) -> int:
    from chefs.outtree import OutTree

    run = Path(args.out)
    if run.exists() and not args.force:
        raise FileExistsError(f"{run} already exists; use --force to overwrite")
    if run.exists() and not run.is_dir():  # found before the O(T^3) fit, not after it
        raise ValueError(f"--out {run} exists and is not a directory")
    if args.split_seed is not None and os.path.isfile(args.data):
        raise ValueError(f"--split-seed splits a named data set; the fit uses all rows of the CSV file {args.data} "
                         f"(`chefs data show {args.data} --out-train F.csv` writes a seeded half of it)")
    split_seed = 0 if args.split_seed is None else args.split_seed
    X = load_data_spec(args.data, args.data_dir, split_seed, bare_split="train")
    print(f"fitting the out-tree to {X.shape[0]} x {X.shape[1]} points by variational Bayes "
          f"(at most {args.iters} iterations; O(T^3) per iteration)", file=sys.stderr, flush=True)
    model = OutTree(iters=args.iters).fit(X, rng=np.random.default_rng(args.seed))
    model.save(run, force=args.force, extra={"data": args.data, "seed": args.seed, "split_seed": split_seed,
                                             "columns": data_column_names(args.data)})
    print(f"fitted {X.shape[0]} x {X.shape[1]} in {model.fit_seconds_:.1f} s, "
          f"{len(model.elbo_)} VB iterations, ELBO {model.elbo_[-1]:.4f}; saved to {run}")
    return 0


def _sample(args) -> int:
    from chefs.outtree import OutTree

    if not to_stdout(args.out):
        refuse_existing(args.out, args.force)
    model = OutTree.load(args.run)
    Y = model.sample(args.num, np.random.default_rng(args.seed), candidates=args.candidates, method=args.method)
    names = model.meta_.get("columns")
    if "columns" not in model.meta_ and isinstance(model.meta_.get("data"), str) \
            and not os.path.isfile(model.meta_["data"]):  # a run from before the names were saved
        names = data_column_names(model.meta_["data"])
    write_points(args.out, Y, names)  # as chefs fantasy writes them
    return 0


def _score(args) -> int:
    from chefs.outtree import OutTree

    model = OutTree.load(args.run)
    # a NAME:test split is the fit's split unless asked otherwise (runs before stop 16 stored none: 0)
    split_seed = model.meta_.get("split_seed", 0) if args.split_seed is None else args.split_seed
    X = load_data_spec(args.data, args.data_dir, split_seed, scoring=True)
    print(f"{model.score(X):.6f}")
    return 0


def register(subparsers) -> None:
    from ..outtree.predictive import SAMPLE_METHODS

    p = subparsers.add_parser("outtree", help="out-tree (tdid) density estimator with variational Bayes")
    sub = p.add_subparsers(dest="outtree_command", metavar="ACTION")
    p.set_defaults(func=lambda args: (p.print_help(), 2)[1])

    f = sub.add_parser("fit", help="fit by variational Bayes and save to a RUN directory")
    f.add_argument("--data", required=True,
                   help="CSV file, or data set NAME (its training split, as chefs fit uses), NAME:train or NAME:test")
    f.add_argument("--data-dir", default=None, help="UCI/R data files (default: $CHEFS_DATA)")
    f.add_argument("--split-seed", type=nonneg_int, default=None,
                   help="seed of the train/test split of a named data set (default 0); a CSV file is used whole")
    f.add_argument("--out", required=True, help="RUN directory to create")
    f.add_argument("--seed", type=nonneg_int, default=0)
    f.add_argument("--iters", type=positive_int, default=12, help="maximum VB iterations")
    f.add_argument("--force", action="store_true", help="overwrite an existing RUN")
    f.set_defaults(func=_fit)

    s = sub.add_parser("sample", help="draw fantasy points from a fitted RUN")
    s.add_argument("run")
    s.add_argument("--num", type=positive_int, required=True)
    s.add_argument("--out", default=None, help="CSV file, with the data's column names as header when known "
                                               "(default: standard output; - also means standard output)")
    s.add_argument("--force", action="store_true", help="overwrite an existing --out file")
    s.add_argument("--seed", type=nonneg_int, default=0)
    s.add_argument("--candidates", type=positive_int, default=16,
                   help="proposals per fantasy point (default 16; the cost grows linearly with it)")
    s.add_argument("--method", choices=list(SAMPLE_METHODS), default="sir",
                   help="sir: independent sampling-importance-resampling draws, exact only as --candidates "
                        "grows (default); isir: iterated SIR, a chain that leaves the predictive exactly "
                        "invariant but repeats some points")
    s.set_defaults(func=_sample)

    c = sub.add_parser("score", help="print the mean predictive log-density of a data file")
    c.add_argument("run")
    c.add_argument("data", help="CSV file, NAME:test or NAME:train (the split of chefs fit), or NAME (all of it)")
    c.add_argument("--data-dir", default=None, help="UCI/R data files (default: $CHEFS_DATA)")
    c.add_argument("--split-seed", type=nonneg_int, default=None,
                   help="seed of the train/test split (default: the one the RUN was fitted with)")
    c.set_defaults(func=_score)
