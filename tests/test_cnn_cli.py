"""End to end: `chefs cnn sample` on the 8x8 digits (process pool) and `chefs cnn report`."""

import json
import time

import pytest

pytest.importorskip("torch")

from chefs.cli import main  # noqa: E402


def test_cnn_sample_and_report_end_to_end(tmp_path, capsys):
    run = tmp_path / "run"
    t0 = time.perf_counter()
    rc = main(["cnn", "sample", "--data", "digits", "--chains", "2", "--samples", "4", "--train-steps", "80",
               "--warm-steps", "20", "--seed", "3", "--executor", "process", "--quiet", "--out", str(run)])
    assert rc == 0
    assert time.perf_counter() - t0 < 120
    for f in ("config.json", "samples.jsonl", "weights.npz", "test_proba.npz"):
        assert (run / f).is_file()
    cfg = json.loads((run / "config.json").read_text())
    assert cfg["complete"] and cfg["chain"]["gamma"] == 20.0 and cfg["chain"]["n_bins"] == 5
    assert len(cfg["chains_summary"]) == 2
    # refuses to overwrite without --force
    assert main(["cnn", "sample", "--data", "digits", "--out", str(run)]) == 2
    assert "--force" in capsys.readouterr().err
    rep = tmp_path / "rep"
    assert main(["cnn", "report", str(run), "--out", str(rep)]) == 0
    s = json.loads((rep / "summary.json").read_text())
    assert s["num_samples"] == 8 and s["num_chains"] == 2
    assert 0.0 <= s["mean_accuracy"] <= s["max_accuracy"] <= 1.0
    assert s["ensemble_accuracy"] > 0.8  # digits 1/2/3 are easy even for the bare X->Y network
    for f in ("fig5a_statistics.png", "fig5b_orders.png", "fig5c_architectures.png", "samples.csv"):
        assert (rep / f).stat().st_size > 0


def test_cnn_cli_errors(tmp_path, capsys):
    assert main(["cnn", "sample", "--data", "nope", "--out", str(tmp_path / "r")]) == 2
    assert "mnist123" in capsys.readouterr().err
    assert main(["cnn", "report", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "half").mkdir()
    assert main(["cnn", "report", str(tmp_path / "half"), "--out", str(tmp_path / "o")]) == 2
    assert "not a complete run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["cnn", "sample", "--chains", "0", "--out", str(tmp_path / "r")])
