"""Figure 5 of 002 from a run directory: statistics, plots and ensemble accuracy.

* Figure 5A: histograms (diagonal) and pairwise densities (off-diagonal) of
  test accuracy, number of nodes, average degree, width and depth of the
  sampled architectures (nodes reachable from the input only), with colored
  crosses at the three drawn architectures;
* Figure 5B: histograms of the mean, standard deviation, minimum and maximum
  of the order values (reachable hidden nodes);
* Figure 5C: drawings of three architectures (fewest, median and most nodes
  among the distinct networks), nodes placed at height ``theta``;
* ``summary.json``: ensemble accuracy (label probabilities averaged over all
  recorded samples), mean and maximum single-network accuracy, sizes visited,
  acceptance rates and training cost; ``samples.csv``: one row per sample.
"""

from __future__ import annotations

import csv
import json
from pathlib import Path

import numpy as np

from ..graph import DAG
from .network import count_structures, network_key, reachable_mask
from .shapes import ShapeRule
from .store import read_run

__all__ = ["summarize", "make_report"]

FIG5A = ("accuracy", "num_nodes", "avg_degree", "width", "depth")
FIG5B = ("theta_mean", "theta_std", "theta_min", "theta_max")
COLORS = ("tab:red", "tab:green", "tab:purple")


def _col(records, name):
    return np.array([np.nan if r.get(name) is None else float(r[name]) for r in records])


def _describe(v):
    v = v[np.isfinite(v)]
    if v.size == 0:
        return None
    return {"min": float(v.min()), "median": float(np.median(v)), "mean": float(v.mean()), "max": float(v.max())}


def _shape_rule(run) -> ShapeRule:
    """The shape rule a run was sampled with (the defaults for settings it did not store)."""
    ccfg = run["config"].get("chain", {})
    return ShapeRule(ccfg.get("n_bins", 5), ccfg.get("base_channels", 4), ccfg.get("channel_rule", "product"))


def summarize(run) -> dict:
    """Across-sample statistics of a run (dict or path), as in section 4.2 of 002."""
    run = read_run(run) if not isinstance(run, dict) else run
    recs = run["records"]
    if not recs:
        raise ValueError(f"{run['path']} holds no samples")
    y = run["y_test"]
    probs = np.stack([run["proba"][(r["chain"], r["net_id"])] for r in recs])
    ens = probs.mean(axis=0)
    acc = _col(recs, "accuracy")
    cfg = run["config"]
    chains = cfg.get("chains_summary", [])
    moves: dict = {}
    for ch in chains:
        for m, t in ch.get("moves", {}).items():
            d = moves.setdefault(m, {"proposed": 0, "accepted": 0, "trained": 0, "impossible": 0})
            for k in d:
                d[k] += t.get(k, 0)
    for d in moves.values():
        d["acceptance_rate"] = d["accepted"] / d["proposed"] if d["proposed"] else None
    distinct = {(r["chain"], r["net_id"]) for r in recs}
    dags = [DAG.from_dict(r) for r in recs]
    archs = {network_key(d) for d in dags}
    rule = _shape_rule(run)
    out = {
        "num_samples": len(recs),
        "num_chains": len({r["chain"] for r in recs}),
        "num_distinct_weight_sets": len(distinct),
        "num_distinct_architectures": len(archs),  # forward networks told apart by their order values
        "num_distinct_structures": count_structures(dags, rule),  # the same, up to naming the hidden nodes
        "ensemble_accuracy": float(np.mean(ens.argmax(1) == y)),
        "mean_accuracy": float(np.mean(acc)),
        "max_accuracy": float(np.max(acc)),
        "min_accuracy": float(np.min(acc)),
        "sizes_visited": {k: _describe(_col(recs, k)) for k in
                          ("num_nodes", "num_edges", "avg_degree", "width", "depth",
                           "total_nodes", "total_edges")},
        "orders": {k: _describe(_col(recs, k)) for k in FIG5B},
        "moves": moves,
        "train_steps_total": int(sum(ch.get("train_steps", 0) for ch in chains)),
        "fits_total": int(sum(ch.get("fits", 0) for ch in chains)),
        "wall_seconds_max_chain": float(max((ch.get("wall_seconds", 0.0) for ch in chains), default=0.0)),
        "wall_seconds_run": cfg.get("wall_seconds"),
    }
    return out


def _pick_three(recs):
    """Indices of three records with distinct architectures: fewest, median and most reachable nodes."""
    first = {}
    for i, r in enumerate(recs):
        first.setdefault(network_key(DAG.from_dict(r)), i)
    idx = sorted(first.values(), key=lambda i: (recs[i]["num_nodes"], -recs[i]["accuracy"], i))
    if len(idx) <= 3:
        return idx
    return [idx[0], idx[len(idx) // 2], idx[-1]]


def draw_architecture(ax, dag: DAG, shape_rule: ShapeRule, color="k", title=None):
    """Draw the input-reachable part of ``dag`` with node heights ``theta`` (Figure 5C of 002)."""
    import networkx as nx

    mask = reachable_mask(dag)
    g = dag.to_networkx().subgraph(np.flatnonzero(mask).tolist()).copy()
    g.remove_edges_from([(p, c) for p, c in list(g.edges) if not mask[p]])
    th = dag.theta
    by_bin: dict = {}
    for k in sorted(g.nodes, key=lambda k: -th[k]):
        by_bin.setdefault(shape_rule.bin(th[k]), []).append(k)
    pos = {}
    for b, nodes in by_bin.items():
        for j, k in enumerate(nodes):
            pos[k] = ((j - (len(nodes) - 1) / 2) * 0.6 + 0.25 * ((-1) ** j) * (len(nodes) > 1), th[k])
    cmap = __import__("matplotlib").colormaps["viridis"]
    cols = [cmap(shape_rule.bin(th[k]) / max(1, shape_rule.n_bins - 1)) if not dag.observed[k] else "lightgray"
            for k in g.nodes]
    labels = {k: ("X" if th[k] == 1.0 and dag.observed[k] else "Y" if dag.observed[k] else "") for k in g.nodes}
    nx.draw_networkx(g, pos=pos, ax=ax, node_color=cols, labels=labels, node_size=120, arrowsize=8,
                     width=0.8, font_size=8, edge_color="0.4")
    for b in range(1, shape_rule.n_bins):
        ax.axhline(1 - b / shape_rule.n_bins, color="0.85", lw=0.5, zorder=0)
    ax.set_ylim(-0.05, 1.05)
    ax.set_ylabel("theta")
    ax.tick_params(left=True, labelleft=True)
    if title:
        ax.set_title(title, color=color, fontsize=9)


def make_report(run_path, out_dir) -> dict:
    """Write ``summary.json``, ``samples.csv`` and the Figure 5 panels to ``out_dir``
    (Figure 5 and the ensemble accuracy of 002 section 4.2)."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    run = read_run(run_path)
    summary = summarize(run)
    out = Path(out_dir)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"{out} exists and is not a directory")
    out.mkdir(parents=True, exist_ok=True)
    recs = run["records"]
    rule = _shape_rule(run)
    three = _pick_three(recs)
    summary["drawn"] = [{"chain": recs[i]["chain"], "iteration": recs[i]["iteration"],
                         "net_id": recs[i]["net_id"], **{k: recs[i][k] for k in FIG5A}} for i in three]
    with open(out / "summary.json", "w", encoding="utf-8") as fh:
        json.dump(summary, fh, indent=1)
    cols = ["chain", "iteration", "net_id", *FIG5A, *FIG5B, "num_edges", "total_nodes", "total_edges",
            "log_evidence", "log_prior", "move", "accepted"]
    with open(out / "samples.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.writer(fh)
        w.writerow(cols)
        for r in recs:
            w.writerow([r.get(c) for c in cols])

    # Figure 5A
    data = {k: _col(recs, k) for k in FIG5A}
    n = len(FIG5A)
    fig, axes = plt.subplots(n, n, figsize=(2.2 * n, 2.2 * n))
    for a, ka in enumerate(FIG5A):
        for b, kb in enumerate(FIG5A):
            ax = axes[a, b]
            xa, xb = data[kb], data[ka]
            if a == b:
                ax.hist(xa[np.isfinite(xa)], bins=20, color="0.5")
            elif a > b:
                ok = np.isfinite(xa) & np.isfinite(xb)
                if ok.sum() > 1 and np.ptp(xa[ok]) > 0 and np.ptp(xb[ok]) > 0:
                    ax.hist2d(xa[ok], xb[ok], bins=15, cmap="Greys")
                else:
                    ax.plot(xa[ok], xb[ok], ".", color="0.5")
                for c, i in zip(COLORS, three):
                    ax.plot(recs[i][kb], recs[i][ka], "x", color=c, ms=8, mew=2, clip_on=False, zorder=5)
            else:
                ax.axis("off")
            if a == n - 1:
                ax.set_xlabel(kb)
            if b == 0:
                ax.set_ylabel(ka)
    fig.suptitle("Figure 5A: sampled architectures (input-reachable nodes)")
    fig.tight_layout()
    fig.savefig(out / "fig5a_statistics.png", dpi=110)
    plt.close(fig)

    # Figure 5B
    fig, axes = plt.subplots(1, 4, figsize=(12, 2.8))
    for ax, k in zip(axes, FIG5B):
        v = _col(recs, k)
        v = v[np.isfinite(v)]
        if v.size:
            ax.hist(v, bins=20, color="0.5")
        ax.set_xlabel(k)
    fig.suptitle("Figure 5B: order values of the reachable hidden nodes")
    fig.tight_layout()
    fig.savefig(out / "fig5b_orders.png", dpi=110)
    plt.close(fig)

    # Figure 5C
    fig, axes = plt.subplots(1, max(1, len(three)), figsize=(4.5 * max(1, len(three)), 5), squeeze=False)
    for ax, c, i in zip(axes[0], COLORS, three):
        r = recs[i]
        draw_architecture(ax, DAG.from_dict(r), rule, color=c,
                          title=f"chain {r['chain']} it {r['iteration']}: acc {r['accuracy']:.3f}, "
                                f"{r['num_nodes']} nodes, depth {r['depth']}")
    fig.suptitle("Figure 5C: sampled architectures (color = shape bin)")
    fig.tight_layout()
    fig.savefig(out / "fig5c_architectures.png", dpi=110)
    plt.close(fig)
    return summary
