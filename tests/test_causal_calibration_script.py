"""benchmarks/causal_chain_calibration.py --pools and benchmarks/causal_modes.py: smoke runs on a tiny causal
run of the benchmark's seed-14 SEM (the scripts rebuild the SEM from its seed), checked against the library's
own summaries, and their option checks."""

from __future__ import annotations

import numpy as np
import pytest

from .conftest import load_script

cc = load_script("benchmarks/causal_chain_calibration.py")
cm = load_script("benchmarks/causal_modes.py")


@pytest.fixture(scope="module")
def bench(tmp_path_factory):
    from chefs.bench.causal import make_sem, sem_settings
    from chefs.causal import CausalDiscovery

    out = tmp_path_factory.mktemp("bench")
    sem = make_sem(14, *sem_settings(14, False))  # D = 5, N = 500
    CausalDiscovery(sweeps=12, burn_in=4, thin=2, chains=3, seed=14, out=out / "runs" / "seed14", force=True,
                    progress=False).fit(sem.X)
    return out


def test_pools_read_the_first_k_chains(bench, capsys):
    from chefs.bench.causal import calibration_table, make_sem, sem_settings
    from chefs.causal import CausalDiscovery

    assert cc.main([str(bench), "--seeds", "14", "--pools", "2,1"]) == 0
    out = capsys.readouterr().out
    assert out.index("| 1 |") < out.index("| 2 |")  # sorted
    sem = make_sem(14, *sem_settings(14, False))
    off = ~np.eye(5, dtype=bool)

    def lines(chains):  # the library's own pooled bins of these chains, as the script prints them
        s = CausalDiscovery.load(bench / "runs" / "seed14", chains=chains).summary_
        calib = [(k, float(q), bool(t)) for k, truth in (("p_edge", sem.edges), ("p_ancestor", sem.ancestor),
                                                         ("p_confounded", sem.confounded))
                 for q, t in zip(getattr(s, k)[off], truth[off])]
        return [f"| 2 | {c['bin']} | {c['count']} | {c['mean_predicted']:.3f} |" for c in calibration_table(calib)
                if c["probability"] == "all" and c["count"]]

    assert all(line in out for line in lines([0, 1]))       # K = 2 is chains 0 and 1
    assert not all(line in out for line in lines([1, 2]))   # which the check can tell from other chains


@pytest.mark.parametrize("pools, msg", [("0,2", "positive"), ("a", "comma-separated"), ("", "comma-separated"),
                                        ("2,4", "asks for 4 chains")])
def test_bad_pools_are_one_line_errors(bench, capsys, pools, msg):
    with pytest.raises(SystemExit) as e:
        cc.main([str(bench), "--seeds", "14", "--pools", pools])
    assert e.value.code == 2 and msg in capsys.readouterr().err


def test_modes_table(bench, capsys):
    assert cm.main([str(bench), "--seeds", "14", "--top", "2"]) == 0
    out = capsys.readouterr().out
    assert "| 14 | 3 |" in out and "The highest chain by log joint" in out
    with pytest.raises(ValueError, match="--top"):
        cm.main([str(bench), "--seeds", "14", "--top", "0"])


def test_compare_reads_whole_runs(bench, capsys):
    """--compare: every chain of each directory pooled; the same run read twice gives the rows that --pools gives
    for all its chains (K = 3), and a run of other chains gives other rows."""
    assert cc.main([str(bench), "--seeds", "14", "--pools", "3"]) == 0
    whole = capsys.readouterr().out
    assert cc.main([str(bench), "--seeds", "14", "--compare", str(bench), "--labels", "a,b"]) == 0
    out = capsys.readouterr().out
    bins = [line.split("|", 2)[2] for line in whole.splitlines() if line.startswith("| 3 | [")]
    assert len(bins) == 5
    for label in ("a", "b"):
        assert [line.split("|", 2)[2] for line in out.splitlines() if line.startswith(f"| {label} | [")] == bins
    row = next(line for line in whole.splitlines() if line.startswith("| 3 | ") and "[" not in line)
    first = row.split("|")[2:6]  # SHD, F1, AUROC, latent: as --pools reads them
    for label in ("a", "b"):
        line = next(x for x in out.splitlines() if x.startswith(f"| {label} | ") and "[" not in x)
        assert line.split("|")[2:6] == first
    assert cc.main([str(bench), "--seeds", "14", "--pools", "1"]) == 0
    one = capsys.readouterr().out
    first_chain = [line.split("|", 2)[2] for line in one.splitlines() if line.startswith("| 1 | [")]
    assert first_chain != bins
    # DIR:K reads the first K chains, as --pools K does
    assert cc.main([f"{bench}:1", "--seeds", "14", "--compare", str(bench), "--labels", "c,d"]) == 0
    out = capsys.readouterr().out
    assert [line.split("|", 2)[2] for line in out.splitlines() if line.startswith("| c | [")] == first_chain
    assert [line.split("|", 2)[2] for line in out.splitlines() if line.startswith("| d | [")] == bins


@pytest.mark.parametrize("extra, msg", [(["--labels", "a"], "names 1 row(s) for 2"),
                                        (["--pools", "2"], "two modes"), (["--compare", "x:0"], "must be positive"),
                                        (["--labels", "a,a"], "distinct names"), ([], "distinct names"),
                                        (["--compare", "BENCH:4"], "asks for 4 chains")])
def test_bad_compare_options_are_one_line_errors(bench, capsys, extra, msg):
    with pytest.raises(SystemExit) as e:
        extra = [e.replace("BENCH", str(bench)) for e in extra]
        cc.main([str(bench), "--seeds", "14"] + (extra if extra[:1] == ["--compare"] else ["--compare", str(bench)] + extra))
    assert e.value.code == 2 and msg in capsys.readouterr().err


cs = load_script("benchmarks/causal_stacking.py")


def test_stacking_weights_pick_the_chain_that_predicts_better():
    """A planted case: chain 1's log densities are higher on every row, so stacking gives it (nearly) all the
    weight; two chains with the same densities get equal weight; the elpd is ordered accordingly."""
    rng = np.random.default_rng(0)
    base = rng.normal(0.0, 0.3, size=(20, 200))
    w, elpd, bad = cs.stacking_weights({0: base, 1: base + 1.0})
    assert w[1] > 0.99 and elpd[1] > elpd[0] and w.sum() == pytest.approx(1.0)
    assert bad.shape == (2,)
    w, _, _ = cs.stacking_weights({0: base, 1: base.copy()})
    assert w == pytest.approx([0.5, 0.5], abs=1e-6)


def test_weighted_summary_is_the_pooled_one_or_one_chain(bench):
    """Equal weights over chains with equal sample counts give the library's pooled summary; a one-hot weight
    gives that chain's own summary (which differs from the pool, so the check can fail)."""
    from chefs.causal import CausalDiscovery, CausalSummary

    net = CausalDiscovery.load(bench / "runs" / "seed14")
    pooled, per_chain = CausalSummary.from_samples(net.samples_, net.names_, net.sample_chains_)
    assert len({s.num_samples for s in per_chain.values()}) == 1
    eq = cs.weighted_summary(per_chain, np.full(3, 1 / 3))
    for k in ("p_edge", "p_ancestor", "p_confounded"):
        assert np.allclose(getattr(eq, k), getattr(pooled, k))
    one = cs.weighted_summary(per_chain, np.array([0.0, 1.0, 0.0]))
    assert np.array_equal(one.p_ancestor, per_chain[1].p_ancestor)
    assert not all(np.array_equal(getattr(one, k), getattr(pooled, k)) for k in ("p_edge", "p_ancestor"))


def test_stacking_script_runs(bench, capsys, tmp_path):
    assert cs.main([str(bench), "--seeds", "14", "--draws", "3", "--num-is", "4", "--cache", str(tmp_path)]) == 0
    out = capsys.readouterr().out
    assert "| 14 | 2 | 3 |" in out and "| equal |" in out and "| stacked |" in out
    assert sorted(p.name for p in tmp_path.iterdir()) == [f"seed14-chain{c}.npy" for c in range(3)]
    with pytest.raises(ValueError, match="--draws"):
        cs.main([str(bench), "--seeds", "14", "--draws", "1"])
