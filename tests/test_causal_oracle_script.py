"""benchmarks/causal_oracle.py: its start is the SEM's own structure (checked through the library's latent
projection; a start that miswires a confounder or misorders the variables fails it), a tiny run's report, and its
option check."""

from __future__ import annotations

import json

import numpy as np
import pytest

from .conftest import load_script

co = load_script("benchmarks/causal_oracle.py")


@pytest.mark.parametrize("seed", [10, 11, 15])
def test_the_start_is_the_sems_structure(seed):
    from chefs.bench.causal import make_sem, sem_settings
    from chefs.causal import relations

    sem = make_sem(seed, *sem_settings(seed, False))
    D = sem.edges.shape[0]
    pairs = co.confounded_pairs(sem)
    assert pairs and all(sem.confounded[a, b] for a, b in pairs)
    g = co.true_structure_start(sem)
    assert g.observed[:D].all() and not g.observed[D:].any() and g.num_nodes == D + len(pairs)
    edge, anc, conf, k = relations(g.to_dict())
    np.testing.assert_array_equal(edge, sem.edges)  # a hidden root adds no directed edge
    np.testing.assert_array_equal(anc, sem.ancestor)
    np.testing.assert_array_equal(conf, sem.confounded)
    assert k == len(pairs)
    h = co.true_structure_start(sem, with_confounders=False)
    edge0, anc0, conf0, k0 = relations(h.to_dict())
    np.testing.assert_array_equal(edge0, sem.edges)
    np.testing.assert_array_equal(anc0, sem.ancestor)
    assert not conf0.any() and k0 == 0


def test_the_starts_hidden_units_have_distinct_orders_on_every_seed():
    """On seeds 0-99 of the benchmark's full sizes: every start is a valid chain state (free orders distinct: seeds
    31, 58 and 74 put two hidden units past the cap of 0.99, which a first version gave both) and its hidden units
    sit above their children."""
    from chefs.bench.causal import make_sem, sem_settings
    from chefs.mcmc.state import GraphState

    capped = 0
    for seed in range(100):
        D, H, N = sem_settings(seed, False)
        if H == 0:
            continue
        sem = make_sem(seed, D, H, 10)  # the structure depends on the seed alone, not on N
        g = co.true_structure_start(sem)
        GraphState.from_dag(g)  # raises on equal free orders
        assert len(set(g.theta.tolist())) == g.num_nodes and g.theta.max() < 1
        for p, c in zip(g.parents.tolist(), g.children.tolist()):
            assert g.theta[p] > g.theta[c]
        capped += int((g.theta[D:] >= 0.99).sum() >= 2)
    assert capped >= 3


def test_a_tiny_run_reports_its_pairs(tmp_path, capsys):
    co.main(["--seeds", "14", "--chains", "1", "--sweeps", "20", "--out", str(tmp_path), "--plot",
             str(tmp_path / "a.png")])
    out = capsys.readouterr().out
    lines = [json.loads(s) for s in out.splitlines()]
    assert (tmp_path / "a.png").stat().st_size > 0
    (tmp_path / "lines.jsonl").write_text(out)
    co.main(["--read", str(tmp_path / "lines.jsonl"), "--plot", str(tmp_path / "b.png")])
    assert (tmp_path / "b.png").stat().st_size > 0
    assert [r["start"] for r in lines] == ["truth", "truth-no-conf"]
    for r in lines:
        assert r["seed"] == 14 and [p["pair"] for p in r["confounded_pairs"]] == [[1, 3], [2, 3]]
        assert all(0 <= p["p_confounded"] <= 1 and 0 <= p["p_edge_either"] <= 2 for p in r["confounded_pairs"])
        assert abs(sum(r["latent_causes"].values()) - 1) < 1e-3  # (each rounded to 4 places)
    for bad in (["--chains", "0"], ["--read", str(tmp_path / "lines.jsonl")]):
        with pytest.raises(SystemExit):
            co.main(bad)
