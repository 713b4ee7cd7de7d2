"""BeliefNetwork: the scikit-learn-style API end to end on a small problem,
input validation, run directories, the conditional (inputs at theta = 1)
variant, and the CLI (fit, fantasy, plot)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chefs
from chefs.cli import main
from chefs.density import BeliefNetwork, UnitMap, check_data


@pytest.fixture(scope="module")
def moons():
    from chefs.datasets import load_split

    tr, te = load_split("two-moons", seed=0)
    return tr[:300], te[:200]


def test_fit_sample_score(tmp_path, moons):
    tr, te = moons
    net = chefs.BeliefNetwork(sweeps=30, burn_in=10, thin=2, seed=1, out=tmp_path / "run", progress=False).fit(tr)
    assert len(net.samples_) == 10
    f = net.sample(500, rng=0)
    assert f.shape == (500, 2) and np.all(np.isfinite(f))
    lp = net.score_samples(te, num_is=16, max_samples=5)
    assert lp.shape == (200,) and np.all(np.isfinite(lp))
    # reproducible: the same seed gives the same posterior samples
    again = chefs.BeliefNetwork(sweeps=30, burn_in=10, thin=2, seed=1, out=tmp_path / "run2", progress=False).fit(tr)
    assert again.samples_ == net.samples_
    loaded = BeliefNetwork.load(tmp_path / "run")
    assert loaded.samples_ == net.samples_
    with pytest.raises(FileExistsError):
        chefs.BeliefNetwork(sweeps=30, burn_in=10, out=tmp_path / "run", progress=False).fit(tr)
    diag = net.diagnostics()
    assert set(diag["acceptance"]) >= {"edge", "birth_death", "order", "activations"}


def test_temporary_run_directory_is_removed(tmp_path, moons):
    """out=None: the run lives in a temporary directory that outlives the fit (diagnostics
    read it), is replaced by a refit, and is removed with the estimator; a copy does not own it;
    a given ``out`` is kept."""
    import copy
    import gc

    tr, _ = moons
    net = chefs.BeliefNetwork(sweeps=6, burn_in=2, thin=2, seed=1, progress=False).fit(tr)
    first = net.run_dir_
    assert (first / "chain-0").is_dir()
    net.diagnostics()
    net.fit(tr)
    assert not first.exists() and net.run_dir_.is_dir() and net.run_dir_ != first
    second = net.run_dir_
    clone = copy.deepcopy(net)
    del clone
    gc.collect()
    assert second.is_dir()
    del net
    gc.collect()
    assert not second.exists()
    kept = chefs.BeliefNetwork(sweeps=6, burn_in=2, thin=2, seed=1, progress=False, out=tmp_path / "run").fit(tr)
    del kept
    gc.collect()
    assert (tmp_path / "run" / "chain-0").is_dir()


def test_a_stopped_fit_warns_and_keeps_its_samples(tmp_path, moons, monkeypatch):
    """A stop file (RUN/stop) written during a fit ends its chain early: the fit warns that
    `chefs resume` continues it and uses the samples kept so far. Control: no warning
    without the file."""
    import warnings

    import chefs.mcmc.run as R

    monkeypatch.setattr(R, "STOP_LOOK_SECONDS", 0.0)
    tr, _ = moons
    run = tmp_path / "run"

    def stop_at_20(sweep, state):
        if sweep == 20:
            (run / R.STOP_FILE).write_text("stop\n")

    with pytest.warns(UserWarning, match="chefs resume"):
        net = chefs.BeliefNetwork(sweeps=30, burn_in=10, thin=2, seed=1, pilots=1, out=run,
                                  progress=stop_at_20).fit(tr)
    assert len(net.samples_) == 5  # sweeps 12, 14, ..., 20
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        net = chefs.BeliefNetwork(sweeps=30, burn_in=10, thin=2, seed=1, pilots=1, out=tmp_path / "b",
                                  progress=lambda sweep, state: None).fit(tr)
    assert len(net.samples_) == 10


@pytest.mark.parametrize("margin", [None, 0.05, 0.2])
def test_unit_map_roundtrip_and_jacobian(moons, margin):
    from chefs.density import MARGIN

    tr, _ = moons
    m = UnitMap.fit(tr) if margin is None else UnitMap.fit(tr, margin)
    mg = MARGIN if margin is None else margin
    assert m.margin == mg
    assert np.allclose(m.inverse(m.forward(tr)), tr)
    U = m.forward(tr)
    assert U.min() == pytest.approx(mg) and U.max() == pytest.approx(1 - mg)
    assert m.log_jacobian() == pytest.approx(np.sum(np.log((1 - 2 * mg) / (tr.max(0) - tr.min(0)))))
    again = UnitMap.from_dict(json.loads(json.dumps(m.to_dict())))
    assert again.margin == mg and np.allclose(again.forward(tr), U)


def test_unit_map_margin_checked_and_legacy_runs():
    tr = np.random.default_rng(0).normal(size=(20, 2))
    for bad in (0.0, 1e-17, 0.5, -0.1, float("nan"), "0.1", True):
        with pytest.raises(ValueError, match="margin"):
            UnitMap.fit(tr, bad)
        with pytest.raises(ValueError, match="margin"):
            chefs.BeliefNetwork(margin=bad)
    # a unitmap.json written before the margin was stored reads as the old 0.3
    d = UnitMap.fit(tr, 0.1).to_dict()
    del d["margin"]
    assert UnitMap.from_dict(d).margin == 0.3


def test_margin_reaches_the_run_and_comes_back(tmp_path):
    tr = np.random.default_rng(2).normal(size=(40, 2))
    net = chefs.BeliefNetwork(sweeps=6, burn_in=2, thin=2, out=tmp_path / "run", progress=False, margin=0.1).fit(tr)
    U = np.load(tmp_path / "run" / "train01.npy")
    assert U.min() == pytest.approx(0.1) and U.max() == pytest.approx(0.9)
    back = chefs.BeliefNetwork.load(tmp_path / "run")
    assert back.margin == 0.1 and back.map_.margin == 0.1
    assert np.allclose(back.score_samples(tr[:5], num_is=4), net.score_samples(tr[:5], num_is=4))


@pytest.mark.parametrize("bad,match", [
    (np.array([[1.0, np.nan], [2.0, 3.0]]), "NaN"),
    (np.array([[1.0, np.inf], [2.0, 3.0]]), "NaN or infinite"),
    (np.array([[1.0, 2.0]]), "two rows"),
    (np.array([[1.0, 2.0], [1.0, 3.0]]), "constant"),
    ([["a", "b"], ["c", "d"]], "numeric"),
])
def test_bad_data(bad, match):
    with pytest.raises(ValueError, match=match):
        UnitMap.fit(check_data(bad))


def test_wrong_columns_against_fitted_model(tmp_path, moons):
    tr, te = moons
    net = chefs.BeliefNetwork(sweeps=12, burn_in=4, thin=2, out=tmp_path / "r", progress=False).fit(tr)
    with pytest.raises(ValueError, match="columns"):
        net.score_samples(np.ones((3, 3)))


def test_conditional_model(tmp_path, moons):
    tr, te = moons
    net = chefs.BeliefNetwork(sweeps=20, burn_in=10, thin=2, out=tmp_path / "c", inputs=[0], progress=False).fit(tr)
    for s in net.samples_:
        assert s["theta"][0] == 1.0 and s["theta"][1] == 0.0
    f = net.sample(200, rng=0, inputs=te)
    assert np.allclose(f[:, 0], te[:, 0])
    assert np.all(np.isfinite(net.score_samples(te, num_is=8, max_samples=3)))
    with pytest.raises(ValueError, match="conditional"):
        net.sample(10)


def test_cli_fantasy_keeps_the_csv_header(tmp_path, capsys, monkeypatch):
    """Fantasy data of a model fitted on a CSV with a header come with that header
    (and a header-less file gives header-less fantasy data, as before)."""
    from chefs.cli import main
    from chefs.datasets import read_csv

    data = tmp_path / "d.csv"
    np.savetxt(data, np.random.default_rng(1).normal(size=(60, 2)), delimiter=",", header="width,height", comments="")
    run = tmp_path / "run"
    assert main(["fit", "--data", str(data), "--sweeps", "8", "--burn-in", "4", "--thin", "2", "--no-progress",
                 "--out", str(run), "--margin", "0.2", "--init-activations", "prior"]) == 0
    assert json.loads((run / "unitmap.json").read_text())["margin"] == 0.2  # --margin reaches the fit
    assert json.loads((run / "config.json").read_text())["model"]["init_activations"] == "prior"
    assert main(["fantasy", str(run), "--num", "5", "--out", str(tmp_path / "f.csv")]) == 0
    text = (tmp_path / "f.csv").read_text().splitlines()
    assert text[0] == "width,height" and len(text) == 6
    # a file of the run it reads is never its output, --force or not (it replaced config.json: found in review)
    config = (run / "config.json").read_bytes()
    for cmd in (["fantasy", str(run), "--num", "5"], ["export", str(run)]):
        assert main(cmd + ["--out", str(run / "config.json"), "--force"]) == 2
    assert (run / "config.json").read_bytes() == config
    assert read_csv(tmp_path / "f.csv").shape == (5, 2)
    # --out - (or no --out, as chefs outtree sample): standard output, no file named "-"
    capsys.readouterr()
    monkeypatch.chdir(tmp_path)
    for out in (["--out", "-"], []):
        assert main(["fantasy", str(run), "--num", "5"] + out) == 0
        assert capsys.readouterr().out.splitlines() == text
    assert not (tmp_path / "-").exists()


def test_cli_fit_fantasy_plot(tmp_path, capsys):
    run = tmp_path / "run"
    assert main(["fit", "--data", "ring", "--sweeps", "12", "--burn-in", "4", "--thin", "2", "--no-progress",
                 "--out", str(run)]) == 0
    assert (run / "traces.nc").is_file()  # scalar traces in an open format, as the README says
    assert json.loads((run / "config.json").read_text())["model"]["init_activations"] == "projection"
    out = capsys.readouterr().out
    assert "Hellinger(fantasy, test)" in out and "acceptance" in out
    assert main(["fit", "--data", "ring", "--sweeps", "12", "--out", str(run)]) == 2
    assert main(["fantasy", str(run), "--num", "50", "--out", str(tmp_path / "f.csv")]) == 0
    # a named data set's fantasy CSV carries the registry's column names
    assert (tmp_path / "f.csv").read_text().splitlines()[0] == "x,y"
    assert np.loadtxt(tmp_path / "f.csv", delimiter=",", skiprows=1).shape == (50, 2)
    assert main(["plot", str(run)]) == 0
    assert (run / "plots" / "fantasy.png").exists() and (run / "plots" / "posterior_dag.png").exists()
    assert main(["fit", "--data", "no-such-set", "--out", str(tmp_path / "x")]) == 2
    assert main(["fit", "--data", "ring", "--prior", "cibp", "--sweeps", "8", "--burn-in", "4", "--thin", "2", "--no-progress",
                 "--out", str(tmp_path / "cibp")]) == 0


def test_cli_fit_interrupted_keeps_the_test_split(tmp_path, monkeypatch, capsys):
    """Ctrl-C during `chefs fit`: the run keeps its test split, column names and
    label, so `chefs resume` / `fantasy` / `plot` have them afterwards."""
    run = tmp_path / "run"

    def interrupted(self, X):
        run.mkdir()
        self.run_dir_ = run  # the run exists (create_run has run), then Ctrl-C
        raise KeyboardInterrupt

    monkeypatch.setattr(BeliefNetwork, "fit", interrupted)
    assert main(["fit", "--data", "ring", "--sweeps", "12", "--no-progress", "--out", str(run)]) == 130
    assert "chefs resume" in capsys.readouterr().err
    assert np.load(run / "test.npy").shape[1] == 2
    assert json.loads((run / "columns.json").read_text()) == ["x", "y"]
    assert (run / "dataset.txt").read_text().strip() == "ring"


def test_cli_fit_reports_moves_that_never_ran_as_na(tmp_path, capsys):
    """The CIBP has no order or depth moves: their acceptance reads n/a, not 0.000."""
    assert main(["fit", "--data", "ring", "--prior", "cibp", "--sweeps", "6", "--burn-in", "2", "--thin", "2",
                 "--no-progress", "--out", str(tmp_path / "run")]) == 0
    line = next(s for s in capsys.readouterr().out.splitlines() if s.startswith("acceptance:"))
    assert "order n/a" in line and "depth n/a" in line and "edge n/a" not in line


def test_warmup_covering_the_whole_run_warns(tmp_path, moons):
    tr, _ = moons
    with pytest.warns(UserWarning, match="covers all 4 sweeps"):
        BeliefNetwork(sweeps=4, burn_in=2, thin=1, structure_warmup=10, out=tmp_path / "r", progress=False).fit(tr[:50])


def test_a_bad_burn_in_is_refused_before_the_warm_up_warning(tmp_path, capsys):
    """A burn-in at or above the sweeps gets its one-line error alone, not after a warning that the
    (default) warm-up covers the run, for `chefs fit` and `chefs discover` alike."""
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("always")
        for cmd in (["fit", "--data", "ring"], ["discover", "--data", "ring"]):
            assert main(cmd + ["--sweeps", "100", "--burn-in", "200", "--no-progress",
                               "--out", str(tmp_path / cmd[0])]) == 2
            err = capsys.readouterr().err
            assert err == "chefs: error: burn-in (200) must be smaller than the number of sweeps (100)\n", err
            assert not (tmp_path / cmd[0]).exists()


@pytest.mark.parametrize("flags,msg", [
    (["--activation-update", "slice", "--num-tries", "8"], "--num-tries belongs to --activation-update mtm or both"),
    (["--pilots", "1", "--pilot-sweeps", "50"], "--pilot-sweeps belong(s) to --pilots P with P > 1"),
    (["--pilots", "1", "--pilot-draws", "64", "--no-pilot-structures"],
     "--pilot-draws, --pilot-structures belong(s) to --pilots P with P > 1")])
def test_fit_refuses_options_it_would_ignore(tmp_path, capsys, flags, msg):
    """An option that the other settings make idle is refused in one line before anything is written (a review
    found them silently ignored); the same option where it acts is accepted (tests/test_hmc.py runs --pilots 2
    --pilot-sweeps 2 --pilot-structures)."""
    out = tmp_path / "run"
    assert main(["fit", "--data", "ring", "--sweeps", "4", "--no-progress", "--out", str(out)] + flags) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error: " + msg) and err.count("\n") == 1, err
    assert not out.exists()


def test_cli_warnings_are_one_line(tmp_path, capsys):
    """The warm-up warning reaches a CLI user as one `chefs: warning:` line (not
    Python's file:line: UserWarning form), and `chefs plot` of a run whose K+
    trace is constant passes on no ArviZ "single value" warning."""
    import warnings

    run = tmp_path / "run"
    with warnings.catch_warnings():
        warnings.simplefilter("always")
        warnings.simplefilter("ignore", DeprecationWarning)  # hidden outside __main__ by Python's default filters
        assert main(["fit", "--data", "ring", "--sweeps", "4", "--burn-in", "2", "--thin", "1", "--warmup", "10",
                     "--no-progress", "--out", str(run)]) == 0
        err = capsys.readouterr().err
        assert err == "chefs: warning: structure_warmup (10) covers all 4 sweeps: the structure stays at its start\n"
        assert main(["plot", str(run)]) == 0
        assert capsys.readouterr().err == ""


def test_cli_fit_failing_before_the_run_writes_nothing(tmp_path):
    """A fit refused by its own input checks leaves --out untouched (no data
    files that would then block the corrected command, or overwrite an old run's)."""
    run = tmp_path / "run"
    run.mkdir()
    assert main(["fit", "--data", "ring", "--inputs", "5", "--sweeps", "4", "--no-progress", "--out", str(run)]) == 2
    assert not list(run.iterdir())


def test_cli_fantasy_on_a_prior_mcmc_run_names_it(tmp_path, capsys):
    run = tmp_path / "prior"
    assert main(["prior", "mcmc", "--num-observed", "2", "--sweeps", "5", "--no-progress", "--out", str(run)]) == 0
    capsys.readouterr()
    assert main(["fantasy", str(run), "--num", "3"]) == 2
    assert capsys.readouterr().err == (f"chefs: error: {run} is a 'chefs prior mcmc' run, not a 'chefs fit' run: "
                                       f"read it with 'chefs summary|export {run}', continue it with "
                                       f"'chefs resume {run}'\n")


def test_cli_fit_out_that_is_a_file_is_one_clear_error(tmp_path, capsys):
    """--out of chefs fit names a run directory: a file leaked "[Errno 20] Not a directory"."""
    f = tmp_path / "s.jsonl"
    f.write_text("keep\n")
    assert main(["fit", "--data", "ring", "--sweeps", "4", "--no-progress", "--out", str(f)]) == 2
    assert capsys.readouterr().err == f"chefs: error: --out takes a directory; {f} is a file\n"
    assert f.read_text() == "keep\n"


def test_cli_fit_split_seed_is_for_named_data_sets(tmp_path, capsys):
    """`chefs fit` trains on all rows of a CSV: an explicit --split-seed there is
    an error instead of being silently ignored."""
    data = tmp_path / "d.csv"
    np.savetxt(data, np.random.default_rng(1).normal(size=(30, 2)), delimiter=",")
    assert main(["fit", "--data", str(data), "--split-seed", "3", "--sweeps", "4", "--no-progress",
                 "--out", str(tmp_path / "run")]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error: --split-seed splits a named data set") and err.count("\n") == 1
    assert not (tmp_path / "run").exists()


def test_a_run_fitted_with_the_removed_collapse_bias_is_refused(tmp_path, capsys):
    """``collapse_bias`` was removed at stop 33 (docs/derivations.md 3.11): an unfinished run whose
    spec has it on cannot be continued with this chefs, and ``chefs resume`` says so in one line
    (exit 2); its stored samples still read (fantasy). A spec with it off (stops 31-32 wrote
    ``false``) resumes as before."""
    run = tmp_path / "run"
    assert main(["fit", "--data", "ring", "--sweeps", "6", "--burn-in", "2", "--thin", "2", "--no-progress",
                 "--out", str(run)]) == 0
    cfg = run / "config.json"
    spec = json.loads(cfg.read_text())

    def unfinished_with(flag):  # resume must then build the model from the spec again
        spec["model"]["collapse_bias"] = flag
        cfg.write_text(json.dumps(spec))
        for done in run.glob("chain-*/done"):
            done.unlink()

    unfinished_with(False)
    assert main(["resume", str(run), "--no-progress"]) == 0
    unfinished_with(True)
    assert main(["fantasy", str(run), "--num", "5", "--out", str(tmp_path / "g.csv")]) == 0
    capsys.readouterr()
    assert main(["resume", str(run), "--no-progress"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error:") and err.count("\n") == 1 and "collapse_bias" in err, err
    assert "5542530" in err


def test_values_too_large_to_compute_with_are_refused():
    """A value whose square overflows (found by a CLI audit: 1e308 in a CSV led to overflow warnings and an
    internal error after the run directory was written) is refused by check_data, naming where."""
    from chefs.density import MAX_ABS_VALUE, check_data

    X = np.random.default_rng(0).normal(size=(20, 2))
    X[3, 1] = -1e200
    with pytest.raises(ValueError, match="row 3, column 1"):
        check_data(X)
    X[3, 1] = MAX_ABS_VALUE  # the limit itself is allowed
    assert check_data(X).shape == (20, 2)


def test_load_restores_the_runs_prior_and_hyperparameter_settings(tmp_path):
    """BeliefNetwork.load returns an estimator with the run's structure prior and hyperparameter settings (so a
    refit from it repeats the run's model), not the class defaults (found by a review at stop 45)."""
    X = np.random.default_rng(0).normal(size=(40, 2))
    runs = {"cibp": BeliefNetwork(prior="cibp", sweeps=6, burn_in=2, thin=1, pilots=1, out=tmp_path / "c",
                                  progress=False).fit(X),
            "icp": BeliefNetwork(sweeps=6, burn_in=2, thin=1, pilots=1, phi=0.5, sample_hyper=("gamma",),
                                 init_activations="prior", out=tmp_path / "i", progress=False).fit(X)}
    c = BeliefNetwork.load(tmp_path / "c")
    assert c.prior == "cibp" and c.sample_hyper == ()  # the layered priors sample none of alpha, gamma, phi
    i = BeliefNetwork.load(tmp_path / "i")
    assert i.prior == "icp" and i.sample_hyper == ("gamma",) and i.phi == 0.5
    assert i.init_activations == "prior" and c.init_activations == "projection"  # (the start, stop 56)
    assert runs["icp"].phi == 0.5


def test_fit_needs_ten_rows_and_the_cli_refuses_fewer_without_touching_the_run(tmp_path, capsys):
    """Fewer than ``MIN_FIT_ROWS`` rows: a ValueError from ``fit`` and, from ``chefs fit``, one line on stderr, exit
    2, and an existing run directory left as it was (with ``--force`` too). Ten rows fit."""
    from chefs.cli import main
    from chefs.density import MIN_FIT_ROWS

    X = np.random.default_rng(0).normal(size=(MIN_FIT_ROWS, 2))
    kw = dict(sweeps=4, burn_in=2, thin=1, progress=False)
    with pytest.raises(ValueError, match=f"at least {MIN_FIT_ROWS} rows"):
        chefs.BeliefNetwork(out=tmp_path / "a", **kw).fit(X[:-1])
    assert not (tmp_path / "a").exists()
    chefs.BeliefNetwork(out=tmp_path / "b", **kw).fit(X)
    small = tmp_path / "small.csv"
    np.savetxt(small, X[:2], delimiter=",")
    before = sorted(p.name for p in (tmp_path / "b").iterdir())
    capsys.readouterr()
    assert main(["fit", "--data", str(small), "--out", str(tmp_path / "b"), "--force", "--sweeps", "4",
                 "--burn-in", "2", "--thin", "1", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "at least 10 rows" in err and len(err.splitlines()) == 1, err
    assert sorted(p.name for p in (tmp_path / "b").iterdir()) == before


def test_summary_names_the_observed_units_only_where_they_are_the_columns(tmp_path):
    """`chefs summary` labels its edge matrix with the data's column names for a causal run and for a
    density run on the columns themselves, not for one fitted on principal axes (its observed units are
    the axes), nor when the names do not match the units."""
    import json

    from chefs.commands.runs import _observed_names

    run = tmp_path / "r"
    run.mkdir()
    assert _observed_names(run, 2) is None                  # no unit map, no names
    (run / "unitmap.json").write_text(json.dumps({"lo": [0, 0], "hi": [1, 1], "margin": 0.3}))
    (run / "columns.json").write_text(json.dumps(["x", "y"]))
    assert _observed_names(run, 2) == ["x", "y"]
    assert _observed_names(run, 3) is None                  # a count that does not match
    (run / "unitmap.json").write_text(json.dumps({"lo": [0, 0], "hi": [1, 1], "margin": 0.3, "rotation": [[1, 0], [0, 1]]}))
    assert _observed_names(run, 2) is None                  # principal axes: not the columns
    (run / "causal-columns.json").write_text(json.dumps({"names": ["p", "q"], "start": "residual"}))
    assert _observed_names(run, 2) == ["p", "q"]            # a causal run's variables


def test_a_run_is_never_without_its_data(tmp_path, monkeypatch, capsys):
    """The fit's data files are written before config.json, the file that makes the directory a run: a process
    stopped between the two (here: an error raised while the last of them is written) leaves a folder that
    `chefs resume` names as no run, not a run that cannot be read (a review's kill window, stop 58)."""
    class Stopped(Exception):
        pass

    def stopped(self, run):
        assert (run / "train01.npy").exists() and (run / "unitmap.json").exists()
        raise Stopped

    monkeypatch.setattr(BeliefNetwork, "_write_run_files", stopped)
    X = np.random.default_rng(0).normal(size=(30, 2))
    run = tmp_path / "r"
    with pytest.raises(Stopped):
        BeliefNetwork(out=run, sweeps=4, burn_in=2, thin=1, progress=False).fit(X)
    assert (run / "train01.npy").exists() and not (run / "config.json").exists()
    assert main(["resume", str(run)]) == 2
    assert "config.json" in capsys.readouterr().err
