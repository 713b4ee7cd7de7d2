"""Causal discovery with hidden common causes: the ICP belief network with free
observed orders (issue 23; 002's conclusion, "nonparametric causal inference ...
when certain relevant input variables are not observed").

The model is the NLGBN of :mod:`chefs.models.nlgbn` under the ICP prior (eq. 9 of
002, corrected; docs/derivations.md sections 1 and 3) with the observed units'
order values *free*: each is U(0, 1) a priori and sampled by the order moves
(eq. 16), so an observed variable can sit above another and be its parent, and
hidden units act as latent common causes or mediators. :class:`CausalDiscovery`
is a :class:`chefs.density.BeliefNetwork` in that mode (same run directory,
chains, resume and diagnostics); its posterior summaries over the observed
variables are defined on the *latent projection* of each sampled DAG
(docs/derivations.md section 3.8)::

    p_edge[i, j]       P(i -> j in the projection: an edge i -> j, or a directed
                         path from i to j whose intermediate units are all hidden)
    p_ancestor[i, j]   P(a directed path from i to j, through any units)
    p_confounded[i, j] P(i <-> j in the projection: a hidden unit h with directed
                         paths to i and to j whose intermediate units are all hidden)

and the posterior of the number of hidden units that reach two or more observed
variables through hidden units only (the latent common causes).
"""

from __future__ import annotations

import csv
import json
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .density import BeliefNetwork, check_data

EDGES_FILE = "edges.csv"
SUMMARY_FILE = "causal.json"
PICTURE_FILE = "causal.png"
GRAPHML_FILE = "summary.graphml"
COLUMNS_FILE = "causal-columns.json"  # (`chefs fit` writes its own columns.json)
EDGE_COLUMNS = ("source", "target", "p_edge", "p_ancestor", "p_confounded",
                "p_edge_se", "p_ancestor_se", "p_confounded_se")  # the last three since stop 54 (empty for one chain)
# The largest number of observed variables `chefs discover` accepts: each sweep costs
# O(D^2 N) in the edge pass alone and the order moves mix over D! rankings; beyond it a
# run does not finish in any reasonable budget on a small machine (docs/derivations.md 3.8).
MAX_COLUMNS = 30
#: how each chain's observed orders start: "residual" (the default since stop 41: a residual-independence
#: ordering of the data, chain 0 on the data and chain c > 0 on a bootstrap resample) or "prior" (a prior draw
#: per chain, as at stops 34-40); docs/derivations.md 3.8, "A start at a residual-independence order". "marginal"
#: (an option since stop 52): the residual order improved by the observed-only model's collapsed marginal likelihood
#: (:mod:`chefs.causal_order`), with its best parent sets as edges of the start; docs/derivations.md 3.8, rule 13
#: "additive" (an option since stop 55): an order and parent sets drawn exactly from an additive-noise surrogate's
#: posterior on the chain's rows (:mod:`chefs.causal_additive`); docs/derivations.md 3.8, "A start drawn from an
#: additive-noise order posterior"; "additive-order" (stop 56): the additive start's order alone, without its
#: parent sets as start edges; "auto" (the default since stop 56, rule 16): "additive-order" on data of at most
#: ADDITIVE_MAX_COLUMNS columns, "residual" on wider data (:func:`resolve_start`)
STARTS = ("auto", "residual", "prior", "marginal", "additive", "additive-order")
#: the most observed variables ``start="marginal"`` takes: its search scores every parent set of up to three units
#: among each unit's predecessors, O(D^4) regressions per chain (3-7 CPU s per chain at 8-10 columns, 18 at 12)
MARGINAL_MAX_COLUMNS = 12
START = "auto"


def resolve_start(start: str, num_columns: int) -> str:
    """The start a run of ``num_columns`` columns uses: ``start`` itself unless it is "auto", which is
    "additive-order" on at most :data:`chefs.causal_additive.ADDITIVE_MAX_COLUMNS` columns (its exact sum over
    orders) and "residual" on more (docs/derivations.md 3.8, rule 16)."""
    if start != "auto":
        return start
    from .causal_additive import ADDITIVE_MAX_COLUMNS

    return "additive-order" if num_columns <= ADDITIVE_MAX_COLUMNS else "residual"


# ------------------------------------------------------------------ relations
def relations(sample: dict) -> tuple[np.ndarray, np.ndarray, np.ndarray, int]:
    """Relations among the observed units of one DAG (a stored sample or ``DAG.to_dict()``):
    its latent projection, as defined in docs/derivations.md section 3.8.

    Observed units are the nodes flagged ``observed``, in node order (data column d is
    the d-th observed node, as :meth:`chefs.mcmc.state.GraphState.to_dag` writes them).

    Returns
    -------
    edge : bool (D, D)
        ``edge[i, j]``: i -> j in the latent projection (Verma & Pearl): an edge, or a
        directed path whose intermediate nodes are all hidden.
    ancestor : bool (D, D)
        ``ancestor[i, j]``: a directed path from i to j (any intermediate nodes).
    confounded : bool (D, D), symmetric, False on the diagonal
        i <-> j in the latent projection: some hidden h has hidden-only directed paths
        to both.
    num_confounders : int
        Hidden nodes with hidden-only directed paths to two or more observed nodes.
    """
    theta = np.asarray(sample["theta"], float)
    observed = np.asarray(sample["observed"], bool)
    n = theta.size
    obs_nodes = np.flatnonzero(observed)
    D = obs_nodes.size
    col = np.full(n, -1)
    col[obs_nodes] = np.arange(D)
    children = [[] for _ in range(n)]
    for p, c in sample["edges"]:
        children[int(p)].append(int(c))
    # bit masks over observed columns, children before parents (increasing theta)
    reach = [0] * n    # observed nodes reachable by any directed path
    hreach = [0] * n   # observed nodes reachable through hidden nodes only
    for x in np.argsort(theta, kind="stable"):
        r = h = 0
        for c in children[x]:
            if observed[c]:
                bit = 1 << int(col[c])
                r |= bit | reach[c]
                h |= bit
            else:
                r |= reach[c]
                h |= hreach[c]
        reach[x], hreach[x] = r, h
    bits = 1 << np.arange(D, dtype=object)

    def row(mask):
        return np.array([bool(mask & int(b)) for b in bits], bool)

    edge = np.array([row(hreach[k]) for k in obs_nodes], bool).reshape(D, D)
    ancestor = np.array([row(reach[k]) for k in obs_nodes], bool).reshape(D, D)
    confounded = np.zeros((D, D), bool)
    num_conf = 0
    for x in np.flatnonzero(~observed):
        m = row(hreach[x])
        if m.sum() >= 2:
            num_conf += 1
            confounded |= np.outer(m, m)
    np.fill_diagonal(confounded, False)
    return edge, ancestor, confounded, num_conf


#: two chains disagree on a pair when their probabilities for it differ by more than this (docs/derivations.md 3.8)
DISAGREE = 0.2
KINDS = ("p_edge", "p_ancestor", "p_confounded")


def chain_spread(per_chain: dict) -> dict:
    """For each of :data:`KINDS`, the (D, D) array of the largest difference between two chains'
    probabilities (``per_chain``: chain index -> :class:`CausalSummary`, at least one chain)."""
    chains = sorted(per_chain)
    out = {}
    for k in KINDS:
        p = np.stack([getattr(per_chain[c], k) for c in chains])
        out[k] = p.max(axis=0) - p.min(axis=0)
    return out


def chain_disagreement(per_chain: dict, spread: dict | None = None) -> dict:
    """How far the chains' own summaries are apart (``per_chain``: chain index -> :class:`CausalSummary`).

    For each of ``p_edge``, ``p_ancestor`` and ``p_confounded``: the number of ordered pairs on which
    some two chains' probabilities differ by more than :data:`DISAGREE`. Chains from their own starts
    that do not mix between orders disagree on many pairs, and then the pooled probabilities mix their
    answers by chain count (docs/derivations.md 3.8). ``spread``: :func:`chain_spread` of ``per_chain``
    when the caller has it (computed here otherwise)."""
    chains = sorted(per_chain)
    out = {"chains": chains, "threshold": DISAGREE,
           "samples": {str(c): int(per_chain[c].num_samples) for c in chains}}  # kept samples per chain
    if not chains:
        return out
    D = len(per_chain[chains[0]].names)
    off = ~np.eye(D, dtype=bool)
    out["pairs"] = int(off.sum())
    spread = chain_spread(per_chain) if spread is None else spread
    for k in KINDS:
        out[k] = int(np.sum((spread[k] > DISAGREE) & off))
    return out


def chain_errors(per_chain: dict) -> tuple[dict, dict]:
    """The Monte Carlo standard error of each pooled probability and the chains' spread, from the chains'
    own summaries (``per_chain``: chain index -> :class:`CausalSummary`, two or more chains).

    The pooled probability is the mean of the chains' probabilities ``p_c`` weighted by their kept samples
    ``w_c = n_c / n``. The chains are independent replicates (each from its own start and random stream), so
    the variance of that mean is estimated by ``sum_c w_c^2 (p_c - p)^2 / (1 - sum_c w_c^2)`` (batch means
    with the chains as batches), whatever each chain's autocorrelation: unbiased when each chain's variance
    is inversely proportional to its kept samples, and for equal chains ``C / (C - 1) sum_c w_c^2 (p_c - p)^2
    = var(p_c) / C``, unbiased for any independent, identically distributed chains.
    Chains that stay in different modes give a large error: the pooled value then mixes their answers by
    chain count (docs/derivations.md 3.8). Returns ``(se, spread)``, each a dict over :data:`KINDS` of
    (D, D) arrays; ``spread`` is :func:`chain_spread`, the measure of :func:`chain_disagreement`."""
    chains = sorted(per_chain)
    if len(chains) < 2:
        raise ValueError("standard errors across chains need two or more chains")
    n = np.array([per_chain[c].num_samples for c in chains], float)
    w = n / n.sum()
    se = {}
    for k in KINDS:
        p = np.stack([getattr(per_chain[c], k) for c in chains])
        mean = np.tensordot(w, p, axes=1)
        se[k] = np.sqrt(np.tensordot(w ** 2, (p - mean) ** 2, axes=1) / (1.0 - float(np.sum(w ** 2))))
    return se, chain_spread(per_chain)


@dataclass
class CausalSummary:
    """Posterior summaries over the observed variables (averages over kept samples;
    docs/derivations.md section 3.8).

    ``p_edge``, ``p_ancestor``, ``p_confounded`` are (D, D) arrays indexed
    [source, target] (see :func:`relations`); ``confounders`` holds the number of
    latent common causes in each sample; ``names`` the variables' names. ``se`` and ``spread``
    (two or more chains; else None): each probability's Monte Carlo standard error across the
    chains and the chains' spread (:func:`chain_errors`), dicts over ``"p_edge"``, ``"p_ancestor"``,
    ``"p_confounded"``."""

    names: list
    p_edge: np.ndarray
    p_ancestor: np.ndarray
    p_confounded: np.ndarray
    confounders: np.ndarray
    num_samples: int
    se: dict | None = None
    spread: dict | None = None

    @classmethod
    def from_samples(cls, samples, names, chains=None):
        """The summary of ``samples``. With ``chains`` (each sample's chain), also each chain's own
        summary: returns ``(pooled, {chain: summary})``, every sample's relations computed once."""
        if not samples:
            raise ValueError("no posterior samples to summarise")
        D = len(names)
        keys = np.zeros(len(samples), int) if chains is None else np.asarray(chains)
        if keys.shape != (len(samples),):
            raise ValueError(f"chains must give one chain per sample ({len(samples)}), got {keys.shape}")
        sums = {int(c): [np.zeros((D, D)), np.zeros((D, D)), np.zeros((D, D)), []] for c in np.unique(keys)}
        for s, key in zip(samples, keys):
            se, sa, sc, nk = relations(s)
            if se.shape != (D, D):
                raise ValueError(f"a sample has {se.shape[0]} observed units, the data {D} columns")
            t = sums[int(key)]
            t[0] += se
            t[1] += sa
            t[2] += sc
            t[3].append(nk)

        def summary(parts):
            n = len(parts[3])
            return cls(list(names), parts[0] / n, parts[1] / n, parts[2] / n, np.asarray(parts[3], int), n)

        # counts of 0/1 indicators: the chains' sums add up exactly to the pooled sums
        pooled = summary([sum(t[j] for t in sums.values()) for j in range(3)]
                         + [[nk for t in sums.values() for nk in t[3]]])
        if chains is None:
            return pooled
        return pooled, {c: summary(t) for c, t in sums.items()}

    def confounder_distribution(self) -> dict:
        """Posterior probability of each number of latent common causes."""
        vals, counts = np.unique(self.confounders, return_counts=True)
        return {int(v): float(c) / self.num_samples for v, c in zip(vals, counts)}

    def rows(self) -> list[dict]:
        """One row per ordered pair (source != target), as in ``edges.csv``: the probabilities and their
        standard errors across chains (None for a summary of one chain)."""
        D = len(self.names)
        se = self.se or {}
        return [{"source": self.names[i], "target": self.names[j], "p_edge": float(self.p_edge[i, j]),
                 "p_ancestor": float(self.p_ancestor[i, j]), "p_confounded": float(self.p_confounded[i, j]),
                 **{f"{k}_se": (float(se[k][i, j]) if k in se else None) for k in KINDS}}
                for i in range(D) for j in range(D) if i != j]

    def write_csv(self, path) -> None:
        with open(path, "w", newline="", encoding="utf-8") as fh:
            w = csv.DictWriter(fh, fieldnames=EDGE_COLUMNS)
            w.writeheader()
            for r in self.rows():
                w.writerow({k: (f"{v:.6g}" if isinstance(v, float) else "" if v is None else v)
                            for k, v in r.items()})

    def to_dict(self) -> dict:
        return {"names": self.names, "num_samples": self.num_samples,
                "confounders": self.confounder_distribution(),
                "mean_confounders": float(self.confounders.mean())}

    def graph(self, threshold: float = 0.5):
        """The thresholded summary graph (networkx ``MultiDiGraph``): a directed edge
        i -> j where p_edge > threshold (attribute ``kind="directed"``, ``p``), and a pair
        of edges i -> j, j -> i with ``kind="confounded"`` where p_confounded > threshold."""
        import networkx as nx

        if not 0 <= threshold < 1:
            raise ValueError(f"threshold must be in [0, 1), got {threshold}")
        G = nx.MultiDiGraph()
        for name in self.names:
            G.add_node(str(name))
        D = len(self.names)
        for i in range(D):
            for j in range(D):
                if i == j:
                    continue
                if self.p_edge[i, j] > threshold:
                    G.add_edge(str(self.names[i]), str(self.names[j]), kind="directed", p=float(self.p_edge[i, j]))
                if self.p_confounded[i, j] > threshold:
                    G.add_edge(str(self.names[i]), str(self.names[j]), kind="confounded",
                               p=float(self.p_confounded[i, j]))
        return G

    def write_graphml(self, path, threshold: float = 0.5) -> None:
        import networkx as nx

        nx.write_graphml(self.graph(threshold), str(path))

    def _label(self, kind: str, i: int, j: int) -> str:
        p = float(getattr(self, kind)[i, j])
        return f"{p:.2f}" if self.se is None else f"{p:.2f} ({float(self.se[kind][i, j]):.2f})"

    def plot(self, path=None, ax=None, min_p: float = 0.05, title: str | None = None, labels: bool = True):
        """Observed variables on a circle; directed edges with width and opacity given by
        p_edge (those above ``min_p``), dashed two-headed edges for p_confounded. ``title``: instead of
        the posterior's (its sample count and the mode of the latent common causes); ``labels``: print
        each probability of at least 0.2 beside its edge."""
        from .plots import _mpl

        plt = _mpl()
        D = len(self.names)
        own = ax is None
        if own:
            fig, ax = plt.subplots(figsize=(5.5, 5.5))
            fig.subplots_adjust(0, 0, 1, 0.9)
        else:
            fig = ax.figure
        ang = np.pi / 2 - 2 * np.pi * np.arange(D) / D
        xy = np.c_[np.cos(ang), np.sin(ang)]
        for i in range(D):
            for j in range(D):
                if i == j:
                    continue
                p = self.p_edge[i, j]
                if p > min_p:
                    if p >= 0.2 and labels:
                        mid = 0.55 * xy[i] + 0.45 * xy[j] + 0.06 * np.array([xy[j, 1] - xy[i, 1], xy[i, 0] - xy[j, 0]])
                        ax.text(*mid, self._label("p_edge", i, j), fontsize=7, ha="center", va="center")
                    ax.annotate("", xy=xy[j], xytext=xy[i],
                                arrowprops=dict(arrowstyle="-|>", lw=0.5 + 3.5 * p, alpha=0.25 + 0.75 * p,
                                                color="black", shrinkA=16, shrinkB=16,
                                                connectionstyle="arc3,rad=0.08"))
                q = self.p_confounded[i, j]
                if i < j and q > min_p:
                    if q >= 0.2 and labels:
                        mid = 0.5 * (xy[i] + xy[j]) * 1.25
                        ax.text(*mid, self._label("p_confounded", i, j), fontsize=7, ha="center", va="center",
                                color="tab:red")
                    ax.annotate("", xy=xy[j], xytext=xy[i],
                                arrowprops=dict(arrowstyle="<|-|>", lw=0.5 + 3.5 * q, alpha=0.25 + 0.75 * q,
                                                color="tab:red", linestyle="--", shrinkA=16, shrinkB=16,
                                                connectionstyle="arc3,rad=-0.35"))
        for i in range(D):
            ax.scatter(*xy[i], s=900, color="white", edgecolors="black", zorder=3)
            ax.text(*xy[i], str(self.names[i]), ha="center", va="center", fontsize=8, zorder=4)
        if title is None:
            dist = self.confounder_distribution()
            mode = max(dist, key=dist.get)
            title = (f"posterior over {self.num_samples} samples: black = p(direct edge),\n"
                     f"red dashed = p(hidden common cause); latent causes: mode {mode} (p={dist[mode]:.2f})"
                     + ("" if self.se is None else "\nlabels: probability (its standard error across the chains)"))
        ax.set_title(title, fontsize=8)
        ax.set_xlim(-1.4, 1.4)
        ax.set_ylim(-1.4, 1.4)
        ax.set_aspect("equal")
        ax.axis("off")
        if path is not None:
            fig.savefig(path, dpi=120, bbox_inches="tight")
            if own:
                plt.close(fig)
        return ax


# ------------------------------------------------------------------ data
def check_causal_data(X, names=None, max_columns: int = MAX_COLUMNS) -> tuple[np.ndarray, list]:
    """Validate data for causal discovery: numeric, finite, 2 to ``max_columns`` non-constant
    columns, at least 10 rows. Returns (X as float, column names)."""
    X = check_data(X)
    N, D = X.shape
    if D < 2:
        raise ValueError(f"causal discovery needs at least two columns (variables), got {D}")
    if D > max_columns:
        raise ValueError(f"{D} columns is more than a run can handle (at most {max_columns}): choose the variables "
                         "of interest")
    if N < 10:
        raise ValueError(f"causal discovery needs at least 10 rows (data points), got {N}")
    const = np.flatnonzero(np.ptp(X, axis=0) <= 0)
    if const.size:
        raise ValueError(f"column(s) {const.tolist()} are constant: they carry no information about causes; drop them")
    if names is None:
        names = [str(j) for j in range(D)]
    names = [str(n) for n in names]
    if len(names) != D:
        raise ValueError(f"{len(names)} column names for {D} columns")
    if len(set(names)) != D:
        raise ValueError("column names must be distinct")
    return X, names


# ------------------------------------------------------------------ start
def _centred_gram(A: np.ndarray) -> np.ndarray:
    """The doubly centred Gaussian kernel matrix of the rows of ``A`` (n, d), bandwidth by the median
    heuristic: the median of the positive squared distances between rows (ties left out, so that
    discrete or resampled data keep a bandwidth; all rows equal: a zero matrix)."""
    sq = np.sum(A * A, axis=1)
    d2 = np.maximum(sq[:, None] + sq[None, :] - 2.0 * (A @ A.T), 0.0)
    pairs = d2[np.triu_indices_from(d2, 1)]
    pairs = pairs[pairs > 1e-12 * max(float(pairs.max(initial=0.0)), 1e-300)]
    if pairs.size == 0:
        return np.zeros_like(d2)
    K = np.exp(-d2 / float(np.median(pairs)))
    K -= K.mean(axis=0)[None, :]
    K -= K.mean(axis=1)[:, None]
    return K


def normalised_hsic(a: np.ndarray, B: np.ndarray) -> float:
    """The normalised Hilbert-Schmidt independence criterion of the rows of ``a`` (n,) or (n, p) and ``B``
    (n, q): ``<Ka, Kb> / (||Ka|| ||Kb||)`` of the centred Gaussian kernel matrices (median-heuristic bandwidths),
    in [0, 1]; near 0 for independent samples. O(n^2) memory and time."""
    a = np.asarray(a, float).reshape(len(a), -1)
    B = np.asarray(B, float).reshape(len(B), -1)
    if len(a) != len(B) or len(a) < 2:
        raise ValueError(f"normalised_hsic needs two samples of the same size >= 2, got {len(a)} and {len(B)}")
    Ka, Kb = _centred_gram(a), _centred_gram(B)
    den = float(np.sqrt(np.sum(Ka * Ka) * np.sum(Kb * Kb)))
    return float(np.sum(Ka * Kb) / den) if den > 0 else 0.0


def residual_order(X, rng=None, max_points: int = 600, n_knots: int = 5, ridge: float = 1.0,
                   max_fit_rows: int = 5000) -> list[int]:
    """A causal order of the columns of ``X`` (roots first) by residual independence: the ordering
    phase of RESIT (Peters et al. 2014, "Causal discovery with continuous additive noise models").
    Among the columns not yet placed, each is regressed on the others by an additive cubic spline
    (scikit-learn's ``SplineTransformer`` with ``n_knots`` knots and a ridge penalty ``ridge``, on
    standardised columns), and the one whose residual is least dependent on those others
    (:func:`normalised_hsic` on ``max_points`` rows drawn by ``rng``, or all rows when there are
    no more) is the next sink. Under an additive-noise model without hidden causes the sink's
    residual is the noise, independent of the rest. Data with more than ``max_fit_rows`` rows are
    first subsampled to that many (drawn by ``rng``; fewer rows leave the draws, and so the order,
    as without the cap), which bounds the regressions' cost. Used only
    to start the chains of :class:`CausalDiscovery` (docs/derivations.md 3.8): the sampler's
    target does not involve it."""
    from sklearn.linear_model import Ridge
    from sklearn.preprocessing import SplineTransformer

    X = np.asarray(X, float)
    if X.ndim != 2 or X.shape[0] < 2 or not np.all(np.isfinite(X)) or np.any(np.ptp(X, axis=0) <= 0):
        raise ValueError("residual_order needs a finite 2-D array with at least two rows and no constant column")
    for name, v, lo in (("max_points", max_points, 2), ("n_knots", n_knots, 2), ("max_fit_rows", max_fit_rows, 2)):
        if isinstance(v, bool) or int(v) != v or v < lo:
            raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
    rng = np.random.default_rng(rng)
    if X.shape[0] > max_fit_rows:
        X = X[np.sort(rng.choice(X.shape[0], int(max_fit_rows), replace=False))]
        if np.any(np.ptp(X, axis=0) <= 0):
            raise ValueError(f"a column is constant on the {max_fit_rows} rows drawn: raise max_fit_rows")
    N, D = X.shape
    sd = X.std(axis=0)
    Z = (X - X.mean(axis=0)) / sd
    rows = np.sort(rng.choice(N, max_points, replace=False)) if N > max_points else np.arange(N)
    # the additive spline's basis is column by column (knots from each column alone): computed once
    basis = [SplineTransformer(n_knots=n_knots, degree=3).fit_transform(Z[:, [k]]) for k in range(D)]
    remaining, sinks = list(range(D)), []
    while len(remaining) > 1:
        best = None
        for j in remaining:
            others = [k for k in remaining if k != j]
            F = np.hstack([basis[k] for k in others])
            r = Z[:, j] - Ridge(alpha=ridge).fit(F, Z[:, j]).predict(F)
            score = normalised_hsic(r[rows], Z[np.ix_(rows, others)])
            if best is None or score < best[0]:
                best = (score, j)
        sinks.append(best[1])
        remaining.remove(best[1])
    return remaining + sinks[::-1]


def start_order(X, seed, kind: str = "residual", X01=None, weight_prior=None) -> tuple[list[int], list]:
    """One chain's start (:meth:`CausalDiscovery._initial_graph`), ``kind`` one of :data:`STARTS` but "prior":
    "residual", the :func:`residual_order` of the rows ``X`` with the random stream ``seed``, and no start edges;
    "additive", an order and its parent sets drawn by that stream from
    :class:`chefs.causal_additive.AdditiveOrderPosterior` on ``X`` (the parent sets as start edges); "marginal",
    the residual order improved by
    :func:`chefs.causal_order.search_order` on the observed-only model's marginal likelihood of ``X01``
    (``X`` on the unit scale) with the weight prior ``weight_prior``, and each variable's best parent set
    as start edges ``(parent column, child column)``. A function of its arguments alone, so that the
    chains' starts can be computed in other processes."""
    if kind not in ("residual", "marginal", "additive", "additive-order"):
        raise ValueError(f"start_order's kind must be 'residual', 'marginal', 'additive' or 'additive-order', "
                         f"got {kind!r}")
    if kind in ("additive", "additive-order"):
        from .causal_additive import AdditiveOrderPosterior

        rng = np.random.default_rng(seed)
        post = AdditiveOrderPosterior(X, rng=rng)
        order = post.sample_order(rng)
        return order, post.sample_parents(order, rng) if kind == "additive" else []
    order = residual_order(X, seed)
    extra = []
    if kind == "marginal":
        from .causal_order import OrderScorer, search_order

        scorer = OrderScorer(X01, weight_prior=weight_prior)
        order, _ = search_order(scorer, order)
        extra = [(k, i) for i, pa in scorer.best_parents(order) for k in pa]
    return order, extra


def _cores() -> int:
    from ._threads import available_cores

    return available_cores()


#: a chain-0 start that took at least this many seconds has the other chains' starts computed in a
#: pool of local processes (starting one costs about a second or two)
START_POOL_SECONDS = 1.0


def order_values(order, D: int) -> np.ndarray:
    """Order values (theta) of D observed units for a causal order (roots first): evenly spaced in
    [0.05, 0.95], the first root highest (parents sit above their children)."""
    theta = np.empty(D)
    theta[np.asarray(order, dtype=int)] = 0.95 - 0.9 * np.arange(D) / max(D - 1, 1)
    return theta


# ------------------------------------------------------------------ estimator
#: unit-map margin of causal discovery: 0.3, at which docs/results-causal.md was measured
CAUSAL_MARGIN = 0.3
#: chains of a causal run (`CausalDiscovery`, `chefs discover`, the full `chefs bench causal`): 16 since stop 44
#: (8 at stop 43, 4 at stops 41-42), each from its own residual order (chain c > 0 on a bootstrap resample); more
#: chains pooled assert fewer false relations at p >= 0.8 (with the weights' scale sampled, 16 put the development
#: SEMs' top bin within 0.1 of its mean), while the middle bins stay as miscalibrated (docs/derivations.md 3.8,
#: "Eight chains" and "Sixteen chains")
CAUSAL_CHAINS = 16
#: expected hidden units of the residual start (``init_hidden``; the density estimator's is 10, which
#: ``start="prior"`` keeps): 2 since stop 41, fewer spurious common causes; docs/derivations.md 3.8
CAUSAL_INIT_HIDDEN = 2.0
#: power of the observed units' likelihood in causal discovery (docs/derivations.md 3.19): 1, the posterior itself.
#: ``likelihood_power=0.1`` (a power posterior) passed its rule at stop 42 (pooled p >= 0.8 true 56 % -> 66 % on the
#: development SEMs) but removes the latent common causes altogether, so it is an option, not the default
CAUSAL_LIKELIHOOD_POWER = 1.0
#: the edge weights' prior in causal discovery: their precision 1/v ~ Gamma(1, 1), Gibbs-sampled (003 section 3.4's
#: hyperprior, ``weight_prior``) since stop 44, so that the data set the weights' scale: a hidden mediator as steep
#: as a sigmoid mechanism needs weights far beyond N(0, 1) on the mapped scale; fewer sure but false relations on the
#: development SEMs (docs/derivations.md 3.8, "A sampled weight scale"). None: W ~ N(0, 1) fixed (stops 26-43)
CAUSAL_WEIGHT_PRIOR = (1.0, 1.0)
#: the ICP's hyperparameters in causal discovery: alpha and phi start at (or, when not sampled, stay at) these
#: values, and the names in CAUSAL_SAMPLE_HYPER are sampled under 002's hyperpriors (docs/derivations.md 3.8)
CAUSAL_ALPHA = 1.0
CAUSAL_PHI = 1.0
CAUSAL_SAMPLE_HYPER = ("alpha", "gamma", "phi")
#: the non-centred updates (docs/derivations.md 3.24) stay off in causal discovery: stop 47's registered rule found
#: them no help to the calibration (ECE 0.144 against 0.145), although density estimation has them on since stop 49
CAUSAL_NONCENTRED = False
#: the relocation move (``NLGBN.relocate_move``: an observed unit moved to a fresh order value with its edges to the
#: other observed units redrawn; docs/derivations.md 3.8, "Relocation", stop 53): an exact kernel, off by default:
#: stop 53's registered rule 14 found the calibration unchanged (ECE 0.099 against the default's 0.101) at 1.5-1.7 times the CPU
CAUSAL_RELOCATE = False
#: with pilots (``pilots`` > 1; one start by default) they are ranked by 32 importance draws per point, as before
#: stop 49 (the density default became 512 there; not measured for causal discovery)
CAUSAL_PILOT_DRAWS = 32


class CausalDiscovery(BeliefNetwork):
    """Posterior over causal structures with hidden common causes (issue 23).

    A :class:`chefs.density.BeliefNetwork` whose observed units' order values are
    free (U(0, 1) a priori under the ICP, eq. 9 of 002; moved by the order moves of
    eq. 16), so observed variables may be parents of each other and hidden units
    are latent causes or mediators. Every keyword of ``BeliefNetwork`` applies
    except ``inputs`` (conditioning on inputs fixes orders), ``rotate`` (always
    False: the variables themselves are the observed units) and ``tails`` (always
    False: each variable's scale stays affine); ``prior`` must be "icp" (the CIBP and ECIBP keep
    observed units at the bottom). Defaults here: sixteen chains
    (:data:`CAUSAL_CHAINS`; with ``weight_prior=None``, ``chains=8`` gives stop 43's runs, ``chains=4``
    stops 41-42's, and ``start="prior", chains=2`` stops 34-40's), about two hidden units in each
    residual start (``init_hidden``,
    :data:`CAUSAL_INIT_HIDDEN`; 10 with ``start="prior"``), one pilot per chain
    (``pilots=1``; the pilots' start heuristic of docs/derivations.md 3.7 is available but
    untested for this use), margin 0.3 (:data:`CAUSAL_MARGIN`, that of the documented
    results, whatever the belief network's default; a number, never ``"auto"``), and the
    weights' precision sampled, ``weight_prior=(1, 1)`` (:data:`CAUSAL_WEIGHT_PRIOR`; the
    density estimator keeps 002's fixed W ~ N(0, 1), which ``weight_prior=None`` restores here,
    as in stops 26-43's runs).
    ``likelihood_power`` below 1 (default 1, :data:`CAUSAL_LIKELIHOOD_POWER`) samples a power
    posterior, the observed units' likelihood raised to that power: at 0.1 it is less sure of
    the relations the misspecified mechanisms suggest, and it also loses every latent common
    cause (docs/derivations.md 3.19).

    ``start``: where each chain's observed orders begin (:data:`START`). "residual"
    (the default): at a causal order of the data by residual independence
    (:func:`residual_order`), chain 0 on the data and chain c > 0 on a bootstrap
    resample of the rows; "prior": at a random prior draw per chain (stops 34-40); "marginal": the
    residual order improved by hill climbing on the order score of :mod:`chefs.causal_order` (the model's own
    marginal likelihood with every unit observed, on the same rows), with each observed unit's best parent set
    (at most three) added to the start as edges (a few seconds more per chain for ten columns); "additive": an
    order and parent sets (at most three parents) drawn exactly from the posterior of an additive-noise model
    with spline mechanisms on the same rows (:mod:`chefs.causal_additive`), the parent sets added as edges (at
    most 14 columns; about a second per chain for ten); "additive-order": the same order draw without the parent
    sets as start edges, so that the chain's own moves build its edges and hidden causes (stop 56). The
    residual orders are computed one chain after the other before sampling starts: O(D^2)
    regressions on at most 5,000 rows each, seconds for ten columns, about half a minute per chain
    for thirty.
    The chains mix slowly over the observed orders, so the start shapes the answer:
    on development SEMs the ancestral F1 is about twice that of the prior start
    (docs/results-causal.md, stop 41). The orders are free and sampled from there on.
    ``relocate=True`` adds an exact move that lets one chain travel between orders: an observed
    unit moved to a fresh order value with its edges to the other observed units redrawn from
    their Gibbs conditionals (``NLGBN.relocate_move``; docs/derivations.md 3.8, "Relocation").
    Off by default (:data:`CAUSAL_RELOCATE`): it reorders the variables but rarely reverses a
    dependence, and left the calibration where it was (stop 53, rule 14).

    After :meth:`fit`, ``summary_`` holds a :class:`CausalSummary` and the run
    directory holds ``edges.csv``, ``causal.json`` (the confounder-count
    posterior and the chains' disagreement), ``causal-columns.json`` (the variables' names),
    ``causal.png`` (the picture) and ``summary.graphml`` (the graph thresholded at ``threshold``).
    With more than one chain the chains run in fresh processes: a script that calls :meth:`fit`
    needs the ``if __name__ == "__main__":`` guard (not in a notebook).
    See docs/derivations.md section 3.8 for what is sampled and what the
    summaries mean.
    """

    def __init__(self, *args, pilots: int = 1, threshold: float = 0.5, margin: float | None = None,
                 start: str = START, relocate: bool = CAUSAL_RELOCATE, **kw):
        from .models.nlgbn import check_flag

        self.relocate = check_flag("relocate", relocate)
        if not 0 <= threshold < 1:
            raise ValueError(f"threshold must be in [0, 1), got {threshold!r}")
        if start not in STARTS:
            raise ValueError(f"start must be one of {', '.join(STARTS)}, got {start!r}")
        self.start = start
        self.threshold = float(threshold)
        if kw.get("inputs"):
            raise ValueError("causal discovery has no input columns: every observed order is free")
        if kw.pop("rotate", False):
            raise ValueError("causal discovery needs the variables themselves as observed units: rotate must be False")
        if kw.pop("tails", False):
            raise ValueError("causal discovery keeps each variable's scale affine (its mechanisms act on it): "
                             "tails must be False")
        if kw.pop("pilot_structures", False):
            raise ValueError("causal discovery starts each chain from its own structure, and its pilots from the "
                             "chain's: pilot_structures must be False")
        if kw.get("prior", "icp") != "icp" or (args and args[0] != "icp"):
            raise ValueError("causal discovery needs the ICP prior (the CIBP/ECIBP keep observed units at the bottom)")
        kw.setdefault("chains", CAUSAL_CHAINS)
        if start != "prior":  # every data-ordered start (the prior start keeps the density estimator's 10)
            kw.setdefault("init_hidden", CAUSAL_INIT_HIDDEN)
        kw.setdefault("likelihood_power", CAUSAL_LIKELIHOOD_POWER)
        kw.setdefault("weight_prior", CAUSAL_WEIGHT_PRIOR)
        kw.setdefault("alpha", CAUSAL_ALPHA)
        kw.setdefault("phi", CAUSAL_PHI)
        kw.setdefault("sample_hyper", CAUSAL_SAMPLE_HYPER)
        kw.setdefault("noncentred", CAUSAL_NONCENTRED)
        kw.setdefault("pilot_draws", CAUSAL_PILOT_DRAWS)
        if margin is not None:
            from .density import check_margin

            margin = check_margin(margin, allow_auto=False)  # pinned per run, never chosen by the columns
        super().__init__(*args, pilots=pilots, margin=CAUSAL_MARGIN if margin is None else margin, rotate=False,
                         tails=False, **kw)

    def _observed_orders(self, D: int):
        return None  # free: U(0, 1) a priori, sampled

    def _initial_graphs(self, D: int):
        """One start per chain (:meth:`_initial_graph`: at a residual-independence order, chain c > 0
        on a bootstrap resample, or at its own prior draw with ``start="prior"``;
        docs/derivations.md 3.8): chains from one shared start agreed with each other because
        they kept its order, which made the chain comparison blind to that. With
        ``start="prior"``, chain 0's start is the shared start of runs before stop 34. None for
        an empty prior start (``start="prior"``, ``init_hidden=0``: each chain then draws its
        observed orders from its own stream)."""
        if resolve_start(self.start, D) == "prior":
            if not self.init_hidden:
                return None
            return [self._initial_graph(D, c) for c in range(int(self.chains))]  # checked by check_run_settings
        orders = self._start_orders(D)
        return [self._initial_graph(D, c, orders[c]) for c in range(int(self.chains))]

    def _start_rows(self, chain: int) -> np.ndarray:
        """The rows chain ``chain``'s start is ordered on: the data for chain 0, a bootstrap resample of
        them for chain c > 0 (the data again when the resample has a constant column)."""
        from .causal_additive import bootstrap_rows

        return bootstrap_rows(self._start_data, self.seed, chain)

    def _start_task(self, chain: int) -> tuple:
        """The arguments of chain ``chain``'s :func:`start_order`."""
        X = self._start_rows(chain)
        start = resolve_start(self.start, X.shape[1])
        marginal = start == "marginal"
        return (X, [self.seed, 7919, chain, 2], start, self.map_.forward(X) if marginal else None,
                self.weight_prior)

    def _start_orders(self, D: int) -> list:
        """Each chain's :func:`start_order` (``start="residual"``, ``"marginal"`` or ``"additive"``). Chain 0's is
        computed here; when it took at least :data:`START_POOL_SECONDS` and there are more chains and
        cores, the others are computed in a pool of local processes (about half a minute per chain at
        30 columns, 2-5 CPU seconds at 10). Each chain's order depends only on its rows and its own
        seed, so the pool changes where they are computed, not what they are."""
        import sys
        import time

        chains = int(self.chains)
        tasks = [self._start_task(c) for c in range(chains)]
        loud = D >= 15 and self.progress is not False
        if loud:
            print(f"chain 0: ordering {D} variables by residual independence (the start) ...", file=sys.stderr,
                  flush=True)
        import sklearn.linear_model  # noqa: F401  (imported before the clock starts: chain 0's time is its work)
        import sklearn.preprocessing  # noqa: F401

        t0 = time.perf_counter()
        out = [start_order(*tasks[0])]
        workers = min(chains - 1, _cores())
        executor = None
        # (not when the chains run in this process or on a cluster: a script run that way may lack the
        # `if __name__ == "__main__":` guard that local processes need)
        local = self.scheduler is None and not callable(self.progress)
        if local and workers >= 2 and time.perf_counter() - t0 >= START_POOL_SECONDS:
            from .mcmc.run import make_executor

            executor, _ = make_executor(workers)  # None in a daemonic process (a Dask worker's)
        self.start_pool_ = 0
        if executor is None:
            for c in range(1, chains):
                if loud:
                    print(f"chain {c}: ordering {D} variables by residual independence (the start) ...",
                          file=sys.stderr, flush=True)
                out.append(start_order(*tasks[c]))
            return out
        try:
            if loud:
                print(f"chains 1-{chains - 1}: ordering {D} variables by residual independence (the starts) in "
                      f"{workers} processes ...", file=sys.stderr, flush=True)
            out += list(executor.map(start_order, *zip(*tasks[1:])))
        except BaseException:  # Ctrl-C or a failed start: the orders not begun are cancelled
            executor.shutdown(wait=False, cancel_futures=True)
            raise
        executor.shutdown(wait=True)
        self.start_pool_ = workers  # (read by benchmarks/causal_starts.py)
        return out

    def _initial_graph(self, D: int, chain: int = 0, start=None):
        """``start="prior"``: the prior draw of :class:`BeliefNetwork` (observed units at random orders).
        ``start="residual"``: the same recipe (the ICP with gamma set by ``init_hidden``, every hidden
        unit connected to the data), drawn with the observed units at the order values of
        :func:`residual_order` (:func:`order_values`), computed on the data for chain 0 and on a
        bootstrap resample of the rows for chain c > 0, so that chains disagree where the ordering
        does. Only the start: the drawn DAG's observed orders are set free (the ICP sampler
        marks orders it was given as fixed), so the order moves sample them from there on.
        With ``init_hidden=0`` the start is the observed units alone at those orders."""
        if resolve_start(self.start, D) == "prior":
            return super()._initial_graph(D, chain)
        from .graph import DAG

        if start is None:  # (the order of _start_orders, computed here)
            start = start_order(*self._start_task(chain))
        order, extra = start
        theta = order_values(order, D)
        if not self.init_hidden:
            g = DAG(theta, np.ones(D, dtype=bool))
        else:
            g = super()._initial_graph(D, chain, observed_order=theta.tolist())
        if not extra:
            return DAG(g.theta, g.observed, g.parents, g.children)  # every order free (fixed=None)
        node = np.flatnonzero(g.observed)  # data column d is the d-th observed node
        if not np.allclose(g.theta[node], theta):
            raise RuntimeError("the start's observed units are not at the order values they were drawn at")
        have = set(zip(g.parents.tolist(), g.children.tolist()))
        add = [(int(node[k]), int(node[i])) for k, i in extra if (int(node[k]), int(node[i])) not in have]
        parents = np.r_[g.parents, np.array([a for a, _ in add], dtype=np.int64)]
        children = np.r_[g.children, np.array([b for _, b in add], dtype=np.int64)]
        return DAG(g.theta, g.observed, parents, children)

    def _write_run_files(self, run) -> None:
        # before sampling, so that an interrupted run is known as a causal one to `chefs resume`
        # the start the run used (fit's resolution of "auto")
        (Path(run) / COLUMNS_FILE).write_text(json.dumps({"names": self.names_, "start": self.start_,
                                                          "init_hidden": self.init_hidden}))

    def fit(self, X, names=None) -> "CausalDiscovery":
        """Sample the posterior and write the summaries. ``names``: the columns' names
        (default: a DataFrame's columns, else "0", "1", ...)."""
        if names is None and hasattr(X, "columns"):
            names = [str(c) for c in X.columns]
        X, names = check_causal_data(X, names)
        from .causal_additive import ADDITIVE_MAX_COLUMNS

        self.start_ = resolve_start(self.start, X.shape[1])  # the start used (what the run's files record)
        if self.start in ("additive", "additive-order") and X.shape[1] > ADDITIVE_MAX_COLUMNS:
            raise ValueError(f"start={self.start!r} takes at most {ADDITIVE_MAX_COLUMNS} columns (its exact sum over "
                             f"orders holds D x 2^(D-1) terms), got {X.shape[1]}: use start='residual'")
        if self.start == "marginal" and X.shape[1] > MARGINAL_MAX_COLUMNS:
            raise ValueError(f"start='marginal' takes at most {MARGINAL_MAX_COLUMNS} columns (its order search grows as "
                             f"the fourth power of the columns), got {X.shape[1]}: use start='residual'")
        self.names_ = names
        self._start_data = X  # read by _initial_graph (the residual start) while the run is created
        try:
            super().fit(X)
        finally:
            del self._start_data
        self._summarise()
        return self

    def _summarise(self, write: bool = True) -> None:
        """Summaries of the kept samples; with ``write``, also written into the run directory (derived
        files, rewritten in place): edges.csv, causal.json, causal.png and summary.graphml
        (thresholded at ``self.threshold``)."""
        # sample_chains_ is absent on estimators pickled before stop 34: one group then
        self.summary_, per_chain = CausalSummary.from_samples(
            self.samples_, self.names_, getattr(self, "sample_chains_", [0] * len(self.samples_)))
        self.disagreement_ = {}
        if len(per_chain) > 1:
            self.summary_.se, self.summary_.spread = chain_errors(per_chain)
            self.disagreement_ = chain_disagreement(per_chain, self.summary_.spread)
        if not write:
            return
        run = Path(self.run_dir_)
        self.summary_.write_csv(run / EDGES_FILE)
        # null unless two or more chains' samples were summarised (a run of one chain)
        (run / SUMMARY_FILE).write_text(json.dumps({**self.summary_.to_dict(), "threshold": self.threshold,
                                                    "chain_disagreement": self.disagreement_ or None}, indent=1))
        self.summary_.write_graphml(run / GRAPHML_FILE, self.threshold)
        self.summary_.plot(run / PICTURE_FILE)

    @classmethod
    def load(cls, run_dir, chains=None) -> "CausalDiscovery":
        """A fitted estimator from a `chefs discover` run directory. ``chains``: the chains whose kept
        samples to summarise (default all, pooled). Reading all chains rewrites the run's summary files
        (edges.csv, causal.json, causal.png, summary.graphml) from them, as `chefs resume` does; reading
        some chains leaves those files alone, so that they keep describing the whole run."""
        from .mcmc.run import load_spec

        spec = load_spec(run_dir)
        if spec.get("config", {}).get("observed_order", 0.0) is not None or \
                not (Path(run_dir) / COLUMNS_FILE).exists():
            raise ValueError(f"{run_dir} is not a causal-discovery run (`chefs discover` writes one)")
        net = super().load(run_dir, chains)
        columns = json.loads((Path(run_dir) / COLUMNS_FILE).read_text())
        net.names_ = columns["names"]
        # the start the run used (runs before stop 41 started at prior draws)
        net.start = columns.get("start", "prior")
        net.start_ = net.start
        net.init_hidden = float(columns.get("init_hidden", 10.0))  # what the run's starts were drawn with
        # the run's files summarise all its chains: a read of some chains (chains=[i]) leaves them as they are
        net._summarise(write=chains is None)
        return net

    # --------------------------------------------------------------- outputs
    @property
    def edges_(self) -> list[dict]:
        """The rows of ``edges.csv``."""
        return self.summary_.rows()

    def plot(self, path=None, **kw):
        return self.summary_.plot(path, **kw)

    def write_graphml(self, path, threshold: float = 0.5) -> None:
        self.summary_.write_graphml(path, threshold)


def is_causal_run(run_dir) -> bool:
    """Whether ``run_dir`` was written by :class:`CausalDiscovery` (``chefs discover``)."""
    return (Path(run_dir) / COLUMNS_FILE).is_file() and (Path(run_dir) / "config.json").is_file()


__all__ = ["CausalDiscovery", "CausalSummary", "relations", "check_causal_data", "MAX_COLUMNS", "CAUSAL_CHAINS",
           "CAUSAL_INIT_HIDDEN", "CAUSAL_LIKELIHOOD_POWER", "CAUSAL_WEIGHT_PRIOR", "CAUSAL_ALPHA", "CAUSAL_PHI",
           "CAUSAL_SAMPLE_HYPER", "is_causal_run",
           "chain_disagreement", "residual_order",
           "normalised_hsic", "order_values", "START", "STARTS"]
