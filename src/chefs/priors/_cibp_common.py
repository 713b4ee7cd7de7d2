"""What the CIBP and the ECIBP share: layer map, hyperparameters, densities,
automorphism counting, the forward sampler and the prior-move API.

See :mod:`chefs.priors.cibp`, :mod:`chefs.priors.ecibp` and
``docs/derivations-cibp.md`` (§ numbers below refer to it).
"""

from __future__ import annotations

import math
from typing import NamedTuple, Sequence

import numpy as np
from scipy.special import gammaln

from ..graph import DAG
from . import _cibp_kernels as kern

__all__ = ["LayeredPrior", "BirthDeathToken", "layer_theta", "theta_layer", "expected_next_width"]


def layer_theta(layer) -> np.ndarray:
    """Order value of layer l: ``theta_l = 1 - 2**-l`` (observed layer 0 at 0).

    A strictly increasing map of the layer index into [0, 1), so networks of
    any depth are valid :class:`~chefs.graph.DAG` objects (exact in floating
    point up to l = 52).
    """
    return 1.0 - np.ldexp(1.0, -np.asarray(layer, dtype=np.int64))


def theta_layer(theta) -> np.ndarray:
    """Inverse of :func:`layer_theta` (rounded to the nearest layer)."""
    t = np.asarray(theta, dtype=float)
    with np.errstate(divide="ignore"):
        return np.where(t <= 0, 0, np.rint(-np.log2(np.maximum(1.0 - t, 1e-300)))).astype(np.int64)


def expected_next_width(K, alpha: float, beta: float):
    """E[K^(m+1) | K^(m) = K] = lambda(K; alpha, beta) = alpha sum_{k=1}^K beta/(k + beta - 1)
    (eq. 1 of 003): the layer-width Markov chain, the same for the ECIBP."""
    K = np.asarray(K)
    out = np.array([alpha * np.sum(beta / (beta + np.arange(int(k)))) for k in K.reshape(-1)])
    return out.reshape(K.shape) if K.ndim else float(out[0])


def _check_positive(name, v) -> float:
    try:
        v = float(v)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a number, got {v!r}") from None
    if not math.isfinite(v) or v <= 0:
        raise ValueError(f"{name} must be a positive finite number, got {v}")
    return v


def _check_bounds(name, bounds) -> tuple[float, float]:
    try:
        lo, hi = (float(x) for x in bounds)
    except (TypeError, ValueError):
        raise ValueError(f"{name} must be a pair (low, high) of numbers, got {bounds!r}") from None
    if not (math.isfinite(lo) and math.isfinite(hi) and 0 < lo < hi):
        raise ValueError(f"{name} must satisfy 0 < low < high < inf, got {bounds!r}")
    return lo, hi


class BirthDeathToken(NamedTuple):
    """What :meth:`LayeredPrior.undo` needs, and what a likelihood model needs
    to attach or drop its auxiliary variables.

    kind : 0 nothing proposed, 1 birth, 2 death
    born : slot ids of the units born (empty unless kind == 1)
    removed : slot ids of the units removed (empty unless kind == 2)
    child : the unit i the move was about (the only child of the born/removed unit)
    """

    kind: int
    born: tuple
    removed: tuple
    child: int


NOTHING = BirthDeathToken(0, (), (), -1)


class LayeredPrior:
    """Base of :class:`~chefs.priors.cibp.CIBP` and :class:`~chefs.priors.ecibp.ECIBP`.

    Parameters
    ----------
    alpha, beta : float or sequence of float
        Per-layer IBP mass and concentration (003 section 3.2, alpha^(m), beta^(m)).
        A sequence gives layers 1, 2, ...; deeper layers repeat its last value.
    alpha_bounds, beta_bounds : (low, high)
        Top-hat priors U(low, high) of the per-layer hyperparameters (003
        section 3.2), used by :meth:`update_hyper`; also the range in which
        given values must lie.
    max_layers : int
        Hidden layers allowed. The forward sampler raises ``ValueError`` past
        it; the MCMC proposes no birth past it (it targets the prior truncated
        to depth <= max_layers, the same as the prior whenever the sampler
        would not have raised). At most 50 (the order-value map is exact to 52).
    """

    skip = False  # ECIBP: units may connect to any lower layer
    name = "layered"

    def __init__(self, alpha=1.0, beta=1.0, alpha_bounds=(0.01, 5.0), beta_bounds=(0.01, 5.0),
                 max_layers: int = 50):
        if int(max_layers) != max_layers or not 1 <= max_layers <= 50:
            raise ValueError(f"max_layers (--max-layers) must be an integer in 1..50, got {max_layers}")
        self.max_layers = int(max_layers)
        self.alpha_bounds = _check_bounds("alpha_bounds", alpha_bounds)
        self.beta_bounds = _check_bounds("beta_bounds", beta_bounds)
        self.alpha = self._per_layer("alpha", alpha, self.alpha_bounds)
        self.beta = self._per_layer("beta", beta, self.beta_bounds)

    def _per_layer(self, name, value, bounds) -> np.ndarray:
        vals = [_check_positive(name, v) for v in np.atleast_1d(np.asarray(value, dtype=object))]
        if len(vals) == 0 or len(vals) > self.max_layers + 1:
            raise ValueError(f"{name} needs 1 to max_layers + 1 = {self.max_layers + 1} values, got {len(vals)}")
        lo, hi = bounds
        if any(not lo <= v <= hi for v in vals):
            raise ValueError(f"{name} values must lie inside their top-hat prior [{lo}, {hi}] "
                             f"(pass {name}_bounds to widen it), got {vals}")
        out = np.empty(self.max_layers + 2)
        out[0] = np.nan  # layer 0 (observed) has no restaurant
        n = len(vals)
        out[1:n + 1] = vals
        out[n + 1:] = vals[-1]
        return out

    # ------------------------------------------------------------ hyper
    @property
    def hyper(self) -> dict:
        """Per-layer hyperparameters, layers 1..max_layers+1 (JSON-able)."""
        return {"alpha": self.alpha[1:].tolist(), "beta": self.beta[1:].tolist()}

    def set_hyper(self, hyper: dict) -> None:
        self.alpha = self._per_layer("alpha", hyper["alpha"], self.alpha_bounds)
        self.beta = self._per_layer("beta", hyper["beta"], self.beta_bounds)

    def __repr__(self) -> str:
        return (f"{type(self).__name__}(alpha={self.alpha[1]:.4g}, beta={self.beta[1]:.4g}, "
                f"max_layers={self.max_layers})")

    # ------------------------------------------------------------ layers
    def layers(self, graph: DAG) -> np.ndarray:
        """Layer of every node of a network of this prior; ``ValueError`` when
        the graph is not one (observed nodes at theta = 0 with no children,
        hidden nodes at ``layer_theta(l)`` for l >= 1 with every child in
        layer l - 1 (CIBP) or at least one there and the rest lower (ECIBP))."""
        th = graph.theta
        lay = theta_layer(th)
        if np.any(lay > self.max_layers):
            raise ValueError(f"graph is deeper than max_layers={self.max_layers}")
        if not np.allclose(layer_theta(lay), th, rtol=0, atol=1e-12):
            raise ValueError(f"{self.name}: order values must be 1 - 2^-l for integer layers l "
                             "(observed nodes at 0)")
        if np.any(graph.observed != (lay == 0)):
            raise ValueError(f"{self.name}: observed nodes must be exactly the nodes of layer 0 (theta = 0)")
        p, c = graph.parents, graph.children
        gap = lay[p] - lay[c]
        if not self.skip and np.any(gap != 1):
            raise ValueError("CIBP: every edge must go from layer l to layer l - 1")
        top_child = np.zeros(graph.num_nodes, dtype=np.int64)
        np.maximum.at(top_child, p, lay[c] + 1)
        hidden = ~graph.observed
        if np.any(top_child[hidden] != lay[hidden]):
            raise ValueError(f"{self.name}: every hidden unit of layer l needs a child in layer l - 1")
        return lay

    def to_dag(self, layer: np.ndarray, parents, children, num_observed: int) -> DAG:
        """A network given the layer of every node (observed nodes first)."""
        lay = np.asarray(layer, dtype=np.int64)
        obs = np.arange(lay.size) < num_observed
        return DAG(layer_theta(lay), obs, parents, children, fixed=obs, validate=False)

    # ------------------------------------------------------------ densities
    def _layer_terms(self, lay: np.ndarray, m: np.ndarray, alpha=None, beta=None):
        """Ordered-labelled log-density terms of each layer l = 1..M+1 (§2.2)."""
        alpha = self.alpha if alpha is None else alpha
        beta = self.beta if beta is None else beta
        M = int(lay.max()) if lay.size else 0
        K = np.bincount(lay, minlength=M + 2)
        out = np.zeros(M + 2)
        for ll in range(1, M + 2):
            a, b = alpha[ll], beta[ll]
            C = int(K[ll - 1])
            N = int(K[:ll].sum()) if self.skip else C
            eta = m[lay == ll]
            out[ll] = (K[ll] * math.log(a * b) - gammaln(K[ll] + 1) - a * np.sum(b / (b + np.arange(C)))
                       + np.sum(gammaln(eta) + gammaln(N - eta + b) - gammaln(N + b)))
        return out

    def log_prob_labelled(self, graph: DAG) -> float:
        """Log-probability of the network with the hidden units of every layer
        in a given order (all ∏_l K_l! orders equally likely; §2.2)."""
        lay = self.layers(graph)
        if lay.size and lay.max() + 1 > self.max_layers + 1:
            return -math.inf
        return float(self._layer_terms(lay, graph.out_degree()).sum())

    def log_prob(self, graph: DAG) -> float:
        """Log-probability of the unlabelled network (observed units labelled,
        hidden units not), §2.3::

            log p(G) = log p_ordered(G) + sum_l log K_l! - log |Aut(G)|

        where Aut(G) is the group of automorphisms fixing every observed node.
        This is the exact probability of the structure a forward draw returns.
        """
        lay = self.layers(graph)
        K = np.bincount(lay)
        return (self.log_prob_labelled(graph) + float(np.sum(gammaln(K[1:] + 1)))
                - math.log(automorphisms(graph, lay)))

    # ------------------------------------------------------------ sampler
    def sample(self, rng: np.random.Generator, num_observed: int, max_nodes: int = 100_000,
               _variant: int = 0) -> DAG:
        """One forward draw (003 section 3.2; for the ECIBP §4.1 of the derivations).

        Parameters
        ----------
        rng : numpy.random.Generator
        num_observed : int
            D, the units of layer 0 (nodes 0..D-1 of the result, at theta = 0, fixed).
        max_nodes : int
            ``ValueError`` when the draw exceeds this many units.
        _variant : int
            Testing only: 1 makes the first customer's new-dish rate alpha*beta
            instead of alpha (a planted error for negative controls).
        """
        lay, parents, children = self._draw(rng, num_observed, max_nodes, _variant)
        return self.to_dag(lay, parents, children, int(num_observed)).canonical()

    def _draw(self, rng, num_observed, max_nodes=100_000, _variant=0, _limit=None):
        """Forward draw as (layer of each unit, parents, children); units are
        numbered observed first, then layer by layer. ``_limit`` (tests): give
        up and return None as soon as there are more than that many hidden units."""
        if not isinstance(rng, np.random.Generator):
            raise ValueError("rng must be a numpy.random.Generator (use numpy.random.default_rng(seed))")
        if int(num_observed) != num_observed or num_observed < 1:
            raise ValueError(f"the number of observed units must be a positive integer, got {num_observed}")
        D = int(num_observed)
        layer_of_unit = [0] * D
        parents: list[int] = []
        children: list[int] = []
        prev = list(range(D))       # units of the layer below (the creating customers)
        lower: list[int] = []      # units of the layers below that (ECIBP skip customers)
        lay = 0
        while prev:
            lay += 1
            if lay > self.max_layers:
                raise ValueError(f"the draw exceeded max_layers={self.max_layers}; lower alpha or beta "
                                 "or raise max_layers")
            custs = prev + (lower if self.skip else [])
            dish_children = self._restaurant(rng, custs, len(prev), self.alpha[lay], self.beta[lay], _variant)
            base = len(layer_of_unit)
            if base + len(dish_children) > max_nodes:
                raise ValueError(f"the draw exceeded max_nodes={max_nodes} units; lower alpha or beta")
            new = list(range(base, base + len(dish_children)))
            for u, ch in zip(new, dish_children):
                layer_of_unit.append(lay)
                parents.extend([u] * len(ch))
                children.extend(ch)
            lower = lower + prev
            prev = new
            if _limit is not None and len(layer_of_unit) - D > _limit:
                return None
        return np.array(layer_of_unit, dtype=np.int64), parents, children

    @staticmethod
    def _restaurant(rng, custs, n_creating, a, b, _variant=0) -> list[list[int]]:
        """One two-parameter IBP restaurant (003 section 3.1): customer j
        (1-based) takes dish k with probability eta_k / (j + b - 1); the first
        ``n_creating`` customers also order Poisson(a b / (j + b - 1)) new
        dishes. Returns the customers of each dish, dishes in order of creation."""
        counts = np.zeros(0)  # eta of each dish
        dish_children: list[list[int]] = []
        for j, cust in enumerate(custs, start=1):
            if counts.size:
                took = np.flatnonzero(rng.random(counts.size) < counts / (j + b - 1.0))
                counts[took] += 1
                for d in took.tolist():
                    dish_children[d].append(cust)
            if j <= n_creating:
                rate = a * b / (j + b - 1.0)
                if _variant == 1 and j == 1:
                    rate = a * b
                new_dishes = rng.poisson(rate)
                if new_dishes:
                    counts = np.concatenate([counts, np.ones(new_dishes)])
                    dish_children.extend([cust] for _ in range(new_dishes))
        return dish_children

    def sample_many(self, rng: np.random.Generator, num: int, num_observed: int, **kw) -> list[DAG]:
        return [self.sample(rng, num_observed, **kw) for _ in range(int(num))]

    # ------------------------------------------------------------ MCMC API
    def initial_state(self, num_observed: int):
        """A :class:`~chefs.mcmc.state.GraphState` with the D observed units
        (slots 0..D-1, theta = 0, fixed) and nothing else."""
        from ..mcmc.state import GraphState

        if int(num_observed) != num_observed or num_observed < 1:
            raise ValueError(f"the number of observed units must be a positive integer, got {num_observed}")
        D = int(num_observed)
        return GraphState.from_dag(DAG(np.zeros(D), np.ones(D, bool), fixed=np.ones(D, bool)))

    def state_from_dag(self, graph: DAG, capacity: int | None = None):
        """Load a network of this prior into a GraphState (observed units in
        slots 0..D-1). Hidden units of a layer share their order value; they
        are not ``fixed`` (a DAG allows only observed nodes to be fixed)."""
        from ..mcmc.state import GraphState

        self.layers(graph)
        s = GraphState.from_dag(graph, capacity, allow_ties=True)
        s.fixed[s.obs] = True  # observed units stay in layer 0
        return s

    def _K(self):
        return np.zeros(self.max_layers + 3, dtype=np.int64)

    def edge_candidates(self, state, i: int) -> list[int]:
        """Units k whose edge k -> i a Gibbs step may set either way without
        changing any unit's layer or the set of units (003 section 4.4: the
        non-singleton parents, and for the ECIBP also units of higher layers)."""
        out = np.empty(state.capacity, dtype=np.int64)
        n = kern.edge_candidates(state.theta, state.alive, state.Z, int(i), self.skip, out)
        return out[:n].tolist()

    def edge_prior_prob(self, state, k: int, i: int) -> float:
        """P(Z_ki = 1 | rest) under the prior for a candidate parent k of i:
        eta_{-i,k} / (N_l + beta_l - 1) (003 section 4.4)."""
        return float(kern.edge_prior_prob(state.theta, state.alive, state.Z, state.m, int(k), int(i),
                                          self.beta, self._K(), self.skip))

    def propose_birth_death(self, rng: np.random.Generator, state, _plant: int = 0):
        """Reversible-jump birth/death of a parentless singleton parent (§3.3),
        applied tentatively. Returns ``(kind, log_ratio, token)``: kind 0 =
        nothing proposed, 1 = birth, 2 = death; ``log_ratio`` = prior log-ratio
        + log Hastings ratio; ``token`` a :class:`BirthDeathToken` for
        :meth:`undo` naming the born / removed slot."""
        state.ensure_capacity(2)
        cand = np.empty(state.capacity, dtype=np.int64)
        kind, lr, h, i = kern.propose_birth_death(rng, state.theta, state.obs, state.fixed, state.alive, state.tie,
                                                  state.Z, state.m, state.npar, state.a, self.alpha, self.beta,
                                                  self.skip, self._K(), cand, int(_plant))
        if kind == 0:
            return 0, 0.0, NOTHING
        h = int(h)
        tok = BirthDeathToken(int(kind), (h,) if kind == 1 else (), (h,) if kind == 2 else (), int(i))
        return int(kind), float(lr), tok

    def undo(self, state, token: BirthDeathToken) -> None:
        """Undo a birth/death proposal."""
        if token.kind == 0:
            return
        h = token.born[0] if token.kind == 1 else token.removed[0]
        kern.undo_birth_death(state.theta, state.obs, state.fixed, state.alive, state.tie, state.Z, state.m,
                              state.npar, state.a, token.kind, h, token.child)

    def log_prob_state(self, state) -> float:
        """Log-density of the state in ordered-labelled form (hidden units of each
        layer in a uniformly random order, §2.2): the target of the moves.
        ``log_prob(state.to_dag())`` is this plus sum_l log K_l! - log|Aut|."""
        return float(kern.log_prob_ordered(state.theta, state.alive, state.m, self.alpha, self.beta, self._K(),
                                           self.skip))

    def layer_widths(self, state) -> np.ndarray:
        """Widths K_0, K_1, ..., K_M of the layers of a state."""
        K = self._K()
        M = kern.widths(state.theta, state.alive, K)
        return K[:M + 1].copy()

    def update_hyper(self, rng: np.random.Generator, state, names: Sequence[str] = ("alpha", "beta")) -> dict:
        """Update the per-layer hyperparameters under their top-hat priors (§5).

        Layers l <= M + 1 (whose restaurant has customers): slice sampling
        (Neal 2003, shrinkage from the whole prior interval, so no tuning and
        exact) of alpha_l then beta_l given the layer's factor; deeper layers do
        not touch the graph and are drawn from the top-hat prior. Returns
        :attr:`hyper` (also stored on the prior).
        """
        bad = [n for n in names if n not in ("alpha", "beta")]
        if bad:
            raise ValueError(f"unknown hyperparameter(s) {bad}; choose from alpha, beta")
        K = self._K()
        M = kern.widths(state.theta, state.alive, K)
        lay = kern_layers(state)
        m = state.m[state.alive]
        for ll in range(1, self.max_layers + 2):
            if ll > M + 1:
                if "alpha" in names:
                    self.alpha[ll] = rng.uniform(*self.alpha_bounds)
                if "beta" in names:
                    self.beta[ll] = rng.uniform(*self.beta_bounds)
                continue
            C = int(K[ll - 1])
            N = int(K[:ll].sum()) if self.skip else C
            Kl = int(K[ll])
            eta = m[lay == ll].astype(float)
            j = np.arange(C)

            def logf(a, b):
                return (Kl * math.log(a * b) - a * float(np.sum(b / (b + j)))
                        + float(np.sum(gammaln(N - eta + b) - gammaln(N + b))))

            if "alpha" in names:
                b0 = self.beta[ll]
                self.alpha[ll] = _slice_bounded(rng, lambda x: logf(x, b0), self.alpha[ll], self.alpha_bounds)
            if "beta" in names:
                a0 = self.alpha[ll]
                self.beta[ll] = _slice_bounded(rng, lambda x: logf(a0, x), self.beta[ll], self.beta_bounds)
        return self.hyper

    def run_prior_chain(self, rng: np.random.Generator, state, num_steps: int, p_edge: float = 0.5,
                        _plant: int = 0) -> np.ndarray:
        """The prior-only chain (edge Gibbs and birth/death, numba fast path):
        ``num_steps`` steps in place. Returns the proposal/acceptance counts."""
        stats = np.zeros((2, 2), dtype=np.int64)
        left = int(num_steps)
        while left > 0:
            state.ensure_capacity(4)
            left -= kern.run_prior(rng, state.theta, state.obs, state.fixed, state.alive, state.tie, state.Z,
                                   state.m, state.npar, state.a, self.alpha, self.beta, self.skip, float(p_edge),
                                   left, stats, int(_plant))
        return stats


def kern_layers(state) -> np.ndarray:
    """Layers of the alive slots of a state (in slot order)."""
    return theta_layer(state.theta[state.alive])


def _slice_bounded(rng, logf, x0: float, bounds) -> float:
    """One slice-sampling update of x on [lo, hi] (uniform prior) by shrinkage
    from the whole interval (Neal 2003, section 4)."""
    lo, hi = bounds
    level = logf(x0) + math.log(rng.random())
    left, right = lo, hi
    for _ in range(200):
        x = left + (right - left) * rng.random()
        if logf(x) > level:
            return float(x)
        if x < x0:
            left = x
        else:
            right = x
    return float(x0)


# ------------------------------------------------------------ automorphisms
def automorphisms(graph: DAG, layer: np.ndarray | None = None) -> int:
    """``|Aut(G)|``: automorphisms of the DAG that fix every observed node.

    Hidden twins (same layer, same parents, same children) are interchangeable:
    ``|Aut(G)| = |Aut_c(Q)| prod_c n_c!``, with Q the quotient by twin classes
    (n_c the class sizes) and Aut_c the automorphisms of Q that preserve the
    class sizes, counted by VF2 (networkx) on Q (§2.3).
    """
    import networkx as nx
    from networkx.algorithms.isomorphism import DiGraphMatcher

    n = graph.num_nodes
    lay = theta_layer(graph.theta) if layer is None else np.asarray(layer)
    par = graph.parent_sets()
    ch = graph.child_sets()
    classes: dict = {}
    cls_of = np.empty(n, dtype=np.int64)
    for k in range(n):
        key = ("obs", k) if graph.observed[k] else ("hid", int(lay[k]), tuple(sorted(par[k])), tuple(sorted(ch[k])))
        cls_of[k] = classes.setdefault(key, len(classes))
    sizes = np.bincount(cls_of, minlength=len(classes))
    q = nx.DiGraph()
    for key, c in classes.items():
        q.add_node(c, colour=key[:2] if key[0] == "obs" else ("hid", key[1], int(sizes[c])))
    q.add_edges_from({(int(cls_of[p]), int(cls_of[c])) for p, c in zip(graph.parents, graph.children)})
    gm = DiGraphMatcher(q, q, node_match=lambda x, y: x["colour"] == y["colour"])
    count = sum(1 for _ in gm.isomorphisms_iter())
    return int(count * math.prod(math.factorial(int(s)) for s in sizes))
