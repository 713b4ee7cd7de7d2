"""BeliefNetwork.score_samples and BeliefNetwork.sample against the exact density
of hand-built posterior samples: one hidden unit is integrated out by quadrature
(the observed units are independent given it), a network without hidden units is
closed form. Tolerances are numbers of Monte Carlo standard errors: for the
held-out density the importance-sampling error of each point's estimate is
computed exactly by quadrature; for the fantasy data, binomial cell errors.
Planted errors (a precision read as a variance; a hidden bias off by 0.1)
fail both checks."""

from __future__ import annotations

import math

import numpy as np
import pytest
from scipy.special import expit, logit
from scipy.stats import norm

from chefs import density
from chefs.density import BeliefNetwork, UnitMap

from .stats import Z, cell_z, max_abs_z

# one hidden unit (node 0) above two observed units (nodes 1, 2)
HIDDEN = {"theta": [0.7, 0.0, 0.0], "observed": [False, True, True], "edges": [[0, 1], [0, 2]],
          "weights": [2.5, -2.0], "bias": [0.4, -0.3, 0.5], "precision": [2.0, 6.0, 4.0]}
# no hidden units: the two observed units are independent Gaussians in logit space
FLAT = {"theta": [0.0, 0.0], "observed": [True, True], "edges": [], "weights": [],
        "bias": [0.2, -0.1], "precision": [3.0, 1.5]}
# a conditional model: input (node 0, theta = 1) -> hidden (node 1) -> output (node 2), plus input -> output
COND = {"theta": [1.0, 0.5, 0.0], "observed": [True, False, True], "edges": [[0, 1], [1, 2], [0, 2]],
        "weights": [1.5, 2.0, -1.0], "bias": [0.0, -0.5, 0.3], "precision": [1.0, 2.5, 5.0]}

H = np.linspace(-12.0, 12.0, 4001)  # quadrature grid over the hidden pre-activation


def _network(samples, margin=0.2, inputs=()):
    net = BeliefNetwork(margin=margin)
    net.map_ = UnitMap(np.array([-1.0, 2.0]), np.array([3.0, 5.0]), margin)
    net.samples_ = [dict(s) for s in samples]
    net.inputs = tuple(inputs)
    return net


def _hidden_terms(sample, y):
    """(prior weight of each grid point, likelihood of y (points, 2) at each grid point)."""
    b, rho, w = sample["bias"], sample["precision"], sample["weights"]
    prior = norm.pdf(H, b[0], 1 / math.sqrt(rho[0])) * (H[1] - H[0])
    u = expit(H)
    lik = np.ones((y.shape[0], H.size))
    for d, node in enumerate((1, 2)):
        lik *= norm.pdf(y[:, d, None], b[node] + w[d] * u[None, :], 1 / math.sqrt(rho[node]))
    return prior, lik


def _exact_logit_density(y):
    """Mixture of HIDDEN and FLAT in logit space: (density, IS variance of HIDDEN's term)."""
    prior, lik = _hidden_terms(HIDDEN, y)
    p_hidden = lik @ prior
    var_hidden = (lik**2) @ prior - p_hidden**2  # variance of one importance weight
    b, rho = FLAT["bias"], FLAT["precision"]
    p_flat = np.prod([norm.pdf(y[:, d], b[d], 1 / math.sqrt(rho[d])) for d in range(2)], axis=0)
    return 0.5 * (p_hidden + p_flat), var_hidden


def _score_z(net, num_is):
    """z-scores of score_samples against the exact log-density at 60 points drawn
    from the model (and two points outside the support, which must be -inf)."""
    X = net.sample(60, rng=11)
    X = np.vstack([X, [[-2.5, 3.0], [0.0, 9.5]]])  # outside the unit map's (0, 1)
    got = net.score_samples(X, rng=5, num_is=num_is)
    assert np.all(np.isneginf(got[-2:]))
    U = net.map_.forward(X[:-2])
    y = logit(U)
    p, var_h = _exact_logit_density(y)
    log_jac = np.sum(np.log(net.map_.scale)) - np.sum(np.log(U * (1 - U)), axis=1)
    exact = np.log(p) + log_jac
    se = 0.5 * np.sqrt(var_h / num_is) / p  # delta method: SE of log of the mixture estimate
    bias = -0.5 * se**2  # E[log p_hat] - log p to second order
    return (got[:-2] - exact - bias) / se


def test_score_samples_matches_the_exact_density():
    z = _score_z(_network([HIDDEN, FLAT]), num_is=2000)
    assert np.max(np.abs(z)) < Z and abs(z.mean()) * math.sqrt(z.size) < Z, z


def _cell_probs(sample, edges0, edges1):
    """Exact probability of each (column-0 interval, column-1 interval) cell, in unit space."""
    y0, y1 = logit(edges0), logit(edges1)
    b, rho = sample["bias"], sample["precision"]
    if any(not o for o in sample["observed"]):
        w = sample["weights"]
        prior = norm.pdf(H, b[0], 1 / math.sqrt(rho[0])) * (H[1] - H[0])
        u = expit(H)
        c0 = norm.cdf(y0[:, None], b[1] + w[0] * u[None, :], 1 / math.sqrt(rho[1]))
        c1 = norm.cdf(y1[:, None], b[2] + w[1] * u[None, :], 1 / math.sqrt(rho[2]))
        P0, P1 = np.diff(c0, axis=0), np.diff(c1, axis=0)  # (cells, grid)
        return np.einsum("ig,jg,g->ij", P0, P1, prior)
    P0 = np.diff(norm.cdf(y0, b[0], 1 / math.sqrt(rho[0])))
    P1 = np.diff(norm.cdf(y1, b[1], 1 / math.sqrt(rho[1])))
    return np.outer(P0, P1)


def _sample_z(net, n=40000):
    X = net.sample(n, rng=3)
    U = net.map_.forward(X)
    assert np.all((U > 0) & (U < 1))
    edges = np.array([0.0, 0.2, 0.4, 0.5, 0.6, 0.8, 1.0])
    probs = 0.5 * (_cell_probs(HIDDEN, edges, edges) + _cell_probs(FLAT, edges, edges))
    counts, _, _ = np.histogram2d(U[:, 0], U[:, 1], bins=[edges, edges])
    keys = [(i, j) for i in range(edges.size - 1) for j in range(edges.size - 1)]
    return cell_z({k: counts[k] for k in keys}, n, {k: probs[k] for k in keys}, min_prob=1e-4)


def test_fantasy_data_follow_the_exact_density():
    """34 cells of the unit square (36 less two below probability 1e-4) (both columns): the frequencies of 40,000
    fantasy points against the exact cell probabilities."""
    zs = _sample_z(_network([HIDDEN, FLAT]))
    assert len(zs) >= 20 and max_abs_z(zs) < Z, zs


def _plant(monkeypatch, kind):
    """Planted errors in the arrays every posterior sample is read into:
    the precision read as a variance, or the hidden unit's bias off by 0.1."""
    from chefs.models import predictive

    real = predictive.sample_arrays

    def planted(sample):
        arr = real(sample)
        if kind == "precision-as-variance":
            arr.rho = 1.0 / arr.rho
        else:
            arr.b = arr.b.copy()
            arr.b[~arr.obs] += 0.1
        return arr

    monkeypatch.setattr(predictive, "sample_arrays", planted)


PLANTS = ["precision-as-variance", "hidden-bias-off-by-0.1"]


@pytest.mark.parametrize("kind", PLANTS)
def test_negative_control_score(monkeypatch, kind):
    """Largest |z| 38,000 and 7.0 (mean z times sqrt(60): -18.4); the passing test reads 2.7."""
    net = _network([HIDDEN, FLAT])
    X = net.sample(60, rng=11)  # drawn before the plant, as in the passing test
    _plant(monkeypatch, kind)
    monkeypatch.setattr(net, "sample", lambda n, rng=None: X)
    z = _score_z(net, num_is=2000)
    assert np.max(np.abs(z)) > Z or abs(z.mean()) * math.sqrt(z.size) > Z, z


@pytest.mark.parametrize("kind", PLANTS)
def test_negative_control_fantasy(monkeypatch, kind):
    """Largest cell |z| 505 and 8.0; the passing test reads 1.5."""
    _plant(monkeypatch, kind)
    assert max_abs_z(_sample_z(_network([HIDDEN, FLAT]))) > Z


def _conditional_z(net, num_is=4000):
    rng = np.random.default_rng(2)
    X = np.column_stack([rng.uniform(-0.5, 2.5, 40), rng.uniform(2.2, 4.8, 40)])
    got = net.score_samples(X, rng=7, num_is=num_is)
    U = net.map_.forward(X)
    b, rho, w = COND["bias"], COND["precision"], COND["weights"]
    prior = norm.pdf(H[None, :], b[1] + w[0] * U[:, :1], 1 / math.sqrt(rho[1])) * (H[1] - H[0])  # (points, grid)
    lik = norm.pdf(logit(U[:, 1:2]), b[2] + w[1] * expit(H)[None, :] + w[2] * U[:, :1], 1 / math.sqrt(rho[2]))
    p = np.sum(prior * lik, axis=1)
    var = np.sum(prior * lik**2, axis=1) - p**2
    exact = np.log(p) - np.log(U[:, 1] * (1 - U[:, 1])) + math.log(net.map_.scale[1])
    se = np.sqrt(var / num_is) / p
    return (got - exact + 0.5 * se**2) / se


def test_conditional_score_matches_the_exact_density():
    """inputs=(0,): log p(output | input) by quadrature over the hidden unit; the
    input column's own density and Jacobian are not counted."""
    z = _conditional_z(_network([COND], inputs=(0,)))
    assert np.max(np.abs(z)) < Z and abs(z.mean()) * math.sqrt(z.size) < Z, z


def test_negative_control_conditional_score_counts_the_input(monkeypatch):
    """Plant: score_samples forgets the inputs, so the input column's density is counted."""
    real = density.log_density_unit
    monkeypatch.setattr(density, "log_density_unit", lambda s, U, rng, num_is=64, inputs=(): real(s, U, rng, num_is))
    z = _conditional_z(_network([COND], inputs=(0,)))
    assert np.max(np.abs(z)) > Z, z


def _conditional_sample_z(net, x0=2.8, n=40000):
    """Cell z-scores of the output column of ``n`` conditional fantasy points at the
    input value ``x0`` against p(output | input) by quadrature over the hidden unit
    (12 cells in logit space, two of them the tails)."""
    X = net.sample(n, rng=3, inputs=np.full((n, 1), x0))
    y = logit(net.map_.forward(X)[:, 1])
    u0 = float(net.map_.forward(np.array([[x0, 3.0]]))[0, 0])
    b, rho, w = COND["bias"], COND["precision"], COND["weights"]
    prior = norm.pdf(H, b[1] + w[0] * u0, 1 / math.sqrt(rho[1])) * (H[1] - H[0])
    mean = b[2] + w[1] * expit(H) + w[2] * u0
    edges = np.concatenate([[-np.inf], np.linspace(-2.0, 2.0, 11), [np.inf]])
    cdf = norm.cdf((edges[:, None] - mean[None, :]) * math.sqrt(rho[2])) @ prior
    probs = {j: float(cdf[j + 1] - cdf[j]) for j in range(edges.size - 1)}
    assert abs(sum(probs.values()) - 1) < 1e-6
    cells = np.searchsorted(edges, y, side="right") - 1
    counts = {j: int(np.sum(cells == j)) for j in probs}
    return X, cell_z(counts, n, probs, min_prob=1e-4)


def test_conditional_fantasy_follows_the_exact_conditional():
    """``sample(n, inputs=...)``: the input column is the given value and the output
    follows p(output | input) (test audit, stop 18: only the conditional score was
    checked). Input 2.8, near the top of its training range [-1, 3]; largest cell
    |z| 1.9 at stop 18, the control 18.7."""
    X, zs = _conditional_sample_z(_network([COND], inputs=(0,)))
    assert np.allclose(X[:, 0], 2.8)
    assert len(zs) >= 8 and max_abs_z(zs) < Z, zs


def test_negative_control_conditional_fantasy_ignores_the_input(monkeypatch):
    """Plant: the ancestral sampler is not told the input, so it draws the input
    node from its own prior and the output from that."""
    real = density.ancestral
    monkeypatch.setattr(density, "ancestral", lambda s, n, rng, given=None: real(s, n, rng, None))
    _, zs = _conditional_sample_z(_network([COND], inputs=(0,)))
    assert max_abs_z(zs) > Z, zs
