"""The ``chefs`` command line: a thin layer over the library.

Each module listed in ``chefs.commands.MODULES`` defines ``register(subparsers)``
that adds its sub-commands; every sub-command sets ``func(args) -> int``. User errors
(``ValueError``, missing files) print one line and exit with status 2; a
warning prints one line, ``chefs: warning: ...``.
"""

from __future__ import annotations

import argparse
import importlib
import sys
import warnings
from pathlib import Path

from . import __version__, commands


class _DefaultsFormatter(argparse.HelpFormatter):
    """Appends an option's default to its help, unless the help already states one
    or the default is None / False (a flag) / empty."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if ("default" in text.lower() or not action.option_strings or default is None or isinstance(default, bool)
                or default is argparse.SUPPRESS or default == ""):  # flags (store_true / store_false) need no default
            return text
        return f"{text} (default: %(default)s)"


class _Parser(argparse.ArgumentParser):
    """Every (sub)parser of ``chefs`` states its defaults in --help."""

    def __init__(self, *args, **kwargs):
        kwargs.setdefault("formatter_class", _DefaultsFormatter)
        super().__init__(*args, **kwargs)

    def add_argument(self, *args, **kwargs):
        default = kwargs.get("default")
        if ("help" not in kwargs and args and str(args[0]).startswith("-") and default is not None
                and not isinstance(default, bool) and default is not argparse.SUPPRESS):
            kwargs["help"] = "default: %(default)s"
        return super().add_argument(*args, **kwargs)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(
        prog="chefs",
        description="Bayesian nonparametric DAG structure learning with the Indian Chefs Process.",
    )
    parser.add_argument("--version", action="version", version=f"chefs {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND")
    for name in commands.MODULES:
        importlib.import_module(f"{commands.__name__}.{name}").register(sub)
    return parser


def _show_warning(message, category, filename, lineno, file=None, line=None) -> None:
    """A library warning reaches a CLI user as one line, without the source location."""
    text = " ".join(str(message).split())
    print(f"chefs: warning: {text}", file=sys.stderr if file is None else file)


def main(argv=None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    if not getattr(args, "func", None):
        parser.print_help()
        return 2
    try:
        with warnings.catch_warnings():
            warnings.showwarning = _show_warning  # restored when the command returns
            return int(args.func(args) or 0)
    except (ValueError, FileNotFoundError, FileExistsError, NotADirectoryError, IsADirectoryError) as err:
        print(f"chefs: error: {err}", file=sys.stderr)
        return 2
    except BrokenPipeError:  # e.g. `chefs data list | head`: the reader has gone, which is not an error
        import os

        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return 0
    except OSError as err:  # permissions, a full disk, an unreachable host: the system's message, no traceback
        print(f"chefs: error: {err}", file=sys.stderr)
        return 2
    except MemoryError:  # a count far beyond the machine (--num, --num-mc, --chains ...): say so in one line
        print("chefs: error: not enough memory for this command; is one of its counts (--num, --num-mc, "
              "--candidates, --chains, --num-tries ...) too large?", file=sys.stderr)
        return 2
    except KeyboardInterrupt:
        hint = ""
        if args.command in ("fit", "discover") and getattr(args, "out", None) and Path(args.out).is_dir():
            hint = f"; checkpoints are kept: `chefs resume {args.out}` continues the run"
        elif args.command == "bench" and getattr(args, "bench_command", None) == "table1":
            hint = "; the finished rows are kept: the same command with --resume (instead of --force) runs the rest"
        print(f"chefs: interrupted{hint}", file=sys.stderr)
        return 130


if __name__ == "__main__":  # pragma: no cover
    sys.exit(main())
