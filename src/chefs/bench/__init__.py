"""Benchmarks that reproduce the papers' tables."""

from __future__ import annotations


def check_names(items, known, flag: str, what: str, hint: str = "") -> list:
    """A benchmark's list argument (``--models``, ``--datasets``, ``--priors``): not
    empty, no name twice (a repeated name would run twice and show the spread of
    identical runs as "± 0"), every name known. Returns the list."""
    items = list(items)
    if not items:
        raise ValueError(f"{flag} is empty; choose from {', '.join(known)}{hint}")
    twice = sorted({x for x in items if items.count(x) > 1})
    if twice:
        raise ValueError(f"{what}(s) {twice} listed more than once in {flag}")
    unknown = [x for x in items if x not in known]
    if unknown:
        raise ValueError(f"unknown {what}(s) {unknown}; choose from {', '.join(known)}")
    return items
