"""The CIBP prior (003): forward sampler, exact density of unlabelled networks,
the layer-width Markov chain, and the prior-only MCMC must agree. Each check
has a negative control that plants an error (the naive product of per-layer
left-ordered-form probabilities, a wrong new-dish rate, a wrong Hastings
ratio, a missing ordering factor) and shows the same check fails.

Helpers here are shared with tests/test_ecibp.py."""

from __future__ import annotations

import math
from collections import Counter

import numpy as np
import pytest
from scipy import stats as sps
from scipy.special import gammaln

from chefs import DAG
from chefs.priors import _cibp_kernels as ck
from chefs.priors._cibp_common import automorphisms, expected_next_width, layer_theta, theta_layer
from chefs.priors._cibp_exact import enumerate_networks, raw_key
from chefs.priors.cibp import CIBP

from .stats import Z, cell_z, max_abs_z, mcse_mean

N_DRAWS = 20_000


# ------------------------------------------------------------------ helpers
def key_cells(key) -> list:
    """Cells a structure key counts in: itself and its statistics."""
    if key == "tail":
        return ["tail"]
    D, widths, edges = key
    skip = sum(1 for p, c in edges if _lay(p, D, widths) - _lay(c, D, widths) > 1)
    return [key, ("H", sum(widths)), ("depth", len(widths)), ("E", len(edges)), ("skip", skip),
            ("K1", widths[0] if widths else 0)]


def _lay(u, D, widths):
    if u < D:
        return 0
    u -= D
    for ll, w in enumerate(widths, start=1):
        if u < w:
            return ll
        u -= w
    raise AssertionError("unit out of range")


def exact_cells(prior, D, H, density=None) -> dict:
    """Exact probability of every structure with <= H hidden units and of every
    statistic value (joint with H hidden <= H), plus the tail."""
    ex = enumerate_networks(prior, D, H)
    probs: dict = {}
    total = 0.0
    for key, (p, _, dag) in ex.items():
        if density is not None:
            p = math.exp(density(dag))
        total += p
        for c in key_cells(key):
            probs[c] = probs.get(c, 0.0) + p
    probs["tail"] = 1.0 - total
    return probs


def forward_keys(prior, D, H, n, seed, variant=0) -> list:
    rng = np.random.default_rng(seed)
    out = []
    for _ in range(n):
        r = prior._draw(rng, D, _variant=variant, _limit=H)
        if r is None:
            out.append("tail")
        else:
            lay, pa, ch = r
            out.append(raw_key(D, lay.tolist(), pa, ch) if len(lay) - D <= H else "tail")
    return out


def state_key(state, D, H):
    idx = np.flatnonzero(state.alive)
    if idx.size - D > H:
        return "tail"
    lay = theta_layer(state.theta[idx]).tolist()
    p, c = np.nonzero(state.Z[np.ix_(idx, idx)])
    return raw_key(D, lay, p.tolist(), c.tolist())


def chain_keys(prior, D, H, n, thin, seed, plant=0, burn=2000, max_nodes=200) -> list:
    """Thinned chain states as structure keys. A chain that grows past
    ``max_nodes`` units (the prior puts negligible mass there; planted errors
    can make the chain diverge) is stopped and its remaining states count as "tail"."""
    rng = np.random.default_rng(seed)
    state = prior.initial_state(D)
    prior.run_prior_chain(rng, state, burn, _plant=plant)
    out = []
    for _ in range(n):
        if state.num_nodes > max_nodes:
            out.extend(["tail"] * (n - len(out)))
            break
        prior.run_prior_chain(rng, state, thin, _plant=plant)
        out.append(state_key(state, D, H))
    return out


def iid_z(keys, probs) -> dict:
    counts = Counter()
    for k in keys:
        for c in key_cells(k):
            counts[c] += 1
    zs = cell_z(counts, len(keys), probs, min_prob=0.002)
    if any(c not in probs for c in counts):
        zs["unknown-structure"] = np.inf
    return zs


def batch_z(keys, probs, batches=50) -> dict:
    """z-scores of chain frequencies against exact probabilities; standard
    errors from batch means (floored at the binomial one)."""
    n = len(keys) // batches * batches
    cells = [set(key_cells(k)) for k in keys[:n]]
    zs = {}
    for c, p in probs.items():
        if p < 0.002 or p >= 1:
            continue
        x = np.fromiter((c in s for s in cells), dtype=float, count=n)
        bm = x.reshape(batches, -1).mean(axis=1)
        se = max(bm.std(ddof=1) / math.sqrt(batches), math.sqrt(p * (1 - p) / n))
        zs[c] = (x.mean() - p) / se
    if any(c not in probs for s in cells for c in s):
        zs["unknown-structure"] = np.inf
    return zs


def worst(zs, k=5):
    return sorted(zs.items(), key=lambda kv: -abs(kv[1]))[:k]


def forward_stats(prior, D, n, seed) -> np.ndarray:
    """(depth, K1, K2, K3, hidden, edges, skip edges, edges into observed) per draw."""
    rng = np.random.default_rng(seed)
    rows = np.zeros((n, 8))
    for t in range(n):
        lay, pa, ch = prior._draw(rng, D)
        pa, ch = np.asarray(pa, dtype=np.int64), np.asarray(ch, dtype=np.int64)
        K = np.bincount(lay, minlength=4)
        rows[t] = (lay.max(), K[1], K[2], K[3], lay.size - D, pa.size,
                   np.sum(lay[pa] - lay[ch] > 1) if pa.size else 0, np.sum(ch < D))
    return rows


def chain_stats(prior, D, n, thin, seed, burn=5000, plant=0, max_nodes=400) -> np.ndarray:
    """Summary rows of ``n`` thinned chain states. A chain that grows past
    ``max_nodes`` units (planted errors can make it diverge) is stopped and its
    last row repeated."""
    rng = np.random.default_rng(seed)
    state = prior.initial_state(D)
    prior.run_prior_chain(rng, state, burn, _plant=plant)
    rows = np.zeros((n, 8))
    out = np.zeros(8, dtype=np.int64)
    for t in range(n):
        if state.num_nodes > max_nodes:  # the current state's summary fills the rest
            ck.summary(state.theta, state.obs, state.alive, state.Z, out)
            rows[t:] = out
            break
        prior.run_prior_chain(rng, state, thin, _plant=plant)
        ck.summary(state.theta, state.obs, state.alive, state.Z, out)
        rows[t] = out
    return rows


CAPS = (6, 8, 8, 8, 20, 60, 40, 30)  # the statistics are heavy-tailed: compare means of min(x, cap)


def compare_stats(fwd, chn) -> dict:
    """Two-sample z of the means of the capped statistics (iid SE for forward
    draws, the chain's SE from its effective sample size)."""
    zs = {}
    for j, name in enumerate(("depth", "K1", "K2", "K3", "H", "E", "skip", "in_obs")):
        x = np.minimum(fwd[:, j], CAPS[j])
        y = np.minimum(chn[:, j], CAPS[j])
        se = math.sqrt(x.var(ddof=1) / x.size + mcse_mean(y) ** 2)
        if se > 0:
            zs[name] = (x.mean() - y.mean()) / se
    return zs


# -------------------------------------------------------- exact density
SETTINGS = [
    # alpha, beta, D, max_hidden
    (1.0, 1.0, 1, 4),
    (0.7, 1.5, 2, 3),
]


@pytest.mark.parametrize("alpha,beta,D,H", SETTINGS)
def test_forward_draws_match_exact_density(alpha, beta, D, H):
    prior = CIBP(alpha, beta)
    probs = exact_cells(prior, D, H)
    zs = iid_z(forward_keys(prior, D, H, N_DRAWS, seed=1), probs)
    assert len(zs) > 15
    assert max_abs_z(zs) < Z, worst(zs)


def test_log_prob_is_sum_over_labellings_and_automorphisms_are_right():
    """log_prob (prod K_l! / |Aut|) equals the sum of the ordered probabilities
    of all labelled versions; |Aut| from twin classes equals plain VF2."""
    from networkx.algorithms.isomorphism import DiGraphMatcher

    prior = CIBP(0.9, 1.3)
    ex = enumerate_networks(prior, 2, 4)
    assert sum(v[0] for v in ex.values()) < 1
    for key, (p, p_sum, dag) in ex.items():
        assert p == pytest.approx(p_sum, rel=1e-10, abs=1e-300), key
    rng = np.random.default_rng(3)
    checked = 0
    for g in prior.sample_many(rng, 60, 3):
        if g.num_nodes > 11:
            continue
        G = g.to_networkx()
        for k in range(g.num_nodes):
            G.nodes[k]["lab"] = k if g.observed[k] else -1
        n_aut = sum(1 for _ in DiGraphMatcher(G, G, node_match=lambda x, y: x["lab"] == y["lab"]).isomorphisms_iter())
        assert automorphisms(g) == n_aut
        checked += 1
    assert checked > 20
    # a network where twins in layer 1 are told apart by layer 2: |Aut| = 1
    g = DAG(layer_theta([0, 1, 1, 2]), [True, False, False, False], [1, 2, 3], [0, 0, 1])
    assert automorphisms(g) == 1


def naive_log_prob(prior, g):
    """The product of per-layer left-ordered-form probabilities, 1/prod_h K_h!
    per layer, instead of the exact prod_l K_l! / |Aut(G)|."""
    lay = prior.layers(g)
    K = np.bincount(lay)
    ch = g.child_sets()
    classes = Counter((int(lay[k]), tuple(sorted(ch[k]))) for k in range(g.num_nodes) if not g.observed[k])
    return (prior.log_prob_labelled(g) + float(np.sum(gammaln(K[1:] + 1)))
            - sum(math.lgamma(v + 1) for v in classes.values()))


def test_negative_control_naive_lof_product_is_caught():
    prior = CIBP(1.5, 1.0)
    probs = exact_cells(prior, 1, 4, density=lambda g: naive_log_prob(prior, g))
    zs = iid_z(forward_keys(prior, 1, 4, N_DRAWS, seed=1), probs)
    assert max_abs_z(zs) > Z


def test_negative_control_planted_sampler_error_is_caught():
    """First customer with new-dish rate alpha*beta (instead of alpha)."""
    prior = CIBP(0.7, 1.5)
    probs = exact_cells(prior, 2, 3)
    zs = iid_z(forward_keys(prior, 2, 3, N_DRAWS, seed=1, variant=1), probs)
    assert max_abs_z(zs) > Z


# ----------------------------------------------- layer-width Markov chain
@pytest.mark.parametrize("alpha,beta,D", [(1.0, 1.0, 5), (0.6, 2.5, 8)])
def test_layer_widths_follow_poisson_markov_chain(alpha, beta, D):
    """K1 ~ Poisson(lambda(D)) and E[K2 | K1] = lambda(K1) (eq. 1 of 003)."""
    prior = CIBP(alpha, beta)
    rows = forward_stats(prior, D, 6000, seed=4)
    lam = expected_next_width(D, alpha, beta)
    K1, K2 = rows[:, 1], rows[:, 2]
    n = K1.size
    zs = {"mean": (K1.mean() - lam) / math.sqrt(lam / n)}
    for k in range(12):
        p = sps.poisson.pmf(k, lam)
        if p > 0.002:
            zs[k] = (np.mean(K1 == k) - p) / math.sqrt(p * (1 - p) / n)
    resid = K2 - expected_next_width(K1.astype(int), alpha, beta)
    zs["K2|K1"] = resid.mean() / (resid.std(ddof=1) / math.sqrt(n))
    assert max_abs_z(zs) < Z, zs


def test_negative_control_width_check_catches_one_parameter_rate():
    """The one-parameter IBP rate alpha * H_D is wrong for beta = 0.4."""
    prior = CIBP(1.0, 0.4)
    K1 = forward_stats(prior, 8, 6000, seed=4)[:, 1]
    wrong = expected_next_width(8, 1.0, 1.0)
    assert abs(K1.mean() - wrong) / math.sqrt(wrong / K1.size) > Z


# ------------------------------------------------------ prior-only MCMC
def test_prior_chain_matches_exact_probabilities():
    prior = CIBP(1.0, 1.0)
    probs = exact_cells(prior, 1, 4)
    zs = batch_z(chain_keys(prior, 1, 4, 20_000, thin=20, seed=5), probs)
    assert max_abs_z(zs) < Z, worst(zs)


@pytest.mark.parametrize("plant", [ck.PLANT_HASTINGS_NSO, ck.PLANT_ORDER_FACTOR])
def test_negative_control_chain_with_planted_error_is_caught(plant):
    """plant 1: Hastings ratio without 1/n' (the number of singleton parents);
    plant 2: target without the 1/K_l! ordering factor."""
    prior = CIBP(1.0, 1.0)
    probs = exact_cells(prior, 1, 4)
    zs = batch_z(chain_keys(prior, 1, 4, 20_000, thin=20, seed=5, plant=plant), probs)
    assert max_abs_z(zs) > Z


def test_prior_chain_matches_forward_draws_on_larger_networks():
    prior = CIBP(0.8, 1.2)
    fwd = forward_stats(prior, 5, 6000, seed=6)
    chn = chain_stats(prior, 5, 15_000, thin=40, seed=7)
    zs = compare_stats(fwd, chn)
    assert max_abs_z(zs) < Z, zs
    assert np.all(chn[:, 6] == 0)  # no skip edges in the CIBP


def test_negative_control_larger_networks_catch_planted_chain():
    """Hastings ratio without 1/n' (the planted ordering-factor error makes
    these networks grow without bound instead)."""
    prior = CIBP(0.8, 1.2)
    fwd = forward_stats(prior, 5, 6000, seed=6)
    rng = np.random.default_rng(7)
    state = prior.initial_state(5)
    prior.run_prior_chain(rng, state, 5000, _plant=ck.PLANT_HASTINGS_NSO)
    rows = np.zeros((5000, 8))
    out = np.zeros(8, dtype=np.int64)
    for t in range(rows.shape[0]):
        prior.run_prior_chain(rng, state, 40, _plant=ck.PLANT_HASTINGS_NSO)
        ck.summary(state.theta, state.obs, state.alive, state.Z, out)
        rows[t] = out
    assert max_abs_z(compare_stats(fwd, rows)) > Z


# ------------------------------------------ move pieces against densities
def check_moves(prior, D, seed):
    """Every birth/death log-ratio equals the full log_prob_state difference
    plus an independently computed Hastings term; undo restores the state;
    edge_prior_prob equals the ratio of full densities."""
    rng = np.random.default_rng(seed)
    checked = edges = 0
    for _ in range(40):
        g = prior.sample(rng, D)
        if g.num_nodes > 30:
            continue
        s = prior.state_from_dag(g)
        for _ in range(8):
            before = s.to_dag()
            lp0 = prior.log_prob_state(s)
            Kp = s.num_nodes
            widths = prior.layer_widths(s)
            kind, lr, tok = prior.propose_birth_death(rng, s)
            if kind == 0:
                continue
            s.check()
            after = s.to_dag()
            prior.layers(after)
            lp1 = prior.log_prob_state(s)
            assert lp1 == pytest.approx(prior.log_prob_labelled(after), abs=1e-9)
            i = tok.child
            n_so = sum(1 for k in np.flatnonzero(s.alive)
                       if not s.obs[k] and s.Z[k, i] and s.m[k] == 1 and s.npar[k] == 0)
            if kind == 1:
                h = tok.born[0]
                lay = theta_layer(s.theta[h])
                Kl = widths[lay] if lay < widths.size else 0
                hast = math.log(Kp) - math.log(Kp + 1) - math.log(n_so) + math.log(Kl + 1)
            else:
                h = tok.removed[0]
                lay = theta_layer(s.theta[h])
                hast = math.log(Kp) - math.log(Kp - 1) + math.log(n_so + 1) - math.log(widths[lay])
            assert lr == pytest.approx(lp1 - lp0 + hast, abs=1e-9)
            prior.undo(s, tok)
            assert s.to_dag() == before
            s.check()
            checked += 1
            if rng.random() < 0.5:  # keep the accepted state sometimes
                kind, lr, tok = prior.propose_birth_death(rng, s)
                s.check()
        for i in np.flatnonzero(s.alive).tolist():
            for k in prior.edge_candidates(s, i):
                p1 = prior.edge_prior_prob(s, k, i)
                cur = bool(s.Z[k, i])
                from chefs.mcmc import _kernels as mk

                mk.apply_set_edge(s.Z, s.m, s.npar, k, i, True)
                l1 = prior.log_prob_state(s)
                prior.layers(s.to_dag())
                mk.apply_set_edge(s.Z, s.m, s.npar, k, i, False)
                l0 = prior.log_prob_state(s)
                prior.layers(s.to_dag())
                mk.apply_set_edge(s.Z, s.m, s.npar, k, i, cur)
                assert p1 == pytest.approx(1 / (1 + math.exp(l0 - l1)), rel=1e-9)
                edges += 1
    assert checked > 100 and edges > 100


def test_move_log_ratios_match_full_densities():
    check_moves(CIBP(1.0, 1.0), 3, seed=8)


def test_edge_candidates_are_non_singleton_parents_one_layer_up():
    prior = CIBP()
    # obs 0, 1; layer 1: u2 -> {0, 1}, u3 -> {0}; layer 2: u4 -> {2}
    g = DAG(layer_theta([0, 0, 1, 1, 2]), [True, True, False, False, False], [2, 2, 3, 4], [0, 1, 0, 2])
    s = prior.state_from_dag(g)
    assert prior.edge_candidates(s, 0) == [2]   # u3 is a singleton parent of 0
    assert prior.edge_candidates(s, 1) == [2, 3]
    assert prior.edge_candidates(s, 2) == []    # u4 is a singleton parent of u2
    assert prior.edge_candidates(s, 3) == [4]
    assert prior.edge_prior_prob(s, 3, 1) == pytest.approx(1 / (2 + 1.0 - 1))


# ------------------------------------------------------- hyperparameters
def test_update_hyper_targets_the_layer_conditional():
    """On a fixed graph, alpha_1 and beta_1 from repeated updates have the
    means of their exact conditional (2-D quadrature on the top-hat box)."""
    prior = CIBP(1.0, 1.0, alpha_bounds=(0.1, 3.0), beta_bounds=(0.2, 4.0))
    g = DAG(layer_theta([0, 0, 0, 1, 1, 1, 2]), [True] * 3 + [False] * 4,
            [3, 3, 4, 5, 6, 6], [0, 1, 1, 2, 3, 4])
    s = prior.state_from_dag(g)
    a = np.linspace(0.1, 3.0, 400)
    b = np.linspace(0.2, 4.0, 400)
    A, B = np.meshgrid(a, b, indexing="ij")
    lay = theta_layer(s.theta[s.alive])
    eta = s.m[s.alive][lay == 1]
    N = 3
    logf = 3 * np.log(A * B) - A * sum(B / (B + j) for j in range(N))
    for e in eta:
        logf = logf + gammaln(N - e + B) - gammaln(N + B)
    w = np.exp(logf - logf.max())
    ref = {"alpha": (w * A).sum() / w.sum(), "beta": (w * B).sum() / w.sum()}
    rng = np.random.default_rng(9)
    draws = np.array([[h["alpha"][0], h["beta"][0]] for h in (prior.update_hyper(rng, s) for _ in range(2000))])
    bm = draws.reshape(40, -1, 2).mean(axis=1)
    se = bm.std(axis=0, ddof=1) / math.sqrt(40)
    zs = (draws.mean(axis=0) - [ref["alpha"], ref["beta"]]) / se
    assert np.all(np.abs(zs) < Z), (zs, ref, draws.mean(axis=0))
    # layers beyond the first empty one: the top-hat prior
    deep = np.array([prior.update_hyper(rng, s)["alpha"][10] for _ in range(1000)])
    assert abs(deep.mean() - 1.55) / (2.9 / math.sqrt(12) / math.sqrt(1000)) < Z
    # negative control: the wrong conditional (beta's Beta terms dropped) is far off
    logf_bad = 3 * np.log(A * B) - A * sum(B / (B + j) for j in range(N))
    wb = np.exp(logf_bad - logf_bad.max())
    assert abs((draws[:, 1].mean() - (wb * B).sum() / wb.sum()) / se[1]) > Z


# ------------------------------------------------------------ validation
def test_bad_input_raises():
    with pytest.raises(ValueError):
        CIBP(alpha=0)
    with pytest.raises(ValueError):
        CIBP(alpha=6.0)  # outside the default top-hat prior
    with pytest.raises(ValueError):
        CIBP(beta_bounds=(2, 1))
    with pytest.raises(ValueError):
        CIBP(max_layers=0)
    with pytest.raises(ValueError):
        CIBP().sample(42, 2)
    with pytest.raises(ValueError):
        CIBP().sample(np.random.default_rng(0), 0)
    with pytest.raises(ValueError):
        CIBP(alpha=2.0, beta=2.0, max_layers=2).sample_many(np.random.default_rng(0), 50, 10)
    skip = DAG(layer_theta([0, 1, 2]), [True, False, False], [1, 2], [0, 0])
    with pytest.raises(ValueError):
        CIBP().layers(skip)
    with pytest.raises(ValueError):
        CIBP().layers(DAG([0.0, 0.3], [True, False], [1], [0]))
    with pytest.raises(ValueError):
        CIBP().update_hyper(np.random.default_rng(0), CIBP().initial_state(2), names=("gamma",))


def test_per_layer_hyperparameters_and_reproducibility():
    prior = CIBP(alpha=[1.5, 0.2], beta=[1.0, 0.5])
    assert prior.alpha[1] == 1.5 and prior.alpha[2] == 0.2 and prior.alpha[7] == 0.2
    a = [g.to_json() for g in prior.sample_many(np.random.default_rng(3), 20, 4)]
    b = [g.to_json() for g in prior.sample_many(np.random.default_rng(3), 20, 4)]
    assert a == b
    for g in prior.sample_many(np.random.default_rng(4), 50, 4):
        g.validate()
        DAG.from_json(g.to_json())
        prior.layers(g)
        assert np.all(g.theta[:4] == 0) and np.all(g.fixed[:4])


# -------------------------------------------------------------------- CLI
def test_cli_sample_and_figures(tmp_path):
    from chefs import read_jsonl
    from chefs.cli import main

    out = tmp_path / "c.jsonl"
    assert main(["prior", "sample", "--prior", "cibp", "--num-observed", "4", "--alpha", "0.8", "--beta", "1.2",
                 "--num", "6", "--seed", "2", "--out", str(out)]) == 0
    graphs = list(read_jsonl(out))
    assert len(graphs) == 6
    for g in graphs:
        CIBP().layers(g)
    assert main(["prior", "sample", "--prior", "cibp", "--num-observed", "2", "--gamma", "3",
                 "--out", str(tmp_path / "x.jsonl")]) == 2
    assert main(["prior", "cibp-figures", "--out", str(tmp_path / "fig"), "--num", "40",
                 "--samples", "1", "--max-units", "15"]) == 0
    pngs = sorted(p.name for p in (tmp_path / "fig").glob("*.png"))
    assert len(pngs) >= 3
    # a --max-units no draw meets is an error, never a drawing of a larger sample (CLI audit, stop 45)
    for units in ("1", "40"):
        assert main(["prior", "cibp-figures", "--out", str(tmp_path / "fig2"), "--num-observed", "40", "--num", "40",
                     "--samples", "1", "--max-units", units]) == 2


def test_ecibp_update_hyper_targets_the_layer_conditional():
    """The ECIBP branch: the dishes of layer 2 (one unit, with a skip edge to an
    observed unit) have the C = 3 units of layer 1 as creating customers and all
    N = 6 units below as customers (docs/derivations-cibp.md). alpha_2 and beta_2
    from repeated updates have the means of that conditional (2-D quadrature);
    the CIBP's count (N = 3) is rejected at the same standard errors (z = 34.8
    on beta; the passing check reads at most 1.4)."""
    from chefs.priors.ecibp import ECIBP

    prior = ECIBP(1.0, 1.0, alpha_bounds=(0.1, 3.0), beta_bounds=(0.2, 4.0))
    g = DAG(layer_theta([0, 0, 0, 1, 1, 1, 2]), [True] * 3 + [False] * 4,
            [3, 3, 4, 5, 6, 6, 6], [0, 1, 1, 2, 3, 4, 0])
    s = prior.state_from_dag(g)
    A, B = np.meshgrid(np.linspace(0.1, 3.0, 400), np.linspace(0.2, 4.0, 400), indexing="ij")

    def means(N, C=3, eta=3):
        logf = np.log(A * B) - A * sum(B / (B + j) for j in range(C)) + gammaln(N - eta + B) - gammaln(N + B)
        w = np.exp(logf - logf.max())
        return np.array([(w * A).sum(), (w * B).sum()]) / w.sum()

    rng = np.random.default_rng(9)
    draws = np.array([[h["alpha"][1], h["beta"][1]] for h in (prior.update_hyper(rng, s) for _ in range(2000))])
    se = draws.reshape(40, -1, 2).mean(axis=1).std(axis=0, ddof=1) / math.sqrt(40)
    z = (draws.mean(axis=0) - means(6)) / se
    assert np.all(np.abs(z) < Z), z
    assert np.max(np.abs((draws.mean(axis=0) - means(3)) / se)) > Z
