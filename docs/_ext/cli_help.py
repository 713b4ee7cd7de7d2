"""Sphinx directives of the chefs site.

``.. chefs-cli::`` renders the CLI reference from the real argparse parsers
(:func:`chefs.cli.build_parser`): one section per command and sub-command holding exactly
the text ``chefs ... --help`` prints, so the page cannot drift from the command line.

``.. chefs-public:: MODULE`` lists a package's ``__all__``, each name linked to the page
where it is defined (the API reference documents every object once, at its home module).
"""

from __future__ import annotations

import argparse
import importlib
import inspect
import os
import pkgutil

from docutils import nodes
from docutils.statemachine import StringList
from sphinx.util.docutils import SphinxDirective
from sphinx.util.nodes import nested_parse_with_titles

#: the width ``--help`` is wrapped at on the page (argparse reads COLUMNS)
HELP_COLUMNS = 100


def _subcommands(parser: argparse.ArgumentParser):
    """(name, help, sub-parser) of each sub-command of ``parser``, in registration order."""
    for action in parser._actions:  # argparse keeps sub-parsers only here
        if isinstance(action, argparse._SubParsersAction):
            helps = {a.dest: a.help for a in action._choices_actions}
            for name, sub in action.choices.items():
                yield name, helps.get(name), sub


def help_text(parser: argparse.ArgumentParser) -> str:
    """``parser.format_help()`` at a fixed width (what ``--help`` prints in a 100-column terminal)."""
    old = os.environ.get("COLUMNS")
    os.environ["COLUMNS"] = str(HELP_COLUMNS)
    try:
        return parser.format_help()
    finally:
        if old is None:
            del os.environ["COLUMNS"]
        else:
            os.environ["COLUMNS"] = old


class ChefsCli(SphinxDirective):
    """The ``chefs`` command and every sub-command, each as a section with its ``--help``."""

    has_content = False

    def run(self):
        from chefs.cli import build_parser

        parser = build_parser()
        return self._section(["chefs"], parser, None, top=True)

    def _section(self, words, parser, summary, top=False):
        title = " ".join(words)
        section = nodes.section(ids=[nodes.make_id("cli-" + title)], names=[nodes.fully_normalize_name(title)])
        section += nodes.title(text=title)
        if summary:
            section += nodes.paragraph(text=summary)
        block = nodes.literal_block(text=help_text(parser))
        block["language"] = "text"
        section += block
        children = [self._section(words + [name], sub, text) for name, text, sub in _subcommands(parser)]
        if top:
            return [section, *children]
        section.extend(children)
        return section


def _home(obj, package: str, name: str) -> tuple[str, str]:
    """(role, full name) of the object's documented home."""
    if inspect.isclass(obj) or inspect.isfunction(obj):
        role = "class" if inspect.isclass(obj) else "func"
        return role, f"{obj.__module__}.{obj.__qualname__}"
    pkg = importlib.import_module(package)
    if hasattr(pkg, "__path__"):  # data: the submodule that defines (not imports) it
        for info in pkgutil.iter_modules(pkg.__path__):
            if info.name.startswith("_"):
                continue
            mod = importlib.import_module(f"{package}.{info.name}")
            if getattr(mod, name, None) is obj and name in getattr(mod, "__all__", vars(mod)):
                return "data", f"{mod.__name__}.{name}"
    return "data", f"{package}.{name}"


class ChefsPublic(SphinxDirective):
    """Bullet list of ``MODULE.__all__``, each linked to its home page, with its first docstring line."""

    required_arguments = 1

    def run(self):
        package = self.arguments[0]
        mod = importlib.import_module(package)
        lines = []
        for name in mod.__all__:
            if name.startswith("__"):
                continue
            obj = getattr(mod, name)
            role, target = _home(obj, package, name)
            doc = (inspect.getdoc(obj) or "").strip().split("\n\n")[0].replace("\n", " ") if role != "data" else ""
            lines.append(f"* :py:{role}:`{name} <{target}>`" + (f" -- {doc}" if doc else ""))
        node = nodes.container()
        nested_parse_with_titles(self.state, StringList(lines, source=package), node)
        return node.children


def setup(app):
    app.add_directive("chefs-cli", ChefsCli)
    app.add_directive("chefs-public", ChefsPublic)
    return {"version": "1.0", "parallel_read_safe": True, "parallel_write_safe": True}
