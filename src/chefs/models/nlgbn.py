"""Nonlinear Gaussian belief network (NLGBN) with an ICP prior on its structure.

Unit i (Frey 1997; 003 section 2; 002 section 4.1)::

    y_i = b_i + sum_k Z_ki W_ki u_k + eps_i,   eps_i ~ N(0, 1/rho_i),   u_i = sigmoid(y_i)

so u_i in (0, 1) has density N(logit u; mu_i, 1/rho_i) / (u (1 - u)). Observed
units (theta = 0, or inputs at theta = 1) hold the data mapped into (0, 1);
hidden units carry one latent activation per data point. Priors (shape,
rate): rho ~ Gamma(0.5, 0.5), b ~ N(0, 1), W ~ N(0, 1) (or W ~ N(0, v) with
1/v ~ Gamma(a, b) sampled, ``weight_prior=(a, b)``).

Everything is stored per slot of the :class:`~chefs.mcmc.state.GraphState`
(arrays of its capacity) in pre-activation space: ``Y[i]`` = logit(u_i),
``U[i]`` = u_i and ``MU[i]`` = b_i + sum over parents (kept exact after every
change). One sweep (``NLGBN.sweep``):

1. hidden activations: multiple-try Metropolis, tries from the prior given the
   parents, selected by the children's likelihood (003 section 4.1),
   vectorised over data points and tries (or univariate slice sampling,
   ``activation_update="slice"``);
2. ``(b_i, W_.i)`` jointly from their Gaussian conditional, rho_i from its Gamma
   conditional (003 sections 4.2-4.3);
3. structure: an edge pass over every node with W_ki integrated out
   (collapsed Gibbs for (Z_ki, W_ki)), then a fixed number of birth/death,
   order and depth proposals using the ICP kernels of :mod:`chefs.mcmc`; new
   units' (b, rho, activations) are proposed from their prior, the new edge
   weight is integrated out and then drawn from its conditional.

With ``noncentred=True``, step 2 is followed by two slice-sampling updates per
hidden unit with a child, in the coordinates ``eps_h = sqrt(rho_h) (Y_h - MU_h)``
held fixed: ``log rho_h``, and a common scale of ``(b_h, W_.h)`` (docs/derivations.md
section 3.24).

Derivations: docs/derivations.md section 3.
"""

from __future__ import annotations

import math

import numpy as np
from scipy.special import expit

from ..mcmc import _kernels as kern
from . import _nlgbn_kernels as _kern

LOG_2PI = math.log(2 * math.pi)
ACTIVATION_UPDATES = ("slice", "mtm", "mtm+slice")
# How a fresh chain's hidden activations start (``init_activations``; NLGBN.project_activations,
# docs/derivations.md section 3.5)
INIT_ACTIVATIONS = ("projection", "prior")
# rows of NLGBN.stats (proposals, acceptances); "hmc" counts transitions and
# accepted ones
MOVE_NAMES = ("edge", "birth_death", "order", "depth", "activations", "hmc", "reversal", "relocate")
PROJECTION_SCALE = 3.0
PROJECTION_OFFSET_SD = 0.5


def collapsed_gain(u: np.ndarray, r: np.ndarray, rho: float, v: float = 1.0) -> tuple[float, float, float]:
    """Log marginal-likelihood gain of adding regressor ``u`` with weight
    W ~ N(0, v) to residual ``r`` ~ N(0, 1/rho): returns (log gain, posterior
    mean, posterior variance) of W.

    log [int N(r; W u, 1/rho) N(W; 0, v) dW / N(r; 0, 1/rho)]
        = -0.5 log(1 + v s) + 0.5 v t^2 / (1 + v s),  s = rho u.u,  t = rho u.r

    Derivation: docs/derivations.md section 3.2 ("Edges, collapsed").
    """
    s = rho * float(u @ u)
    t = rho * float(u @ r)
    d = 1.0 + v * s
    return -0.5 * math.log(d) + 0.5 * v * t * t / d, v * t / d, v / d


def check_flag(name: str, value) -> bool:
    """A True/False setting ``name`` as a bool; anything else (1, "yes", None) is refused."""
    if not isinstance(value, (bool, np.bool_)):
        raise ValueError(f"{name} must be True or False, got {value!r}")
    return bool(value)


def check_noncentred(value) -> bool:
    """``noncentred`` (:meth:`NLGBN.noncentred_update`) as a bool; anything but True or False is refused."""
    return check_flag("noncentred", value)


def check_likelihood_power(power, hmc_steps: int = 0) -> float:
    """The power of the observed units' likelihood: a number in (0, 1] (1: the posterior itself),
    and 1 when the joint HMC kernel runs (``hmc_steps`` > 0), which targets the untempered likelihood."""
    if isinstance(power, bool) or not isinstance(power, (int, float, np.integer, np.floating)) \
            or not 0.0 < float(power) <= 1.0:
        raise ValueError(f"likelihood_power (--likelihood-power) must be a number in (0, 1], got {power!r}")
    if float(power) != 1.0 and hmc_steps:
        raise ValueError("hmc_steps needs likelihood_power 1 (the joint HMC kernel targets the untempered likelihood)")
    return float(power)


class NLGBN:
    """NLGBN likelihood and its within-model updates on a graph state (003 sections 2 and 4,
    002 section 4.1; docs/derivations.md section 3).

    Parameters
    ----------
    data : array (N, D)
        Observed values already mapped into (0, 1) (one column per observed node).
    rng : numpy.random.Generator
        Used to initialise parameters.
    num_tries : int
        Tries of the multiple-try Metropolis update of hidden activations.
    init_activations : "prior" or "projection"
        How :meth:`init_from_state` starts the hidden activations of a fresh
        chain: ancestral draws from the prior, or (``"projection"``) soft
        half-space features of the data (see ``INIT_ACTIVATIONS``). Only the start
        differs; every update is the same.
    likelihood_power : float in (0, 1]
        The observed units' likelihood raised to this power (1: the posterior; below 1 a
        power posterior, docs/derivations.md 3.19). Their precision slots hold
        ``power * rho``.
    noncentred : bool
        After the Gibbs updates of each sweep, :meth:`noncentred_update`: each hidden unit's
        precision and incoming scale in non-centred coordinates (docs/derivations.md 3.24).
    relocate : bool
        With free observed orders (causal discovery), :meth:`relocate_move` once per structure
        round after the reversal: an observed unit moved to a fresh order value with its edges to
        the other observed units redrawn (docs/derivations.md 3.8). No effect with fixed orders.
    """

    is_null = False
    #: tests only: planted errors in the power posterior's precision update, the controls of
    #: tests/test_causal.py::test_stationarity_power_posterior: 1 leaves the residual sum of squares untempered,
    #: 2 tempers the hidden units' precisions too
    power_plant = 0
    #: tests only: planted errors in :meth:`noncentred_update` (tests/test_noncentred.py): 1 drops the log-rho
    #: Jacobian, 2 drops the scale move's Jacobian g^(p + 1), 3 drops the children's likelihood (the data's term)
    noncentred_plant = 0

    def __init__(self, data: np.ndarray, capacity: int, rng: np.random.Generator, num_tries: int = 4,
                 structure_moves: int | None = None, rho_prior=(0.5, 0.5), weight_var: float = 1.0,
                 bias_var: float = 1.0, structure_prior=None, activation_update: str = "mtm",
                 weight_prior=None, init_activations: str = "prior", hmc_steps: int = 0, hmc_adapt: int = 0,
                 hmc_plant: int = 0, likelihood_power: float = 1.0, noncentred: bool = False,
                 relocate: bool = False):
        self.noncentred = check_noncentred(noncentred)
        self.relocate = check_flag("relocate", relocate)
        if init_activations not in INIT_ACTIVATIONS:
            raise ValueError(f"init_activations must be one of {INIT_ACTIVATIONS}, got {init_activations!r}")
        self.init_activations = init_activations
        if activation_update not in ACTIVATION_UPDATES:
            raise ValueError(f"activation_update must be one of {ACTIVATION_UPDATES}, got {activation_update!r}")
        self.activation_update = activation_update
        data = np.asarray(data, dtype=float)
        if data.ndim != 2 or data.shape[0] < 2:
            raise ValueError("NLGBN data must be a 2-D array with at least two rows")
        if np.any(~np.isfinite(data)) or np.any(data <= 0) or np.any(data >= 1):
            raise ValueError("NLGBN data must lie strictly inside (0, 1); map it with chefs.density.UnitMap first")
        self.N, self.D = data.shape
        self.num_tries = int(num_tries)
        # the observed units' likelihood raised to this power (a power posterior; docs/derivations.md 3.19): their
        # precision slots then hold power * rho, so that every update reading a slot targets the tempered density
        self.likelihood_power = check_likelihood_power(likelihood_power, hmc_steps)
        self.rho_prior = (float(rho_prior[0]), float(rho_prior[1]))
        self.weight_var, self.bias_var = float(weight_var), float(bias_var)
        # None: W ~ N(0, weight_var) fixed; (shape, rate): the weights' precision
        # 1/weight_var ~ Gamma(shape, rate) is sampled (003 section 3.4's
        # normal-gamma hyperprior, one precision for all weights)
        if weight_prior is not None:
            weight_prior = (float(weight_prior[0]), float(weight_prior[1]))
            if not (weight_prior[0] > 0 and weight_prior[1] > 0 and all(map(math.isfinite, weight_prior))):
                raise ValueError(f"weight_prior must be (shape, rate) > 0, got {weight_prior}")
        self.weight_prior = weight_prior
        # None: the ICP (numba kernels of chefs.mcmc); otherwise an object with the
        # prior-move API of chefs.priors.cibp (edge_candidates, edge_prior_prob,
        # propose_birth_death, undo, update_hyper)
        self.structure_prior = structure_prior
        self.update_prior_hyper = True
        self.structure_moves = int(structure_moves) if structure_moves else max(10, 2 * self.D)
        cap = int(capacity)
        self.b = np.zeros(cap)
        self.rho = np.ones(cap)
        self.W = np.zeros((cap, cap))
        self.Y = np.zeros((cap, self.N))
        self.U = np.full((cap, self.N), 0.5)
        self.MU = np.zeros((cap, self.N))
        self.Y[: self.D] = (np.log(data) - np.log1p(-data)).T
        self.U[: self.D] = data.T
        self.jacobian = -np.sum(np.log(data) + np.log1p(-data), axis=0)  # log 1/(u(1-u)) per column
        self.rho[: self.D] = 1.0 / np.maximum(self.Y[: self.D].var(axis=1), 1e-3)
        self.b[: self.D] = self.Y[: self.D].mean(axis=1)
        self.stats = np.zeros((len(MOVE_NAMES), 2), dtype=np.int64)
        # joint non-centred HMC of the continuous state for the current structure
        # (chefs.models.hmc; docs/derivations.md section 3.6); None: Gibbs updates only
        self.hmc = None
        if hmc_steps:
            from .hmc import ContinuousHMC

            self.hmc = ContinuousHMC(hmc_steps, hmc_adapt, plant=hmc_plant)

    # --------------------------------------------------------- bookkeeping
    @property
    def capacity(self) -> int:
        return self.b.shape[0]

    def match_capacity(self, state) -> None:
        new = state.capacity
        old = self.capacity
        if new == old:
            return
        keep = min(new, old)  # a smaller state (a fresh one) has nothing beyond its capacity
        for name in ("b", "rho"):
            arr = np.zeros(new) if name == "b" else np.ones(new)
            arr[:keep] = getattr(self, name)[:keep]
            setattr(self, name, arr)
        W = np.zeros((new, new))
        W[:keep, :keep] = self.W[:keep, :keep]
        self.W = W
        for name, fill in (("Y", 0.0), ("U", 0.5), ("MU", 0.0)):
            arr = np.full((new, self.N), fill)
            arr[:keep] = getattr(self, name)[:keep]
            setattr(self, name, arr)

    def parents(self, state, i) -> np.ndarray:
        return np.flatnonzero(state.Z[:, i] & state.alive)

    def children(self, state, k) -> np.ndarray:
        return np.flatnonzero(state.Z[k, :] & state.alive)

    def refresh_mu(self, state, i) -> None:
        pa = self.parents(state, i)
        self.MU[i] = self.b[i] + (self.W[pa, i] @ self.U[pa] if pa.size else 0.0)

    def init_from_state(self, state, rng) -> None:
        """Draw missing hidden activations/parameters from the prior, ancestrally;
        with ``init_activations="projection"`` the hidden activations then start
        at data features (:meth:`project_activations`). Priors of 002 section 4.1;
        the start: docs/derivations.md section 3.5."""
        self.match_capacity(state)
        order = np.argsort(state.theta[: state.capacity] + np.where(state.alive, 0.0, 10.0))[::-1]
        for i in order:
            if not state.alive[i]:
                continue
            pa = self.parents(state, i)
            for k in pa:
                if self.W[k, i] == 0.0:
                    self.W[k, i] = rng.normal() * math.sqrt(self.weight_var)
            self.refresh_mu(state, i)
            if not state.obs[i]:
                self.b[i] = rng.normal() * math.sqrt(self.bias_var) if self.b[i] == 0.0 else self.b[i]
                self.refresh_mu(state, i)
                self.Y[i] = self.MU[i] + rng.normal(size=self.N) / math.sqrt(self.rho[i])
                self.U[i] = expit(self.Y[i])
        if self.init_activations == "projection":
            self.project_activations(state, rng)

    def project_activations(self, state, rng) -> None:
        """Start every alive hidden unit at a soft half-space feature of the data.

        With ``X`` the observed units' pre-activations (logit of the mapped data),
        standardised per column, unit h gets ``Y_h = s (p - c)``: ``p = X v``
        standardised over the data points, ``v`` a uniformly random direction,
        ``c ~ N(0, PROJECTION_OFFSET_SD^2)``, ``s = PROJECTION_SCALE``; then every
        node's mean is recomputed. A chain started from prior draws has to discover
        such features through the activation updates, and with structure moves
        already running it often loses its shared hidden units first (ring:
        3 of 6 chains ended with independent columns, docs/derivations.md 3.5).
        """
        X = self.Y[: self.D].T
        sd = X.std(axis=0)
        Xs = (X - X.mean(axis=0)) / np.where(sd > 0, sd, 1.0)
        for h in np.flatnonzero(state.alive & ~state.obs):
            v = rng.normal(size=self.D)
            v /= max(np.linalg.norm(v), 1e-300)
            c = PROJECTION_OFFSET_SD * rng.normal()
            p = Xs @ v
            psd = p.std()
            p = (p - p.mean()) / psd if psd > 0 else np.zeros(self.N)
            self.Y[h] = PROJECTION_SCALE * (p - c)
            self.U[h] = expit(self.Y[h])
        for i in np.flatnonzero(state.alive):
            self.refresh_mu(state, i)

    # ----------------------------------------------------------- densities
    def node_loglik(self, i) -> float:
        r = self.Y[i] - self.MU[i]
        return 0.5 * self.N * (math.log(self.rho[i]) - LOG_2PI) - 0.5 * self.rho[i] * float(r @ r)

    def log_likelihood(self, state) -> float:
        """log p(observed data | structure, parameters, hidden activations), in (0, 1) units.

        The NLGBN unit density of 003 section 2 (002 section 4.1) with the logistic
        sigmoid (docs/derivations.md section 3.1).
        """
        return float(sum(self.node_loglik(i) for i in range(self.D)) + self.jacobian.sum())

    # -------------------------------------------------------- activations
    def update_activations(self, rng, state, plant: int = 0) -> None:
        """Every hidden unit's activations, one data point at a time (numba kernels):
        multiple-try Metropolis with tries from the prior given the parents
        (``"mtm"``, the default), univariate slice sampling of the full
        conditional (``"slice"``), or both in turn. ``plant`` (tests only): a planted
        error in the slice sampler's conditional (the prior mean shifted).
        003 section 4.1; docs/derivations.md section 3.2."""
        hidden = np.flatnonzero(state.alive & ~state.obs)
        if self.activation_update == "mtm":  # all units in one parallel region (same numbers as unit by unit)
            J = self.num_tries
            z = np.empty((hidden.size, 2 * J - 1, self.N))
            uu = np.empty((hidden.size, 2, self.N))
            kids = []
            for u, h in enumerate(hidden):  # the random stream of the unit-by-unit loop below
                rng.standard_normal(out=z[u])
                rng.random(out=uu[u])
                kids.append(self.children(state, h))
            ptr = np.zeros(hidden.size + 1, dtype=np.int64)
            ptr[1:] = np.cumsum([k.size for k in kids])
            idx = np.concatenate(kids).astype(np.int64) if kids else np.zeros(0, dtype=np.int64)
            acc = _kern.mtm_units(self.Y, self.U, self.MU, self.W, self.rho, hidden, ptr, idx, J, z, uu)
            self.stats[4, 0] += self.N * hidden.size
            self.stats[4, 1] += acc
            return
        for h in hidden:
            ch = self.children(state, h)
            if self.activation_update != "slice":
                J = self.num_tries
                z = rng.standard_normal((2 * J - 1, self.N))
                uu = rng.random((2, self.N))
                acc = _kern.mtm_unit(self.Y, self.U, self.MU, self.W, self.rho, h, ch, J, z, uu)
                self.stats[4, 0] += self.N
                self.stats[4, 1] += acc
            if self.activation_update != "mtm":
                _kern.slice_unit(self.Y, self.U, self.MU, self.W, self.rho, h, ch, int(rng.integers(2**31)), 8, plant)

    # ---------------------------------------------------------- parameters
    def update_parameters(self, rng, state, priors) -> None:
        """Gibbs updates of ``(b_i, W_.i)`` jointly and of ``rho_i`` for every alive unit
        (003 sections 4.2-4.3; docs/derivations.md section 3.2)."""
        for i in np.flatnonzero(state.alive):
            pa = self.parents(state, i)
            X = np.vstack([np.ones(self.N), self.U[pa]])  # (1 + p, N)
            prior_prec = np.full(1 + pa.size, 1.0 / self.weight_var)
            prior_prec[0] = 1.0 / self.bias_var
            prec = np.diag(prior_prec) + self.rho[i] * (X @ X.T)
            L = np.linalg.cholesky(prec)
            rhs = self.rho[i] * (X @ self.Y[i])
            mean = np.linalg.solve(L.T, np.linalg.solve(L, rhs))
            beta = mean + np.linalg.solve(L.T, rng.normal(size=1 + pa.size))
            self.b[i] = beta[0]
            self.W[pa, i] = beta[1:]
            self.MU[i] = beta @ X
            r = self.Y[i] - self.MU[i]
            # an observed unit's tempered conditional Gamma(a + eta N / 2, b + eta S / 2), its slot eta * rho
            # (eta = 1, and every hidden unit: the plain conditional, to the last bit)
            e = self.likelihood_power if state.obs[i] or self.power_plant == 2 else 1.0
            es = 1.0 if self.power_plant == 1 else e
            self.rho[i] = e * rng.gamma(priors[0] + 0.5 * e * self.N, 1.0 / (priors[1] + 0.5 * es * float(r @ r)))

    # ----------------------------------------------------------- structure
    def _propose_new_unit(self, rng, state, h, parent=-1) -> None:
        """Prior draws for a new unit's bias, precision and activations."""
        self.match_capacity(state)
        self.b[h] = rng.normal() * math.sqrt(self.bias_var)
        self.rho[h] = rng.gamma(self.rho_prior[0], 1.0 / self.rho_prior[1])
        self.W[:, h] = 0.0
        self.W[h, :] = 0.0
        mu = np.full(self.N, self.b[h])
        if parent >= 0:
            self.W[parent, h] = rng.normal() * math.sqrt(self.weight_var)
            mu = mu + self.W[parent, h] * self.U[parent]
        self.MU[h] = mu
        self.Y[h] = mu + rng.normal(size=self.N) / math.sqrt(self.rho[h])
        self.U[h] = expit(self.Y[h])

    def edge_pass(self, rng, state, hyper) -> None:
        """Collapsed Gibbs of (Z_ki, W_ki) over every node and candidate parent (numba kernel).

        Prior conditional: eq. 13 of 002; with the collapsed likelihood gain of
        docs/derivations.md section 3.2 (section 2.2 for the prior side).
        """
        theta, obs, fixed, alive, tie, Z, m, npar, a = state.arrays()
        _kern.edge_pass(rng, theta, obs, alive, Z, m, npar, a, self.W, self.Y, self.U, self.MU, self.rho,
                        hyper["alpha"], hyper["phi"], self.weight_var, self.stats)

    def birth_death(self, rng, state, hyper) -> None:
        """Birth or death of a singleton-orphan hidden parent (eqs. 14-15 of 002, re-derived:
        docs/derivations.md sections 2.3 and 3.2)."""
        state.ensure_capacity(4)
        self.match_capacity(state)
        theta, obs, fixed, alive, tie, Z, m, npar, a = state.arrays()
        cand = np.empty(state.capacity, dtype=np.int64)
        kind, lr, h, i = kern.propose_birth_death(rng, theta, obs, fixed, alive, tie, Z, m, npar, a, cand,
                                                  hyper["alpha"], hyper["gamma"], hyper["phi"], 0)
        if kind != 0:
            self._accept_birth_death(rng, state, kind, lr, h, i, lambda: kern.undo_birth_death(
                theta, obs, fixed, alive, tie, Z, m, npar, a, kind, h, i))

    # the collapsed structure moves (derivations §3.2): the changing weight is integrated out
    def _base(self, i) -> np.ndarray:
        """Unit i's residual Y_i - MU_i."""
        return self.Y[i] - self.MU[i]

    def _gain(self, u, r, i) -> tuple:
        """Collapsed gain of regressor ``u`` on unit i's residual ``r`` (from ``_base`` plus the
        changing weight's term): ``collapsed_gain``."""
        return collapsed_gain(u, r, self.rho[i], self.weight_var)

    def _set_with_edge(self, rng, g, i, r, u) -> float:
        """Draw the collapsed weight from its conditional given the edge, set MU_i, return the
        weight."""
        w = g[1] + math.sqrt(g[2]) * rng.normal()
        self.MU[i] = self.Y[i] - r + w * u
        return w

    def _set_without_edge(self, i, r) -> None:
        """Set MU_i without the edge."""
        self.MU[i] = self.Y[i] - r

    def _accept_birth_death(self, rng, state, kind, lr, h, i, undo) -> None:
        """Likelihood side of a tentatively applied birth (kind 1) or death (2) of
        h, the only parent-less parent of i: new unit from its prior, W_hi
        collapsed (derivations §3.2); ``undo()``
        reverts the structure."""
        self.stats[1, 0] += 1
        if kind == 1:
            self._propose_new_unit(rng, state, h)
            r0 = self._base(i)
            g = self._gain(self.U[h], r0, i)
            if math.log(rng.random()) < lr + g[0]:
                self.W[h, i] = self._set_with_edge(rng, g, i, r0, self.U[h])
                self.stats[1, 1] += 1
            else:
                undo()
        else:
            r0 = self._base(i) + self.W[h, i] * self.U[h]
            g = self._gain(self.U[h], r0, i)
            if math.log(rng.random()) < lr - g[0]:
                self.W[h, i] = 0.0
                self._set_without_edge(i, r0)
                self.stats[1, 1] += 1
            else:
                undo()

    def order_move(self, rng, state, hyper) -> None:
        """Metropolis-Hastings move of one order value (eq. 16 of 002; docs/derivations.md
        sections 2.4 and 3.2: the likelihood does not involve the orders)."""
        theta, obs, fixed, alive, tie, Z, m, npar, a = state.arrays()
        ok, lr, i, old = kern.propose_order(rng, theta, obs, fixed, alive, tie, Z, m, a,
                                            hyper["alpha"], hyper["gamma"], hyper["phi"], 0)
        if not ok:
            return
        self.stats[2, 0] += 1
        if math.log(rng.random()) < lr:  # the likelihood does not depend on the orders
            self.stats[2, 1] += 1
        else:
            kern.apply_move_node(theta, alive, a, i, old)

    def reversal_move(self, rng, state, hyper, plant: int = 0) -> None:
        """Reverse an edge between two observed units with free orders and swap their order
        values (causal discovery, docs/derivations.md section 3.8). The edge is picked uniformly
        among the E such edges (E is unchanged by the move, and the move is its own inverse, so the
        proposal is symmetric); the swap is a permutation of the order values (Jacobian 1); a
        state that breaks the order along another edge is rejected. Both weights are integrated
        out: ``log A = log p(G') - log p(G) + log gain(u_i -> k) - log gain(u_k -> i)``; on
        acceptance W_ik is drawn from its conditional. With no such edge (every observed order
        fixed, as in density estimation) it draws no random number. ``plant`` (tests only): 1 drops
        the prior ratio."""
        theta, obs, fixed, alive, tie, Z, m, npar, a = state.arrays()
        cap = state.capacity
        ok = alive & obs[:cap] & ~fixed[:cap]
        ks, iis = np.nonzero(Z[:cap, :cap] & ok[:, None] & ok[None, :])
        if ks.size == 0:
            return
        e = int(rng.integers(ks.size))
        k, i = int(ks[e]), int(iis[e])
        self.stats[6, 0] += 1
        tk, ti = theta[k], theta[i]
        # the swapped orders must keep every other edge of k and i pointing down
        pa_i = self.parents(state, i)
        ch_k = self.children(state, k)
        if np.any(theta[pa_i[pa_i != k]] <= tk) or np.any(theta[ch_k[ch_k != i]] >= ti):
            return
        before = state.log_prior(hyper["alpha"], hyper["gamma"], hyper["phi"])
        r_i = self._base(i) + self.W[k, i] * self.U[k]
        gain_old = self._gain(self.U[k], r_i, i)[0]
        r_k = self._base(k)
        g_new = self._gain(self.U[i], r_k, k)
        gain_new = g_new[0]

        def swap(p, c):
            """Edge p -> c becomes c -> p; c moves up onto p's order value (a momentary tie, which
            apply_move_node's strict counts handle), then p moves down to c's old value."""
            tp, tc = theta[p], theta[c]
            kern.apply_set_edge(Z, m, npar, p, c, False)
            kern.apply_set_edge(Z, m, npar, c, p, True)
            kern.apply_move_node(theta, alive, a, c, tp)
            kern.apply_move_node(theta, alive, a, p, tc)

        swap(k, i)
        after = state.log_prior(hyper["alpha"], hyper["gamma"], hyper["phi"])
        lr = (0.0 if plant == 1 else after - before) + gain_new - gain_old
        if math.log(rng.random()) < lr:
            self.W[k, i] = 0.0
            self._set_without_edge(i, r_i)
            self.W[i, k] = self._set_with_edge(rng, g_new, k, r_k, self.U[i])
            self.stats[6, 1] += 1
        else:
            swap(i, k)  # the same involution undoes it: i -> k back to k -> i, orders back

    def relocate_move(self, rng, state, hyper, plant: int = 0) -> None:
        """Move an observed unit with a free order to a fresh order value and redraw its edges to
        the other observed units (causal discovery, docs/derivations.md 3.8, "Relocation").

        Pick ``i`` uniformly among the observed units with free orders and ``t' ~ U(0, 1)``; a
        state in which a hidden parent of ``i`` lies at or below ``t'`` (or a hidden child at or
        above it) has target density 0 and is rejected. Otherwise every edge between ``i`` and
        another observed unit is removed (the *base*, the same from both sides), ``theta_i`` set to
        ``t'``, and the observed units above ``t'`` (as parents of ``i``), then those below it (as
        children), in slot order, are each included with the probability that the edge pass's
        Gibbs step would give it in that context (ICP prior odds times the collapsed gain), its
        weight drawn from its conditional. The reverse proposal re-adds the old edges with their
        old weights from the base at the old order value, through the same walk. With the weights'
        densities cancelling against the gains (each added edge's joint term is its gain times its
        weight's conditional density),
        ``log A = log p(G') - log p(G) + sum gain' - log q' - (sum gain - log q)``, the sums over the
        walks' included edges and ``q`` the walks' inclusion probabilities. ``plant`` (tests only):
        1 drops ``log q`` and ``log q'``; 2 drops the prior ratio; 3 evaluates the reverse walk at the new order
        value instead of the old one."""
        theta, obs, fixed, alive, tie, Z, m, npar, a = state.arrays()
        cap = state.capacity
        free = np.flatnonzero(alive & obs[:cap] & ~fixed[:cap])
        if free.size == 0:
            return
        i = int(free[rng.integers(free.size)])
        t_new = float(rng.random())
        self.stats[7, 0] += 1
        pa, ch = self.parents(state, i), self.children(state, i)
        if np.any(theta[pa[~obs[pa]]] <= t_new) or np.any(theta[ch[~obs[ch]]] >= t_new):
            return
        al, ga, ph = hyper["alpha"], hyper["gamma"], hyper["phi"]
        t_old = float(theta[i])
        old = {int(k): float(self.W[k, i]) for k in pa[obs[pa]]}
        old_ch = {int(c): float(self.W[i, c]) for c in ch[obs[ch]]}
        units = np.flatnonzero(alive & obs[:cap])  # every MU row and W entry the move can touch
        mu0 = self.MU[units].copy()
        w0 = self.W[np.ix_(units, units)].copy()
        before = state.log_prior(al, ga, ph)

        def clear():
            """To the base: no edge between i and another observed unit."""
            for k in self.parents(state, i):
                if obs[k]:
                    self.MU[i] -= self.W[k, i] * self.U[k]
                    self.W[k, i] = 0.0
                    kern.apply_set_edge(Z, m, npar, k, i, False)
            for c in self.children(state, i):
                if obs[c]:
                    self.MU[c] -= self.W[i, c] * self.U[i]
                    self.W[i, c] = 0.0
                    kern.apply_set_edge(Z, m, npar, i, c, False)

        def walk(given):
            """From the base at theta_i: each observed unit above i as a parent, then each below as
            a child, in slot order, included with its Gibbs probability in the context so far
            (``given``: the edges to include and their weights, for the reverse path; None: draw).
            Returns (sum of the included edges' gains, log probability of the decisions)."""
            gains = logq = 0.0
            ti = theta[i]
            for side in (0, 1):  # 0: candidate parents k -> i; 1: candidate children i -> k
                for k in units:
                    if k == i or (theta[k] <= ti if side == 0 else theta[k] >= ti):
                        continue
                    p, c = (k, i) if side == 0 else (i, k)
                    g = self._gain(self.U[p], self.Y[c] - self.MU[c], c)
                    p1 = kern.edge_prior_prob(obs, Z, m, a, p, c, al, ph)
                    logit = math.log(p1) - math.log1p(-p1) + g[0]
                    inc = (int(k) in given[side]) if given is not None else rng.random() < expit(logit)
                    logq -= np.logaddexp(0.0, -logit if inc else logit)
                    if inc:
                        gains += g[0]
                        w = given[side][int(k)] if given is not None else g[1] + math.sqrt(g[2]) * rng.normal()
                        self.MU[c] += w * self.U[p]
                        self.W[p, c] = w
                        kern.apply_set_edge(Z, m, npar, p, c, True)
            return gains, logq

        clear()
        if plant == 3:
            kern.apply_move_node(theta, alive, a, i, t_new)
        gain_old, q_old = walk((old, old_ch))  # the reverse path: back to the current state
        clear()
        kern.apply_move_node(theta, alive, a, i, t_new)
        gain_new, q_new = walk(None)
        after = state.log_prior(al, ga, ph)
        if plant == 1:
            q_old = q_new = 0.0
        lr = (0.0 if plant == 2 else after - before) + (gain_new - q_new) - (gain_old - q_old)
        if math.log(rng.random()) < lr:
            for j in units:  # the incremental means, recomputed from the weights
                self.refresh_mu(state, j)
            self.stats[7, 1] += 1
            return
        clear()
        kern.apply_move_node(theta, alive, a, i, t_old)
        for k in old:
            kern.apply_set_edge(Z, m, npar, k, i, True)
        for c in old_ch:
            kern.apply_set_edge(Z, m, npar, i, c, True)
        self.MU[units] = mu0
        self.W[np.ix_(units, units)] = w0

    def depth_move(self, rng, state, hyper) -> None:
        """Insert or remove a hidden unit on an edge (the "increase depth" move of 002's
        future work, section 5; docs/derivations.md sections 2.5 and 3.2)."""
        state.ensure_capacity(4)
        self.match_capacity(state)
        theta, obs, fixed, alive, tie, Z, m, npar, a = state.arrays()
        kind, lr, h, k, i = kern.propose_depth(rng, theta, obs, fixed, alive, tie, Z, m, npar, a,
                                               hyper["alpha"], hyper["gamma"], hyper["phi"])
        if kind == 0:
            return
        self.stats[3, 0] += 1
        if kind == 1:
            # G had k -> i with W_ki (collapsed out of both sides); h gets prior draws given k
            self._propose_new_unit(rng, state, h, parent=k)
            r0 = self._base(i) + self.W[k, i] * self.U[k]
            g_new = self._gain(self.U[h], r0, i)
            gain_old = self._gain(self.U[k], r0, i)[0]
            if math.log(rng.random()) < lr + g_new[0] - gain_old:
                self.W[k, i] = 0.0
                self.W[h, i] = self._set_with_edge(rng, g_new, i, r0, self.U[h])
                self.stats[3, 1] += 1
            else:
                kern.undo_depth(theta, obs, fixed, alive, tie, Z, m, npar, a, kind, h, k, i)
        else:
            r0 = self._base(i) + self.W[h, i] * self.U[h]
            gain_old = self._gain(self.U[h], r0, i)[0]
            g_new = self._gain(self.U[k], r0, i)
            if math.log(rng.random()) < lr + g_new[0] - gain_old:
                self.W[h, i] = 0.0
                self.W[k, h] = 0.0
                self.W[k, i] = self._set_with_edge(rng, g_new, i, r0, self.U[k])
                self.stats[3, 1] += 1
            else:
                kern.undo_depth(theta, obs, fixed, alive, tie, Z, m, npar, a, kind, h, k, i)

    # ------------------------------------------- other structure priors
    def edge_pass_prior(self, rng, state) -> None:
        """Collapsed edge Gibbs with the conditionals of ``structure_prior`` (CIBP/ECIBP:
        docs/derivations.md section 3.4, docs/derivations-cibp.md sections 2.4 and 4.3)."""
        prior = self.structure_prior
        for i in np.flatnonzero(state.alive).tolist():
            changed = False
            for k in prior.edge_candidates(state, i):
                p1 = prior.edge_prior_prob(state, k, i)
                cur = bool(state.Z[k, i])
                gain, mean, var = _kern.collapsed(self.U, self.Y, self.MU, self.W, self.rho, k, i, cur,
                                                  self.weight_var)
                if p1 <= 0.0 or p1 >= 1.0:
                    new = p1 >= 1.0
                else:
                    logit = math.log(p1) - math.log1p(-p1) + gain
                    new = rng.random() < (1.0 / (1.0 + math.exp(-logit)) if logit > -700 else 0.0)
                w_old = self.W[k, i] if cur else 0.0
                w_new = mean + math.sqrt(var) * rng.normal() if new else 0.0
                self.MU[i] += (w_new - w_old) * self.U[k]
                self.W[k, i] = w_new
                if new != cur:
                    kern.apply_set_edge(state.Z, state.m, state.npar, k, i, new)
                    changed = True
            self.stats[0, 0] += 1
            self.stats[0, 1] += int(changed)

    def birth_death_prior(self, rng, state) -> None:
        """Birth/death of a parentless singleton unit under ``structure_prior``
        (docs/derivations-cibp.md sections 3 and 4.3; docs/derivations.md section 3.4)."""
        prior = self.structure_prior
        state.ensure_capacity(4)
        self.match_capacity(state)
        kind, lr, tok = prior.propose_birth_death(rng, state)
        if kind != 0:
            h = tok.born[0] if kind == 1 else tok.removed[0]
            self._accept_birth_death(rng, state, kind, lr, h, tok.child, lambda: prior.undo(state, tok))

    def update_within(self, rng, state) -> None:
        """Activations and parameters for a fixed structure (steps 1-2 of a sweep;
        003 sections 4.1-4.3, docs/derivations.md sections 3.2 and 3.6)."""
        self.match_capacity(state)
        self.update_activations(rng, state)
        self.update_parameters(rng, state, self.rho_prior)
        if self.hmc is not None:
            self.hmc.match_capacity(self.capacity)
            accepted, _ = self.hmc.step(self, state, rng)
            self.stats[5, 0] += 1
            self.stats[5, 1] += int(accepted)
        self.update_weight_var(rng, state)
        if self.noncentred:
            self.noncentred_update(rng, state)

    def noncentred_update(self, rng, state) -> None:
        """For every hidden unit h with a child, with its standardised noise
        ``eps_h = sqrt(rho_h) (Y_h - MU_h)`` held fixed (so that ``Y_h`` moves with the update):
        a slice-sampling update of ``log rho_h``, then one of a common scale ``g`` of
        ``(b_h, W_.h)`` (a group move with Jacobian ``g^(p + 1)``, p parents). The targets are
        the conditionals of the joint density in those coordinates: the parameters' priors
        times h's children's densities (docs/derivations.md section 3.24). The slice samplers run in
        one numba kernel per unit (``_nlgbn_kernels.noncentred_unit``; since stop 51, with the same
        draws as :meth:`_noncentred_update_reference`, the numpy code it replaced, tested against it)."""
        self._noncentred_update(rng, state, False)

    def _noncentred_update_reference(self, rng, state) -> None:
        """:meth:`noncentred_update` in numpy and Python closures (stops 46-50; tests only)."""
        self._noncentred_update(rng, state, True)

    def _noncentred_update(self, rng, state, reference: bool) -> None:
        from ..mcmc.hyper import slice_sample_log

        a, rate = self.rho_prior
        jac_rho = a - 1.0 if self.noncentred_plant == 1 else a  # the Gamma's a - 1 plus log rho's Jacobian
        for h in np.flatnonzero(state.alive & ~state.obs):
            ch = self.children(state, h)
            if ch.size == 0:
                continue
            if not (math.isfinite(self.rho[h]) and self.rho[h] > 0):  # numba's log(0) is -inf: a loop, not an error
                raise FloatingPointError(f"hidden unit {h}'s precision is {self.rho[h]!r}, not a positive number")
            pa = self.parents(state, h)
            eps = math.sqrt(self.rho[h]) * (self.Y[h] - self.MU[h])
            wc = self.W[h, ch].copy()
            rc = self.rho[ch].copy()  # an observed child's slot: its (tempered) precision
            base = self.MU[ch] - wc[:, None] * self.U[h][None, :]
            Yc = self.Y[ch]
            mu = self.MU[h].copy()
            q = self.b[h] ** 2 / (2 * self.bias_var) + float(self.W[pa, h] @ self.W[pa, h]) / (2 * self.weight_var)
            k = 0.0 if self.noncentred_plant == 2 else pa.size + 1.0
            if not reference:
                self.rho[h], g = _kern.noncentred_unit(rng, float(self.rho[h]), mu, eps, Yc, base, wc, rc, jac_rho,
                                                       rate, q, k, self.noncentred_plant == 3)
                noise = eps * (1.0 / math.sqrt(self.rho[h]))
            else:
                def children_loglik(y_h):
                    if self.noncentred_plant == 3:
                        return 0.0
                    r = Yc - base - wc[:, None] * expit(y_h)[None, :]
                    return -0.5 * float(rc @ np.einsum("ij,ij->i", r, r))

                self.rho[h] = slice_sample_log(
                    rng, lambda t: jac_rho * t - rate * math.exp(t) + children_loglik(mu + eps * math.exp(-0.5 * t)),
                    self.rho[h])
                noise = eps * (1.0 / math.sqrt(self.rho[h]))
                g = slice_sample_log(
                    rng, lambda t: -math.exp(2 * t) * q + k * t + children_loglik(math.exp(t) * mu + noise), 1.0)
            self.b[h] *= g
            self.W[pa, h] *= g
            self.refresh_mu(state, h)
            self.Y[h] = self.MU[h] + noise
            self.U[h] = expit(self.Y[h])
            for c in ch:
                self.refresh_mu(state, c)

    def edge_weights(self, state) -> np.ndarray:
        """Weights of the edges between alive units."""
        al = np.flatnonzero(state.alive)
        sub = np.ix_(al, al)
        return self.W[sub][state.Z[sub]]

    def update_weight_var(self, rng, state, prior=None) -> None:
        """Gibbs update of the weights' common variance under its Gamma prior on
        the precision (no-op when ``weight_prior`` is None). A simplification of the
        normal-gamma hyperprior of 003 section 3.4 (docs/derivations.md section 3.3)."""
        prior = prior or self.weight_prior
        if prior is None:
            return
        w = self.edge_weights(state)
        self.weight_var = 1.0 / rng.gamma(prior[0] + 0.5 * w.size, 1.0 / (prior[1] + 0.5 * float(w @ w)))

    def sweep(self, rng, state, config, hyper) -> None:
        """One full sweep (see the module docstring; docs/derivations.md section 3.2)."""
        self.update_within(rng, state)
        if self.structure_prior is not None:
            self.edge_pass_prior(rng, state)
            for _ in range(self.structure_moves):
                self.birth_death_prior(rng, state)
            if self.update_prior_hyper:
                self.structure_prior.update_hyper(rng, state)
            return
        self.edge_pass(rng, state, hyper)
        w = np.asarray(config.weights, float)
        # the observed units (slots below D) keep their fixed flags for the whole chain
        reversals = w[2] > 0 and not state.fixed[: self.D].all()
        for _ in range(self.structure_moves):
            if w[1] > 0:
                self.birth_death(rng, state, hyper)
            if w[2] > 0:
                self.order_move(rng, state, hyper)
            if reversals:
                self.reversal_move(rng, state, hyper)
                if self.relocate:
                    self.relocate_move(rng, state, hyper)
            if w[3] > 0:
                self.depth_move(rng, state, hyper)

    # ------------------------------------------------ forward simulation
    def forward(self, rng, state) -> None:
        """Draw every parameter, activation and the data from the model given the
        structure (ancestrally): the marginal-conditional side of a Geweke test
        (docs/derivations.md section 3.3)."""
        self.match_capacity(state)
        self.W[:] = 0.0
        if self.weight_prior is not None:
            self.weight_var = 1.0 / rng.gamma(self.weight_prior[0], 1.0 / self.weight_prior[1])
        for i in state.canonical_slots()[np.argsort(-state.theta[state.canonical_slots()], kind="stable")]:
            pa = self.parents(state, i)
            self.b[i] = rng.normal() * math.sqrt(self.bias_var)
            # the generative model whose posterior is the power posterior (docs/derivations.md 3.19): an observed
            # unit's precision rho ~ Gamma(a + N (eta - 1) / 2, b), its slot eta * rho, the data N(MU, 1 / slot)
            # (eta = 1, and every hidden unit: the prior Gamma(a, b), to the last bit)
            e = self.likelihood_power if state.obs[i] else 1.0
            shape = self.rho_prior[0] + 0.5 * self.N * (e - 1.0)
            if shape <= 0:
                raise ValueError(f"forward draws of a power posterior need rho_prior[0] > N (1 - power) / 2 "
                                 f"= {0.5 * self.N * (1.0 - e):g}")
            self.rho[i] = e * rng.gamma(shape, 1.0 / self.rho_prior[1])
            self.W[pa, i] = rng.normal(size=pa.size) * math.sqrt(self.weight_var)
            self.refresh_mu(state, i)
            self.Y[i] = self.MU[i] + rng.normal(size=self.N) / math.sqrt(self.rho[i])
            self.U[i] = expit(self.Y[i])

    def resample_data(self, rng, state) -> None:
        """Fresh observed values given everything else (pre-activation space): a Gibbs
        step of the joint for Geweke and stationarity tests.

        With free observed orders (causal discovery, docs/derivations.md section 3.8)
        an observed unit can have observed parents and hidden children, and its data
        then enter other units' conditionals. The block redrawn is therefore the
        observed units together with every unit below one of them (a set closed under
        descendants, so no unit outside it has a parent inside it and its conditional
        given the rest is the ancestral draw), parents first. Observed units at
        theta = 0 with no unit below them: the same draws as before, in slot order."""
        alive = np.flatnonzero(state.alive)
        block = state.obs[: state.capacity] & state.alive
        for i in alive[np.argsort(-state.theta[alive], kind="stable")]:  # parents first
            if not block[i]:
                continue
            self.Y[i] = self.MU[i] + rng.normal(size=self.N) / math.sqrt(self.rho[i])
            self.U[i] = expit(self.Y[i])
            for c in self.children(state, i):
                block[c] = True  # descendants of redrawn units are redrawn too
                self.refresh_mu(state, c)

    def test_functions(self, state) -> dict:
        obs = np.flatnonzero(state.alive & state.obs)
        hid = np.flatnonzero(state.alive & ~state.obs)
        return {"y_obs_mean": float(self.Y[obs].mean()), "y_obs_sq": float((self.Y[obs] ** 2).mean()),
                "u_obs_mean": float(self.U[obs].mean()), "b_obs": float(self.b[obs].mean()),
                "log_rho_obs": float(np.log(self.rho[obs]).mean()),
                "log_weight_var": math.log(self.weight_var),
                "u_hidden_sum": float(self.U[hid].mean(axis=1).sum()) if hid.size else 0.0,
                # joint functions of structure and data (the structure moves' business)
                "indeg_x_yvar": float(np.sum(state.npar[obs] * self.Y[obs].var(axis=1))),
                "indeg_x_ysq": float(np.sum(state.npar[obs] * (self.Y[obs] ** 2).mean(axis=1))),
                # how much of the data the parents explain: the covariance of each observed unit's
                # mean with its data (the births' and deaths' business: a new unit or weight chosen
                # without regard to the data leaves it lower)
                "mu_y_cov": float(np.sum(np.mean((self.MU[obs] - self.MU[obs].mean(axis=1, keepdims=True))
                                                 * (self.Y[obs] - self.Y[obs].mean(axis=1, keepdims=True)), axis=1)))}

    # ------------------------------------------------------------- pilots
    def score_state(self, state, rng, num_is: int = 32, max_points: int = 1000) -> float:
        """Mean log-likelihood per training point of the current structure and parameters,
        by importance sampling from the hidden units' prior (``log_density_unit``; at most
        ``max_points`` points, evenly spaced). Compares chains' start states
        (docs/derivations.md section 3.7)."""
        from .predictive import log_density_unit

        rec = state.to_dag().to_dict()
        rec.update(self.snapshot(state))
        U = self.U[: self.D].T[np.unique(np.linspace(0, self.N - 1, min(self.N, max_points)).astype(int))]
        return float(np.mean(log_density_unit(rec, U, rng, num_is)))

    def restart(self) -> None:
        """Forget the counters and the HMC adaptation of a pilot chain (its state stays)."""
        self.stats[:] = 0
        if self.hmc is not None:
            from .hmc import ContinuousHMC

            h = self.hmc
            self.hmc = ContinuousHMC(h.num_steps, h.adapt, h.target_accept, h.plant)

    # ---------------------------------------------------------- checkpoint
    ARRAYS = ("b", "rho", "W", "Y", "U", "MU", "stats")

    def save_arrays(self, path) -> None:
        """Write the model's arrays to an NPZ file atomically (temp, fsync, rename)."""
        from ..mcmc.store import atomic_savez

        extra = {}
        if self.structure_prior is not None:
            extra = {"prior_alpha": self.structure_prior.alpha, "prior_beta": self.structure_prior.beta}
        if self.hmc is not None:
            extra.update(self.hmc.to_arrays())
        atomic_savez(path, **{k: getattr(self, k) for k in self.ARRAYS}, weight_var=self.weight_var, **extra)

    def load_arrays(self, path) -> None:
        with np.load(path, allow_pickle=False) as z:
            for k in self.ARRAYS:
                setattr(self, k, np.array(z[k]))
            if self.stats.shape[0] < len(MOVE_NAMES):  # written before the HMC (reversal) row existed
                self.stats = np.vstack([self.stats, np.zeros((len(MOVE_NAMES) - self.stats.shape[0], 2), np.int64)])
            if self.hmc is not None:
                self.hmc.from_arrays(z)
            if "weight_var" in z:
                self.weight_var = float(z["weight_var"])
            if self.structure_prior is not None and "prior_alpha" in z:
                self.structure_prior.alpha = np.array(z["prior_alpha"])
                self.structure_prior.beta = np.array(z["prior_beta"])

    # ------------------------------------------------------------- output
    def snapshot(self, state) -> dict:
        """Parameters of the active units in the canonical order of ``state.to_dag()``."""
        slots = state.canonical_slots()
        pos = {int(s): j for j, s in enumerate(slots)}
        edges = []
        weights = []
        for s in slots:
            for c in np.flatnonzero(state.Z[s] & state.alive):
                edges.append((pos[int(s)], pos[int(c)]))
                weights.append(float(self.W[s, c]))
        order = sorted(range(len(edges)), key=lambda e: edges[e])
        return {"bias": [float(self.b[s]) for s in slots], "precision": [float(self.rho[s]) for s in slots],
                "weights": [weights[e] for e in order]}


def model_from_spec(spec: dict, run_dir, state, structure_prior=None) -> NLGBN:
    """The NLGBN of a run directory's model spec (``config.json``): the builder
    :mod:`chefs.models` registers with the chain driver under ``"nlgbn"``."""
    from pathlib import Path

    if spec.get("collapse_bias"):
        raise ValueError("this run was fitted with collapse_bias, an option since removed (docs/derivations.md "
                         "section 3.11); continue it with the chefs of commit 5542530 or earlier")
    data = np.load(Path(run_dir) / spec["data"], allow_pickle=False)
    return NLGBN(data, state.graph.capacity, state.rng, num_tries=spec.get("num_tries", 4),
                 structure_moves=spec.get("structure_moves"),
                 activation_update=spec.get("activation_update", "mtm"),
                 weight_prior=spec.get("weight_prior"),
                 # runs written before the setting existed started from the prior
                 init_activations=spec.get("init_activations", "prior"),
                 # runs written before HMC existed: Gibbs updates only
                 hmc_steps=spec.get("hmc_steps", 0), hmc_adapt=spec.get("hmc_adapt", 0),
                 # runs written before stop 42: the posterior itself
                 likelihood_power=spec.get("likelihood_power", 1.0),
                 # runs written before stop 46: no non-centred updates
                 noncentred=spec.get("noncentred", False),
                 # runs written before stop 53: no relocation move
                 relocate=spec.get("relocate", False),
                 structure_prior=structure_prior)
