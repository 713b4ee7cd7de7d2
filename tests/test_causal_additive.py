"""The additive-noise surrogate behind ``start="additive"`` (chefs.causal_additive): its Bayes factor against an
independent quadrature, its sum over orders against brute force, and its exact draws of orders and parent sets
against their enumerated posterior, each with a planted error that the check catches."""
import json
from itertools import permutations

import numpy as np
import pytest
from scipy.special import logsumexp
from scipy.stats import multivariate_normal

from chefs import causal_additive as ca
from chefs.causal_additive import AdditiveOrderPosterior, log_bayes_factor


def _quadrature_log_bf(y, X, g):
    """log p(y | X) - log p(y | 1) by direct integration: c under its flat prior integrated out (below), beta ~
    N(0, g sigma^2 (X'X)^-1) on centred X, so y | sigma^2 is Gaussian; sigma^2 under 1/sigma^2 by quadrature in
    log sigma^2. The improper parts are the same in both models and cancel."""
    n = y.size
    Xc = X - X.mean(axis=0)
    # the flat prior on c integrates it out: what is left is the density of y's coordinates orthogonal to 1, the
    # same factor in both models
    P = Xc @ np.linalg.pinv(Xc)  # (the projection onto the columns' span, also when they are rank deficient)
    H = np.linalg.svd(np.eye(n) - 1.0 / n)[0][:, : n - 1]
    z = H.T @ y
    grid = np.linspace(np.log(y.var()) - 8, np.log(y.var()) + 8, 4001)

    def log_marginal(extra):
        vals = [multivariate_normal(np.zeros(n - 1), np.exp(ls) * H.T @ (np.eye(n) + extra) @ H).logpdf(z)
                for ls in grid]
        return logsumexp(vals) + np.log(grid[1] - grid[0])

    return log_marginal(g * P) - log_marginal(np.zeros((n, n)))


def test_bayes_factor_against_quadrature():
    rng = np.random.default_rng(0)
    n = 15
    X = rng.normal(size=(n, 2))
    y = 0.7 * X[:, 0] - 0.4 * X[:, 1] ** 2 + rng.normal(scale=0.8, size=n)
    Xc = X - X.mean(axis=0)
    yc = y - y.mean()
    beta = np.linalg.lstsq(Xc, yc, rcond=None)[0]
    r2 = 1 - np.sum((yc - Xc @ beta) ** 2) / np.sum(yc ** 2)
    want = _quadrature_log_bf(y, X, float(n))
    assert log_bayes_factor(r2, n, 2) == pytest.approx(want, abs=1e-4)
    # planted: (n - p) / 2 for (n - 1 - p) / 2 is off by log(1 + g) / 2 = 1.39 nats here
    planted = 0.5 * (n - 2) * np.log1p(n) - 0.5 * (n - 1) * np.log1p(n * (1 - r2))
    assert abs(planted - want) > 1.0
    assert log_bayes_factor(0.3, 10, 0) == 0.0


@pytest.mark.parametrize("distinct", [None, 3])
def test_node_score_against_quadrature(distinct):
    """A variable's score given one parent, rebuilt independently: the parent's cubic spline basis (5 knots, no
    constant column) on the standardised column, and the Bayes factor by quadrature. With a parent of three distinct
    values the six columns span only two dimensions (the rank, not the column count, is the penalty's p: a review
    found the count used at first: 2 log(1 + n) = 6.4 nats too low here). Other plants, measured (stop 55): the
    columns left uncentred, 0.030 and 1.61 nats off (continuous, three-valued); g = n - 1, 0.64 and 0.21 off."""
    from sklearn.preprocessing import SplineTransformer

    rng = np.random.default_rng(4)
    n = 24
    x = rng.normal(size=n) if distinct is None else rng.integers(0, distinct, n).astype(float)
    y = np.tanh(1.5 * x) + 0.5 * rng.normal(size=n)
    post = AdditiveOrderPosterior(np.c_[x, y], max_parents=1)
    z = (x - x.mean()) / x.std()
    B = SplineTransformer(n_knots=5, degree=3, include_bias=False).fit_transform(z[:, None])
    assert np.linalg.matrix_rank(B - B.mean(axis=0)) == (6 if distinct is None else 2)
    want = _quadrature_log_bf((y - y.mean()) / y.std(), B, float(n))
    assert post._node(1, (0,)) == pytest.approx(want, abs=1e-4)


def _sem(n=300, seed=1):
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = np.tanh(2 * a) + 0.4 * rng.normal(size=n)
    c = 0.8 * np.sin(2 * b) + 0.5 * a + 0.4 * rng.normal(size=n)
    d = rng.normal(size=n)
    return np.c_[a, b, c, d]


def _brute_orders(post):
    """Every order's log weight, by summing each variable's parent sets afresh (not through the cached terms)."""
    out = {}
    for order in permutations(range(post.D)):
        total = 0.0
        for p, i in enumerate(order):
            pred = set(order[:p])
            ok = [s for s in post.sets[i] if set(s) <= pred]
            total += logsumexp([post._node(i, s) for s in ok]) - np.log(len(ok))
        out[order] = total
    return out


def test_sum_over_orders_against_brute_force():
    post = AdditiveOrderPosterior(_sem(), max_parents=2)
    brute = _brute_orders(post)
    assert post.log_evidence == pytest.approx(logsumexp(list(brute.values())), abs=1e-9)
    for order, w in list(brute.items())[:5]:
        assert post.order_log_weight(order) == pytest.approx(w, abs=1e-9)


def _order_frequencies(post, draws, seed, sampler=None):
    rng = np.random.default_rng(seed)
    counts = {}
    for _ in range(draws):
        o = tuple((sampler or post.sample_order)(rng))
        counts[o] = counts.get(o, 0) + 1
    return counts


def _max_z(counts, probs, draws):
    """Largest |z| over the orders (binomial standard errors)."""
    z = [abs(counts.get(o, 0) / draws - p) / np.sqrt(max(p * (1 - p), 1e-12) / draws) for o, p in probs.items()
         if p > 1e-4]
    return max(z)


def _flat_sem(c_on_b=0.5, n=40, seed=3):
    """Moderate dependences on few rows, so that several orders (parent sets) have mass between 0.02 and 0.6: a
    sharp posterior would test one order, a flat one could not tell the planted sampler from the right one."""
    rng = np.random.default_rng(seed)
    a = rng.normal(size=n)
    b = 0.8 * np.tanh(2 * a) + 0.6 * rng.normal(size=n)
    c = c_on_b * b + 0.7 * rng.normal(size=n)
    return np.c_[a, b, c]


def test_order_draws_match_the_enumerated_posterior():
    """4,000 exact draws against the six orders' enumerated probabilities. Measured (stop 55, seed 0): max |z| 1.06;
    the planted sampler (sinks by their own term, without the sum over the other variables' orders) 45.09."""
    post = AdditiveOrderPosterior(_flat_sem(), max_parents=2)
    brute = _brute_orders(post)
    lz = logsumexp(list(brute.values()))
    probs = {o: np.exp(w - lz) for o, w in brute.items()}
    assert sum(p > 0.02 for p in probs.values()) == 6 and max(probs.values()) < 0.4  # (0.032-0.339)
    draws = 4000
    assert _max_z(_order_frequencies(post, draws, 0), probs, draws) < 4

    # planted: sinks drawn by their own term alone, without the sum over the orders of the others
    def sinks_by_own_term(rng):
        S, sinks = (1 << post.D) - 1, []
        while S:
            members = [j for j in range(post.D) if S >> j & 1]
            lw = np.array([post._pred[j, S ^ (1 << j)] for j in members])
            w = np.exp(lw - lw.max())
            j = members[int(rng.choice(len(members), p=w / w.sum()))]
            sinks.append(j)
            S ^= 1 << j
        return sinks[::-1]

    assert _max_z(_order_frequencies(post, draws, 0, sinks_by_own_term), probs, draws) > 4


def _parent_frequencies(order, child, draws, seed):
    """The enumerated posterior of ``child``'s parent set given ``order`` and the frequencies of ``draws`` draws of
    it (every draw also checked: no variable gets a parent placed after it)."""
    post = AdditiveOrderPosterior(_flat_sem(0.6), max_parents=2)
    pred = set(order[: order.index(child)])
    sets = [s for s in post.sets[child] if set(s) <= pred]
    lw = np.array([post._node(child, s) for s in sets])
    probs = dict(zip(sets, np.exp(lw - logsumexp(lw))))
    rng = np.random.default_rng(seed)
    counts = {}
    for _ in range(draws):
        edges = post.sample_parents(order, rng)
        assert all(order.index(k) < order.index(i) for k, i in edges)
        s = tuple(sorted(k for k, i in edges if i == child))
        counts[s] = counts.get(s, 0) + 1
    return probs, counts


def test_parent_draws_match_their_enumerated_posterior():
    """3,000 draws of the last variable's parent set given the order. Measured (stop 55, seed 1): max |z| 1.96; against
    the flat prior (the plant: parent sets drawn from it) 45.12."""
    probs, counts = _parent_frequencies([0, 1, 2], 2, 3000, 1)
    assert sorted(probs.values())[-3] > 0.02  # three sets with mass (0.027, 0.384, 0.589)
    assert _max_z(counts, probs, 3000) < 4
    flat = {s: 1 / len(probs) for s in probs}  # planted: the parent sets drawn from their prior
    assert _max_z(counts, flat, 3000) > 4


def test_parent_draws_respect_the_order_for_every_variable():
    """Given the order (1, 2, 0), variable 2's parent set (the middle of the order: the draw must see only the
    variable before it) is drawn from its posterior over the subsets of {1} (0.395, 0.605), and no variable gets a
    parent placed after it."""
    probs, counts = _parent_frequencies([1, 2, 0], 2, 3000, 2)
    assert min(probs.values()) > 0.3
    assert _max_z(counts, probs, 3000) < 4


def test_a_sharp_posterior_finds_the_order_and_bad_input_is_refused():
    X = _sem(n=600)
    post = AdditiveOrderPosterior(X)
    o = post.sample_order(0)
    assert o.index(0) < o.index(1) < o.index(2)  # a -> b -> c, a -> c
    with pytest.raises(ValueError, match="2 to 14 columns"):
        AdditiveOrderPosterior(np.random.default_rng(0).normal(size=(50, ca.ADDITIVE_MAX_COLUMNS + 1)))
    with pytest.raises(ValueError, match="no constant"):
        AdditiveOrderPosterior(np.c_[X[:, 0], np.ones(len(X))])
    with pytest.raises(ValueError, match="max_parents"):
        AdditiveOrderPosterior(X, max_parents=-1)
    small = AdditiveOrderPosterior(X, max_rows=100, rng=0)
    assert small.N == 100
    drawn = set(np.random.default_rng(0).choice(40, 10, replace=False).tolist())  # the rows max_rows=10 draws
    rare = np.c_[X[:40, :2], np.zeros(40)]
    rare[min(set(range(40)) - drawn), 2] = 1.0  # a column nonzero on one row the draw misses
    assert AdditiveOrderPosterior(rare, max_rows=10, rng=0).N == 40  # all rows then, not an error


def test_causal_discovery_starts_at_the_drawn_orders_and_parent_sets(tmp_path):
    from chefs import causal as cc
    from chefs.causal import CausalDiscovery

    X = _sem(n=200)
    cd = CausalDiscovery(seed=3, chains=2, sweeps=6, burn_in=2, thin=1, progress=False, start="additive",
                         out=tmp_path / "run")
    cd.map_ = None  # (not read by the additive start)
    cd._start_data = X
    starts = cd._start_orders(4)
    for c, (order, edges) in enumerate(starts):
        want = cc.start_order(cd._start_rows(c), [3, 7919, c, 2], "additive")
        assert (order, edges) == want
        assert all(order.index(k) < order.index(i) for k, i in edges)
    g = cd._initial_graph(4, 0, starts[0])
    node = np.flatnonzero(g.observed)
    have = set(zip(g.parents.tolist(), g.children.tolist()))
    assert all((int(node[k]), int(node[i])) in have for k, i in starts[0][1])
    theta = g.theta[node]
    assert list(np.argsort(-theta)) == starts[0][0]
    del cd._start_data
    cd.fit(X)
    assert CausalDiscovery.load(tmp_path / "run").start == "additive"
    with pytest.raises(ValueError, match="kind must be"):
        cc.start_order(X, 0, "prior")
    with pytest.raises(ValueError, match="start='additive' takes at most 14"):
        CausalDiscovery(start="additive", chains=1, sweeps=4, burn_in=2, thin=1, progress=False).fit(
            np.random.default_rng(0).normal(size=(40, 15)))


def test_additive_order_start_keeps_the_order_and_drops_the_edges(tmp_path):
    """``start="additive-order"``: each chain at the additive start's order (the same draw), with none of its parent
    sets as start edges: the start graph is the one drawn at that order with no edge added (the control: the additive
    start's graph holds the drawn edges)."""
    from chefs import causal as cc
    from chefs.causal import CausalDiscovery

    X = _sem(n=200)
    kw = dict(seed=3, chains=2, sweeps=6, burn_in=2, thin=1, progress=False)
    graphs = {}
    for start in ("additive-order", "additive"):
        cd = CausalDiscovery(start=start, out=tmp_path / start, **kw)
        cd.map_ = None
        cd._start_data = X
        starts = cd._start_orders(4)
        graphs[start] = (starts, cd._initial_graph(4, 0, starts[0]))
        del cd._start_data
    (orders, g), (full, g_full) = graphs["additive-order"], graphs["additive"]
    assert [o for o, _ in orders] == [o for o, _ in full] and all(not e for _, e in orders)
    assert any(e for _, e in full)
    node = np.flatnonzero(g.observed)
    assert list(np.argsort(-g.theta[node])) == orders[0][0]
    edges = set(zip(g.parents.tolist(), g.children.tolist()))
    full_edges = set(zip(g_full.parents.tolist(), g_full.children.tolist()))
    drawn = {(int(node[k]), int(node[i])) for k, i in full[0][1]}
    assert drawn <= full_edges and edges == full_edges - (drawn - edges)
    assert not drawn <= edges
    # the default "auto" is this start on at most 14 columns, and the run records the start it used
    CausalDiscovery(seed=3, chains=1, sweeps=4, burn_in=2, thin=1, progress=False, out=tmp_path / "auto").fit(X)
    assert json.loads((tmp_path / "auto" / "causal-columns.json").read_text())["start"] == "additive-order"
    assert CausalDiscovery.load(tmp_path / "auto").start == "additive-order"
    with pytest.raises(ValueError, match="start='additive-order' takes at most 14"):
        CausalDiscovery(start="additive-order", chains=1, sweeps=4, burn_in=2, thin=1, progress=False).fit(
            np.random.default_rng(0).normal(size=(40, 15)))


def test_bagged_relations_and_the_benchmark_method(tmp_path, capsys):
    """``bagged_relations``: one surrogate pools its own draws; the probabilities are shares of drawn DAGs (an
    ancestor wherever an edge); bad sizes are refused. ``chefs bench causal --methods additive`` writes its rows."""
    import csv

    from chefs.causal_additive import bagged_relations
    from chefs.cli import main

    X = _sem(n=200)
    E, A = bagged_relations(X, chains=2, draws=10, seed=1)
    assert E.shape == A.shape == (4, 4) and np.all(A >= E) and np.all(np.diag(A) == 0)
    assert np.all((E * 20) == np.round(E * 20))  # counts over 2 x 10 drawn DAGs
    assert E[0, 1] == 1.0 and E[1, 2] == 1.0  # a -> b -> c, found by every draw
    E1, _ = bagged_relations(X, chains=1, draws=10, seed=1)
    post = AdditiveOrderPosterior(X, rng=1)
    rng = np.random.default_rng([1, 0, 5])
    want = np.zeros((4, 4))
    for _ in range(10):
        for k, i in post.sample_parents(post.sample_order(rng), rng):
            want[k, i] += 0.1
    assert np.allclose(E1, want)
    for bad in ({"chains": 0}, {"draws": 1.5}):
        with pytest.raises(ValueError, match="positive integer"):
            bagged_relations(X, **bad)
    out = tmp_path / "b"
    assert main(["bench", "causal", "--quick", "--seeds", "0", "--methods", "additive", "--no-real",
                 "--out", str(out)]) == 0
    rows = list(csv.DictReader(open(out / "causal.csv")))
    assert [r["method"] for r in rows] == ["additive"] and 0.0 <= float(rows[0]["anc_f1"]) <= 1.0
