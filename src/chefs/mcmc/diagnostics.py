"""Diagnostics and posterior summaries of a run directory.

Scalar traces go to ArviZ ``InferenceData`` (netCDF, ``traces.nc``), from which
``summary`` reports R-hat and effective sample sizes; structure summaries give
edge inclusion probabilities between observed nodes, the posteriors of K+,
hidden count and depth, and a representative graph (the kept graph of highest
log joint density).
"""

from __future__ import annotations

import contextlib
import json
import logging
import math
import warnings
from pathlib import Path

import numpy as np

from ..graph import DAG
from .run import load_spec
from .store import SCALARS, SQLiteStore

TRACE_VARS = ("num_nodes", "num_edges", "num_hidden", "depth", "log_joint", "alpha", "gamma", "phi")

#: R-hat of the log joint density above which the chains of a run are said to disagree
#: (Gelman et al.'s 1.1; ArviZ's rank-normalised split R-hat).
RHAT_WARN = 1.1
#: a chain is "behind" when its mean log joint density is below the best chain's by more than
#: this many standard errors of the difference (each chain's Monte Carlo SE from ArviZ)
BEHIND_SE = 4.0


def mcse_mean(x) -> float:
    """Monte Carlo SE of the mean of one autocorrelated chain: sd / sqrt(ESS), with
    ArviZ's effective sample size (Geyer's initial monotone sequence on split
    halves). 0 for a constant trace; NaN below 4 draws."""
    import arviz as az

    x = np.asarray(x, dtype=float)
    if x.size < 4:
        return float("nan")
    if np.ptp(x) == 0:
        return 0.0
    with _quiet_arviz():
        return float(np.ravel(az.mcse(x[None, :]))[0])


def chain_stores(run_dir):
    spec = load_spec(run_dir)
    for c in range(spec["chains"]):
        path = Path(run_dir) / f"chain-{c}" / "samples.sqlite"
        if path.exists():
            yield c, SQLiteStore(path)


def traces(run_dir) -> dict:
    """{variable: array (chain, draw)} truncated to the shortest chain."""
    per_chain = []
    for _, store in chain_stores(run_dir):
        per_chain.append(store.scalars())
        store.close()
    if not per_chain or min(len(t["sweep"]) for t in per_chain) == 0:
        raise ValueError(f"{run_dir} has no stored samples yet")
    n = min(len(t["sweep"]) for t in per_chain)
    return {v: np.array([t[v][:n] for t in per_chain], dtype=float) for v in ("sweep",) + SCALARS}


def inference_data(run_dir):
    """ArviZ InferenceData of the scalar traces (posterior group)."""
    import arviz as az

    tr = traces(run_dir)
    spec = load_spec(run_dir)
    sampled = set(spec["config"].get("sample_hyper", []))
    names = [v for v in TRACE_VARS if v not in ("alpha", "gamma", "phi") or v in sampled]
    with _quiet_arviz():
        return az.from_dict(posterior={v: tr[v] for v in names},
                            attrs={"run": str(run_dir), "sweeps": spec["sweeps"], "thin": spec["thin"]})


def write_netcdf(run_dir) -> Path:
    idata = inference_data(run_dir)
    path = Path(run_dir) / "traces.nc"
    idata.to_netcdf(str(path))
    return path


@contextlib.contextmanager
def _quiet_arviz():
    """ArviZ logs a shape warning for single-chain runs and numpy warns on constant
    traces (R-hat and ESS are then undefined, shown as NaN); the CLI says so itself.
    ArviZ's density plot of a constant trace warns too (the trace plot shows it flat)."""
    import arviz as az

    # ArviZ logs through its own Logger("arviz") instance (not the one logging.getLogger returns)
    log = getattr(az, "_log", None) or logging.getLogger("arviz")
    level = log.level
    log.setLevel(logging.ERROR)
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore", RuntimeWarning)
            warnings.filterwarnings("ignore", message="Your data appears to have a single value", category=UserWarning)
            yield
    finally:
        log.setLevel(level)


def summary_table(run_dir):
    """pandas DataFrame of means, sds, R-hat and ESS per scalar (R-hat is NaN for a
    single chain, R-hat and ESS are NaN or inf for a constant trace)."""
    import arviz as az

    with _quiet_arviz():
        return az.summary(inference_data(run_dir), kind="all", round_to=4)


def chain_comparison(run_dir) -> dict:
    """The chains of a run side by side, to spot a chain stuck in a poorer mode.

    Returns ``{"rhat": R-hat of log_joint (NaN for one chain or fewer than 4 draws),
    "chains": [{"chain", "samples", "log_joint", "log_joint_se", "log_lik", "num_hidden",
    "num_edges"}, ...], "best": chain with the highest mean log_joint, "behind": [...]}``.
    Means are over each chain's kept samples (all of them, not truncated to the shortest
    chain); ``log_joint_se`` is ArviZ's Monte Carlo SE of the mean (autocorrelation
    included; NaN below 4 samples). A chain is ``behind`` when the R-hat exceeds
    ``RHAT_WARN`` and its mean log_joint is below the best chain's by more than
    ``BEHIND_SE`` standard errors of the difference. Leaving such a chain out
    (``BeliefNetwork.load(run, chains=...)``, ``chefs fantasy --chains``) changes the
    estimate from the pooled chains to the chosen ones."""
    import arviz as az

    rows, draws = [], []
    for c, store in chain_stores(run_dir):
        t = store.scalars()
        store.close()
        n = len(t["sweep"])
        if n == 0:
            continue
        lj = np.asarray(t["log_joint"], dtype=float)
        rows.append({"chain": c, "samples": n, "log_joint": float(lj.mean()), "log_joint_se": mcse_mean(lj),
                     **{k: float(np.mean(t[k])) for k in ("log_lik", "num_hidden", "num_edges")}})
        draws.append(lj)
    if not rows:
        raise ValueError(f"{run_dir} has no stored samples yet")
    rhat = float("nan")
    m = min(len(d) for d in draws)
    if len(draws) >= 2 and m >= 4:
        x = np.array([d[:m] for d in draws])
        if np.ptp(x) > 0:
            with _quiet_arviz():
                rhat = float(az.rhat(x))
    best = max(rows, key=lambda r: r["log_joint"])
    behind = []
    if rhat > RHAT_WARN:
        for r in rows:
            gap = best["log_joint"] - r["log_joint"]
            se = math.hypot(best["log_joint_se"], r["log_joint_se"])
            if r is not best and np.isfinite(se) and gap > BEHIND_SE * se:
                behind.append(r["chain"])
    return {"rhat": rhat, "chains": rows, "best": best["chain"], "behind": behind}


def structure_summary(run_dir) -> dict:
    """Edge inclusion between observed nodes, posteriors of K+, H, depth, representative graph."""
    spec = load_spec(run_dir)
    D = spec["config"]["num_observed"]
    incl = np.zeros((D, D))
    n = 0
    best = (-np.inf, None)
    counts = {"num_nodes": {}, "num_hidden": {}, "depth": {}}
    for _, store in chain_stores(run_dir):
        for row in store.rows():
            g = json.loads(row[1])
            sc = dict(zip(SCALARS, row[2:]))
            for p, c in g["edges"]:
                if p < D and c < D:
                    incl[p, c] += 1
            for key in counts:
                v = int(sc[key])
                counts[key][v] = counts[key].get(v, 0) + 1
            if sc["log_joint"] > best[0]:
                best = (sc["log_joint"], row[1])
            n += 1
        store.close()
    if n == 0:
        raise ValueError(f"{run_dir} has no stored samples yet")
    post = {k: {int(v): c / n for v, c in sorted(d.items())} for k, d in counts.items()}
    return {
        "num_samples": n,
        "edge_inclusion_observed": (incl / n).tolist(),
        "posterior": post,
        "representative": json.loads(best[1]),
        "representative_log_joint": best[0],
    }


def trace_plot(run_dir, path=None) -> Path:
    import arviz as az

    from ..plots import _mpl

    plt = _mpl()
    idata = inference_data(run_dir)
    with _quiet_arviz():
        axes = az.plot_trace(idata, compact=True)
    fig = np.asarray(axes).ravel()[0].figure
    fig.tight_layout()
    path = Path(path or Path(run_dir) / "traces.png")
    fig.savefig(path, dpi=90)
    plt.close(fig)
    return path


def kept_graphs(run_dir):
    for _, store in chain_stores(run_dir):
        for text in store.graphs():
            yield DAG.from_json(text)
        store.close()
