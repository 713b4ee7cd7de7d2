"""`chefs compare RUN`: a fitted run beside DP-GMM, KDE and the truth (chefs.bench.compare), and the
`fit.json` record that `chefs fit` writes for it."""

from __future__ import annotations

import csv
import json
import re

import numpy as np
import pytest

from chefs.cli import main


@pytest.fixture(scope="module")
def ring_run(tmp_path_factory):
    """A short `chefs fit` on ring's split 1, and what it printed."""
    import contextlib
    import io

    run = tmp_path_factory.mktemp("compare") / "run"
    buf = io.StringIO()
    with contextlib.redirect_stdout(buf):
        rc = main(["fit", "--data", "ring", "--split-seed", "1", "--sweeps", "12", "--burn-in", "4", "--thin", "2",
                   "--seed", "3", "--no-progress", "--out", str(run)])
    assert rc == 0
    return run, buf.getvalue()


def test_fit_records_its_split_and_time(ring_run):
    run, _ = ring_run
    record = json.loads((run / "fit.json").read_text())
    assert record["data"] == "ring" and record["split_seed"] == 1
    assert record["cpu_seconds"] > 0 and record["wall_seconds"] > 0


def test_compare_reproduces_the_fit_and_table1s_peers(ring_run, tmp_path, capsys):
    from chefs.bench.table1 import FULL, _cell_rows
    from chefs.datasets import true_heldout_loglik

    run, printed = ring_run
    out = tmp_path / "cmp"
    assert main(["compare", str(run), "--out", str(out)]) == 0
    text = capsys.readouterr().out
    with open(out / "compare.csv") as fh:
        rows = {r["model"]: r for r in csv.DictReader(fh)}
    assert list(rows) == ["icp (this run)", "dpgmm", "kde", "truth"]
    assert (out / "compare.png").stat().st_size > 0
    # the run's row: the HD and held-out value `chefs fit` printed (same fantasy seed, same estimator)
    hd = float(re.search(r"Hellinger\(fantasy, test\) = ([0-9.]+)", printed).group(1))
    ho = float(re.search(r"per point: (-?[0-9.]+)", printed).group(1))
    icp = rows["icp (this run)"]
    assert round(float(icp["hellinger"]), 4) == hd and round(float(icp["heldout_loglik"]), 4) == ho
    assert float(icp["cpu_seconds"]) == json.loads((run / "fit.json").read_text())["cpu_seconds"]
    # the peers: Table 1's cell of split 1, number for number (its stream and training data). Stop 62 (the
    # suite's time): KDE's cell only is rerun here (3.6 s less); DP-GMM's row comes from the same loop of
    # peer_rows, with its own cell_rng stream and the same training split, and Table 1 calls the same fit_dpgmm
    cells = _cell_rows("ring", 1, ["kde"], FULL, None, None, 1, baseline=False, log=lambda *a: None)
    for cell, _, _ in cells:
        row = rows[cell["model"]]
        assert float(row["hellinger"]) == pytest.approx(cell["hellinger"], abs=1e-12)
        assert float(row["heldout_loglik"]) == pytest.approx(cell["heldout_loglik"], abs=1e-12)
        assert float(row["cpu_seconds"]) > 0
    assert float(rows["truth"]["heldout_loglik"]) == pytest.approx(true_heldout_loglik("ring", 1), abs=1e-12)
    assert rows["truth"]["cpu_seconds"] == ""  # unknown numbers are blank, not "nan"
    assert "dpgmm" in text and "truth" in text and "wrote" in text


def test_compare_one_peer_and_bad_peers(ring_run, tmp_path, capsys):
    run, _ = ring_run
    assert main(["compare", str(run), "--peers", "dpgmm", "--out", str(tmp_path / "c")]) == 0
    with open(tmp_path / "c" / "compare.csv") as fh:
        assert [r["model"] for r in csv.DictReader(fh)] == ["icp (this run)", "dpgmm", "truth"]
    capsys.readouterr()
    for bad, why in (("dpgmm,foo", "unknown peer(s) ['foo']"), ("kde,kde", "listed more than once"),
                     (",", "--peers is empty")):
        with pytest.raises(SystemExit) as e:
            main(["compare", str(run), "--peers", bad])
        assert e.value.code == 2
        assert why in capsys.readouterr().err
    (tmp_path / "file").write_text("x")
    assert main(["compare", str(run), "--out", str(tmp_path / "file")]) == 2
    assert "is a file" in capsys.readouterr().err


def test_compare_refuses_runs_it_cannot_score(tmp_path, capsys):
    data = tmp_path / "d.csv"
    np.savetxt(data, np.random.default_rng(1).normal(size=(60, 2)), delimiter=",")
    csv_run = tmp_path / "csv-run"
    assert main(["fit", "--data", str(data), "--sweeps", "6", "--burn-in", "2", "--thin", "2", "--no-progress",
                 "--out", str(csv_run)]) == 0
    assert json.loads((csv_run / "fit.json").read_text())["split_seed"] is None
    cond = tmp_path / "cond"
    assert main(["fit", "--data", "ring", "--inputs", "0", "--sweeps", "6", "--burn-in", "2", "--thin", "2",
                 "--no-progress", "--out", str(cond)]) == 0
    prior_run = tmp_path / "prior"
    assert main(["prior", "mcmc", "--num-observed", "2", "--sweeps", "5", "--no-progress", "--out", str(prior_run)]) == 0
    causal = tmp_path / "causal"
    assert main(["discover", "--data", str(data), "--out", str(causal), "--sweeps", "6", "--burn-in", "2", "--thin",
                 "2", "--chains", "1", "--no-progress"]) == 0
    capsys.readouterr()
    for run, why in ((csv_run, "no test split"), (cond, "--inputs"), (tmp_path / "nothing", "not a run directory"),
                     (prior_run, "'chefs prior mcmc' run"), (causal, "run of `chefs discover`")):
        assert main(["compare", str(run)]) == 2
        err = capsys.readouterr().err
        assert why in err and len(err.strip().splitlines()) == 1
        assert not (run / "compare").exists()


def test_compare_refuses_an_unfinished_run(ring_run, tmp_path, capsys):
    import shutil

    run = tmp_path / "run"
    shutil.copytree(ring_run[0], run)
    (run / "chain-0" / "done").unlink()
    assert main(["compare", str(run)]) == 2
    assert "unfinished" in capsys.readouterr().err and not (run / "compare").exists()


def test_an_interrupted_fit_records_no_time(tmp_path, monkeypatch, capsys):
    from chefs.density import BeliefNetwork

    run = tmp_path / "run"

    def interrupted(self, X):
        run.mkdir()
        self.run_dir_ = run
        raise KeyboardInterrupt

    monkeypatch.setattr(BeliefNetwork, "fit", interrupted)
    assert main(["fit", "--data", "ring", "--sweeps", "12", "--no-progress", "--out", str(run)]) == 130
    record = json.loads((run / "fit.json").read_text())
    assert record["split_seed"] == 0 and "cpu_seconds" not in record and "did not run to its end" in record["untimed"]


def test_a_fit_killed_while_sampling_leaves_its_test_split(tmp_path, monkeypatch):
    """What a SIGKILL during sampling leaves (no ``finally`` runs then) is the run directory as it stands when
    the chains start: it already holds the test split, the data's label and names and a provisional fit record,
    so that `chefs resume`, `plot` and `compare` find them (a review found them written only at the end)."""
    import chefs.density as dens

    run = tmp_path / "run"
    seen = {}

    def killed(run_dir, **kw):  # the chains' start: record the directory, then die as a kill would
        seen["files"] = sorted(p.name for p in run_dir.iterdir())
        seen["record"] = json.loads((run_dir / "fit.json").read_text())
        seen["test"] = np.load(run_dir / "test.npy")
        raise SystemExit(137)

    monkeypatch.setattr(dens, "run_chains", killed)
    with pytest.raises(SystemExit):
        main(["fit", "--data", "ring", "--split-seed", "2", "--sweeps", "12", "--burn-in", "4", "--thin", "2",
              "--no-progress", "--out", str(run)])
    assert {"test.npy", "dataset.txt", "columns.json", "fit.json", "config.json", "train.npy"} <= set(seen["files"])
    from chefs.commands.fit import load_data

    _, test, _ = load_data("ring", None, 2)
    np.testing.assert_array_equal(seen["test"], test)
    assert seen["record"]["split_seed"] == 2 and "did not run to its end" in seen["record"]["untimed"]


def test_an_interrupt_before_the_run_exists_does_not_offer_a_resume(tmp_path, monkeypatch, capsys):
    """Ctrl-C before the run directory exists (here: while connecting to a scheduler) said `chefs resume OUT`
    continues the run, of a directory never made (found in review); with the run made, the hint stays."""
    from chefs.density import BeliefNetwork

    def interrupted(self, X):
        raise KeyboardInterrupt

    monkeypatch.setattr(BeliefNetwork, "fit", interrupted)
    assert main(["fit", "--data", "ring", "--sweeps", "12", "--no-progress", "--out", str(tmp_path / "o")]) == 130
    err = capsys.readouterr().err
    assert "interrupted" in err and "resume" not in err
