"""The marginal-likelihood start of causal discovery (chefs.causal_order; docs/derivations.md 3.8, stop 52)."""
from itertools import product

import numpy as np
import pytest
from scipy.integrate import quad
from scipy.special import gammaln, logsumexp
from scipy.stats import gamma, invgamma, multivariate_normal

import chefs.causal_order as co
from chefs.causal_order import OrderScorer, node_log_marginal, search_order


def _exact_node(y, X, v, rho_prior=(0.5, 0.5)):
    """log p(y | X, v) by a dense Gaussian and adaptive quadrature over log rho."""
    N = y.size
    S = X @ np.diag(np.r_[1.0, np.full(X.shape[1] - 1, v)]) @ X.T
    prior = gamma(rho_prior[0], scale=1 / rho_prior[1])

    def f(lr):
        return multivariate_normal(np.zeros(N), S + np.eye(N) / np.exp(lr)).logpdf(y) + prior.logpdf(np.exp(lr)) + lr

    grid = np.linspace(-8, 14, 120)
    vals = np.array([f(g) for g in grid])
    m, pk = vals.max(), grid[vals.argmax()]
    val, _ = quad(lambda lr: np.exp(f(lr) - m), pk - 6, pk + 6, points=[pk], limit=200, epsabs=0, epsrel=1e-12)
    return m + np.log(val)


def _data(N, rng, noise):
    X = np.column_stack([np.ones(N), rng.uniform(0.3, 0.7, (N, 2))])
    return X, 0.5 + 2 * X[:, 1] - X[:, 2] + rng.normal(0, noise, N)


@pytest.mark.parametrize("N,noise", [(20, 1.0), (80, 0.1)])
def test_node_log_marginal_against_quadrature(N, noise):
    rng = np.random.default_rng(N)
    X, y = _data(N, rng, noise)
    lv = np.array([-2.0, 0.3, 3.0])
    got = node_log_marginal(y, X, (0.5, 0.5), lv)
    ref = np.array([_exact_node(y, X, v) for v in np.exp(lv)])
    np.testing.assert_allclose(got, ref, atol=1e-6, rtol=0)


def test_node_log_marginal_planted_errors_fail(monkeypatch):
    """Negative controls: the same comparison fails with the intercept's prior variance at 2 instead of 1, and with
    a fine grid that does not follow the posterior's width (the old fixed window of +-0.6 at N = 20)."""
    rng = np.random.default_rng(20)
    X, y = _data(20, rng, 1.0)
    ref = _exact_node(y, X, 1.0)
    ok = node_log_marginal(y, X, (0.5, 0.5), np.zeros(1))[0]
    assert abs(ok - ref) < 1e-6
    # intercept variance 2: the same as a first column of sqrt(2)
    X2 = X.copy()
    X2[:, 0] *= np.sqrt(2.0)
    assert abs(node_log_marginal(y, X2, (0.5, 0.5), np.zeros(1))[0] - ref) > 1e-3
    monkeypatch.setattr(co, "_FINE", np.linspace(-0.6, 0.6, 61) / max(8 * np.sqrt(2 / 20), co._COARSE[1] - co._COARSE[0]))
    assert abs(node_log_marginal(y, X, (0.5, 0.5), np.zeros(1))[0] - ref) > 1e-3


def _brute_order_score(sc, order):
    """Sum over every DAG consistent with ``order`` whose units have at most max_parents parents (uniform
    weights) of its marginal likelihood (``dag_score``, v integrated out; the integral over v and the sum over
    DAGs commute). Written without the scorer's per-unit factorisation."""
    pairs = [(order[a], order[b]) for a in range(len(order)) for b in range(a + 1, len(order))]
    D = len(order)
    terms = []
    for bits in product([0, 1], repeat=len(pairs)):
        A = np.zeros((D, D), bool)
        for on, (k, i) in zip(bits, pairs):
            A[k, i] = bool(on)
        if A.sum(0).max() > sc.max_parents:
            continue
        terms.append(sc.dag_score(A))
    return float(logsumexp(terms))


def _three(rng, N=300):
    a, b = rng.normal(size=N), rng.normal(size=N)
    c = np.tanh(a) + np.tanh(b) + 0.3 * rng.normal(size=N)  # a -> c <- b
    Z = np.column_stack([a, b, c])
    return 0.3 + 0.4 * (Z - Z.min(0)) / np.ptp(Z, 0)


@pytest.mark.parametrize("max_parents", [1, 2])
def test_order_score_is_the_sum_over_dags_of_the_order(max_parents):
    sc = OrderScorer(_three(np.random.default_rng(0)), max_parents=max_parents)
    for order in ([0, 1, 2], [2, 0, 1], [1, 2, 0]):
        assert sc.score(order) == pytest.approx(_brute_order_score(sc, order), abs=1e-8)


def test_order_score_planted_error_fails(monkeypatch):
    """Negative control: predecessor sets that include the unit itself's successor (an off-by-one in the
    slice) break the identity with the brute-force sum."""
    sc = OrderScorer(_three(np.random.default_rng(0)), max_parents=2)
    monkeypatch.setattr(OrderScorer, "score", lambda self, order: float(logsumexp(
        sum(self.pred_score(i, [k for k in order[:p + 2] if k != i]) for p, i in enumerate(order)) + self.log_pv)))
    assert abs(sc.score([0, 1, 2]) - _brute_order_score(sc, [0, 1, 2])) > 1e-3


def test_search_finds_the_collider():
    """a -> c <- b is identified by its v-structure: from the worst start (c first) the climb ends with c last,
    and with its two parents as c's best parent set."""
    sc = OrderScorer(_three(np.random.default_rng(1)), max_parents=2)
    order, score = search_order(sc, [2, 0, 1])
    assert order[-1] == 2
    assert dict(sc.best_parents(order))[2] == (0, 1)


def test_scorer_input_checks():
    with pytest.raises(ValueError, match="inside"):
        OrderScorer(np.array([[0.0, 0.5], [0.5, 0.5]]))
    with pytest.raises(ValueError, match="2-D"):
        OrderScorer(np.array([0.5, 0.4]))


def test_fixed_weight_scale_without_prior():
    U = _three(np.random.default_rng(2), 100)
    sc = OrderScorer(U, weight_prior=None)
    assert sc.log_v.tolist() == [0.0]
    X = np.column_stack([np.ones(100), U[:, 0], U[:, 1]])
    y = np.log(U[:, 2] / (1 - U[:, 2]))
    assert sc.node(2, (0, 1))[0] == pytest.approx(node_log_marginal(y, X, (0.5, 0.5), np.zeros(1))[0])


@pytest.mark.parametrize("prior", [(1.0, 1.0), (0.5, 2.0), (3.0, 0.5)])
def test_weight_scale_prior_on_the_log_v_grid(prior):
    """log_pv is the density of log v under 1/v ~ Gamma(shape, rate) (v ~ InvGamma(shape, scale=rate), times the
    Jacobian v), plus the log of the grid step, so that the score's logsumexp over the grid is the integral over v;
    it sums to about 1 on the grid. Planted: the Gamma density of 1/v without the Jacobian (shape - 1 for shape)."""
    sc = OrderScorer(_three(np.random.default_rng(3), 50), weight_prior=prior)
    v = np.exp(sc.log_v)
    step = sc.log_v[1] - sc.log_v[0]
    ref = invgamma(prior[0], scale=prior[1]).logpdf(v) + sc.log_v + np.log(step)
    np.testing.assert_allclose(sc.log_pv, ref, atol=1e-10)
    assert abs(np.exp(logsumexp(sc.log_pv)) - 1) < 0.02
    a, b = prior
    w = -sc.log_v
    planted = a * np.log(b) - gammaln(a) + (a - 1) * w - b * np.exp(w) + np.log(step)
    assert np.max(np.abs(planted - ref)) > 1
