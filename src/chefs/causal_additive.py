"""Exact draws of causal orders from an additive-noise surrogate (docs/derivations.md 3.8, "A start drawn from an
additive-noise order posterior", stop 55).

The surrogate model has every variable observed and each one an additive function of its parents plus Gaussian
noise: ``z_i = c_i + sum_{k in pa(i)} f_ki(z_k) + eps_i`` on standardised columns ``z``, each ``f_ki`` a cubic
spline of ``z_k`` (scikit-learn's ``SplineTransformer``, ``n_knots`` knots, without its constant column), its
coefficients under Zellner's g-prior with the unit-information ``g = N`` (Kass & Wasserman 1995; Liang et al.
2008), the intercept and the noise variance under the reference prior ``p(c, sigma^2) ∝ 1/sigma^2``. Each
variable's log marginal likelihood relative to its parentless model is then closed-form (:func:`log_bayes_factor`).
The structure prior is order-modular (Friedman & Koller 2003): a uniform order, and each variable's parent set
uniform over the sets of at most ``max_parents`` of its predecessors. (So a DAG's prior is the sum over its linear
extensions of those factors: it favours sparse DAGs, which have more extensions, e.g. the empty graph on four
variables 24 times a chain through them at ``max_parents=2``.) The regressors' count in the Bayes factor is the rank
of a parent set's centred spline columns (fewer than its columns for a parent with few distinct values). Summed over the parent sets, an order's
weight is a product of one term per variable that depends only on its set of predecessors, so the sum over all
orders is a dynamic programme over subsets (:class:`AdditiveOrderPosterior`), and orders are drawn exactly from
their posterior by taking sinks one at a time from the full set down.

Under an additive-noise model with nonlinear mechanisms and no hidden causes the causal order is identifiable
(Hoyer et al. 2009; Peters et al. 2014): the surrogate's likelihood tells orders apart where the belief network's
direct edges, linear on each unit's logit scale, barely do (docs/results-causal.md, stop 55). Only the chains'
starts use it (:class:`chefs.causal.CausalDiscovery`, ``start="additive"``): the sampler's target does not
involve it.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np
from scipy.special import logsumexp

#: the most observed variables the exact sum over orders takes: it holds D x 2^(D-1) terms
ADDITIVE_MAX_COLUMNS = 14


def log_bayes_factor(r2: float, n: int, p: int) -> float:
    """log p(y | X) - log p(y | intercept only) under Zellner's g-prior with g = n on ``p`` centred regressors,
    the intercept and noise variance under p(c, sigma^2) ∝ 1/sigma^2 (Liang et al. 2008, eq. 5): ``r2`` is the
    least-squares R^2 of the regression."""
    if p == 0:
        return 0.0
    g = float(n)
    return 0.5 * (n - 1 - p) * np.log1p(g) - 0.5 * (n - 1) * np.log1p(g * (1.0 - min(r2, 1.0 - 1e-12)))


class AdditiveOrderPosterior:
    """The additive-noise surrogate's posterior over causal orders of the columns of ``X`` (module docstring).

    ``max_parents``: the largest parent set per variable; ``n_knots``: the splines' knots (5, as
    :func:`chefs.causal.residual_order`); ``max_rows``: data with more rows are subsampled to that many by
    ``rng`` (the regressions' cost), unless a column is constant on the rows drawn, when all rows are used."""

    def __init__(self, X, max_parents: int = 3, n_knots: int = 5, max_rows: int = 5000, rng=None):
        from sklearn.preprocessing import SplineTransformer

        X = np.asarray(X, float)
        if X.ndim != 2 or X.shape[0] < 10 or not np.all(np.isfinite(X)) or np.any(np.ptp(X, axis=0) <= 0):
            raise ValueError("AdditiveOrderPosterior needs a finite 2-D array with at least 10 rows and no constant "
                             "column")
        N, D = X.shape
        if D < 2 or D > ADDITIVE_MAX_COLUMNS:
            raise ValueError(f"the additive order posterior takes 2 to {ADDITIVE_MAX_COLUMNS} columns (its exact sum "
                             f"over orders holds D x 2^(D-1) terms), got {D}")
        for name, v, lo in (("max_parents", max_parents, 0), ("n_knots", n_knots, 2), ("max_rows", max_rows, 10)):
            if isinstance(v, bool) or int(v) != v or v < lo:
                raise ValueError(f"{name} must be an integer >= {lo}, got {v!r}")
        if N > max_rows:
            sub = X[np.sort(np.random.default_rng(rng).choice(N, int(max_rows), replace=False))]
            if not np.any(np.ptp(sub, axis=0) <= 0):  # (a column constant on the rows drawn: all rows are used)
                X, N = sub, sub.shape[0]
        self.N, self.D, self.max_parents = N, D, int(max_parents)
        Z = (X - X.mean(axis=0)) / X.std(axis=0)
        self._y = Z
        self._basis = []
        for k in range(D):
            B = SplineTransformer(n_knots=int(n_knots), degree=3, include_bias=False).fit_transform(Z[:, [k]])
            self._basis.append(B - B.mean(axis=0))
        # every variable's parent sets, as tuples and as bit masks, and their log marginal likelihoods (relative
        # to no parent)
        self.sets, self.set_masks, self.set_scores = [], [], []
        for i in range(D):
            others = [k for k in range(D) if k != i]
            sets = [s for size in range(min(self.max_parents, D - 1) + 1) for s in combinations(others, size)]
            self.sets.append(sets)
            self.set_masks.append(np.array([sum(1 << k for k in s) for s in sets], dtype=np.int64))
            self.set_scores.append(np.array([self._node(i, s) for s in sets]))
        # pred[i][S]: log-sum over parent sets inside the predecessor set S (a bit mask of all D columns), the
        # parent-set prior uniform over the sets allowed by S
        full = 1 << D
        masks = np.arange(full, dtype=np.int64)
        self._pred = np.full((D, full), -np.inf)
        for i in range(D):
            inside = (self.set_masks[i][None, :] & ~masks[:, None]) == 0  # (subsets, parent sets): the set lies inside S
            sc = np.where(inside, self.set_scores[i][None, :], -np.inf)
            self._pred[i] = logsumexp(sc, axis=1) - np.log(inside.sum(axis=1))
        # F[S]: log of the sum over the orders of S (as the first |S| places) of their variables' terms
        self._F = np.full(full, -np.inf)
        self._F[0] = 0.0
        for S in range(1, full):
            members = [j for j in range(D) if S >> j & 1]
            self._F[S] = logsumexp([self._F[S ^ (1 << j)] + self._pred[j, S ^ (1 << j)] for j in members])

    def _node(self, i: int, parents) -> float:
        if not parents:
            return 0.0
        F = np.hstack([self._basis[k] for k in parents])
        y = self._y[:, i]
        beta, _, rank, _ = np.linalg.lstsq(F, y, rcond=None)
        r2 = 1.0 - float(np.sum((y - F @ beta) ** 2)) / float(y @ y)
        # p is the rank of the centred columns (the g-prior on their span, with a generalised inverse): a parent
        # with few distinct values spans fewer than its columns, and the rank is at most N - 1 (a saturated fit
        # then has Bayes factor 1)
        return log_bayes_factor(r2, self.N, int(rank))

    @property
    def log_evidence(self) -> float:
        """log of the sum over orders and parent sets (relative to the empty graph), the orders' prior 1/D!
        left out."""
        return float(self._F[-1])

    def order_log_weight(self, order) -> float:
        """An order's (roots first) unnormalised log posterior: the sum of its variables' terms."""
        order = [int(i) for i in order]
        S, out = 0, 0.0
        for i in order:
            out += self._pred[i, S]
            S |= 1 << i
        return out

    def sample_order(self, rng) -> list[int]:
        """One order (roots first) drawn exactly from the posterior: the sinks one at a time, from the full set."""
        rng = np.random.default_rng(rng)
        S, sinks = (1 << self.D) - 1, []
        while S:
            members = [j for j in range(self.D) if S >> j & 1]
            logw = np.array([self._F[S ^ (1 << j)] + self._pred[j, S ^ (1 << j)] for j in members])
            w = np.exp(logw - logw.max())
            j = members[int(rng.choice(len(members), p=w / w.sum()))]
            sinks.append(j)
            S ^= 1 << j
        return sinks[::-1]

    def sample_parents(self, order, rng) -> list[tuple[int, int]]:
        """Parent sets given ``order``, each drawn from its posterior: edges ``(parent, child)``."""
        rng = np.random.default_rng(rng)
        edges, S = [], 0
        for i in [int(i) for i in order]:
            ok = np.flatnonzero((self.set_masks[i] & ~S) == 0)
            lw = self.set_scores[i][ok]
            w = np.exp(lw - lw.max())
            s = self.sets[i][int(ok[rng.choice(len(ok), p=w / w.sum())])]
            edges += [(int(k), i) for k in s]
            S |= 1 << i
        return edges


def bootstrap_rows(X, seed, chain: int) -> np.ndarray:
    """The rows chain ``chain`` of a run with seed ``seed`` starts from: ``X`` itself for chain 0, a bootstrap
    resample of its rows (stream ``[seed, 7919, chain, 1]``) for chain c > 0, or ``X`` again when the resample has a
    constant column. Shared by :class:`chefs.causal.CausalDiscovery`'s starts and :func:`bagged_relations`."""
    X = np.asarray(X)
    if chain == 0:
        return X
    rows = X[np.random.default_rng([seed, 7919, chain, 1]).integers(0, len(X), len(X))]
    return X if np.any(np.ptp(rows, axis=0) <= 0) else rows


def bagged_relations(X, chains: int = 16, draws: int = 25, seed=0) -> tuple[np.ndarray, np.ndarray]:
    """The surrogate read as a causal posterior by itself (``chefs bench causal``'s method ``additive``): ``chains``
    surrogates, each on :func:`bootstrap_rows` (chain 0 on ``X``, the others on bootstrap resamples, as
    :class:`chefs.causal.CausalDiscovery`'s starts), ``draws`` exact draws of an order and its parent sets
    from each (stream ``[seed, c, 5]``), pooled. Returns ``(p_edge, p_ancestor)``, (D, D) arrays: the shares of the
    drawn DAGs with the edge ``i -> j`` and with a directed path from i to j. The surrogate has no hidden causes."""
    X = np.asarray(X, float)
    for name, v in (("chains", chains), ("draws", draws)):
        if isinstance(v, bool) or int(v) != v or v < 1:
            raise ValueError(f"{name} must be a positive integer, got {v!r}")
    from .graph import transitive_closure

    D = X.shape[1] if X.ndim == 2 else 0
    E, A = np.zeros((D, D)), np.zeros((D, D))
    for c in range(int(chains)):
        post = AdditiveOrderPosterior(bootstrap_rows(X, seed, c), rng=seed)
        rng = np.random.default_rng([seed, c, 5])
        for _ in range(int(draws)):
            M = np.zeros((D, D), bool)
            for k, i in post.sample_parents(post.sample_order(rng), rng):
                M[k, i] = True
            E += M
            A += transitive_closure(M)
    n = int(chains) * int(draws)
    return E / n, A / n
