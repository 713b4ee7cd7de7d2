"""End to end: `chefs cnn sample` on the 8x8 digits (process pool) and `chefs cnn report`."""

import json

import pytest

pytest.importorskip("torch")

from chefs.cli import main  # noqa: E402


def test_cnn_sample_and_report_end_to_end(tmp_path, capsys):
    run = tmp_path / "run"
    rc = main(["cnn", "sample", "--data", "digits", "--chains", "2", "--samples", "4", "--train-steps", "80",
               "--warm-steps", "20", "--seed", "3", "--executor", "serial", "--quiet", "--out", str(run)])
    # serial: the CLI's plumbing is what this test checks (about 6 s less than two worker processes that
    # each import torch); run_chains' process executor is exercised in test_cnn_model (the interrupt test)
    assert rc == 0
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
    # a flag of the other proposal is refused, not ignored (only when given: the default is no error)
    assert main(["cnn", "sample", "--toggle-weight", "0.5", "--out", str(tmp_path / "r")]) == 2
    assert "--toggle-weight belongs to --proposal toggle" in capsys.readouterr().err
    assert not (tmp_path / "r").exists()
    assert main(["cnn", "sample", "--data", "nope", "--out", str(tmp_path / "r")]) == 2
    assert "mnist123" in capsys.readouterr().err
    assert main(["cnn", "report", str(tmp_path / "missing"), "--out", str(tmp_path / "o")]) == 2
    (tmp_path / "half").mkdir()
    assert main(["cnn", "report", str(tmp_path / "half"), "--out", str(tmp_path / "o")]) == 2
    assert "not a complete run" in capsys.readouterr().err
    with pytest.raises(SystemExit):
        main(["cnn", "sample", "--chains", "0", "--out", str(tmp_path / "r")])
    import torch

    if not torch.cuda.is_available():
        assert main(["cnn", "sample", "--device", "cuda", "--out", str(tmp_path / "r")]) == 2
        assert "no GPU" in capsys.readouterr().err and not (tmp_path / "r").exists()


def test_cnn_resume_continues_to_the_same_run(tmp_path, capsys):
    """N samples in one go == N/2, then `chefs cnn resume --samples N` (files compared byte for byte)."""
    import numpy as np

    common = ["--data", "digits", "--max-train", "120", "--chains", "2", "--train-steps", "20", "--warm-steps", "6",
              "--batch-size", "30", "--seed", "4", "--executor", "serial", "--quiet"]
    one, two = tmp_path / "one", tmp_path / "two"
    assert main(["cnn", "sample", *common, "--samples", "4", "--out", str(one)]) == 0
    assert main(["cnn", "sample", *common, "--samples", "2", "--out", str(two)]) == 0
    assert main(["cnn", "sample", *common, "--samples", "2", "--out", str(two)]) == 2
    assert "chefs cnn resume" in capsys.readouterr().err
    assert main(["cnn", "resume", str(two), "--samples", "1"]) == 2  # cannot shorten a run
    assert "cannot be shortened" in capsys.readouterr().err
    assert main(["cnn", "resume", str(two), "--samples", "4", "--quiet"]) == 0
    assert (one / "samples.jsonl").read_bytes() == (two / "samples.jsonl").read_bytes()
    with np.load(one / "weights.npz", allow_pickle=False) as a, np.load(two / "weights.npz", allow_pickle=False) as b:
        assert sorted(a.files) == sorted(b.files)
        for k in a.files:
            np.testing.assert_array_equal(a[k], b[k])
    ca, cb = (json.loads((p / "config.json").read_text()) for p in (one, two))
    for x, y in zip(ca["chains_summary"], cb["chains_summary"]):
        assert (x["train_steps"], x["fits"], x["rng_state"], x["moves"]) == \
            (y["train_steps"], y["fits"], y["rng_state"], y["moves"])
    assert [s["command"] for s in cb["sessions"]] == ["sample", "resume"] and cb["complete"]
    # an interrupted run (config says incomplete) is refused by the report, with the way out
    cb["complete"] = False
    (two / "config.json").write_text(json.dumps(cb))
    assert main(["cnn", "report", str(two), "--out", str(tmp_path / "rep")]) == 2
    assert "chefs cnn resume" in capsys.readouterr().err
    assert main(["cnn", "resume", str(tmp_path / "nothing")]) == 2
    (tmp_path / "old").mkdir()
    (tmp_path / "old" / "config.json").write_text(json.dumps({"chain": {}}))
    assert main(["cnn", "resume", str(tmp_path / "old")]) == 2
    assert "cannot be resumed" in capsys.readouterr().err
    # stored chain settings this version does not know: one line, not a TypeError traceback
    cb["complete"] = False
    cb["chain"]["no_such_setting"] = 1
    (two / "config.json").write_text(json.dumps(cb))
    assert main(["cnn", "resume", str(two), "--samples", "6"]) == 2
    err = capsys.readouterr().err
    assert "chain settings" in err and err.count("\n") == 1


@pytest.mark.parametrize("bad", ["labels", "pixels"])
def test_non_numeric_npz_is_a_one_line_error(tmp_path, capsys, bad):
    import numpy as np

    f = tmp_path / "d.npz"
    X = np.random.default_rng(0).random((20, 8, 8))
    y = np.array(["a", "b"] * 10)
    if bad == "pixels":
        X, y = X.astype(str), np.arange(20) % 2
    np.savez(f, X=X, y=y)
    assert main(["cnn", "sample", "--data", str(f), "--out", str(tmp_path / "r")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error:") and err.count("\n") == 1 and ("'y'" in err or "'X'" in err)


def test_unreachable_scheduler_leaves_no_run_behind(tmp_path, capsys, monkeypatch):
    """The run directory is removed when the chains never started (before, it
    stayed with only config.json and the corrected command needed --force)."""
    import chefs.mcmc.run as mrun

    def unreachable(workers, scheduler):
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: refused")

    monkeypatch.setattr(mrun, "make_executor", unreachable)
    run = tmp_path / "run"
    args = ["cnn", "sample", "--data", "digits", "--chains", "1", "--samples", "2", "--train-steps", "5",
            "--max-train", "60", "--out", str(run)]
    assert main(args + ["--scheduler", "tcp://127.0.0.1:1"]) == 2
    assert "cannot reach" in capsys.readouterr().err and not run.exists()


@pytest.mark.parametrize("command", [["resume"], ["summary"], ["export", "--format", "jsonl", "--out", "X"]])
def test_mcmc_run_commands_point_a_cnn_run_to_the_cnn_commands(tmp_path, capsys, command):
    run = tmp_path / "run"
    run.mkdir()
    (run / "config.json").write_text(json.dumps({"command": "chefs cnn sample", "chains": 2, "seed": 0}))
    (run / "chains").mkdir()
    args = [command[0], str(run)] + command[1:]
    if command[0] == "export":
        args = ["export", str(run), "--format", "jsonl", "--out", str(tmp_path / "g.jsonl")]
    assert main(args) == 2
    err = capsys.readouterr().err
    assert "chefs cnn resume" in err and err.count("\n") == 1


def test_channels_last_images_warn_and_a_directory_is_no_npz(tmp_path):
    import numpy as np

    from chefs.cnn.data import load_data

    f = tmp_path / "d.npz"
    np.savez(f, X=np.random.default_rng(0).random((30, 8, 8, 3)), y=np.arange(30) % 2)
    with pytest.warns(UserWarning, match="channels-last"):
        load_data(str(f))
    np.savez(f, X=np.random.default_rng(0).random((30, 3, 8, 8)), y=np.arange(30) % 2)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("error")
        load_data(str(f))  # channels first: no warning
    d = tmp_path / "dir.npz"
    d.mkdir()
    with pytest.raises(ValueError, match="is a directory"):
        load_data(str(d))


def test_boolean_images_load(tmp_path):
    import numpy as np

    from chefs.cnn.data import load_data

    f = tmp_path / "b.npz"
    np.savez(f, X=np.random.default_rng(1).random((30, 8, 8)) > 0.5, y=np.arange(30) % 2)
    d = load_data(str(f))
    assert d.x_train.dtype == np.float32 and set(np.unique(d.x_train)) <= {0.0, 1.0}


def test_cnn_commands_name_a_run_of_another_command(tmp_path, capsys):
    """`chefs cnn resume/report` on a `chefs fit` run: what it is and what reads it."""
    import numpy as np

    data = tmp_path / "d.csv"
    np.savetxt(data, np.random.default_rng(7).normal(size=(20, 2)), delimiter=",")
    fit = tmp_path / "fit"
    assert main(["fit", "--data", str(data), "--sweeps", "4", "--burn-in", "2", "--thin", "1", "--no-progress",
                 "--out", str(fit)]) == 0
    capsys.readouterr()
    for argv in (["cnn", "resume", str(fit)], ["cnn", "report", str(fit), "--out", str(tmp_path / "r")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert err == (f"chefs: error: {fit} is a 'chefs fit' run, not a 'chefs cnn sample' run: read it with "
                       f"'chefs summary|fantasy|plot|export {fit}', continue it with 'chefs resume {fit}'\n")
    assert not (tmp_path / "r").exists()
