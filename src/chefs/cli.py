"""The ``chefs`` command line: a thin layer over the library.

Each module in :mod:`chefs.commands` defines ``register(subparsers)`` that adds
its sub-commands; every sub-command sets ``func(args) -> int``. User errors
(``ValueError``, missing files) print one line and exit with status 2.
"""

from __future__ import annotations

import argparse
import importlib
import pkgutil
import sys

from . import __version__, commands


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="chefs",
        description="Bayesian nonparametric DAG structure learning with the Indian Chefs Process.",
    )
    parser.add_argument("--version", action="version", version=f"chefs {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for info in sorted(pkgutil.iter_modules(commands.__path__), key=lambda i: i.name):
        if info.name.startswith("_"):
            continue
        module = importlib.import_module(f"{commands.__name__}.{info.name}")
        module.register(sub)
    return parser


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError) as err:
        print(f"chefs: error: {err}", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        print("chefs: interrupted", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
