"""Posterior samples of the NLGBN as arrays, ancestral draws from one sample and
its log-density of observed points by importance sampling (002 section 4.1).

A stored sample is the graph JSON of :meth:`chefs.graph.DAG.to_dict` with the
model's ``bias``, ``precision`` and ``weights`` (``NLGBN.snapshot``). Used by the
density estimator (:mod:`chefs.density`), the missing-value reconstruction
(:mod:`chefs.impute`) and the chains' pilot selection (:meth:`NLGBN.score_state`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np
from scipy.special import expit, logsumexp


@dataclass
class SampleArrays:
    """One posterior sample of the NLGBN as arrays (node indices as in the sample)."""

    obs: np.ndarray  # bool (n,)
    obs_nodes: np.ndarray  # node of data column d
    W: np.ndarray  # (n, n), W[parent, child]
    b: np.ndarray
    rho: np.ndarray
    order: np.ndarray  # parents first
    parents: list  # int64 arrays
    children: list  # int64 arrays


def sample_arrays(sample: dict) -> SampleArrays:
    """Arrays of one stored posterior sample (graph JSON with weights, biases, precisions)."""
    n = len(sample["theta"])
    obs = np.asarray(sample["observed"], bool)
    W = np.zeros((n, n))
    parents = [[] for _ in range(n)]
    children = [[] for _ in range(n)]
    for (p, c), w in zip(sample["edges"], sample["weights"]):
        W[p, c] = w
        parents[c].append(p)
        children[p].append(c)
    order = np.argsort(-np.asarray(sample["theta"], float), kind="stable")
    return SampleArrays(obs, np.flatnonzero(obs), W, np.asarray(sample["bias"], float),
                        np.asarray(sample["precision"], float), order,
                        [np.asarray(p, np.int64) for p in parents], [np.asarray(c, np.int64) for c in children])


def ancestral(sample: dict, num: int, rng, given: dict | None = None):
    """Ancestral draws of all units (num points); returns U (n_nodes, num).
    ``given`` maps node index -> fixed values in (0, 1) (input units).

    The NLGBN unit of 003 section 2; one point per posterior sample gives the
    fantasy data of 002 section 4.1.
    """
    net = sample_arrays(sample)
    b, rho = net.b, net.rho
    U = np.zeros((len(b), num))
    given = given or {}
    for i in net.order:
        if i in given:
            U[i] = given[i]
            continue
        pa = net.parents[i]
        mu = b[i] + (net.W[pa, i] @ U[pa] if pa.size else 0.0)
        y = mu + rng.normal(size=num) / math.sqrt(rho[i])
        U[i] = expit(y)
    return U


def log_density_unit(sample: dict, U_obs: np.ndarray, rng, num_is: int = 64, inputs=()) -> np.ndarray:
    """log p(u_obs | sample) per point by importance sampling from the hidden prior
    (docs/derivations.md sections 3.1 and 3.3).

    ``U_obs`` is (num_points, D) in (0, 1). Points outside (0, 1) get -inf.
    Columns listed in ``inputs`` are conditioned on (their own density is not
    counted): the result is then log p(outputs | inputs).
    """
    inputs = set(int(j) for j in inputs)
    net = sample_arrays(sample)
    obs, b, rho = net.obs, net.b, net.rho
    n_pts, D = U_obs.shape
    inside = np.all((U_obs > 0) & (U_obs < 1), axis=1)
    Uc = np.clip(U_obs, 1e-12, 1 - 1e-12)
    Yo = np.log(Uc) - np.log1p(-Uc)
    obs_idx = net.obs_nodes
    S = num_is
    U = np.zeros((len(b), S, n_pts))
    logw = np.zeros((S, n_pts))
    for i in net.order:
        pa = net.parents[i]
        mu = b[i] + (np.tensordot(net.W[pa, i], U[pa], axes=(0, 0)) if pa.size else 0.0)
        if obs[i]:
            d = int(np.searchsorted(obs_idx, i))
            y = Yo[:, d][None, :]
            if d not in inputs:
                logw += 0.5 * (math.log(rho[i]) - math.log(2 * math.pi)) - 0.5 * rho[i] * (y - mu) ** 2
            U[i] = Uc[:, d][None, :]
        else:
            U[i] = expit(mu + rng.normal(size=(S, n_pts)) / math.sqrt(rho[i]))
    outs = [d for d in range(D) if d not in inputs]
    out = logsumexp(logw, axis=0) - math.log(S) - np.sum(np.log(Uc[:, outs]) + np.log1p(-Uc[:, outs]), axis=1)
    return np.where(inside, out, -np.inf)
