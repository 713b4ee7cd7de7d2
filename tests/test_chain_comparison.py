"""Chains side by side: the stuck-chain note of ``chefs fit`` / ``chefs summary`` and
``--chains`` on ``chefs fantasy`` / ``chefs plot`` (``BeliefNetwork.load(run, chains=...)``)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chefs
from chefs.cli import main
from chefs.mcmc.chain import ChainConfig
from chefs.mcmc.diagnostics import RHAT_WARN, chain_comparison, mcse_mean
from chefs.mcmc.run import create_run
from chefs.mcmc.store import SCALARS, SQLiteStore

GRAPH = '{"theta":[0.0],"observed":[true],"edges":[]}'


def fake_run(path, shifts, n=200, seed=0, model=None):
    """A run directory whose chain c stores ``n`` samples with log_joint an AR(1) trace
    (autocorrelation 0.8, stationary sd 5) around ``1000 + shifts[c]``; ``model``
    as in ``create_run`` (None: a prior-only run)."""
    create_run(path, ChainConfig(1, 0.0), sweeps=n, chains=len(shifts), model=model)
    rng = np.random.default_rng(seed)
    for c, shift in enumerate(shifts):
        e = np.empty(n)
        e[0] = rng.normal(0, 5)
        for t in range(1, n):
            e[t] = 0.8 * e[t - 1] + rng.normal(0, 5 * np.sqrt(1 - 0.64))
        st = SQLiteStore(path / f"chain-{c}" / "samples.sqlite")
        for t in range(n):
            sc = dict.fromkeys(SCALARS, 0.0)
            sc.update(log_joint=1000 + shift + e[t], log_lik=900 + shift + e[t], num_hidden=3 + c, num_edges=5)
            st.add(t, GRAPH, sc)
        st.close()
    return path


def test_a_chain_in_a_poorer_mode_is_named(tmp_path):
    cmp = chain_comparison(fake_run(tmp_path / "stuck", [0.0, -60.0, 0.0]))
    assert cmp["rhat"] > RHAT_WARN and cmp["behind"] == [1]
    assert [r["samples"] for r in cmp["chains"]] == [200, 200, 200]
    r1 = cmp["chains"][1]
    # AR(1) with rho 0.8: SE of the mean about 5 * sqrt((1 + 0.8) / (1 - 0.8) / 200) = 1.06
    assert 0.5 < r1["log_joint_se"] < 2.0
    assert abs(r1["log_joint"] - 940) < 4 * 1.06 and r1["num_hidden"] == 4
    # the best chain may be any one
    assert chain_comparison(fake_run(tmp_path / "first", [-60.0, 0.0]))["behind"] == [0]


def test_chains_that_agree_are_not_flagged(tmp_path):
    """Control: the same law in every chain (R-hat near 1, nothing behind)."""
    cmp = chain_comparison(fake_run(tmp_path / "ok", [0.0, 0.0, 0.0]))
    assert cmp["rhat"] < RHAT_WARN and cmp["behind"] == []
    assert mcse_mean(np.full(10, 3.0)) == 0.0 and np.isnan(mcse_mean([1.0, 2.0]))
    one = chain_comparison(fake_run(tmp_path / "one", [0.0]))
    assert np.isnan(one["rhat"]) and one["behind"] == []


def test_summary_prints_the_chains_and_the_note(tmp_path, capsys):
    run = fake_run(tmp_path / "stuck", [0.0, -60.0], model={"name": "nlgbn"})  # a density run's kind
    assert main(["summary", str(run)]) == 0
    cap = capsys.readouterr()
    assert "per chain" in cap.out and "the chains disagree" in cap.err and "--chains 0" in cap.err
    # a prior-only run: fantasy does not read it, so the note only says to run longer
    run = fake_run(tmp_path / "prior", [0.0, -60.0])
    assert main(["summary", str(run)]) == 0
    err = capsys.readouterr().err
    assert "the chains disagree" in err and "Run longer" in err and "--chains" not in err
    run = fake_run(tmp_path / "ok", [0.0, 0.0])
    assert main(["summary", str(run)]) == 0
    cap = capsys.readouterr()
    assert "per chain" in cap.out and "disagree" not in cap.err


def test_fantasy_from_chosen_chains(tmp_path, capsys):
    run = tmp_path / "run"
    data = tmp_path / "x.csv"  # (60 rows: the chains' choice, not ring's 2,000 points' scores)
    np.savetxt(data, np.random.default_rng(3).normal(size=(60, 2)), delimiter=",", header="a,b", comments="")
    assert main(["fit", "--data", str(data), "--sweeps", "8", "--burn-in", "4", "--thin", "2", "--chains", "2",
                 "--no-progress", "--out", str(run)]) == 0
    assert "per chain" in capsys.readouterr().out
    both = chefs.BeliefNetwork.load(run)
    first = chefs.BeliefNetwork.load(run, chains=[0])
    second = chefs.BeliefNetwork.load(run, chains=[1])
    assert len(first.samples_) == len(second.samples_) == len(both.samples_) // 2 == 2
    assert first.samples_ + second.samples_ == both.samples_
    with pytest.raises(ValueError, match="between 0 and 1"):
        chefs.BeliefNetwork.load(run, chains=[2])
    with pytest.raises(ValueError, match="between 0 and 1"):
        chefs.BeliefNetwork.load(run, chains=[])
    out = tmp_path / "f.csv"
    assert main(["fantasy", str(run), "--num", "20", "--chains", "1", "--out", str(out)]) == 0
    assert np.loadtxt(out, delimiter=",", skiprows=1).shape == (20, 2)
    assert main(["fantasy", str(run), "--num", "20", "--chains", "3", "--out", str(out), "--force"]) == 2
    assert "between 0 and 1" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["fantasy", str(run), "--chains", "a,b", "--out", str(out), "--force"])
    assert main(["plot", str(run), "--chains", "0", "--out", str(tmp_path / "plots")]) == 0
    assert (tmp_path / "plots" / "fantasy.png").exists()
    assert json.loads((run / "config.json").read_text())["chains"] == 2
