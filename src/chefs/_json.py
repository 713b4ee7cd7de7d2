"""JSON for the files chefs writes (open formats, never pickles): numpy scalars and arrays, and tuples,
as plain JSON numbers and lists."""

from __future__ import annotations

import numpy as np


def json_default(o):
    """``json.dump``'s ``default``: numpy integers and floats as numbers, arrays and tuples as lists."""
    if isinstance(o, np.integer):
        return int(o)
    if isinstance(o, np.floating):
        return float(o)
    if isinstance(o, np.ndarray):
        return o.tolist()
    if isinstance(o, tuple):
        return list(o)
    raise TypeError(f"not JSON serialisable: {type(o).__name__}")
