"""Check every local link of a built HTML site: ``python docs/check_links.py docs/_build/html``.

Every ``href`` and ``src`` of every page that does not leave the site (no scheme such as
``https:``, no ``//host``) must name a file that exists under the site, and a ``#fragment``
must name an ``id`` (or ``name``) in that file. Prints each broken link as
``page: link (reason)`` and exits with status 1 if there is one, 0 otherwise.
External links are not fetched (CI has no network).
"""

from __future__ import annotations

import argparse
import sys
from html.parser import HTMLParser
from pathlib import Path
from urllib.parse import unquote, urlsplit


class _Page(HTMLParser):
    """Collects a page's link targets and its anchor ids."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.links: list[str] = []
        self.ids: set[str] = set()

    def handle_starttag(self, tag, attrs):
        for name, value in attrs:
            if value is None:
                continue
            if name in ("href", "src") and not (tag == "link" and name == "href" and value.startswith("#")):
                self.links.append(value)
            elif name == "id" or (tag == "a" and name == "name"):
                self.ids.add(value)


def _parse(path: Path, cache: dict) -> _Page:
    if path not in cache:
        page = _Page()
        page.feed(path.read_text(encoding="utf-8", errors="replace"))
        cache[path] = page
    return cache[path]


def _pages(site: Path) -> list[Path]:
    """The site's pages: every ``.html`` file except the theme's templates copied into ``_static``."""
    return sorted(p for p in site.rglob("*.html") if p.relative_to(site).parts[0] not in ("_static", "_sources"))


def broken_links(site: Path) -> list[str]:
    """``"page: link (reason)"`` for every broken local link under ``site``."""
    site = site.resolve()
    cache: dict = {}
    problems = []
    for page_path in _pages(site):
        page = _parse(page_path, cache)
        for link in page.links:
            parts = urlsplit(link)
            if parts.scheme or parts.netloc or link.startswith(("mailto:", "javascript:", "data:")):
                continue
            if parts.path:
                target = (page_path.parent / unquote(parts.path)).resolve()
                if target.is_dir():
                    target = target / "index.html"
            else:
                target = page_path
            where = f"{page_path.relative_to(site)}: {link}"
            if not target.is_relative_to(site):
                problems.append(f"{where} (outside the site)")
            elif not target.is_file():
                problems.append(f"{where} (no such file)")
            elif parts.fragment and target.suffix == ".html" and unquote(parts.fragment) not in _parse(target, cache).ids:
                problems.append(f"{where} (no anchor #{parts.fragment})")
    return problems


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("site", type=Path, help="the built HTML folder, e.g. docs/_build/html")
    args = parser.parse_args(argv)
    if not (args.site / "index.html").is_file():
        print(f"check_links: {args.site} has no index.html: build the site first", file=sys.stderr)
        return 2
    problems = broken_links(args.site)
    for p in problems:
        print(p)
    pages = len(_pages(args.site.resolve()))
    print(f"check_links: {len(problems)} broken local link(s) in {pages} pages", file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
