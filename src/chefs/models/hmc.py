"""Hamiltonian Monte Carlo over the NLGBN's continuous state for a fixed structure
(002's first item of future work), in the non-centred parameterisation.

For the current structure, one HMC transition moves every hidden unit's
standardised noise ``eps_h = sqrt(rho_h) (Y_h - MU_h)`` and every alive node's
bias, log precision and incoming weights **jointly** (the numba kernels of
:mod:`chefs.models._hmc_kernels`; target and gradient in docs/derivations.md
section 3.6). The existing updates move one block at a time given the others
(activations given parameters, parameters given activations); a hidden unit's
precision and its activations are then strongly coupled (a noisy unit stays noisy,
a precise one stays precise), which is what the joint non-centred move breaks.

Adaptation (warm-up only): the step size by dual averaging (Hoffman & Gelman 2014,
algorithm 5) towards ``target_accept``, and a diagonal mass matrix from the
positions' variances over a window of the warm-up; both are frozen after
``adapt`` transitions, so every transition after the burn-in is an exact HMC
kernel with fixed settings. The frozen mass matrix does not depend on which slot
a hidden unit occupies (slots are reused, so a slot says something about a unit's
history): observed units (slots below D, fixed labels) keep their own variances;
every hidden unit shares its group's median (per data point for the noise), and
so does every edge with a hidden end. The adapted values are part of the model's
checkpoint (``to_arrays`` / ``from_arrays``), so a resumed chain continues bit for
bit.
"""

from __future__ import annotations

import math

import numpy as np

from . import _hmc_kernels as _kern

# dual averaging constants (Hoffman & Gelman 2014, section 3.2.1)
DA_GAMMA, DA_T0, DA_KAPPA = 0.05, 10.0, 0.75
INITIAL_STEP = 0.02
STEP_JITTER = 0.1  # step size drawn from step * U(1 - j, 1 + j) each transition (independent of the state)
MASS_WINDOW = (0.15, 0.6)  # fractions of the adaptation period whose positions estimate the mass matrix
MIN_COUNT = 10  # a slot seen fewer times uses its group's median variance
GROUPS = ("eps", "b", "lr", "w")


class ContinuousHMC:
    """Joint HMC transition of (hidden noise, biases, log precisions, weights)
    (002's future work, section 5; docs/derivations.md section 3.6).

    Parameters
    ----------
    num_steps : int
        Leapfrog steps per transition.
    adapt : int
        Transitions (one per sweep) during which the step size and the mass matrix
        adapt; 0: fixed from the start (initial step size, unit mass).
    target_accept : float
        Mean acceptance probability the step size is adapted towards.
    plant : int
        Tests only: a planted error in the target (1: no log-rho Jacobian; 3: no observed units'
        likelihood, i.e. the prior).
    """

    def __init__(self, num_steps: int = 20, adapt: int = 0, target_accept: float = 0.75, plant: int = 0):
        if int(num_steps) != num_steps or num_steps < 1:
            raise ValueError(f"num_steps must be a positive integer, got {num_steps!r}")
        if int(adapt) != adapt or adapt < 0:
            raise ValueError(f"adapt must be a non-negative integer, got {adapt!r}")
        if not 0.0 < float(target_accept) < 1.0:
            raise ValueError(f"target_accept must lie in (0, 1), got {target_accept!r}")
        self.num_steps, self.adapt, self.target_accept, self.plant = int(num_steps), int(adapt), float(target_accept), plant
        self.calls = 0
        self.accepted = 0.0  # sum of acceptance probabilities (diagnostics)
        self.divergences = 0
        self.log_step = math.log(INITIAL_STEP)
        self._da = np.array([math.log(10 * INITIAL_STEP), 0.0, 0.0, 0.0])  # mu, hbar, log_step_bar, m
        self.var = {g: None for g in GROUPS}  # frozen variances per slot (None: unit mass)
        self.fallback = np.ones(len(GROUPS))
        self._welford = None

    # ------------------------------------------------------------ layout
    @staticmethod
    def layout(model, state):
        """Topological order, parent lists and the position vector of the current state."""
        alive = np.flatnonzero(state.alive)
        topo = alive[np.argsort(-state.theta[alive], kind="stable")].astype(np.int64)
        Z = state.Z
        parents = [topo[Z[topo, i]] for i in topo]  # parents in topological order
        pptr = np.zeros(topo.size + 1, dtype=np.int64)
        pptr[1:] = np.cumsum([p.size for p in parents])
        pidx = np.concatenate(parents).astype(np.int64) if topo.size else np.zeros(0, np.int64)
        child = np.repeat(topo, [p.size for p in parents])
        hidden = ~state.obs[topo]
        N = model.N
        eoff = np.full(topo.size, -1, dtype=np.int64)
        eoff[hidden] = np.arange(int(hidden.sum())) * N
        nb = int(hidden.sum()) * N
        hid = topo[hidden]
        eps = (model.Y[hid] - model.MU[hid]) * np.sqrt(model.rho[hid])[:, None]
        q = np.concatenate([eps.ravel(), model.b[topo], np.log(model.rho[topo]), model.W[pidx, child]])
        return topo, pptr, pidx, child, eoff, nb, q

    def _inverse_mass(self, topo, hidden_slots, pidx, child, N):
        parts = []
        for g, idx in (("eps", hidden_slots), ("b", topo), ("lr", topo)):
            v = self.var[g]
            fb = self.fallback[GROUPS.index(g)]
            if v is None:
                vals = np.full(idx.size * N if g == "eps" else idx.size, fb)
            else:
                vals = v[idx].ravel()
            parts.append(vals)
        v = self.var["w"]
        parts.append(np.full(pidx.size, self.fallback[3]) if v is None else v[pidx, child])
        return np.concatenate(parts)

    # -------------------------------------------------------- transition
    def step(self, model, state, rng) -> tuple[bool, float]:
        """One HMC transition in place; returns (accepted, acceptance probability).
        Target and gradient: docs/derivations.md section 3.6."""
        topo, pptr, pidx, child, eoff, nb, q0 = self.layout(model, state)
        if topo.size == 0:
            return True, 1.0
        hidden_slots = topo[~state.obs[topo]]
        minv = self._inverse_mass(topo, hidden_slots, pidx, child, model.N)
        z = rng.standard_normal(q0.size)
        step = math.exp(self.log_step) * (1.0 + STEP_JITTER * (2.0 * rng.random() - 1.0))
        logu = math.log(rng.random())
        Y, U, MU, gY = model.Y.copy(), model.U.copy(), model.MU.copy(), np.empty_like(model.Y)
        a_rho, r_rho = model.rho_prior
        q, log_acc = _kern.trajectory(q0, minv, step, self.num_steps, z, topo, state.obs, pptr, pidx, eoff,
                                      Y, U, MU, gY, model.bias_var, model.weight_var, a_rho, r_rho, self.plant)
        accept_prob = math.exp(min(0.0, log_acc)) if log_acc > -np.inf else 0.0
        self.divergences += int(log_acc == -np.inf)
        accepted = logu < log_acc
        if accepted:
            n = topo.size
            model.b[topo] = q[nb: nb + n]
            model.rho[topo] = np.exp(q[nb + n: nb + 2 * n])
            model.W[pidx, child] = q[nb + 2 * n:]
            model.Y[topo], model.U[topo], model.MU[topo] = Y[topo], U[topo], MU[topo]
            pos = q
        else:
            pos = q0
        self.accepted += accept_prob
        if self.calls < self.adapt:
            self._adapt(accept_prob, pos, topo, hidden_slots, pidx, child, nb, model)
        self.calls += 1
        return accepted, accept_prob

    # -------------------------------------------------------- adaptation
    def _restart_da(self):
        self._da = np.array([math.log(10 * math.exp(self.log_step)), 0.0, self.log_step, 0.0])

    def _adapt(self, accept_prob, pos, topo, hidden_slots, pidx, child, nb, model):
        mu, hbar, lbar, m = self._da
        m += 1.0
        w = 1.0 / (m + DA_T0)
        hbar = (1.0 - w) * hbar + w * (self.target_accept - accept_prob)
        self.log_step = mu - math.sqrt(m) / DA_GAMMA * hbar
        eta = m ** -DA_KAPPA
        lbar = eta * self.log_step + (1.0 - eta) * lbar
        self._da = np.array([mu, hbar, lbar, m])
        lo, hi = (int(f * self.adapt) for f in MASS_WINDOW)
        if lo <= self.calls < hi:
            self._collect(pos, topo, hidden_slots, pidx, child, nb, model)
        if self.calls + 1 == hi and self._welford is not None:
            self._set_mass(model.D)
            self._welford = None
            self._restart_da()
        if self.calls + 1 == self.adapt:
            self.log_step = self._da[2]  # frozen: the averaged step size
            self._welford = None

    def _collect(self, pos, topo, hidden_slots, pidx, child, nb, model):
        cap, N = model.capacity, model.N
        wf = self._welford
        if wf is None or wf["b"][0].shape[0] != cap:
            new = {g: [np.zeros(s), np.zeros(s), np.zeros(s)] for g, s in
                   (("eps", (cap, N)), ("b", cap), ("lr", cap), ("w", (cap, cap)))}
            if wf is not None:  # the state grew: keep what was collected
                for g in GROUPS:
                    for a, b in zip(new[g], wf[g]):
                        keep = tuple(slice(0, min(x, y)) for x, y in zip(a.shape, b.shape))
                        a[keep] = b[keep]
            self._welford = wf = new
        n = topo.size
        for g, idx, x in (("eps", hidden_slots, pos[:nb].reshape(hidden_slots.size, N)), ("b", topo, pos[nb: nb + n]),
                          ("lr", topo, pos[nb + n: nb + 2 * n]), ("w", (pidx, child), pos[nb + 2 * n:])):
            cnt, mean, m2 = wf[g]
            c = cnt[idx] + 1.0
            d = x - mean[idx]
            mean[idx] += d / c
            m2[idx] += d * (x - mean[idx])
            cnt[idx] = c

    def _set_mass(self, D: int):
        """Variances from the window's moments (Stan's shrinkage for short windows):
        observed slots (< D) keep their own; hidden units and edges with a hidden end
        share their group's median over the slots seen at least MIN_COUNT times (per
        data point for the noise), so relabelling hidden units does not change them."""
        for gi, g in enumerate(GROUPS):
            cnt, mean, m2 = self._welford[g]
            v = m2 / np.maximum(cnt - 1.0, 1.0)
            v = (cnt / (cnt + 5.0)) * v + 1e-3 * (5.0 / (cnt + 5.0))
            ok = cnt >= MIN_COUNT
            if g == "eps":
                hid = ok[D:].any(axis=1)
                per_point = np.median(v[D:][hid], axis=0) if hid.any() else np.ones(v.shape[1])
                self.fallback[gi] = float(np.median(per_point))
                v = np.broadcast_to(per_point, v.shape).copy()
            elif g == "w":
                hidden_end = np.ones(v.shape, bool)
                hidden_end[:D, :D] = False
                sel = ok & hidden_end
                self.fallback[gi] = float(np.median(v[sel])) if sel.any() else 1.0
                v = np.where(hidden_end | ~ok, self.fallback[gi], v)
            else:
                sel = ok[D:]
                self.fallback[gi] = float(np.median(v[D:][sel])) if sel.any() else 1.0
                v = v.copy()
                v[D:] = self.fallback[gi]
                v[:D] = np.where(ok[:D], v[:D], self.fallback[gi])
            self.var[g] = v

    def match_capacity(self, cap: int) -> None:
        """Slots added to the graph state get their group's fallback variance."""
        for gi, g in enumerate(GROUPS):
            v = self.var[g]
            if v is None or v.shape[0] >= cap:
                continue
            shape = (cap, cap) if g == "w" else (cap,) + v.shape[1:]
            new = np.full(shape, self.fallback[gi])
            new[tuple(slice(0, s) for s in v.shape)] = v
            if g == "eps":  # new (hidden) slots get the hidden units' per-point variances
                new[v.shape[0]:] = v[-1]
            self.var[g] = new

    # -------------------------------------------------------- checkpoint
    def to_arrays(self) -> dict:
        out = {"hmc_scalars": np.array([self.calls, self.accepted, self.divergences, self.log_step], float),
               "hmc_da": self._da, "hmc_fallback": self.fallback}
        for g in GROUPS:
            if self.var[g] is not None:
                out[f"hmc_var_{g}"] = self.var[g]
            if self._welford is not None:
                for name, a in zip(("cnt", "mean", "m2"), self._welford[g]):
                    out[f"hmc_wf_{g}_{name}"] = a
        return out

    def from_arrays(self, z) -> None:
        if "hmc_scalars" not in z:
            return
        calls, acc, div, log_step = (float(v) for v in z["hmc_scalars"])
        self.calls, self.accepted, self.divergences, self.log_step = int(calls), acc, int(div), log_step
        self._da = np.array(z["hmc_da"])
        self.fallback = np.array(z["hmc_fallback"])
        self.var = {g: (np.array(z[f"hmc_var_{g}"]) if f"hmc_var_{g}" in z else None) for g in GROUPS}
        if "hmc_wf_b_cnt" in z:
            self._welford = {g: [np.array(z[f"hmc_wf_{g}_{n}"]) for n in ("cnt", "mean", "m2")] for g in GROUPS}
        else:
            self._welford = None

    @property
    def step_size(self) -> float:
        return math.exp(self.log_step)
