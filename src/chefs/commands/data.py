"""``chefs hellinger`` and ``chefs data {list,show,baseline,truth}``: the data sets of
Table 1 and the Hellinger distance between two samples."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import numpy as np

from ._util import data_file, int_at_least, load_data_spec, nonneg_int, refuse_existing


def _add_data_dir(p) -> None:
    p.add_argument(
        "--data-dir",
        metavar="DIR",
        default=None,
        help="directory holding the data files (default: $CHEFS_DATA)",
    )
    p.add_argument(
        "--download",
        action="store_true",
        default=None,
        help="download a missing file (checked by SHA-256) into the cache; also CHEFS_DOWNLOAD=1",
    )


def _num_mc(text: str) -> int:
    from ..evaluation import MIN_NUM_MC

    return int_at_least(text, MIN_NUM_MC)


def register(subparsers) -> None:
    from ..evaluation import DEFAULT_NUM_MC, MIN_NUM_MC

    h = subparsers.add_parser(
        "hellinger",
        help="Hellinger distance between two samples (KDE + Monte Carlo)",
        description=(
            "Print the Hellinger distance between two samples. Each of A and B is a CSV of "
            "numbers, or NAME:train / NAME:test for a split of a data set of Table 1 "
            "(NAME alone = the whole data set)."
        ),
    )
    h.add_argument("a", metavar="A", help="CSV file or NAME[:train|:test]")
    h.add_argument("b", metavar="B", help="CSV file or NAME[:train|:test]")
    h.add_argument("--seed", type=nonneg_int, default=0, help="seed of the Monte Carlo draws (and of data set splits)")
    h.add_argument("--num-mc", type=_num_mc, default=DEFAULT_NUM_MC,
                   help=f"Monte Carlo draws, at least {MIN_NUM_MC} (default %(default)s)")
    h.add_argument("--verbose", action="store_true", help="also print the Bhattacharyya coefficient and standard errors")
    _add_data_dir(h)
    h.set_defaults(func=_cmd_hellinger)

    d = subparsers.add_parser("data", help="the density data sets of Table 1", description="The density data sets of Table 1.")
    dsub = d.add_subparsers(dest="data_command", metavar="ACTION")
    d.set_defaults(func=lambda args: _usage(d))

    ls = dsub.add_parser("list", help="names, dimensions, sources, and whether each file is found")
    _add_data_dir(ls)
    ls.set_defaults(func=_cmd_list)

    sh = dsub.add_parser("show", help="summary of one data set's split; optionally write it as CSV",
                         description="Summary of one data set's train/test split; optionally write the halves as "
                         "CSV. A CSV file is split the same way (a seeded random half for training), although "
                         "`chefs fit --data FILE.csv` trains on all its rows.")
    sh.add_argument("name", metavar="NAME", help="data set name or CSV file")
    sh.add_argument("--seed", type=nonneg_int, default=0, help="seed of generation, dequantisation and split")
    sh.add_argument("--no-dequantize", dest="dequantize", action="store_false", help="keep discrete columns as they are")
    sh.add_argument("--out-train", metavar="F.csv", default=None, help="write the training set here")
    sh.add_argument("--out-test", metavar="F.csv", default=None, help="write the test set here")
    sh.add_argument("--force", action="store_true", help="overwrite existing output files")
    _add_data_dir(sh)
    sh.set_defaults(func=_cmd_show)

    bl = dsub.add_parser("baseline", help="the BASELINE row of Table 1: HD between training and test set",
                         description="The BASELINE row of Table 1: the Hellinger distance between the training "
                         "and test halves of each data set. A CSV file is split into halves at random (seeded), "
                         "although `chefs fit --data FILE.csv` trains on all its rows.")
    bl.add_argument("names", metavar="NAME", nargs="*", help="data sets or CSV files (default: all nine)")
    bl.add_argument("--seed", type=nonneg_int, default=0, help="seed of the data and of the Monte Carlo draws")
    bl.add_argument("--num-mc", type=_num_mc, default=DEFAULT_NUM_MC,
                    help=f"Monte Carlo draws, at least {MIN_NUM_MC} (default %(default)s)")
    _add_data_dir(bl)
    bl.set_defaults(func=_cmd_baseline)

    tr = dsub.add_parser("truth", help="the TRUTH row of Table 1: mean true log-density of the synthetic test splits",
                         description="Mean log-density per point of the test split under the generator's own "
                         "density (docs/derivations-data.md section 1.1): the held-out log-likelihood of the true "
                         "model, the best a model can score on average. Synthetic data sets only.")
    tr.add_argument("names", metavar="NAME", nargs="*", help="ring, two-moons, pinwheel (default: all three)")
    tr.add_argument("--seed", type=nonneg_int, action="append", default=None,
                    help="seed of the split; repeat for several (default 0)")
    tr.set_defaults(func=_cmd_truth)


def _usage(parser) -> int:
    parser.print_help()
    return 2


def _sample(spec: str, args) -> np.ndarray:
    return load_data_spec(spec, args.data_dir, args.seed, args.download)


def _cmd_hellinger(args) -> int:
    from ..evaluation import hellinger_estimate

    a, b = _sample(args.a, args), _sample(args.b, args)
    est = hellinger_estimate(a, b, seed=args.seed, num_mc=args.num_mc)
    if args.verbose:
        print(f"hellinger {est.distance:.6f} (se {est.distance_se:.6f})")
        print(f"bhattacharyya {est.bhattacharyya:.6f} (se {est.bhattacharyya_se:.6f})")
        print(f"points {a.shape[0]} and {b.shape[0]} in {a.shape[1]} dimensions; num_mc {est.num_mc}")
    else:
        print(f"{est.distance:.6f}")
    return 0


def _cmd_list(args) -> int:
    from .. import datasets

    lines = []  # every row looked up before any is printed: a bad --data-dir is an error, not half a table
    for name, spec in datasets.DATASETS.items():
        if spec.kind == "synthetic":
            found = "generated"
        elif spec.filename is None:
            found = "bundled with scikit-learn"
        else:
            path = datasets.locate(name, args.data_dir)
            found = str(path) if path is not None else f"MISSING ({spec.filename})"
        lines.append(f"{name:<10} {spec.dimension:>3}  {spec.kind:<9}  {found:<40}  {spec.source}")
    print(f"{'name':<10} {'dim':>3}  {'kind':<9}  {'found':<40}  source")
    print("\n".join(lines))
    return 0


def _write_csv(path: str, x: np.ndarray, columns) -> None:
    p = Path(path)
    tmp = p.with_name(p.name + ".part")
    try:
        np.savetxt(tmp, x, delimiter=",", header=",".join(columns), comments="", fmt="%.17g")
        os.replace(tmp, p)
    except BaseException:
        tmp.unlink(missing_ok=True)  # no stray .part file after a failed write
        raise


def _csv_split_note(name: str, n_train: int, n_test: int, seed: int) -> str:
    return (f"{name} is a CSV file: split at random into {n_train} training and {n_test} test rows (seed {seed}), "
            f"as a data set of Table 1 is; `chefs fit --data {name}` trains on all {n_train + n_test} rows")


def _cmd_show(args) -> int:
    from .. import datasets
    from ..datasets.files import csv_column_names

    for path in (args.out_train, args.out_test):  # before any output
        if path is not None:
            refuse_existing(path, args.force)
    if args.out_train and args.out_test and Path(args.out_train).resolve() == Path(args.out_test).resolve():
        raise ValueError(f"--out-train and --out-test are the same file ({args.out_train}); give two names")
    source = data_file(args.name, args.data_dir)  # the CSV, or a named data set's own file
    for flag, path in (("--out-train", args.out_train), ("--out-test", args.out_test)):
        if path and source is not None and Path(path).resolve() == Path(source).resolve():
            raise ValueError(f"{flag} {path} is the input file itself; writing there would replace the data")
    train, test = datasets.load_split(
        args.name, seed=args.seed, data_dir=args.data_dir, dequantize=args.dequantize, download=args.download
    )
    raw = datasets.load(args.name, data_dir=args.data_dir, seed=args.seed, dequantize=False, download=args.download)
    steps = datasets.discrete_steps(raw)
    key = datasets.resolve_name(args.name)
    if key is not None:
        spec = datasets.DATASETS[key]
        columns = list(spec.columns)
        print(f"{spec.name} ({spec.dimension}-D, {spec.kind}): {spec.description}")
        print(f"source: {spec.source}")
    else:  # the file's header names, as `chefs fit` keeps them
        header = csv_column_names(args.name)
        columns = header if header and len(header) == raw.shape[1] else [f"x{j + 1}" for j in range(raw.shape[1])]
        print(f"{args.name}: CSV, {raw.shape[1]} columns")
        print(_csv_split_note(args.name, train.shape[0], test.shape[0], args.seed))
    print(f"train {train.shape[0]} rows, test {test.shape[0]} rows, seed {args.seed}, "
          f"dequantised {'yes' if args.dequantize else 'no'}")
    both = np.vstack([train, test])
    print(f"{'column':<22} {'mean':>11} {'sd':>11} {'min':>11} {'max':>11}  step")
    for j, c in enumerate(columns):
        col = both[:, j]
        step = f"{steps[j]:.4g} (discrete)" if steps[j] > 0 else "continuous"
        print(f"{c:<22} {col.mean():>11.4g} {col.std(ddof=1):>11.4g} {col.min():>11.4g} {col.max():>11.4g}  {step}")
    if args.out_train:
        _write_csv(args.out_train, train, columns)
        print(f"wrote {args.out_train}")
    if args.out_test:
        _write_csv(args.out_test, test, columns)
        print(f"wrote {args.out_test}")
    return 0


def _cmd_baseline(args) -> int:
    from .. import datasets
    from ..evaluation import hellinger_estimate

    names = args.names or list(datasets.DATASETS)
    for name in names:
        if datasets.resolve_name(name) is None and not os.path.isfile(name):
            raise ValueError(f"unknown data set {name!r} (known: {', '.join(datasets.DATASETS)})")
    # every data set is read before the table starts: a missing or bad file is an error, not a half table
    splits = [datasets.load_split(name, seed=args.seed, data_dir=args.data_dir, download=args.download)
              for name in names]
    print(f"{'data set':<12} {'dim':>3} {'train':>6} {'test':>6} {'HD':>8} {'se':>8}")
    for name, (train, test) in zip(names, splits):
        est = hellinger_estimate(train, test, seed=args.seed, num_mc=args.num_mc)
        print(f"{name:<12} {train.shape[1]:>3} {train.shape[0]:>6} {test.shape[0]:>6} "
              f"{est.distance:>8.4f} {est.distance_se:>8.4f}")
    for name, (train, test) in zip(names, splits):
        if datasets.resolve_name(name) is None:
            print(f"chefs: note: {_csv_split_note(name, train.shape[0], test.shape[0], args.seed)}", file=sys.stderr)
    return 0


def _cmd_truth(args) -> int:
    from .. import datasets

    names = args.names or list(datasets.synthetic.LOG_DENSITIES)
    for name in names:  # every name checked before the table starts
        key = datasets.resolve_name(name)
        if key is None or datasets.DATASETS[key].kind != "synthetic":
            raise ValueError(f"no true density for {name!r}: it is known for the synthetic data sets "
                             f"({', '.join(datasets.synthetic.LOG_DENSITIES)})")
    seeds = args.seed or [0]
    print(f"{'data set':<12} {'seed':>4} {'test':>6} {'mean log p':>11} {'se':>7}")
    for name in names:
        key = datasets.resolve_name(name)
        means = []
        for seed in seeds:
            _, test = datasets.load_split(key, seed=seed)
            lp = datasets.true_log_density(key, test)
            means.append(float(np.mean(lp)))
            print(f"{key:<12} {seed:>4} {test.shape[0]:>6} {means[-1]:>11.4f} {np.std(lp, ddof=1) / np.sqrt(lp.size):>7.4f}")
        if len(seeds) > 1:
            print(f"{key:<12} {'mean':>4} {'':>6} {np.mean(means):>11.4f}")
    return 0
