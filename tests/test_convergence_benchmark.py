"""benchmarks/convergence.py: its option checks, checkpoint windows, time-to-reach rule,
and a smoke run on iris (a few seconds); the full benchmark is not run here."""

from __future__ import annotations

import csv

import pytest

from .conftest import load_script

conv = load_script("benchmarks/convergence.py")


def test_icp_option_is_a_label_and_belief_network_arguments():
    assert conv.parse_icp('new={"activation_update": "mtm+slice"}') == ("new", {"activation_update": "mtm+slice"})
    assert conv.parse_icp("old={}") == ("old", {})
    for text, msg in [("{}", "LABEL=JSON"), ("a b={}", "LABEL=JSON"), ("x={", "not JSON"), ("x=[1]", "object"),
                      ('x={"sweeps": 5}', "--sweeps"), ('x={"seed": 1}', "--seeds"), ('x={"chains": 2}', "one chain"),
                      ('x={"no_such_option": 1}', "no_such_option"), ('x={"activation_update": "bad"}', "activation")]:
        with pytest.raises(ValueError, match=msg):
            conv.parse_icp(text)


def test_checkpoints_halve_by_root_two_down_to_four_thinning_intervals():
    # 6000 * 2^(-j/2) / 30 = 200, 141.4, 100, 70.7, 50, 35.4, 25, 17.7, 12.5, 8.8, 6.25, 4.4 (then 3.1 < 4)
    assert conv.checkpoints(6000, 30) == [120, 180, 270, 360, 540, 750, 1050, 1500, 2130, 3000, 4230, 6000]
    assert conv.checkpoints(60, 3) == [12, 15, 21, 30, 42, 60]
    assert conv.checkpoints(6000, 30, first=1500) == [2130, 3000, 4230, 6000]  # a configured burn-in


def test_time_to_reach_is_the_first_checkpoint_within_the_threshold():
    def row(seed, model, config, t, h):
        return {"dataset": "ring", "seed": seed, "model": model, "config": config, "cpu_seconds": t, "hellinger": h,
                "heldout_loglik": -1.0}

    rows = [row(0, "dpgmm", "", 2.0, 0.1)] + [row(0, "icp", "a", t, h) for t, h in
                                               [(1.0, 0.3), (2.0, 0.119), (4.0, 0.13), (8.0, 0.05)]]
    rows += [row(1, "dpgmm", "", 2.0, 0.1), row(1, "icp", "a", 9.0, 0.2)]
    assert conv.time_to_reach(rows, "ring", "icp", "a", (0, 1)) == [2.0, None]
    assert conv.time_to_reach(rows, "ring", "dpgmm", "", (0, 1)) == [2.0, 2.0]
    text = conv.summary(rows, ["ring"], (0, 1), [("a", {})], "header")
    assert "| icp a | 2.0 s (1/2) |" in text


def test_bad_options_are_one_line_errors_before_anything_runs(tmp_path, capsys):
    for argv, msg in [(["--datasets", "wine"], "unknown data set"), (["--seeds", "0,x"], "--seeds"),
                      (["--sweeps", "10", "--thin", "5"], "sweeps >= 8 x thin"), (["--icp", "a={}", "--icp", "a={}"],
                                                                                  "labels must differ"),
                      (["--sweeps", "100", "--icp", 'a={"burn_in": 99}'], "burn_in must be"),
                      (["--heldout-draws", "0"], "--heldout-draws")]:
        assert conv.main(["--out", str(tmp_path / "o"), *argv]) == 2
        assert msg in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_quick_smoke_run_on_iris(tmp_path, capsys):
    out = tmp_path / "conv"
    assert conv.main(["--out", str(out), "--quick", "--datasets", "iris", "--sweeps", "16", "--thin", "2",
                      "--icp", "a={}", "--icp", 'b={"num_tries": 2}', "--heldout-draws", "4"]) == 0
    rows = list(csv.DictReader(open(out / "convergence.csv")))
    icp = [r for r in rows if r["model"] == "icp"]
    assert {r["config"] for r in icp} == {"a", "b"}
    assert [int(r["sweep"]) for r in icp if r["config"] == "a"] == [8, 12, 16]
    assert all(0 <= float(r["hellinger"]) <= 1 for r in rows)
    cpu = [float(r["cpu_seconds"]) for r in icp if r["config"] == "a"]
    assert cpu == sorted(cpu) and cpu[0] > 0
    assert {r["model"] for r in rows} == {"icp", "dpgmm", "kde"}  # iris: no truth
    assert "CPU seconds to reach 1.2 x DP-GMM" in (out / "convergence.md").read_text()
    assert "held-out importance draws 4" in (out / "convergence.md").read_text()
    assert (out / "convergence.png").exists()
    assert conv.main(["--out", str(out), "--quick", "--datasets", "iris"]) == 2  # exists: needs --force
