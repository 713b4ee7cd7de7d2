"""Pictures: DAG drawings (nodes placed by order value), study curves, traces."""

from __future__ import annotations

from pathlib import Path

import numpy as np

from .graph import DAG


def _mpl():
    """pyplot, on the non-interactive Agg backend when nothing has chosen one yet.

    A session that already runs pyplot, IPython/Jupyter (inline figures) or sets
    ``MPLBACKEND`` keeps its own backend: switching it would stop the user's later
    figures from showing. The command-line tools get Agg (files only, no display)."""
    import os
    import sys

    import matplotlib

    if "matplotlib.pyplot" not in sys.modules and "IPython" not in sys.modules and not os.environ.get("MPLBACKEND"):
        matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def dag_layout(g: DAG) -> np.ndarray:
    """Positions: y = theta (top = 1); observed nodes spread evenly along x,
    each hidden node above the mean x of its children (processed bottom-up),
    nudged apart from nodes at a similar height."""
    n = g.num_nodes
    pos = np.zeros((n, 2))
    pos[:, 1] = g.theta
    obs = np.flatnonzero(g.observed)
    pos[obs, 0] = np.linspace(0, 1, obs.size) if obs.size > 1 else 0.5
    children = g.child_sets()
    placed: list[int] = list(obs)
    for k in np.argsort(g.theta, kind="stable"):
        if g.observed[k]:
            continue
        ch = children[k]
        x = float(np.mean(pos[ch, 0])) if ch else 0.5
        for _ in range(50):
            near = [j for j in placed if abs(pos[j, 1] - pos[k, 1]) < 0.04 and abs(pos[j, 0] - x) < 0.05]
            if not near:
                break
            x += 0.06 if (len(placed) + _) % 2 == 0 else -0.06
        pos[k, 0] = x
        placed.append(int(k))
    return pos


def draw_dag(g: DAG, ax=None, title: str | None = None, node_size: float = 120):
    """Draw one DAG: observed nodes shaded grey, hidden white, edges as arrows."""
    plt = _mpl()
    if ax is None:
        _, ax = plt.subplots(figsize=(6, 6))
    pos = dag_layout(g)
    for p, c in zip(g.parents, g.children):
        ax.annotate("", xy=pos[c], xytext=pos[p],
                    arrowprops=dict(arrowstyle="-|>", color="0.35", lw=0.8, shrinkA=5, shrinkB=5))
    colors = np.where(g.observed, "0.6", "white")
    ax.scatter(pos[:, 0], pos[:, 1], s=node_size, c=list(colors), edgecolors="black", zorder=3)
    ax.set_ylabel("order value θ")
    ax.set_ylim(-0.05, 1.05)
    ax.set_xticks([])
    ax.set_title(title or f"K+={g.num_nodes}  E+={g.num_edges}  hidden={g.num_hidden}  depth={g.depth()}")
    return ax


def image_path(path) -> Path:
    """The file a picture saved to ``path`` lands in: matplotlib appends ``.png``
    to a name without an extension (``d`` -> ``d.png``)."""
    path = Path(path)
    return path if path.suffix else path.with_name(path.name + ".png")


def save_dag_png(g: DAG, path, title: str | None = None) -> Path:
    """Save a drawing of ``g``; returns the file written (see :func:`image_path`)."""
    plt = _mpl()
    fig, ax = plt.subplots(figsize=(6, 6))
    draw_dag(g, ax, title)
    fig.tight_layout()
    path = image_path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=120)
    plt.close(fig)
    return path
