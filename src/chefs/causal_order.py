"""A start for causal discovery's chains from the model's own marginal likelihood (docs/derivations.md 3.8,
"A start at a higher-marginal order", stop 52).

For a DAG whose units are all observed, the belief network of causal discovery is a set of linear regressions
in logit space: ``logit u_i = b_i + sum_k W_ki u_k + eps_i`` with ``b ~ N(0, 1)``, ``W ~ N(0, v)``,
``eps ~ N(0, 1/rho_i)``, ``rho_i ~ Gamma(a, b)`` (the model's rho prior) and one weight variance ``v`` for all
weights (``1/v ~ Gamma(shape, rate)``, the causal default's weight prior; fixed at 1 without one). With b, W and
rho integrated out, each unit's term :func:`node_log_marginal` is a one-dimensional integral over rho (done on a
grid refined around its peak), as a function of v on a grid.

:func:`search_order` climbs over orders of the observed units by the *order score*: for each unit, the
log-sum over its candidate parent sets (at most ``max_parents`` of the units before it, uniform weights) of its
term, summed over units and then integrated over v. Only the chains' start uses it (:class:`chefs.causal.CausalDiscovery`,
``start="marginal"``): the sampler's target does not involve it, and hidden units are not part of the score.
"""
from __future__ import annotations

from itertools import combinations

import numpy as np
from scipy.special import gammaln, logsumexp

#: log v grid for the weight variance integral (1/v ~ Gamma(shape, rate))
LOG_V = np.linspace(np.log(1e-3), np.log(1e4), 24)
_COARSE = np.linspace(np.log(1e-3), np.log(1e8), 80)  # log rho, coarse pass
_FINE = np.linspace(-1.0, 1.0, 121)  # log rho offsets around the coarse peak, in units of the window below


def node_log_marginal(y: np.ndarray, X: np.ndarray, rho_prior=(0.5, 0.5), log_v=LOG_V) -> np.ndarray:
    """log p(y | X, v) for each v = exp(log_v): y ~ N(X beta, 1/rho), beta ~ N(0, diag(1, v, ..., v)) (first
    column of X the intercept), rho ~ Gamma(shape, rate) = ``rho_prior``; beta and rho integrated out
    (rho numerically in log rho: a coarse grid, then a fine one around its peak, as wide as 8 of the posterior's
    standard deviations of log rho, about sqrt(2 / N), on either side and at least the coarse grid's step)."""
    y = np.asarray(y, float)
    X = np.asarray(X, float)
    N = y.size
    a0, b0 = float(rho_prior[0]), float(rho_prior[1])
    XtX, Xty, yty = X.T @ X, X.T @ y, float(y @ y)
    out = np.empty(len(log_v))
    offsets = _FINE * max(8.0 * np.sqrt(2.0 / N), _COARSE[1] - _COARSE[0])
    for t, lv in enumerate(log_v):
        sq = np.sqrt(np.r_[1.0, np.full(X.shape[1] - 1, np.exp(lv))])
        lam, Q = np.linalg.eigh(sq[:, None] * XtX * sq[None, :])
        lam = np.clip(lam, 0.0, None)
        g2 = (Q.T @ (sq * Xty)) ** 2

        def f(lr):
            r = np.exp(lr)[:, None]
            den = 1.0 + r * lam[None, :]
            ll = -0.5 * (N * np.log(2 * np.pi) - N * lr + np.log(den).sum(1)
                         + r[:, 0] * yty - r[:, 0] ** 2 * (g2[None, :] / den).sum(1))
            return ll + a0 * np.log(b0) - gammaln(a0) + a0 * lr - b0 * r[:, 0]  # Gamma density of log rho

        peak = _COARSE[int(np.argmax(f(_COARSE)))]
        out[t] = logsumexp(f(peak + offsets)) + np.log(offsets[1] - offsets[0])
    return out


class OrderScorer:
    """The order score of the observed-only model on mapped data ``U`` (N x D, in (0, 1)), cached by unit and
    parent set."""

    def __init__(self, U, rho_prior=(0.5, 0.5), weight_prior=(1.0, 1.0), max_parents: int = 3):
        U = np.asarray(U, float)
        if U.ndim != 2 or np.any(U <= 0) or np.any(U >= 1):
            raise ValueError("OrderScorer needs a 2-D array of mapped data inside (0, 1)")
        self.U, self.Y = U, np.log(U / (1 - U))
        self.rho_prior = rho_prior
        self.max_parents = int(max_parents)
        if weight_prior is None:  # W ~ N(0, 1) fixed
            self.log_v, self.log_pv = np.zeros(1), np.zeros(1)
        else:
            a, b = float(weight_prior[0]), float(weight_prior[1])
            self.log_v = LOG_V
            w = -LOG_V  # log(1/v); density of log v under 1/v ~ Gamma(a, b), times the grid step
            self.log_pv = a * np.log(b) - gammaln(a) + a * w - b * np.exp(w) + np.log(LOG_V[1] - LOG_V[0])
        self._node: dict = {}
        self._pred: dict = {}

    def node(self, i: int, parents) -> np.ndarray:
        key = (int(i), tuple(sorted(int(k) for k in parents)))
        if key not in self._node:
            X = np.column_stack([np.ones(len(self.U))] + [self.U[:, k] for k in key[1]])
            self._node[key] = node_log_marginal(self.Y[:, i], X, self.rho_prior, self.log_v)
        return self._node[key]

    def _sets(self, pred):
        for size in range(min(self.max_parents, len(pred)) + 1):
            yield from combinations(sorted(pred), size)

    def pred_score(self, i: int, pred) -> np.ndarray:
        """log-sum over parent sets of unit i among ``pred`` (uniform weights), per v."""
        key = (int(i), frozenset(int(k) for k in pred))
        if key not in self._pred:
            self._pred[key] = logsumexp(np.array([self.node(i, s) for s in self._sets(key[1])]), axis=0)
        return self._pred[key]

    def _order_terms(self, order) -> np.ndarray:
        """Per v of the grid: the order's log-likelihood summed over its parent sets, plus log p(v) times the step."""
        return sum(self.pred_score(i, order[:p]) for p, i in enumerate(order)) + self.log_pv

    def score(self, order) -> float:
        return float(logsumexp(self._order_terms(order)))

    def dag_score(self, A) -> float:
        """The log marginal likelihood of one DAG of observed units (``A[k, i]``: k -> i), v integrated out."""
        A = np.asarray(A, bool)
        return float(logsumexp(sum(self.node(i, np.flatnonzero(A[:, i])) for i in range(A.shape[0])) + self.log_pv))

    def best_parents(self, order) -> list[tuple]:
        """The highest-scoring parent set of each unit given ``order`` (roots first), at the v that maximises
        the order's score: ``[(unit, parents), ...]``."""
        t = int(np.argmax(self._order_terms(order)))
        out = []
        for p, i in enumerate(order):
            sets = list(self._sets(order[:p]))
            out.append((int(i), sets[int(np.argmax([self.node(i, s)[t] for s in sets]))]))
        return out


def search_order(scorer: OrderScorer, order, max_rounds: int = 200) -> tuple[list[int], float]:
    """Best-improvement hill climbing from ``order`` (roots first) over the moves 'take one unit out and put it
    at another position'; returns the local optimum and its score."""
    order = [int(i) for i in order]
    best = scorer.score(order)
    D = len(order)
    for _ in range(int(max_rounds)):
        cand = None
        for a in range(D):
            for b in range(D):
                if a == b:
                    continue
                o = order[:a] + order[a + 1:]
                o.insert(b, order[a])
                s = scorer.score(o)
                if s > best + 1e-9 and (cand is None or s > cand[0]):
                    cand = (s, o)
        if cand is None:
            break
        best, order = cand
    return order, best
