"""Numba kernels of the non-centred Hamiltonian Monte Carlo update of the NLGBN's
continuous state for a fixed structure (docs/derivations.md section 3.6).

Position ``q`` (one flat vector), for the alive nodes in topological order
``topo`` (parents first) and the edges listed per child in ``pidx``:

* ``eps`` of every hidden unit, N values each, at ``eoff[j]``: the standardised
  noise, ``Y_h = MU_h + eps_h / sqrt(rho_h)`` (the non-centred parameterisation);
* ``b`` of every node at ``nb + j``;
* ``log rho`` of every node at ``nb + n + j``;
* ``W`` of every edge at ``nb + 2 n + e`` (edge e: parent ``pidx[e]`` of the child
  at topological position j, ``pptr[j] <= e < pptr[j + 1]``).

Target (log density up to a constant, derivations 3.6):

    sum_h -eps_h.eps_h / 2 + sum_{i in O} [N/2 log rho_i - rho_i/2 |Y_i - MU_i|^2]
    + sum_i [-b_i^2 / (2 v_b) + a log rho_i - r rho_i] - sum_e W_e^2 / (2 v_W)

(the Jacobian of Y_h -> eps_h cancels the hidden units' N/2 log rho_h; ``a log
rho`` is the Gamma(a, r) prior of rho with the Jacobian of rho -> log rho).
"""

from __future__ import annotations

import math

import numpy as np
from numba import njit

from ._nlgbn_kernels import _sigmoid

CACHE = True


@njit(cache=CACHE, error_model="numpy")
def logp_grad(q, grad, topo, obs, pptr, pidx, eoff, Y, U, MU, gY, vb, vw, a_rho, r_rho, plant):
    """Log target at ``q`` and its gradient (into ``grad``; None-free: pass an
    array of q's size). ``Y``, ``U``, ``MU`` are work arrays of the model's shape:
    the observed rows of ``Y``/``U`` hold the data, every other row used is
    written here. ``plant`` (tests only): 1 drops the log-rho Jacobian (targets
    the wrong density), 2 drops the sigmoid's derivative factor (1 - u) from the
    gradient passed to a hidden parent (a wrong gradient of the right density), 3 drops
    the observed units' likelihood (targets the prior, given the observed parents' values where observed units
    are parents: a kernel that ignores the data)."""
    n = topo.shape[0]
    N = Y.shape[1]
    nb = 0
    for j in range(n):
        if eoff[j] >= 0:
            nb += N
    jac = 0.0 if plant == 1 else 1.0
    dsig = 0.0 if plant == 2 else 1.0
    dat = 0.0 if plant == 3 else 1.0
    lp = 0.0
    ssr = np.zeros(n)
    # ---- forward (parents first)
    for j in range(n):
        i = topo[j]
        b = q[nb + j]
        lr = q[nb + n + j]
        rho = math.exp(lr)
        for t in range(N):
            MU[i, t] = b
        for e in range(pptr[j], pptr[j + 1]):
            k = pidx[e]
            w = q[nb + 2 * n + e]
            for t in range(N):
                MU[i, t] += w * U[k, t]
        if obs[i]:
            ss = 0.0
            for t in range(N):
                d = Y[i, t] - MU[i, t]
                ss += d * d
            ssr[j] = ss
            lp += dat * (0.5 * N * lr - 0.5 * rho * ss)
        else:
            s = math.exp(-0.5 * lr)
            eo = eoff[j]
            for t in range(N):
                x = q[eo + t]
                y = MU[i, t] + x * s
                Y[i, t] = y
                U[i, t] = _sigmoid(y)
                lp -= 0.5 * x * x
        lp += -0.5 * b * b / vb + (a_rho - 1.0 + jac) * lr - r_rho * rho
    E = pidx.shape[0]
    for e in range(E):
        w = q[nb + 2 * n + e]
        lp -= 0.5 * w * w / vw
    # ---- backward (children first); gY[i] accumulates d lp / d Y_i of hidden i,
    # and holds d lp / d MU_i of node i once i is reached
    for j in range(n):
        i = topo[j]
        if not obs[i]:
            for t in range(N):
                gY[i, t] = 0.0
    for j in range(n - 1, -1, -1):
        i = topo[j]
        b = q[nb + j]
        lr = q[nb + n + j]
        rho = math.exp(lr)
        if obs[i]:
            for t in range(N):
                gY[i, t] = dat * rho * (Y[i, t] - MU[i, t])
            grad[nb + n + j] = dat * (0.5 * N - 0.5 * rho * ssr[j]) + (a_rho - 1.0 + jac) - r_rho * rho
        else:
            s = math.exp(-0.5 * lr)
            eo = eoff[j]
            glr = 0.0
            for t in range(N):
                x = q[eo + t]
                g = gY[i, t]
                grad[eo + t] = g * s - x
                glr -= 0.5 * g * x * s
            grad[nb + n + j] = glr + (a_rho - 1.0 + jac) - r_rho * rho
        gb = 0.0
        for t in range(N):
            gb += gY[i, t]
        grad[nb + j] = gb - b / vb
        for e in range(pptr[j], pptr[j + 1]):
            k = pidx[e]
            w = q[nb + 2 * n + e]
            gw = 0.0
            if obs[k]:
                for t in range(N):
                    gw += gY[i, t] * U[k, t]
            else:
                for t in range(N):
                    u = U[k, t]
                    gw += gY[i, t] * u
                    gY[k, t] += w * gY[i, t] * u * (1.0 - dsig * u)
            grad[nb + 2 * n + e] = gw - w / vw
    return lp


@njit(cache=CACHE, error_model="numpy")
def trajectory(q0, minv, step, L, z, topo, obs, pptr, pidx, eoff, Y, U, MU, gY, vb, vw, a_rho, r_rho, plant):
    """One leapfrog trajectory of L steps from ``q0`` with momentum ``p = z /
    sqrt(minv)`` (p ~ N(0, M), M = diag(1 / minv)). Returns (end position, log
    acceptance ratio); the ratio is -inf when the log target stops being finite
    (a divergence)."""
    dim = q0.shape[0]
    q = q0.copy()
    grad = np.empty(dim)
    p = np.empty(dim)
    lp0 = logp_grad(q, grad, topo, obs, pptr, pidx, eoff, Y, U, MU, gY, vb, vw, a_rho, r_rho, plant)
    kin0 = 0.0
    for d in range(dim):
        p[d] = z[d] / math.sqrt(minv[d])
        kin0 += 0.5 * p[d] * p[d] * minv[d]
    for d in range(dim):
        p[d] += 0.5 * step * grad[d]
    lp = lp0
    for ell in range(L):
        for d in range(dim):
            q[d] += step * minv[d] * p[d]
        lp = logp_grad(q, grad, topo, obs, pptr, pidx, eoff, Y, U, MU, gY, vb, vw, a_rho, r_rho, plant)
        if not math.isfinite(lp):
            return q, -np.inf
        scale = step if ell < L - 1 else 0.5 * step
        for d in range(dim):
            p[d] += scale * grad[d]
    kin = 0.0
    for d in range(dim):
        kin += 0.5 * p[d] * p[d] * minv[d]
    log_acc = (lp - kin) - (lp0 - kin0)
    if not math.isfinite(log_acc):
        return q, -np.inf
    return q, log_acc
