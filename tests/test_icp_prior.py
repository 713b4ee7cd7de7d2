"""The ICP prior: density (eqs. 8, 9), the finite model (eqs. 1-3) and the chefs
process must agree with each other. Each check has a negative control that
plants an error (the printed 1/K+! factor, the printed Binomial of eq. 10, a
wrong Poisson rate) and shows the same check fails."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats as sps

from chefs import DAG, ICP
from chefs.priors.exact import enumerate_structures, structure_key

from .stats import Z, cell_z, max_abs_z, two_sample_cell_z, two_sample_mean_z

N_DRAWS = 20_000


def key_stats(labels, edges) -> dict:
    n = len(labels)
    longest = [0] * n
    for r in range(n):
        for p, c in edges:
            if p == r:
                longest[r] = max(longest[r], longest[c] + 1)
    rank_of_obs0 = labels.index(0)
    return {
        "K": n,
        "E": len(edges),
        "H": sum(1 for v in labels if v < 0),
        "depth": max(longest) if n else 0,
        "in0": sum(1 for p, c in edges if c == rank_of_obs0),
        "out0": sum(1 for p, c in edges if p == rank_of_obs0),
    }


def sample_keys(prior, D, order, n, seed, **kw):
    rng = np.random.default_rng(seed)
    return [structure_key(g) for g in prior.sample_many(rng, n, D, observed_order=order, **kw)]


def compare_with_exact(keys, structures, max_hidden) -> dict:
    """z-scores of sampler frequencies against exact probabilities for every
    structure with p >= 0.01 and every value of each statistic (joint with
    H <= max_hidden), plus the tail event H > max_hidden."""
    n = len(keys)
    exact = {}
    sample = Counter()
    for s in structures:
        exact[("struct", s.labels, s.edges)] = s.prob
        for name, v in key_stats(s.labels, s.edges).items():
            exact[(name, v)] = exact.get((name, v), 0.0) + s.prob
    exact[("H>max",)] = 1.0 - sum(s.prob for s in structures)
    for labels, edges in keys:
        st = key_stats(labels, edges)
        if st["H"] > max_hidden:
            sample[("H>max",)] += 1
            continue
        sample[("struct", labels, edges)] += 1
        for name, v in st.items():
            sample[(name, v)] += 1
    zs = cell_z(sample, n, {k: p for k, p in exact.items() if k[0] != "struct" or p >= 0.01}, min_prob=0.002)
    # every sampled structure must exist in the enumeration
    unknown = [k for k in sample if k[0] == "struct" and k not in exact]
    if unknown:
        zs[("unknown-structure",)] = np.inf
    return zs


SETTINGS = [
    # alpha, gamma, phi, D, fixed_at_zero, max_hidden
    (1.0, 1.0, 1.0, 2, True, 3),
    (0.5, 0.7, 2.0, 2, False, 2),
    (3.0, 1.5, 0.5, 1, False, 3),
    (2.0, 0.5, 1.0, 3, True, 2),
    (0.5, 0.3, 2.0, 3, False, 1),
]


@pytest.mark.parametrize("alpha,gamma,phi,D,fixed,max_hidden", SETTINGS)
def test_chefs_process_matches_exact_density(alpha, gamma, phi, D, fixed, max_hidden):
    prior = ICP(alpha, gamma, phi)
    structures = enumerate_structures(prior, D, max_hidden, fixed_at_zero=fixed)
    keys = sample_keys(prior, D, 0.0 if fixed else None, N_DRAWS, seed=1)
    zs = compare_with_exact(keys, structures, max_hidden)
    assert len(zs) > 10
    assert max_abs_z(zs) < Z, sorted(zs.items(), key=lambda kv: -abs(kv[1]))[:5]


@pytest.mark.parametrize("alpha,gamma,phi,D,fixed,max_hidden", SETTINGS[:3])
def test_finite_model_matches_exact_finite_density(alpha, gamma, phi, D, fixed, max_hidden):
    """Small K: the enumeration covers every structure (total probability 1)."""
    prior = ICP(alpha, gamma, phi)
    K = D + max_hidden
    assert K > gamma  # the finite model needs K > gamma: every setting has it
    structures = enumerate_structures(prior, D, max_hidden, fixed_at_zero=fixed, finite_K=K)
    assert math.isclose(sum(s.prob for s in structures), 1.0, rel_tol=1e-10)
    keys = sample_keys(prior, D, 0.0 if fixed else None, N_DRAWS, seed=2, method="finite", finite_K=K)
    zs = compare_with_exact(keys, structures, max_hidden)
    assert max_abs_z(zs) < Z, sorted(zs.items(), key=lambda kv: -abs(kv[1]))[:5]


@pytest.mark.parametrize("alpha,gamma,phi,D,fixed,max_hidden", SETTINGS[:3])
def test_finite_model_check_catches_an_off_by_one_K(alpha, gamma, phi, D, fixed, max_hidden):
    """Negative control of the check above: draws of the finite model with K + 1 nodes, compared with the
    enumeration at K (an off-by-one in the number of nodes), fail it."""
    prior = ICP(alpha, gamma, phi)
    K = D + max_hidden
    structures = enumerate_structures(prior, D, max_hidden, fixed_at_zero=fixed, finite_K=K)
    keys = sample_keys(prior, D, 0.0 if fixed else None, N_DRAWS, seed=2, method="finite", finite_K=K + 1)
    assert max_abs_z(compare_with_exact(keys, structures, max_hidden)) > Z


def test_planted_variants_are_refused_for_the_finite_model():
    """The planted-error hooks reach the chefs process only: asking the finite sampler for one is an error,
    never a silent no-op (a control written with it would test nothing)."""
    with pytest.raises(ValueError, match="chefs process"):
        ICP(1.0, 1.0, 1.0).sample(np.random.default_rng(0), 2, method="finite", finite_K=5, _variant=1)


def test_exact_infinite_probabilities_sum_to_one():
    prior = ICP(1.0, 0.3, 1.0)
    totals = [sum(s.prob for s in enumerate_structures(prior, 1, h)) for h in range(5)]
    assert np.all(np.diff(totals) > 0)
    assert totals[0] == pytest.approx(math.exp(-0.3), rel=1e-12)  # P(H = 0) = e^-gamma
    assert 0 < 1 - totals[-1]
    # the missing mass 1 - P(H <= h) is the tail P(H > h) of the generative chefs process
    rng = np.random.default_rng(5)
    n = 10_000
    H = np.array([int(np.sum(~np.asarray(g.observed))) for g in prior.sample_many(rng, n, 1, observed_order=0.0)])
    for h in range(3):
        tail = np.mean(H > h)
        se = math.sqrt(max(tail, 1 / n) * (1 - tail) / n)
        assert abs(tail - (1 - totals[h])) < Z * se, (h, tail, 1 - totals[h])


def test_exact_density_matches_log_prob():
    """The enumeration's integral for one-hidden-node graphs equals a 1-D
    quadrature of ICP.log_prob over the hidden node's order (P(H = 1))."""
    from scipy.integrate import quad

    from chefs import DAG

    prior = ICP(0.8, 1.3, 0.6)
    D = 2
    structures = [s for s in enumerate_structures(prior, D, 1) if s.num_hidden == 1]
    p_h1 = sum(s.prob for s in structures)

    def dens(t):
        total = 0.0
        for children in ([0], [1], [0, 1]):
            g = DAG([0.0, 0.0, t], [True, True, False], [2] * len(children), children, fixed=[True, True, False])
            total += math.exp(prior.log_prob(g))
        return total

    val, err = quad(dens, 0, 1, epsabs=1e-13)
    assert val == pytest.approx(p_h1, rel=1e-9)
    g0 = DAG([0.0, 0.0], [True, True], fixed=[True, True])
    assert math.exp(prior.log_prob(g0)) == pytest.approx(structures and sum(
        s.prob for s in enumerate_structures(prior, D, 0)), rel=1e-12)


def test_negative_control_printed_factorial_is_caught():
    """eq. 9 as printed carries 1/K+!: the same comparison must fail."""
    prior = ICP(1.0, 1.0, 1.0)
    structures = enumerate_structures(prior, 2, 3, fixed_at_zero=True)
    planted = [type(s)(s.labels, s.edges, s.prob / math.factorial(s.num_nodes)) for s in structures]
    keys = sample_keys(prior, 2, 0.0, N_DRAWS, seed=1)
    assert max_abs_z(compare_with_exact(keys, planted, 3)) > Z


@pytest.mark.parametrize("variant", [1, 2])
def test_negative_control_planted_sampler_error_is_caught(variant):
    """variant 1: the printed Binomial of eq. 10; variant 2: a Poisson rate
    alpha*gamma*Delta/(alpha + n + 1) in eq. 12."""
    alpha, gamma, phi, D, fixed, max_hidden = SETTINGS[4] if variant == 1 else SETTINGS[0]
    prior = ICP(alpha, gamma, phi)
    structures = enumerate_structures(prior, D, max_hidden, fixed_at_zero=fixed)
    keys = sample_keys(prior, D, 0.0 if fixed else None, N_DRAWS, seed=1, _variant=variant)
    assert max_abs_z(compare_with_exact(keys, structures, max_hidden)) > Z


# ---------------------------------------------------------------- large graphs
def graph_stats(g):
    obs = np.flatnonzero(g.observed)
    return {
        "K": g.num_nodes,
        "E": g.num_edges,
        "H": g.num_hidden,
        "depth": g.depth(),
        "in_obs": int(g.in_degree()[obs].sum()),
        "out_obs": int(g.out_degree()[obs].sum()),
        "out0": int(g.out_degree()[obs[0]]),
    }


def draw_stats(prior, D, order, n, seed, **kw):
    rng = np.random.default_rng(seed)
    rows = [graph_stats(g) for g in prior.sample_many(rng, n, D, observed_order=order, **kw)]
    return {k: np.array([r[k] for r in rows]) for k in rows[0]}


def compare_samplers(a, b) -> dict:
    zs = {}
    for name in a:
        zs[(name, "mean")] = two_sample_mean_z(a[name], b[name])
        for v, z in two_sample_cell_z(a[name], b[name], range(0, 4)).items():
            zs[(name, v)] = z
    return zs


LARGE = [
    (1.0, 1.0, 1.0, 10, None),
    (0.5, 2.0, 0.5, 5, 0.0),
]


@pytest.mark.parametrize("alpha,gamma,phi,D,order", LARGE)
def test_chefs_process_matches_finite_model_at_large_K(alpha, gamma, phi, D, order):
    prior = ICP(alpha, gamma, phi)
    n = 4000
    a = draw_stats(prior, D, order, n, seed=3)
    b = draw_stats(prior, D, order, n, seed=4, method="finite", finite_K=1000)
    zs = compare_samplers(a, b)
    assert max_abs_z(zs) < Z, sorted(zs.items(), key=lambda kv: -abs(kv[1]))[:5]


def test_negative_control_large_K_comparison_catches_printed_eq10():
    prior = ICP(1.0, 1.0, 1.0)
    n = 4000
    a = draw_stats(prior, 10, None, n, seed=3, _variant=1)
    b = draw_stats(prior, 10, None, n, seed=4, method="finite", finite_K=1000)
    assert max_abs_z(compare_samplers(a, b)) > Z


# --------------------------------------------------------- score identities
def mean_scores(prior, graphs, h=1e-5):
    """Monte Carlo mean and standard error of d/d(log x) log p(G | x) for
    x in (alpha, gamma, phi): zero in expectation under the right sampler."""
    out = {}
    for name in ("alpha", "gamma", "phi"):
        x = getattr(prior, name)
        up = ICP(**{**prior.__dict__, name: x * math.exp(h)})
        dn = ICP(**{**prior.__dict__, name: x * math.exp(-h)})
        s = np.array([(up.log_prob(g) - dn.log_prob(g)) / (2 * h) for g in graphs])
        out[name] = (s.mean(), s.std(ddof=1) / math.sqrt(s.size))
    return out


@pytest.mark.parametrize("alpha,gamma,phi,D,order", LARGE + [(5.0, 0.5, 3.0, 6, [1.0, 0.0, None, None, None, None])])
def test_score_identity_density_vs_chefs_process(alpha, gamma, phi, D, order):
    prior = ICP(alpha, gamma, phi)
    rng = np.random.default_rng(5)
    graphs = prior.sample_many(rng, 4000, D, observed_order=order)
    for name, (m, se) in mean_scores(prior, graphs).items():
        assert abs(m) <= 4 * se, (name, m, se)


def test_negative_control_score_identity_catches_wrong_rate():
    prior = ICP(1.0, 1.0, 1.0)
    rng = np.random.default_rng(5)
    graphs = prior.sample_many(rng, 4000, 10, _variant=2)
    sc = mean_scores(prior, graphs)
    assert max(abs(m) / se for m, se in sc.values()) > 4


# ------------------------------------------------------------------ IBP case
@pytest.mark.parametrize("method", ["chefs", "finite"])
@pytest.mark.parametrize("alpha,gamma,D", [(1.0, 2.0, 5), (0.3, 1.0, 8), (4.0, 0.5, 3)])
def test_ibp_special_case_hidden_count_is_poisson(method, alpha, gamma, D):
    """Observed at 0, hidden at 1: H ~ Poisson(gamma * sum_{r<D} alpha/(alpha+r))
    (two-parameter IBP: gamma is the mass, alpha the concentration)."""
    prior = ICP(alpha, gamma, 1.0)
    rng = np.random.default_rng(6)
    n = 5000
    kw = {"finite_K": 1000} if method == "finite" else {}
    H = np.array([g.num_hidden for g in prior.sample_many(rng, n, D, observed_order=0.0, hidden_order=1.0,
                                                         method=method, **kw)])
    lam = prior.expected_hidden_ibp(D)
    zs = {"mean": (H.mean() - lam) / math.sqrt(lam / n)}
    for k in range(6):
        p = sps.poisson.pmf(k, lam)
        if p > 0.002:
            zs[k] = (np.mean(H == k) - p) / math.sqrt(p * (1 - p) / n)
    assert max_abs_z(zs) < Z, zs


def test_negative_control_ibp_check_catches_one_parameter_ibp():
    """The one-parameter IBP rate gamma * H_D (alpha = 1) is wrong for alpha = 0.3."""
    prior = ICP(0.3, 1.0, 1.0)
    rng = np.random.default_rng(6)
    n = 8000
    H = np.array([g.num_hidden for g in prior.sample_many(rng, n, 8, observed_order=0.0, hidden_order=1.0)])
    wrong = ICP(1.0, 1.0, 1.0).expected_hidden_ibp(8)
    assert abs(H.mean() - wrong) / math.sqrt(wrong / n) > Z


# --------------------------------------------------------- numerical checks
def _mp_log_prob(g, alpha, gamma, phi):
    import mpmath as mp

    mp.mp.dps = 50
    a_, g_, p_ = mp.mpf(alpha), mp.mpf(gamma), mp.mpf(phi)
    m = g.out_degree()
    a = g.num_below()
    lp = mp.mpf(0)
    for k in range(g.num_nodes):
        mk, ak = int(m[k]), int(a[k])
        if g.observed[k]:
            lp += (mp.loggamma(p_ + mk) - mp.loggamma(p_) + mp.loggamma(a_ + ak - mk) - mp.loggamma(a_)
                   - mp.loggamma(a_ + p_ + ak) + mp.loggamma(a_ + p_))
        else:
            lp += mp.log(a_ * g_) + mp.loggamma(mk) + mp.loggamma(a_ + ak - mk) - mp.loggamma(a_ + ak)
    st = sorted(mp.mpf(float(t)) for t in g.theta)
    S = mp.fsum((1 - t) / (a_ + r) for r, t in enumerate(st))
    return lp - a_ * g_ * S


@pytest.mark.parametrize("alpha", [1e-4, 1.0, 1e4])
@pytest.mark.parametrize("gamma", [1e-4, 1.0, 1e4])
@pytest.mark.parametrize("phi", [1e-4, 1.0, 1e4])
def test_log_prob_exact_at_extreme_hyperparameters(alpha, gamma, phi):
    rng = np.random.default_rng(7)
    graphs = [ICP(1.0, 2.0, 1.0).sample(rng, 6) for _ in range(5)]
    prior = ICP(alpha, gamma, phi)
    for g in graphs:
        ref = float(_mp_log_prob(g, alpha, gamma, phi))
        got = prior.log_prob(g)
        assert got == pytest.approx(ref, rel=1e-10, abs=1e-8)


def test_finite_density_converges_to_infinite():
    rng = np.random.default_rng(8)
    prior = ICP(0.7, 1.5, 2.0)
    for _ in range(5):
        g = prior.sample(rng, 5)
        diffs = [abs(prior.log_prob(g, finite_K=K) - prior.log_prob(g)) for K in (10**3, 10**5, 10**7)]
        assert diffs[2] < 1e-4 and diffs[0] > diffs[1] > diffs[2]


def test_sampler_reproducible_and_validates(rng):
    prior = ICP(1.0, 2.0, 1.0)
    a = [prior.sample(np.random.default_rng(3), 4) for _ in range(3)]
    b = [prior.sample(np.random.default_rng(3), 4) for _ in range(3)]
    assert all(x == y for x, y in zip(a, b))
    for g in prior.sample_many(rng, 50, 4, observed_order=[1.0, 0.0, None, 0.0]):
        g.validate()
        assert g.theta[0] == 1.0 and g.theta[1] == 0.0 and g.theta[3] == 0.0
        assert list(g.fixed[:4]) == [True, True, False, True]
    for g in prior.sample_many(rng, 20, 3, method="finite", finite_K=200):
        g.validate()


@pytest.mark.parametrize("bad", [dict(alpha=0), dict(gamma=-1), dict(phi=float("nan")), dict(alpha="x")])
def test_bad_hyperparameters_raise(bad):
    with pytest.raises(ValueError):
        ICP(**{"alpha": 1.0, "gamma": 1.0, "phi": 1.0, **bad})


def test_bad_sampler_arguments_raise(rng):
    prior = ICP()
    with pytest.raises(ValueError):
        prior.sample(rng, 0)
    with pytest.raises(ValueError):
        prior.sample(rng, 2, observed_order=[0.1, 0.2, 0.3])
    with pytest.raises(ValueError):
        prior.sample(rng, 2, observed_order=1.5)
    with pytest.raises(ValueError):
        prior.sample(rng, 2, method="finite")
    with pytest.raises(ValueError):
        prior.sample(rng, 2, method="gibbs")
    with pytest.raises(ValueError):
        prior.sample(42, 2)


def _finite_density_mass(prior, K, density_K):
    """P(H = 0) and P(H = 1) for D = 2 observed nodes fixed at order 0 from the
    finite-K density (eq. 8, ``log_prob(finite_K=density_K)``): H = 0 is one graph;
    for H = 1 the hidden node's order is integrated by quadrature and its child sets
    ({0}, {1}, {0, 1}) summed."""
    from scipy.integrate import quad

    g0 = DAG([0.0, 0.0], [True, True], fixed=[True, True])

    def dens(t):
        return sum(math.exp(prior.log_prob(DAG([0.0, 0.0, t], [True, True, False], [2] * len(ch), ch,
                                                fixed=[True, True, False]), finite_K=density_K))
                   for ch in ([0], [1], [0, 1]))

    p1, _ = quad(dens, 0, 1, epsabs=1e-13)
    return math.exp(prior.log_prob(g0, finite_K=density_K)), p1


@pytest.mark.parametrize("K", [4, 6, 20])
def test_finite_K_density_matches_the_finite_enumeration(K):
    """``log_prob(finite_K=K)`` (eq. 8) against the exact finite-K enumeration, which
    has its own formulas (test audit, stop 18: log_prob's finite-K branch was only
    checked through its K -> infinity limit). Negative control: the density of K + 1
    against the enumeration of K."""
    prior = ICP(0.8, 1.3, 0.6)
    exact = [sum(s.prob for s in enumerate_structures(prior, 2, h, finite_K=K) if s.num_hidden == h) for h in (0, 1)]
    got = _finite_density_mass(prior, K, K)
    assert got == pytest.approx(exact, rel=1e-9)
    wrong = _finite_density_mass(prior, K, K + 1)
    assert max(abs(w - e) for w, e in zip(wrong, exact)) > 1e-3


def test_sample_many_equals_repeated_sample():
    """``sample_many`` checks its arguments once and returns the graphs that as many calls of
    ``sample`` draw from the same stream (both samplers)."""
    prior = ICP(0.8, 2.0, 1.5)
    for kw in ({"observed_order": [0.0, None, 1.0]}, {"method": "finite", "finite_K": 12}):
        a = prior.sample_many(np.random.default_rng(9), 30, 3, **kw)
        rng = np.random.default_rng(9)
        b = [prior.sample(rng, 3, **kw) for _ in range(30)]
        assert [g.to_json() for g in a] == [g.to_json() for g in b]
    with pytest.raises(ValueError, match="num must be"):
        prior.sample_many(np.random.default_rng(0), -1, 2)
    with pytest.raises(ValueError, match="unknown method"):
        prior.sample_many(np.random.default_rng(0), 3, 2, method="gibbs")
