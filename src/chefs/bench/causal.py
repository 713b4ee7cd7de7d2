"""``chefs bench causal``: the ICP causal discovery (:mod:`chefs.causal`) against PC, FCI, GES
(causal-learn) and DirectLiNGAM, RCD, RESIT (lingam) on synthetic nonlinear structural equation
models with hidden confounders (issue 23).

Generator (:func:`make_sem`, every draw from ``numpy.random.default_rng(seed)``):

* D observed variables in a random causal order; each earlier variable is a parent of a later one
  with probability ``min(1, 2 / (D - 1))`` (about two parents per variable), at most 3 parents;
* H hidden confounders, each a root N(0, 1) variable with two distinct observed children drawn at
  random (so every confounder is a common cause of a pair);
* mechanisms: ``x_j = sum_k w_kj sigmoid(s_kj z_k + c_kj) + e_j`` with ``z_k`` the parent standardised,
  ``w ~ +-U(1, 2)``, ``s ~ U(1, 3)``, ``c ~ U(-1, 1)``, noise ``e_j ~ N(0, sd_j^2)``, ``sd_j ~ U(0.2, 0.5)``
  (times the spread of the parents' sum, so that no variable is nearly deterministic);
  a variable without parents is N(0, 1).

Truth on the observed variables (the latent projection: the confounders are roots, so directed
edges are the observed DAG's edges): directed edges, ancestral relations, and confounded pairs.

Comparison rules (``docs/derivations.md`` 3.8 and ``causal.md``): each unordered pair of observed
variables gets one mark: none, i -> j, j -> i, i <-> j (confounded without a direct edge; a pair
with both a direct edge and a confounder counts as the direct edge) or "undirected". SHD = number
of pairs whose estimated mark differs from the true one. ICP: i -> j when p_edge > 0.5, else <->
when p_confounded > 0.5, else none. PC, GES (CPDAGs): directed edges as such, undirected edges as
"undirected" (always wrong: no partial credit). FCI (PAG): i -> j and i o-> j read as i -> j,
i <-> j as <->, o-o and --- as "undirected". DirectLiNGAM: B[j, i] != 0 is i -> j. RCD: NaN entries
are <->, others as DirectLiNGAM. RESIT (lingam's, with the random-forest regressor of lingam's
example, ``max_depth=4``; added at stop 41, since the ICP's chains start at RESIT's ordering): as
DirectLiNGAM. additive (stop 55; :func:`chefs.causal_additive.bagged_relations` with the SEM's seed, the surrogate
of the ICP's ``start="additive"`` read by itself, no hidden causes): i -> j when its p_edge > 0.5, its ancestral
relations where its p_ancestor > 0.5, its p_edge as the AUROC's scores. Ancestral relations: ICP p_ancestor > 0.5; the others the
transitive closure of their directed edges (for FCI of its i -> j edges only; i o-> j does not
assert ancestry). AUROC: of p_edge (ICP) or the estimated directed adjacency (others; an undirected
edge scores 0.5 both ways; DirectLiNGAM and RCD ``|B|``) over ordered pairs against the true directed
edges. Calibration: the ICP's p_edge, p_ancestor and p_confounded against the truth, pooled over
pairs and seeds, in five bins of width 0.2, with counts.
"""

from __future__ import annotations

import csv
import json
import math
import os
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np

from .._json import json_default
from ..causal import CAUSAL_CHAINS, CAUSAL_WEIGHT_PRIOR
from ..graph import transitive_closure

PEERS = ("pc", "fci", "ges", "directlingam", "rcd", "resit")
#: "additive" (stop 55): the additive-noise surrogate of the ICP's ``start="additive"`` read by itself
#: (:func:`chefs.causal_additive.bagged_relations`; no package needed, no hidden causes)
METHODS = ("icp", "additive") + PEERS
BINS = np.linspace(0, 1, 6)

FULL = {"seeds": list(range(10)), "sweeps": 2000, "burn_in": 1000, "thin": 10, "chains": CAUSAL_CHAINS}
QUICK = {"seeds": [0, 1, 2], "sweeps": 300, "burn_in": 150, "thin": 5, "chains": 1}


def sem_settings(seed: int, quick: bool) -> tuple[int, int, int]:
    """(D, H, N) of benchmark seed ``seed``: D in 5..10, H in 0..3, N in 500..2000 (quick: D = 5,
    N = 500, H = seed % 3)."""
    if quick:
        return 5, seed % 3, 500
    r = np.random.default_rng([seed, 23])
    return int(r.integers(5, 11)), int(seed % 4), int(r.choice([500, 1000, 2000]))


@dataclass
class SEM:
    X: np.ndarray           # (N, D) observed data
    edges: np.ndarray       # (D, D) bool, true directed edges among observed
    ancestor: np.ndarray    # (D, D) bool
    confounded: np.ndarray  # (D, D) bool, symmetric
    seed: int
    num_hidden: int


def _sigmoid(x):
    return 1.0 / (1.0 + np.exp(-x))


def make_sem(seed: int, num_observed: int, num_hidden: int, num_samples: int) -> SEM:
    """A nonlinear SEM with sigmoid mechanisms and hidden root confounders (module docstring)."""
    if num_observed < 2 or num_hidden < 0 or num_samples < 10:
        raise ValueError("make_sem needs num_observed >= 2, num_hidden >= 0, num_samples >= 10")
    rng = np.random.default_rng(seed)
    D, H, N = int(num_observed), int(num_hidden), int(num_samples)
    order = rng.permutation(D)
    p = min(1.0, 2.0 / (D - 1))
    edges = np.zeros((D, D), bool)
    for b in range(1, D):
        j = order[b]
        cand = [order[a] for a in range(b) if rng.random() < p]
        if len(cand) > 3:
            cand = list(rng.choice(cand, 3, replace=False))
        for k in cand:
            edges[k, j] = True
    conf_children = [rng.choice(D, 2, replace=False) for _ in range(H)]
    Hval = rng.normal(size=(N, H))
    X = np.zeros((N, D))
    for j in order:
        parents = [("x", k) for k in np.flatnonzero(edges[:, j])] + [("h", h) for h in range(H)
                                                                       if j in conf_children[h]]
        if not parents:
            X[:, j] = rng.normal(size=N)
            continue
        total = np.zeros(N)
        for kind, k in parents:
            z = X[:, k] if kind == "x" else Hval[:, k]
            z = (z - z.mean()) / max(z.std(), 1e-12)
            w = rng.choice([-1.0, 1.0]) * rng.uniform(1, 2)
            total += w * _sigmoid(rng.uniform(1, 3) * z + rng.uniform(-1, 1))
        sd = rng.uniform(0.2, 0.5) * max(total.std(), 0.1)
        X[:, j] = total + sd * rng.normal(size=N)
    anc = transitive_closure(edges)
    conf = np.zeros((D, D), bool)
    for a, b in conf_children:
        conf[a, b] = conf[b, a] = True
    return SEM(X, edges, anc, conf, seed, H)


# ---------------------------------------------------------------- real data: Sachs et al. (2005)
SACHS_ROWS = 853  # the first condition (anti-CD3/CD28), the observational data of the issue


def sachs_dir() -> Path | None:
    """Where the ``cdt`` package (CausalDiscoveryToolbox, PyPI) ships the Sachs et al. (2005) flow
    cytometry data and its reference graph (``cdt/data/resources/cyto_full_data.csv``,
    ``cyto_full_target.csv``), found without importing ``cdt`` (whose import pulls in more than this
    needs); None when it is not installed. Nothing is downloaded."""
    import importlib.util

    try:
        spec = importlib.util.find_spec("cdt")
    except (ImportError, ValueError):
        return None
    if spec is None or not spec.submodule_search_locations:
        return None
    d = Path(list(spec.submodule_search_locations)[0]) / "data" / "resources"
    return d if (d / "cyto_full_data.csv").is_file() and (d / "cyto_full_target.csv").is_file() else None


@dataclass
class RealData:
    X: np.ndarray
    names: list
    edges: np.ndarray
    ancestor: np.ndarray


def load_sachs(directory=None) -> RealData:
    """The first 853 rows of cdt's ``cyto_full_data.csv`` (7,466 rows = the nine conditions of Sachs
    et al. in the order of their files, 853 + 902 + 911 + 723 + 810 + 799 + 848 + 913 + 707; the first
    is anti-CD3/CD28, the general stimulation without an intervention on a measured protein), log
    transformed (every value is >= 1), and cdt's 18-edge reference graph (``cyto_full_target.csv``)."""
    d = Path(directory) if directory is not None else sachs_dir()
    if d is None:
        raise ValueError("the Sachs data need the cdt package, which ships them: pip install cdt")
    with open(d / "cyto_full_data.csv", newline="", encoding="utf-8") as fh:
        rows = list(csv.reader(fh))
    names = [n.strip() for n in rows[0]]
    X = np.log(np.array(rows[1: 1 + SACHS_ROWS], float))
    idx = {n: j for j, n in enumerate(names)}
    edges = np.zeros((len(names),) * 2, bool)
    with open(d / "cyto_full_target.csv", newline="", encoding="utf-8") as fh:
        for cause, effect in list(csv.reader(fh))[1:]:
            edges[idx[cause.strip()], idx[effect.strip()]] = True
    return RealData(X, names, edges, transitive_closure(edges))


# ---------------------------------------------------------------- marks and metrics
NONE, FWD, BWD, BI, UND = "none", "->", "<-", "<->", "---"


def true_marks(sem: SEM) -> dict:
    D = sem.edges.shape[0]
    out = {}
    for i in range(D):
        for j in range(i + 1, D):
            out[(i, j)] = (FWD if sem.edges[i, j] else BWD if sem.edges[j, i]
                           else BI if sem.confounded[i, j] else NONE)
    return out


def shd(est: dict, truth: dict) -> int:
    return int(sum(est[k] != truth[k] for k in truth))


def precision_recall_f1(est: np.ndarray, truth: np.ndarray) -> tuple[float, float, float]:
    off = ~np.eye(truth.shape[0], dtype=bool)
    tp = float(np.sum(est & truth & off))
    fp = float(np.sum(est & ~truth & off))
    fn = float(np.sum(~est & truth & off))
    prec = tp / (tp + fp) if tp + fp else (1.0 if fn == 0 else 0.0)
    rec = tp / (tp + fn) if tp + fn else 1.0
    f1 = 2 * prec * rec / (prec + rec) if prec + rec else 0.0
    return prec, rec, f1


def auroc(scores: np.ndarray, truth: np.ndarray) -> float:
    """Area under the ROC curve over ordered pairs (ties count one half); NaN when the truth
    has no positive or no negative pair."""
    off = ~np.eye(truth.shape[0], dtype=bool)
    s, t = scores[off], truth[off]
    pos, neg = s[t], s[~t]
    if pos.size == 0 or neg.size == 0:
        return float("nan")
    gt = (pos[:, None] > neg[None, :]).sum() + 0.5 * (pos[:, None] == neg[None, :]).sum()
    return float(gt / (pos.size * neg.size))


@dataclass
class Estimate:
    marks: dict
    ancestor: np.ndarray
    scores: np.ndarray
    probs: dict | None = None  # ICP only: p_edge, p_ancestor, p_confounded
    spread: dict | None = None  # ICP with two or more chains: the chains' largest difference, by the same keys


def _marks_from(directed: np.ndarray, bidirected: np.ndarray | None = None,
                undirected: np.ndarray | None = None) -> dict:
    D = directed.shape[0]
    out = {}
    for i in range(D):
        for j in range(i + 1, D):
            if directed[i, j] and not directed[j, i]:
                out[(i, j)] = FWD
            elif directed[j, i] and not directed[i, j]:
                out[(i, j)] = BWD
            elif bidirected is not None and bidirected[i, j]:
                out[(i, j)] = BI
            elif (undirected is not None and undirected[i, j]) or (directed[i, j] and directed[j, i]):
                out[(i, j)] = UND
            else:
                out[(i, j)] = NONE
    return out


# ------------------------------------------------------------------------ methods
def _cpu_seconds() -> float:
    """CPU seconds of this process and of its finished child processes (the ICP's chains run
    in a local process pool when there are two or more; the pool's workers are reaped when the
    fit returns, so their time is counted by then)."""
    import resource

    ch = resource.getrusage(resource.RUSAGE_CHILDREN)
    return time.process_time() + ch.ru_utime + ch.ru_stime


def run_icp(sem: SEM, settings: dict, run_dir, seed: int, names=None) -> Estimate:
    from ..causal import CausalDiscovery

    cd = CausalDiscovery(sweeps=settings["sweeps"], burn_in=settings["burn_in"], thin=settings["thin"],
                         chains=settings["chains"], seed=seed, out=run_dir, force=True, progress=False,
                         start=settings["start"], margin=settings.get("margin"),
                         likelihood_power=settings.get("likelihood_power", 1.0),
                         weight_prior=settings.get("weight_prior", CAUSAL_WEIGHT_PRIOR),
                         noncentred=settings.get("noncentred", False),
                         relocate=settings.get("relocate", False))
    cd.fit(sem.X, names=names)
    return icp_estimate(cd.summary_)


def icp_estimate(s) -> Estimate:
    """The benchmark's reading of a :class:`chefs.causal.CausalSummary`: a directed mark where
    ``p_edge`` > 0.5 (both directions cannot be, their paths exclude each other), else a
    bidirected one where ``p_confounded`` > 0.5; ancestral relations where ``p_ancestor`` > 0.5;
    ``p_edge`` as the AUROC's scores."""
    return Estimate(_marks_from(s.p_edge > 0.5, s.p_confounded > 0.5), s.p_ancestor > 0.5, s.p_edge,
                    {"p_edge": s.p_edge, "p_ancestor": s.p_ancestor, "p_confounded": s.p_confounded},
                    None if s.spread is None else dict(s.spread))


def metrics(est: Estimate, sem: SEM, truth: dict | None = None) -> dict:
    """An estimate's scores against the SEM: SHD of the marks (``truth``: :func:`true_marks`, computed
    when None), ancestral precision, recall and F1, and the AUROC of its scores for the edges."""
    p, r, f = precision_recall_f1(est.ancestor, sem.ancestor)
    return {"shd": shd(est.marks, true_marks(sem) if truth is None else truth), "anc_precision": p,
            "anc_recall": r, "anc_f1": f, "auroc": auroc(est.scores, sem.edges)}


def calibration_pairs(probs: dict, sem: SEM, keys=("p_edge", "p_ancestor", "p_confounded")) -> list[tuple]:
    """``(probability, value, holds)`` for each of ``keys`` and each ordered pair of the SEM's observed
    variables: the input of :func:`calibration_table`. ``probs``: arrays by name (an ICP estimate's ``probs``)."""
    off = ~np.eye(sem.edges.shape[0], dtype=bool)
    truth = {"p_edge": sem.edges, "p_ancestor": sem.ancestor, "p_confounded": sem.confounded}
    return [(key, float(q), bool(t)) for key in keys for q, t in zip(probs[key][off], truth[key][off])]


def agreement_pairs(probs: dict, spread: dict, sem: SEM) -> list[tuple]:
    """``(probability, value, holds, chains agree)`` for every key and ordered pair, as
    :func:`calibration_pairs`, with whether every two chains' probabilities are within
    :data:`chefs.causal.DISAGREE` (0.2) of each other (``spread``: the chains' largest differences), the
    rule of ``causal.json``'s ``chain_disagreement``."""
    from ..causal import DISAGREE

    off = ~np.eye(sem.edges.shape[0], dtype=bool)
    return [(key, q, t, bool(g <= DISAGREE)) for (key, q, t), g in
            zip(calibration_pairs(probs, sem), [float(g) for key in ("p_edge", "p_ancestor", "p_confounded")
                                                for g in np.asarray(spread[key])[off]])]


def _cl_graph(G) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray]:
    """causal-learn endpoint matrix (G[i, j] = mark at i of the edge i-j: -1 tail, 1 arrow, 2 circle)
    -> (directed i -> j incl. i o-> j, definite i -> j, bidirected, undirected)."""
    M = np.asarray(G, int)
    D = M.shape[0]
    directed = np.zeros((D, D), bool)
    definite = np.zeros((D, D), bool)
    bi = np.zeros((D, D), bool)
    und = np.zeros((D, D), bool)
    for i in range(D):
        for j in range(D):
            if i == j or M[i, j] == 0:
                continue
            a, b = M[i, j], M[j, i]  # mark at i, mark at j
            if b == 1 and a == -1:
                directed[i, j] = definite[i, j] = True
            elif b == 1 and a == 2:
                directed[i, j] = True
            elif a == 1 and b == 1:
                bi[i, j] = True
            elif a in (-1, 2) and b in (-1, 2):
                und[i, j] = True
    return directed, definite, bi, und


def run_peer(name: str, X: np.ndarray, seed: int = 0) -> Estimate:
    """A method other than the ICP on the data ``X``; ``seed``: the random streams of ``additive`` (the SEM's seed,
    as the ICP's run seed; the other methods are deterministic)."""
    if name == "additive":
        from ..causal_additive import bagged_relations

        p_edge, p_ancestor = bagged_relations(X, seed=seed)
        return Estimate(_marks_from(p_edge > 0.5), p_ancestor > 0.5, p_edge)
    Xs = (X - X.mean(axis=0)) / X.std(axis=0)
    if name in ("pc", "fci", "ges"):
        if name == "pc":
            from causallearn.search.ConstraintBased.PC import pc

            G = pc(Xs, 0.05, "fisherz", show_progress=False).G.graph
        elif name == "fci":
            from causallearn.search.ConstraintBased.FCI import fci

            G = fci(Xs, "fisherz", 0.05, show_progress=False, verbose=False)[0].graph
        else:
            from causallearn.search.ScoreBased.GES import ges

            G = ges(Xs, "local_score_BIC")["G"].graph
        directed, definite, bi, und = _cl_graph(G)
        scores = directed.astype(float) + 0.5 * und
        return Estimate(_marks_from(directed, bi, und), transitive_closure(definite), scores)
    import lingam

    if name == "resit":  # the regressor of lingam's own RESIT example
        from sklearn.ensemble import RandomForestRegressor

        model = lingam.RESIT(regressor=RandomForestRegressor(max_depth=4, random_state=0), random_state=0)
    else:
        model = lingam.DirectLiNGAM() if name == "directlingam" else lingam.RCD()
    model.fit(Xs)
    B = np.asarray(model.adjacency_matrix_, float)  # B[j, i]: i -> j
    bi = np.isnan(B) | np.isnan(B.T)
    Bz = np.nan_to_num(B)
    directed = (Bz != 0).T
    return Estimate(_marks_from(directed, bi), transitive_closure(directed), np.abs(Bz).T)


def peer_available(name: str) -> str | None:
    """None when the peer's package imports, else the reason."""
    if name == "additive":
        return None
    mod = "causallearn" if name in ("pc", "fci", "ges") else "lingam"
    try:
        __import__(mod)
    except ImportError:
        pkg = "causal-learn" if mod == "causallearn" else "lingam"
        return f"{name}: package {pkg} is not installed (pip install 'indian-chefs[causal-bench]')"
    return None


# ------------------------------------------------------------------------ the run
COLUMNS = ("seed", "num_observed", "num_hidden", "num_samples", "method", "shd", "num_pairs", "anc_precision",
           "anc_recall", "anc_f1", "auroc", "seconds", "note")


def run_benchmark(out, quick: bool = False, methods=METHODS, seeds=None, force: bool = False,
                  progress=print, real: bool = True, start: str | None = None, chains: int | None = None,
                  margin: float | None = None, likelihood_power: float | None = None,
                  weight_prior="default", noncentred: bool | None = None,
                  relocate: bool | None = None, resume: bool = False) -> list[dict]:
    """Run every (seed, method) cell, then (``real``) every method on the Sachs data when the ``cdt``
    package that ships them is installed; write ``causal.csv``, ``causal.md`` and pictures into ``out``.
    ``start``: where the ICP's chains start (:class:`chefs.causal.CausalDiscovery`; None: its default).
    ``chains``: the ICP's chains (None: :data:`chefs.causal.CAUSAL_CHAINS` in the full run, 1 in the quick
    one). ``margin``: the ICP's unit-map margin (None: :data:`chefs.causal.CAUSAL_MARGIN`). ``likelihood_power``: the ICP's
    (None: :class:`chefs.causal.CausalDiscovery`'s default, 1). ``weight_prior``: the ICP's prior on the weights'
    precision, (shape, rate), or None for W ~ N(0, 1) fixed; unlike the other settings, None here is not the
    default but "off", as in :class:`chefs.causal.CausalDiscovery` ("default", the default:
    :data:`chefs.causal.CAUSAL_WEIGHT_PRIOR`). ``noncentred``: the ICP with the non-centred updates of each hidden
    unit's precision and incoming scale (docs/derivations.md 3.24; None: :data:`chefs.causal.CAUSAL_NONCENTRED`,
    off). ``relocate``: the ICP with the relocation move (docs/derivations.md 3.8; None:
    :data:`chefs.causal.CAUSAL_RELOCATE`, off).

    Each finished cell is appended to ``OUT/causal-cells.jsonl`` (:data:`CELLS_FILE`: its row, and for the
    ICP its posterior probabilities) as it finishes, so that nothing finished is lost when the run is
    interrupted: ``resume`` keeps the cells written there with the same settings and runs only the others
    (the cells are deterministic, so the finished tables equal an uninterrupted run's). Without ``resume``
    or ``force`` an earlier run's cells are refused, not overwritten; ``force`` starts afresh."""
    from ..causal import CAUSAL_LIKELIHOOD_POWER, CAUSAL_MARGIN, CAUSAL_NONCENTRED, CAUSAL_RELOCATE, START, STARTS
    from ..density import check_margin, check_weight_prior
    from ..models.nlgbn import check_flag, check_likelihood_power, check_noncentred

    start = START if start is None else start
    out = Path(out)
    if out.exists() and not out.is_dir():
        raise NotADirectoryError(f"--out takes a directory; {out} is a file")
    if force and resume:
        raise ValueError("--force starts afresh and --resume keeps the finished cells: give one of them")
    cells_path = out / CELLS_FILE
    if resume and not cells_path.exists():
        raise ValueError(f"nothing to resume in {out} (no {CELLS_FILE}): run the command without --resume")
    if (out / "causal.csv").exists() and not force and not resume:
        raise FileExistsError(f"{out / 'causal.csv'} exists; use --force to replace it")
    if cells_path.exists() and not force and not resume:
        raise FileExistsError(f"{cells_path} holds the cells of an earlier run that did not finish: --resume "
                              "finishes it, --force starts afresh")
    bad = [m for m in methods if m not in METHODS]
    if bad or not methods:
        raise ValueError(f"unknown method(s) {bad}; choose from {', '.join(METHODS)}")
    if start not in STARTS:
        raise ValueError(f"start must be one of {', '.join(STARTS)}, got {start!r}")
    if chains is not None and (isinstance(chains, bool) or int(chains) != chains or chains < 1):
        raise ValueError(f"chains must be a positive integer, got {chains!r}")
    margin = CAUSAL_MARGIN if margin is None else check_margin(margin, allow_auto=False)
    power = check_likelihood_power(CAUSAL_LIKELIHOOD_POWER if likelihood_power is None else likelihood_power)
    if isinstance(weight_prior, str) and weight_prior == "default":
        weight_prior = CAUSAL_WEIGHT_PRIOR
    weight_prior = check_weight_prior(weight_prior)
    weight_prior = None if weight_prior is None else tuple(weight_prior)
    settings = dict(QUICK if quick else FULL, start=start, margin=margin, likelihood_power=power,
                    weight_prior=weight_prior,
                    noncentred=check_noncentred(CAUSAL_NONCENTRED if noncentred is None else noncentred),
                    relocate=check_flag("relocate", CAUSAL_RELOCATE if relocate is None else relocate))
    if chains is not None:
        settings["chains"] = int(chains)
    if seeds is not None:
        settings["seeds"] = list(seeds)
    label = _cells_label(settings, quick)
    kept = _cells_to_resume(cells_path, label) if resume else {}
    out.mkdir(parents=True, exist_ok=True)
    if force and cells_path.exists():
        cells_path.unlink()
    record = _CellWriter(cells_path, label)
    if kept:
        progress(f"resuming {out}: {len(kept)} finished cell(s) kept from {CELLS_FILE}")
    skipped = {}
    for m in methods:
        if m != "icp":
            why = peer_available(m)
            if why:
                skipped[m] = why
                progress(f"skipping {why}")
    rows, calib, agree = [], [], []
    for seed in settings["seeds"]:
        D, H, N = sem_settings(seed, quick)
        sem = make_sem(seed, D, H, N)
        truth = true_marks(sem)
        _truth_picture(sem, out / f"truth-seed{seed}.png")
        for m in methods:
            if m in skipped:
                continue
            if (seed, m) in kept:
                row, probs, spread = kept[(seed, m)]
                rows.append(row)
                if probs is not None:
                    calib.extend(calibration_pairs(probs, sem))
                if spread is not None:
                    agree.extend(agreement_pairs(probs, spread, sem))
                continue
            t0 = _cpu_seconds()
            note = ""
            try:
                if m == "icp":
                    est = run_icp(sem, settings, out / "runs" / f"seed{seed}", seed)
                else:
                    est = run_peer(m, sem.X, seed)
            except (ValueError, np.linalg.LinAlgError) as err:  # a peer failing on one data set
                rows.append({"seed": seed, "num_observed": D, "num_hidden": H, "num_samples": N, "method": m,
                             "shd": "", "num_pairs": len(truth), "anc_precision": "", "anc_recall": "", "anc_f1": "",
                             "auroc": "", "seconds": round(_cpu_seconds() - t0, 2),
                             "note": f"failed: {' '.join(str(err).split())[:120]}"})
                record(rows[-1], None)
                continue
            secs = _cpu_seconds() - t0
            sc = metrics(est, sem, truth)
            rows.append({"seed": seed, "num_observed": D, "num_hidden": H, "num_samples": N, "method": m,
                         "shd": sc["shd"], "num_pairs": len(truth),
                         **{k: round(sc[k], 4) for k in ("anc_precision", "anc_recall", "anc_f1", "auroc")},
                         "seconds": round(secs, 2), "note": note})
            record(rows[-1], est.probs, est.spread)
            if est.probs is not None:
                calib.extend(calibration_pairs(est.probs, sem))
            if est.spread is not None:
                agree.extend(agreement_pairs(est.probs, est.spread, sem))
            progress(f"seed {seed} (D={D}, H={H}, N={N}) {m}: SHD {sc['shd']}, ancestral F1 {sc['anc_f1']:.3f}, "
                     f"{secs:.1f} CPU s")
    if real:
        d = sachs_dir()
        if d is None:
            skipped["sachs"] = "sachs: the real data need the cdt package, which ships them (pip install cdt)"
            progress(f"skipping {skipped['sachs']}")
        else:
            rows.extend(_run_real(load_sachs(d), methods, skipped, settings, out, progress, kept, record))
    _write(out, rows, calib, skipped, quick, settings, agree)
    return rows


def _run_real(data: RealData, methods, skipped, settings, out, progress, kept=None, record=None) -> list[dict]:
    """Every method on the Sachs data against the reference graph (no hidden confounders known:
    the true marks are its directed edges only). ``kept``: finished cells of an interrupted run, by
    ``("sachs", method)``; ``record``: called with each new cell's row (:class:`_CellWriter`)."""
    D = len(data.names)
    sem = SEM(data.X, data.edges, data.ancestor, np.zeros((D, D), bool), -1, 0)
    truth = true_marks(sem)
    rows = []
    kept = kept or {}
    for m in methods:
        if m in skipped:
            continue
        if ("sachs", m) in kept:
            rows.append(kept[("sachs", m)][0])
            continue
        t0 = _cpu_seconds()
        try:
            est = (run_icp(sem, settings, out / "runs" / "sachs", 0, names=data.names) if m == "icp"
                   else run_peer(m, sem.X))
        except (ValueError, np.linalg.LinAlgError) as err:
            rows.append({"seed": "sachs", "num_observed": D, "num_hidden": "", "num_samples": sem.X.shape[0],
                         "method": m, "shd": "", "num_pairs": len(truth), "anc_precision": "", "anc_recall": "",
                         "anc_f1": "", "auroc": "", "seconds": round(_cpu_seconds() - t0, 2),
                         "note": f"failed: {' '.join(str(err).split())[:120]}"})
            if record is not None:
                record(rows[-1], None)
            continue
        secs = _cpu_seconds() - t0
        sc = metrics(est, sem, truth)
        rows.append({"seed": "sachs", "num_observed": D, "num_hidden": "", "num_samples": sem.X.shape[0], "method": m,
                     "shd": sc["shd"], "num_pairs": len(truth),
                     **{k: round(sc[k], 4) for k in ("anc_precision", "anc_recall", "anc_f1", "auroc")},
                     "seconds": round(secs, 2), "note": "Sachs et al. 2005, first 853 rows, log; cdt's reference graph"})
        if record is not None:
            record(rows[-1], None)
        progress(f"sachs {m}: SHD {sc['shd']}, ancestral F1 {sc['anc_f1']:.3f}, {secs:.1f} CPU s")
    return rows


#: the finished cells of a run, one JSON object a line, appended as they finish (``run_benchmark``'s ``resume``)
CELLS_FILE = "causal-cells.jsonl"
#: a row's numeric metrics: written as null when not finite, read back as NaN
METRIC_COLUMNS = ("anc_precision", "anc_recall", "anc_f1", "auroc", "seconds")


def _cells_label(settings: dict, quick: bool) -> dict:
    """What a kept cell must have been run with: every setting but the seeds (a JSON round trip, so that
    tuples compare equal to the lists read back)."""
    return json.loads(json.dumps({**{k: v for k, v in settings.items() if k != "seeds"}, "quick": bool(quick)}))


class _CellWriter:
    """Appends each finished cell to ``path`` as one line ``{"settings", "row", "probs", "spread"}`` (``probs``:
    the ICP's ``p_edge``, ``p_ancestor`` and ``p_confounded`` as nested lists, else null; ``spread``: the
    chains' largest differences, by the same keys, or null), flushed to disk, so
    that an interrupted run loses at most the cell it was running. Strict JSON: a metric that is not a
    finite number (an AUROC without positive pairs is NaN) is written as null and read back as NaN."""

    def __init__(self, path: Path, label: dict):
        self.path, self.label = Path(path), label

    def __call__(self, row: dict, probs, spread=None) -> None:
        row = {k: (None if isinstance(v, float) and not math.isfinite(v) else v) for k, v in row.items()}
        line = json.dumps({"settings": self.label, "row": row, "probs": probs, "spread": spread},
                          default=json_default, allow_nan=False)
        with open(self.path, "a", encoding="utf-8") as fh:
            fh.write(line + "\n")
            fh.flush()
            os.fsync(fh.fileno())


def _cells_to_resume(path: Path, label: dict) -> dict:
    """The finished cells in ``path`` by ``(seed, method)`` (seed an int, or "sachs"): ``(row, probs, spread)``,
    ``probs`` and ``spread`` as arrays or None. A last line cut short by a crash is left out (its cell runs again); cells
    written with other settings, or a line that is not a cell, are refused with a one-line error (the file
    then left as it is). A cell recorded as failed (a peer's error) is kept too: ``force`` runs it again."""
    text = path.read_text(encoding="utf-8")
    lines = text.split("\n")
    cut = bool(lines) and lines[-1] != ""  # the last line was cut short: its cell runs again
    lines.pop()
    kept = {}
    for k, line in enumerate(lines, 1):
        try:
            cell = json.loads(line)
            row, probs = cell["row"], cell["probs"]
            key = (row["seed"], row["method"])
        except (ValueError, KeyError, TypeError):
            raise ValueError(f"{path}, line {k}: not a finished cell; it cannot be resumed: use --force or another "
                             "--out") from None
        if cell.get("settings") != label:
            raise ValueError(f"{path} was written with other settings than this run ({cell.get('settings')} "
                             f"against {label}): run with the same options, or --force to start afresh")
        spread = cell.get("spread")
        row = {k: (math.nan if v is None and k in METRIC_COLUMNS else v) for k, v in row.items()}
        kept[key] = (row, None if probs is None else {n: np.asarray(v, float) for n, v in probs.items()},
                     None if spread is None else {n: np.asarray(v, float) for n, v in spread.items()})
    if cut:  # checked and kept: the cells after it start on a line of their own
        tmp = path.with_name(path.name + ".part")
        tmp.write_text("".join(line + "\n" for line in lines), encoding="utf-8")
        tmp.replace(path)
    return kept


def calibration_table(calib) -> list[dict]:
    out = []
    for key in ("p_edge", "p_ancestor", "p_confounded", "all"):
        sel = [(q, t) for k, q, t in calib if key in ("all", k)]
        if not sel:
            continue
        q = np.array([s[0] for s in sel])
        t = np.array([s[1] for s in sel], float)
        for b in range(len(BINS) - 1):
            lo, hi = BINS[b], BINS[b + 1]
            m = (q >= lo) & ((q < hi) if b < len(BINS) - 2 else (q <= hi))
            n = int(m.sum())
            out.append({"probability": key, "bin": f"[{lo:.1f}, {hi:.1f}{']' if b == len(BINS) - 2 else ')'}",
                        "count": n, "mean_predicted": float(q[m].mean()) if n else float("nan"),
                        "observed_frequency": float(t[m].mean()) if n else float("nan")})
    return out


def _fmt(v):
    if isinstance(v, float):
        return "n/a" if math.isnan(v) else f"{v:.3f}"
    return str(v)


def _weight_prior_text(prior) -> str:
    return "W ~ N(0, 1) fixed" if prior is None else f"1/v ~ Gamma({prior[0]:g}, {prior[1]:g})"


def _write(out: Path, rows, calib, skipped, quick, settings, agree=()) -> None:
    with open(out / "causal.csv", "w", newline="", encoding="utf-8") as fh:
        w = csv.DictWriter(fh, fieldnames=COLUMNS)
        w.writeheader()
        w.writerows(rows)
    lines = [f"# Causal discovery benchmark ({'quick smoke run' if quick else 'full'})", "",
             f"ICP settings: {settings['sweeps']} sweeps, burn-in {settings['burn_in']}, thin {settings['thin']}, "
             f"{settings['chains']} chain(s), start {settings['start']!r}, margin {settings['margin']}, "
             f"likelihood power {settings['likelihood_power']:g}, weight prior "
             f"{_weight_prior_text(settings.get('weight_prior'))}"
             f"{', non-centred updates' if settings.get('noncentred') else ''}"
             f"{', relocation move' if settings.get('relocate') else ''}; "
             f"seeds {settings['seeds']}. "
             "Generator, comparison rules: "
             "`chefs.bench.causal` (module docstring). Seconds are CPU seconds of this process and its "
             "finished child processes (the ICP's chains run in a process pool when there are two or more).", ""]
    for why in skipped.values():
        lines.append(f"* skipped: {why}")
    lines += ["", "## Every cell", "", "| " + " | ".join(COLUMNS) + " |", "|" + "---|" * len(COLUMNS)]
    lines += ["| " + " | ".join(_fmt(r[c]) for c in COLUMNS) + " |" for r in rows]
    lines += ["", "## Synthetic SEMs: means over seeds (all SEMs / SEMs with hidden confounders)", "",
              "| method | SHD | ancestral F1 | AUROC | SHD (H>0) | ancestral F1 (H>0) | cells |",
              "|---|---|---|---|---|---|---|"]
    for m in METHODS:
        mine = [r for r in rows if r["method"] == m and r["shd"] != "" and r["seed"] != "sachs"]
        if not mine:
            continue
        conf = [r for r in mine if r["num_hidden"] > 0]

        def mean(rs, k):
            v = [float(r[k]) for r in rs if r[k] != "" and not math.isnan(float(r[k]))]
            return float(np.mean(v)) if v else float("nan")

        lines.append(f"| {m} | {_fmt(mean(mine, 'shd'))} | {_fmt(mean(mine, 'anc_f1'))} | {_fmt(mean(mine, 'auroc'))} "
                     f"| {_fmt(mean(conf, 'shd'))} | {_fmt(mean(conf, 'anc_f1'))} | {len(mine)} |")
    real = [r for r in rows if r["seed"] == "sachs"]
    if real:
        lines += ["", "## Real data: Sachs et al. (2005), 853 cells, 11 proteins, cdt's 18-edge reference graph", "",
                  "| method | SHD (of 55 pairs) | ancestral F1 | AUROC |", "|---|---|---|---|"]
        lines += [f"| {r['method']} | {_fmt(r['shd'])} | {_fmt(r['anc_f1'])} | {_fmt(r['auroc'])} |" for r in real]
    lines += ["", "## Calibration of the ICP's posterior probabilities (synthetic SEMs; pooled over ordered pairs and "
              "seeds)", "",
              "| probability | bin | count | mean predicted | observed frequency |", "|---|---|---|---|---|"]
    for c in calibration_table(calib):
        lines.append(f"| {c['probability']} | {c['bin']} | {c['count']} | {_fmt(c['mean_predicted'])} | "
                     f"{_fmt(c['observed_frequency'])} |")
    if agree:
        lines += ["", "## The same, split by whether the chains agree (every two chains within 0.2 on the pair, "
                  "the rule of causal.json's chain_disagreement; all three probabilities pooled)", "",
                  "| chains | bin | count | mean predicted | observed frequency |", "|---|---|---|---|---|"]
        for flag, name in ((True, "agree"), (False, "disagree")):
            for c in calibration_table([(k, q, t) for k, q, t, a in agree if a == flag]):
                if c["probability"] == "all":
                    lines.append(f"| {name} | {c['bin']} | {c['count']} | {_fmt(c['mean_predicted'])} | "
                                 f"{_fmt(c['observed_frequency'])} |")
    (out / "causal.md").write_text("\n".join(lines) + "\n", encoding="utf-8")


def _truth_picture(sem: SEM, path) -> None:
    from ..causal import CausalSummary

    D = sem.edges.shape[0]
    s = CausalSummary([str(j) for j in range(D)], sem.edges.astype(float), sem.ancestor.astype(float),
                      sem.confounded.astype(float), np.array([sem.num_hidden]), 1)
    s.plot(path, title=f"the true graph of seed {sem.seed} on the observed variables: black = direct edge,\n"
                       f"red dashed = hidden common cause ({sem.num_hidden} hidden confounder"
                       f"{'' if sem.num_hidden == 1 else 's'})", labels=False)
