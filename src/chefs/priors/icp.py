"""The Indian Chefs Process prior on (DAG, orders) (002, sections 2-2.4).

The ground truth is the finite model of eqs. 1-3 of 002 with K -> infinity::

    theta_k ~ U(0, 1)
    pi_k    ~ Beta(alpha*gamma/K + phi*I(k in O), alpha - alpha*gamma/K)
    Z_ki    ~ Bernoulli(pi_k * I(theta_k > theta_i))

restricted to the active nodes (observed nodes and their ancestors). Hidden
nodes are unlabelled (identified by their order values); observed nodes are
labelled. Densities are with respect to Lebesgue measure on the free order
values. ``docs/derivations.md`` derives eq. 8 and eq. 9 and lists where the
printed formulas are wrong (the 1/K+! factor, the Binomial of eq. 10 and the
counts of eqs. 11-12).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import gammaln

from ..graph import DAG
from . import _icp_kernels as kern

MAX_EDGES = 10_000_000  # the chefs process's default cap on a draw's edges (two int64 arrays: about 160 MB)

__all__ = ["ICP", "check_hyper", "observed_orders"]


def check_hyper(alpha: float, gamma: float, phi: float) -> tuple[float, float, float]:
    """Validate the ICP hyperparameters (all strictly positive and finite)."""
    out = []
    for name, v in (("alpha", alpha), ("gamma", gamma), ("phi", phi)):
        try:
            v = float(v)
        except (TypeError, ValueError):
            raise ValueError(f"{name} must be a number, got {v!r}") from None
        if not math.isfinite(v) or v <= 0.0:
            raise ValueError(f"{name} must be a positive finite number, got {v}")
        out.append(v)
    return tuple(out)  # type: ignore[return-value]


def observed_orders(num_observed: int, observed_order=None) -> np.ndarray:
    """Observed order values as an array with NaN for "draw from U(0, 1)" (eq. 1 of 002;
    fixed orders as in 002 section 4 and docs/derivations.md section 1.1).

    ``observed_order`` is None (all free), one number (all fixed at it) or one
    value per observed node (NaN or None for a free one).
    """
    if int(num_observed) != num_observed or num_observed < 1:
        raise ValueError(f"the number of observed nodes must be a positive integer, got {num_observed}")
    D = int(num_observed)
    if observed_order is None:
        return np.full(D, np.nan)
    arr = np.asarray(
        [np.nan if v is None else v for v in np.atleast_1d(np.asarray(observed_order, dtype=object))],
        dtype=float,
    )
    if arr.size == 1:
        arr = np.full(D, arr[0])
    if arr.size != D:
        raise ValueError(f"give one observed order for all nodes or one per node ({D}), got {arr.size}")
    fin = arr[~np.isnan(arr)]
    if np.any((fin < 0) | (fin > 1)):
        raise ValueError("observed orders must lie in [0, 1]")
    return arr


@dataclass(frozen=True)
class ICP:
    """The ICP prior with hyperparameters ``alpha``, ``gamma``, ``phi``.

    Parameters
    ----------
    alpha : float
        Beta-process concentration (eq. 2 of 002); small alpha gives denser graphs.
    gamma : float
        Beta-process mass; controls the number of hidden nodes.
    phi : float
        Extra popularity of observed nodes.
    """

    alpha: float = 1.0
    gamma: float = 1.0
    phi: float = 1.0

    def __post_init__(self):
        a, g, p = check_hyper(self.alpha, self.gamma, self.phi)
        object.__setattr__(self, "alpha", a)
        object.__setattr__(self, "gamma", g)
        object.__setattr__(self, "phi", p)

    # ------------------------------------------------------------ densities
    def log_prob(self, graph: DAG, finite_K: int | None = None) -> float:
        """Log-density of an active subgraph and its order values.

        ``finite_K=None`` gives the infinite limit (eq. 9 of 002, corrected:
        no 1/K+! factor); an integer gives the finite-K density (eq. 8,
        corrected). Both are densities over graphs with labelled observed and
        unlabelled hidden nodes, w.r.t. Lebesgue measure on the free orders
        (fixed orders do not change the value: the U(0, 1) density is 1).
        """
        if finite_K is None:
            return float(kern.log_prob_infinite(graph.theta, graph.observed, graph.parents,
                                                self.alpha, self.gamma, self.phi))
        return self._log_prob_finite(graph, int(finite_K))

    def _log_prob_finite(self, graph: DAG, K: int) -> float:
        alpha, gamma, phi = self.alpha, self.gamma, self.phi
        Kp = graph.num_nodes
        D = graph.num_observed
        H = Kp - D
        if K < Kp:
            return -math.inf
        if alpha * gamma / K >= alpha:
            raise ValueError(f"the finite model needs K > gamma (K={K}, gamma={gamma})")
        m = graph.out_degree()
        a = graph.num_below()
        obs = graph.observed
        if np.any((m == 0) & ~obs):
            return -math.inf
        c = alpha * gamma / K
        b = alpha - c
        # number of labelled DAGs mapping to one unlabelled class: (K-D)_(H) falling
        lp = gammaln(K - D + 1) - gammaln(K - D - H + 1)
        # Beta-binomial factors (eq. 6)
        lp += np.sum(np.where(
            obs,
            gammaln(c + phi + m) - gammaln(c + phi) + gammaln(b + a - m) - gammaln(b)
            - gammaln(alpha + phi + a) + gammaln(alpha + phi),
            gammaln(c + m) - gammaln(c) + gammaln(b + a - m) - gammaln(b)
            - gammaln(alpha + a) + gammaln(alpha),
        ))
        # inactive nodes: (sum_j Delta_j f(j))^(K - K+), f(j) = (b)^(j) / alpha^(j)
        st = np.concatenate([[0.0], np.sort(graph.theta), [1.0]])
        delta = np.diff(st)
        j = np.arange(Kp + 1)
        log_f = gammaln(b + j) - gammaln(b) - gammaln(alpha + j) + gammaln(alpha)
        inner_minus_one = float(np.sum(delta * np.expm1(log_f)))  # sum Delta (f - 1)
        lp += (K - Kp) * math.log1p(inner_minus_one)
        return float(lp)

    # ------------------------------------------------------------- samplers
    def sample(
        self,
        rng: np.random.Generator,
        num_observed: int,
        observed_order=None,
        method: str = "chefs",
        finite_K: int | None = None,
        hidden_order: float | None = None,
        max_nodes: int = 1_000_000,
        max_edges: int = MAX_EDGES,
        _variant: int = 0,
    ) -> DAG:
        """Draw one active subgraph from the prior.

        Parameters
        ----------
        rng : numpy.random.Generator
        num_observed : int
            D, the number of observed nodes (they are nodes 0..D-1 of the result).
        observed_order : None, float or sequence
            None: observed orders drawn from U(0, 1); a number: all fixed at
            it; a sequence: one per node (NaN for free).
        method : "chefs" or "finite"
            The sequential chefs process (infinite model) or the finite model
            of eqs. 1-3 with ``finite_K`` nodes in all.
        finite_K : int
            With ``method="finite"`` only (required there): K, the total number of
            nodes, larger than ``num_observed`` and than gamma.
        hidden_order : None or 1.0
            ``1.0`` puts every hidden node at theta = 1 (the IBP special case of
            section 2.4); None draws hidden orders from U(0, 1).
        max_nodes : int
            Abort (``ValueError``) when a chefs draw exceeds this many nodes.
        max_edges : int
            Abort (``ValueError``) when a chefs draw exceeds this many edges (default 10 million, about 160 MB;
            a draw's edges grow about as the square of its nodes: gamma = 1000 gives some 8,000 nodes and
            4 million edges with one observed node at theta = 0).
        _variant : int
            Testing only: plant the printed (wrong) eq. 10 (1) or an off-by-one
            Poisson rate (2), for negative controls.
        """
        return self._draw(rng, self._sampler_args(rng, num_observed, observed_order, method, finite_K,
                                                  hidden_order, max_nodes, max_edges, _variant))

    def _sampler_args(self, rng, num_observed, observed_order, method, finite_K, hidden_order, max_nodes,
                      max_edges, _variant) -> tuple:
        """The checked arguments of :meth:`sample` (checked once for :meth:`sample_many`)."""
        if not isinstance(rng, np.random.Generator):
            raise ValueError("rng must be a numpy.random.Generator (use numpy.random.default_rng(seed))")
        obs_theta = observed_orders(num_observed, observed_order)
        if hidden_order is not None and float(hidden_order) != 1.0:
            raise ValueError("hidden_order must be None (uniform) or 1.0 (IBP special case)")
        at_one = hidden_order is not None
        fixed = ~np.isnan(obs_theta)
        if method == "chefs":
            K = None
            max_nodes = int(max_nodes)  # only the chefs process reads it (the finite model never did)
            max_edges = int(max_edges)
            if max_nodes < 1 or max_edges < 1:
                raise ValueError(f"max_nodes and max_edges must be positive, got {max_nodes} and {max_edges}")
        elif method == "finite":
            if finite_K is None:
                raise ValueError("method='finite' needs finite_K, the total number of nodes K "
                                 "(chefs prior sample: --finite-K)")
            K = int(finite_K)
            if K <= num_observed or K <= self.gamma:
                raise ValueError(f"finite_K must exceed both the number of observed nodes and gamma, got {K}")
        else:
            raise ValueError(f"unknown method {method!r}: use 'chefs' or 'finite'")
        if K is not None and _variant:
            raise ValueError("the planted-error variants (_variant) apply to the chefs process only, "
                             "not to method='finite'")
        return obs_theta, fixed, at_one, K, max_nodes, max_edges, int(_variant)

    def _draw(self, rng, args) -> DAG:
        obs_theta, fixed, at_one, K, max_nodes, max_edges, variant = args
        if K is None:
            th, ob, p, c, status = kern.chefs_draw(rng, obs_theta, self.alpha, self.gamma, self.phi,
                                                   at_one, max_nodes, max_edges, variant)
            if status == 1:
                raise ValueError(f"the draw exceeded max_nodes={max_nodes} active nodes; "
                                 "lower gamma or raise max_nodes")
            if status == 2:
                raise ValueError(f"the draw exceeded max_edges={max_edges} edges; lower gamma (here {self.gamma:g}) "
                                 "or raise max_edges")
        else:
            th, ob, p, c = kern.finite_draw(rng, obs_theta, K, self.alpha, self.gamma, self.phi, at_one)
        fx = np.zeros(th.shape[0], dtype=bool)
        fx[ob] = fixed  # observed nodes appear in star order in both samplers
        return DAG(th, ob, p, c, fx, validate=False)

    def sample_many(self, rng, num: int, num_observed: int, observed_order=None, method: str = "chefs",
                    finite_K: int | None = None, hidden_order: float | None = None, max_nodes: int = 1_000_000,
                    max_edges: int = MAX_EDGES, _variant: int = 0) -> list[DAG]:
        """``num`` independent draws of :meth:`sample` (the same arguments, checked once): the same
        graphs, from the same stream, as ``num`` calls of :meth:`sample`."""
        if int(num) != num or num < 0:
            raise ValueError(f"num must be a non-negative integer, got {num}")
        args = self._sampler_args(rng, num_observed, observed_order, method, finite_K, hidden_order, max_nodes,
                                  max_edges, _variant)
        return [self._draw(rng, args) for _ in range(int(num))]

    def expected_hidden_ibp(self, num_observed: int) -> float:
        """E[H] in the IBP special case: gamma * sum_{r<D} alpha / (alpha + r)
        (002 section 2.4; docs/derivations.md section 1.7)."""
        r = np.arange(int(num_observed))
        return float(self.gamma * np.sum(self.alpha / (self.alpha + r)))
