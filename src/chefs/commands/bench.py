"""``chefs bench table1``: reproduce Table 1 of the ICP paper."""

from __future__ import annotations

from ._util import positive_int


def register(sub) -> None:
    b = sub.add_parser("bench", help="benchmarks that reproduce the papers' tables")
    bs = b.add_subparsers(dest="bench_command", metavar="BENCH")
    t = bs.add_parser("table1", help="Table 1: Hellinger distance of fantasy data, nine data sets")
    t.add_argument("--out", required=True)
    t.add_argument("--datasets", default=None, help="comma-separated (default: all nine)")
    t.add_argument("--models", default="icp,cibp,ecibp,kde,dpgmm,outtree")
    t.add_argument("--seeds", type=positive_int, default=1, help="number of seeds (splits and chains)")
    t.add_argument("--chains", type=positive_int, default=1)
    t.add_argument("--quick", action="store_true", help="short chains and subsampled training sets (~5 min)")
    t.add_argument("--data-dir", default=None)
    t.set_defaults(func=cmd_table1)
    b.set_defaults(func=lambda args: (b.print_help(), 2)[1])


def cmd_table1(args) -> int:
    from ..bench.table1 import DATASETS, run_table1

    datasets = tuple(d.strip() for d in args.datasets.split(",")) if args.datasets else DATASETS
    models = tuple(m.strip() for m in args.models.split(",") if m.strip())
    path = run_table1(args.out, datasets, models, tuple(range(args.seeds)), args.quick, args.data_dir)
    print(f"wrote {path}, {path.with_suffix('.md')}")
    print(path.with_suffix(".md").read_text())
    return 0
