"""chefs.cnn numpy-only parts: shape rule, network statistics, proposals (incl. prior recovery)."""

import math

import numpy as np
import pytest
from scipy.integrate import quad

from chefs import DAG, ICP
from chefs.cnn import (EdgeToggle, NodeBirthDeath, ShapeRule, architecture_stats, default_proposal,
                       network_edges, network_key, reachable_mask, removable_nodes)
from chefs.cnn.proposals import Mixture
from .stats import mcse_mean


def g(theta, edges):
    n = len(theta)
    obs = [True, True] + [False] * (n - 2)
    e = np.asarray(edges, dtype=np.int64).reshape(-1, 2)
    return DAG(theta, obs, e[:, 0], e[:, 1], obs)


# ---------------------------------------------------------------- shapes
def test_shape_rule_bins_channels_sides():
    r = ShapeRule()
    assert [r.bin(t) for t in (1.0, 0.95, 0.79, 0.5, 0.1, 0.0)] == [0, 0, 1, 2, 4, 4]
    assert [r.channels(t) for t in (0.9, 0.7, 0.5, 0.3, 0.1)] == [4, 8, 16, 32, 64]
    assert [r.side(t, (28, 28)) for t in (0.9, 0.7, 0.5, 0.3, 0.1)] == [(28, 28), (14, 14), (7, 7), (4, 4), (2, 2)]
    assert r.side(0.1, (8, 8)) == (1, 1)
    assert ShapeRule(channel_rule="printed").channels(0.9) == 5  # eq. 18 as printed
    assert ShapeRule(n_bins=11).channels(0.0) == 4096  # the largest allowed
    for bad in (dict(n_bins=0), dict(base_channels=-1), dict(channel_rule="x"), dict(n_bins=2.5), dict(n_bins=12),
                dict(n_bins=3, base_channels=2000)):
        with pytest.raises(ValueError):
            ShapeRule(**bad)
    with pytest.raises(ValueError):
        r.bin(1.5)


# ---------------------------------------------------------------- network stats
def test_architecture_stats_small_graph():
    # X=0 (1.0), Y=1 (0.0), a=2 (0.7), b=3 (0.4), u=4 (0.6) unreachable (no parent)
    d = g([1.0, 0.0, 0.7, 0.4, 0.6], [[0, 2], [2, 3], [0, 3], [3, 1], [2, 1], [4, 3]])
    assert reachable_mask(d).tolist() == [True, True, True, True, False]
    assert (4, 3) not in network_edges(d)
    s = architecture_stats(d)
    assert s["num_nodes"] == 4 and s["num_edges"] == 5
    assert s["avg_degree"] == pytest.approx(2 * 5 / 4)
    # paths X->a->b->Y, X->a->Y, X->b->Y
    assert s["width"] == 3 and s["depth"] == 3
    assert s["theta_min"] == 0.4 and s["theta_max"] == 0.7 and s["theta_mean"] == pytest.approx(0.55)
    assert s["total_nodes"] == 5 and s["total_edges"] == 6
    bare = g([1.0, 0.0], [])
    sb = architecture_stats(bare)
    assert sb["num_nodes"] == 1 and sb["width"] == 0 and sb["depth"] == 0 and math.isnan(sb["theta_mean"])


def test_network_key_ignores_unreachable_part():
    a = g([1.0, 0.0, 0.5], [[0, 1], [2, 1]])
    b = g([1.0, 0.0], [[0, 1]])
    assert network_key(a) == network_key(b) == ((1.0, 0.0),)


def test_io_nodes_checked():
    with pytest.raises(ValueError, match="two observed"):
        architecture_stats(DAG([1.0], [True]))
    with pytest.raises(ValueError, match="theta=1"):
        architecture_stats(DAG([0.9, 0.0], [True, True]))


# ---------------------------------------------------------------- proposals
def test_birth_then_death_inverts_with_opposite_log_ratio():
    icp = ICP(1.0, 3.0, 2.0)
    rng = np.random.default_rng(3)
    prop = NodeBirthDeath(icp)
    for _ in range(30):
        d = icp.sample(rng, 2, observed_order=[1.0, 0.0])
        if d.num_edges == 0:
            continue
        new, lr = prop._birth(rng, d)
        j = new.num_nodes - 1
        assert j in removable_nodes(new).tolist()
        # force the death of the new node: restrict the removable set to it
        rem = removable_nodes(new)
        k = int(new.parents[new.children == j][0]); i = int(new.children[new.parents == j][0])
        back_lr = (icp.log_prob(d) - icp.log_prob(new) + math.log(rem.size) - math.log(d.num_edges)
                   - math.log(new.theta[k] - new.theta[i]))
        assert back_lr == pytest.approx(-lr)
        # and the death move, made to pick j, returns the old graph
        class Pick:
            def integers(self, n):
                return int(np.flatnonzero(rem == j)[0])
        old, lr2 = prop._death(Pick(), new)
        assert old == d and lr2 == pytest.approx(-lr)


def test_toggle_keeps_graph_valid_and_symmetric():
    icp = ICP(1.0, 3.0, 2.0)
    rng = np.random.default_rng(5)
    t = EdgeToggle(icp)
    d = icp.sample(rng, 2, observed_order=[1.0, 0.0])
    for _ in range(200):
        new, lr = t(rng, d)
        if lr == -math.inf:
            assert new is d
            continue
        new.validate()
        assert lr == pytest.approx(icp.log_prob(new) - icp.log_prob(d))
        assert abs(new.num_edges - d.num_edges) == 1
        d = new


def test_proposal_input_checks():
    icp = ICP()
    with pytest.raises(ValueError, match="Generator"):
        EdgeToggle(icp)(0, g([1.0, 0.0], []))
    with pytest.raises(ValueError):
        EdgeToggle("not a prior")
    with pytest.raises(ValueError):
        Mixture([(0.0, EdgeToggle(icp))])
    with pytest.raises(ValueError):
        default_proposal(icp, toggle_weight=1.0)


def _exact_small_h(icp):
    """Exact P(H=0) and P(H=1) of the ICP with X at 1, Y at 0 (integrals of the density)."""
    p0 = sum(math.exp(icp.log_prob(g([1.0, 0.0], e))) for e in ([], [[0, 1]]))
    p1 = 0.0
    for e in ([[2, 1]], [[0, 2], [2, 1]], [[0, 1], [2, 1]], [[0, 1], [0, 2], [2, 1]]):
        f = lambda t, e=e: math.exp(icp.log_prob(g([1.0, 0.0, t], e)))
        p1 += quad(f, 0, 1)[0]
    return p0, p1


class _NoJacobian(NodeBirthDeath):
    """Negative control: the birth/death ratio without the log(theta_k - theta_i) term."""

    def __call__(self, rng, dag):
        new, lr = super().__call__(rng, dag)
        if lr == -math.inf:
            return new, lr
        j = new.num_nodes - 1 if self.last_name == "birth" else None
        if j is not None:
            k = int(new.parents[new.children == j][0]); i = int(new.children[new.parents == j][0])
            return new, lr - math.log(new.theta[k] - new.theta[i])
        # death: the removed node is the one of `dag` whose order value is gone
        j = int(np.flatnonzero(~np.isin(dag.theta, new.theta))[0])
        k = int(dag.parents[dag.children == j][0]); i = int(dag.children[dag.parents == j][0])
        return new, lr + math.log(dag.theta[k] - dag.theta[i])


def _prior_chain(prop, steps, seed):
    rng = np.random.default_rng(seed)
    d = g([1.0, 0.0], [[0, 1]])
    h = np.empty(steps, dtype=np.int64)
    for s in range(steps):
        new, lr = prop(rng, d)
        if lr >= 0 or math.log(rng.random()) < lr:
            d = new
        h[s] = d.num_hidden
    return h


def _within(freq_series, exact, z=4.5):
    """Chain mean within z Monte Carlo SEs (from the chain's ESS) of the exact value."""
    se = mcse_mean(freq_series)
    return abs(freq_series.mean() - exact) <= z * se, freq_series.mean(), se


def test_prior_recovery_and_negative_control():
    """With no evidence the chain's stationary law is the ICP prior (P(H=0), P(H=1) exact)."""
    icp = ICP(1.0, 1.0, 1.0)
    p0, p1 = _exact_small_h(icp)
    assert p0 == pytest.approx(math.exp(-1.0), rel=1e-6)  # gamma*alpha/(alpha+0) hidden: Poisson(1) at H=0
    h = _prior_chain(default_proposal(icp), 12000, 11)[1000:]
    ok0, m0, se0 = _within((h == 0).astype(float), p0)
    ok1, m1, se1 = _within((h == 1).astype(float), p1)
    assert ok0, (m0, p0, se0)
    assert ok1, (m1, p1, se1)
    # negative control: dropping the Jacobian-like factor biases the number of hidden nodes
    bad = Mixture([(0.5, EdgeToggle(icp)), (0.5, _NoJacobian(icp))])
    hb = _prior_chain(bad, 12000, 11)[1000:]
    okb, mb, seb = _within((hb == 0).astype(float), p0)
    assert not okb, (mb, p0, seb)


def test_cli_without_torch_says_how_to_install(tmp_path):
    import subprocess
    import sys

    code = ("import sys; sys.modules['torch'] = None\n"
            "from chefs.cli import main\n"
            f"rc = main(['cnn', 'sample', '--data', 'digits', '--out', {str(tmp_path / 'r')!r}])\n"
            "import chefs.cnn; assert chefs.cnn.ShapeRule().channels(0.9) == 4\n"
            "sys.exit(rc)\n")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=60)
    assert out.returncode == 2, out.stderr
    assert "pip install 'indian-chefs[cnn]'" in out.stderr


def test_grow_by_births():
    import numpy as np

    from chefs import ICP
    from chefs.cnn import NodeBirthDeath
    from chefs.cnn.chain import bare_graph

    nbd = NodeBirthDeath(ICP(1.0, 20.0, 5.0))
    g = nbd.grow(np.random.default_rng(0), bare_graph(), 5)
    assert g.num_hidden == 5 and g.num_edges == 6  # each birth on an edge adds one node and one edge
    assert nbd.grow(np.random.default_rng(0), g, 3) is g  # already large enough
    with pytest.raises(ValueError, match="without edges"):
        nbd.grow(np.random.default_rng(0), bare_graph(edge=False), 1)
    with pytest.raises(ValueError, match="hidden"):
        nbd.grow(np.random.default_rng(0), g, -1)


def test_count_structures_merges_renamed_hidden_nodes_of_the_same_bins():
    """Same edges between nodes of the same shape bins: one structure, two
    order-value keys; a hidden node moved to another bin, or another edge, is
    another structure."""
    from chefs import DAG
    from chefs.cnn.network import count_structures, network_key
    from chefs.cnn.shapes import ShapeRule

    rule = ShapeRule(5, 4, "product")

    def net(t1, t2, extra=False):  # X(1) -> h1 -> h2 -> Y(0), optionally X -> h2
        par, ch = [0, 2, 3], [2, 3, 1]
        if extra:
            par, ch = par + [0], ch + [3]
        return DAG([1.0, 0.0, t1, t2], [True, True, False, False], par, ch, fixed=[True, True, False, False])

    a, b = net(0.75, 0.45), net(0.71, 0.49)  # bins 1 and 2 both times
    c = net(0.75, 0.25)  # h2 in bin 3
    d = net(0.75, 0.45, extra=True)
    assert network_key(a) != network_key(b)
    assert count_structures([a, b], rule) == 1
    assert count_structures([a, b, c], rule) == 2
    assert count_structures([a, b, c, d, a], rule) == 3
