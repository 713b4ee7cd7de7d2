"""The chain driver: resume reproduces an uninterrupted run exactly (also after
SIGKILL), stores never hold a sample twice, chains run in parallel through
process and Dask executors with identical results, CLI plumbing."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from chefs.cli import main
from chefs.mcmc.chain import ChainConfig
from chefs.mcmc.run import create_run, run_chain, run_chains
from chefs.mcmc.store import SCALARS, MemoryStore, SQLiteStore


def rows(run_dir, chain=0):
    st = SQLiteStore(Path(run_dir) / f"chain-{chain}" / "samples.sqlite")
    try:
        return st.rows()
    finally:
        st.close()


def small_run(path, sweeps=60, chains=1, seed=3, every=5.0, **kw):
    config = ChainConfig(3, 0.0, 1.0, 2.0, 1.0, sample_hyper=kw.pop("sample_hyper", ()))
    return create_run(path, config, sweeps, burn_in=10, thin=2, chains=chains, seed=seed, checkpoint_every=every,
                      **kw)


@pytest.mark.parametrize("sample_hyper", [(), ("alpha", "gamma", "phi")])
def test_resume_equals_uninterrupted(tmp_path, sample_hyper):
    a = small_run(tmp_path / "a", sample_hyper=sample_hyper)
    run_chain(a, 0)
    b = small_run(tmp_path / "b", sample_hyper=sample_hyper, every=1e-9)
    run_chain(b, 0, stop_after=23)
    assert not (Path(b) / "chain-0" / "done").exists()
    run_chain(b, 0)
    ra, rb = rows(a), rows(b)
    assert len(ra) == 25 and ra == rb
    assert [r[0] for r in ra] == list(range(12, 61, 2))


def test_a_stop_file_stops_the_chain_and_resume_removes_it(tmp_path, monkeypatch):
    """RUN/stop (what run_chains writes when its client is interrupted while chains run
    on Dask workers) makes a running chain checkpoint and return unfinished at its next
    look; run_chains (chefs resume) removes it and the chain then runs to the same
    samples as an uninterrupted run. Control: without the file the same chain runs on."""
    import chefs.mcmc.run as R

    monkeypatch.setattr(R, "STOP_LOOK_SECONDS", 0.0)  # look after every sweep
    a = small_run(tmp_path / "a")
    run_chain(a, 0)
    b = small_run(tmp_path / "b")
    seen = []

    def stop_at_sweep_25(sweep, state):
        seen.append(sweep)
        if sweep == 25:
            (Path(b) / R.STOP_FILE).write_text("stop\n")

    res = run_chain(b, 0, progress=stop_at_sweep_25)
    assert res["stopped"] and res["sweep"] == 25 and seen[-1] == 25
    assert not (Path(b) / "chain-0" / "done").exists()
    assert json.loads((Path(b) / "chain-0" / "checkpoint.json").read_text())["sweep"] == 25
    out = run_chains(b, progress=False)
    assert not (Path(b) / R.STOP_FILE).exists() and out[0]["started_at"] == 25 and not out[0]["stopped"]
    assert rows(a) == rows(b) and (Path(b) / "chain-0" / "done").exists()
    c = small_run(tmp_path / "c")  # the control
    assert not run_chain(c, 0, progress=lambda sweep, state: None)["stopped"]


def test_resume_discards_work_after_checkpoint(tmp_path):
    """Samples stored after the last checkpoint (a crash between the two writes)
    are removed on resume and regenerated identically, never duplicated."""
    a = small_run(tmp_path / "a")
    run_chain(a, 0)
    b = small_run(tmp_path / "b", every=1e9)  # checkpoint only at the end of each call
    run_chain(b, 0, stop_after=20)
    old = (Path(b) / "chain-0" / "checkpoint.json").read_text()
    run_chain(b, 0, stop_after=10)
    assert rows(b)[-1][0] == 30
    # crash between "data" and "counter": store has sweeps up to 30, checkpoint says 20
    (Path(b) / "chain-0" / "checkpoint.json").write_text(old)
    run_chain(b, 0)
    assert rows(a) == rows(b)


def test_sigkill_then_resume_reproduces_run(tmp_path):
    args = ["prior", "mcmc", "--num-observed", "4", "--observed-order", "0", "--gamma", "2", "--sweeps", "3000",
            "--burn-in", "100", "--thin", "3", "--seed", "7", "--checkpoint-every", "0.05", "--no-progress"]
    ref = tmp_path / "ref"
    assert main(args + ["--out", str(ref)]) == 0
    run = tmp_path / "killed"
    env = dict(os.environ, CI="1")
    proc = subprocess.Popen([sys.executable, "-m", "chefs.cli", *args, "--out", str(run)], env=env,
                            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    ck = run / "chain-0" / "checkpoint.json"
    deadline = time.time() + 120
    killed_at = None
    while time.time() < deadline and proc.poll() is None:
        try:
            sw = json.loads(ck.read_text())["sweep"]
        except (OSError, ValueError, KeyError):
            sw = 0
        if sw > 300:
            proc.send_signal(signal.SIGKILL)
            killed_at = sw
            break
        time.sleep(0.01)
    proc.wait()
    assert killed_at is not None, "the run finished before it could be killed"
    assert not (run / "chain-0" / "done").exists()
    before = rows(run)
    assert len(set(r[0] for r in before)) == len(before)  # no duplicates
    assert main(["resume", str(run), "--no-progress"]) == 0
    assert rows(run) == rows(ref)


def test_parallel_chains_processes_equal_sequential(tmp_path):
    seq = small_run(tmp_path / "seq", chains=2)
    run_chains(seq, progress=False, workers=1)
    par = small_run(tmp_path / "par", chains=2)
    res = run_chains(par, progress=False, workers=2)
    assert [r["chain"] for r in res] == [0, 1]
    for c in range(2):
        assert rows(seq, c) == rows(par, c)
    assert rows(par, 0) != rows(par, 1)  # independent streams


def test_dask_local_cluster(tmp_path):
    distributed = pytest.importorskip("distributed")
    ref = small_run(tmp_path / "ref", chains=2)
    run_chains(ref, progress=False, workers=1)
    run = small_run(tmp_path / "dask", chains=2)
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cl:
        run_chains(run, scheduler=cl.scheduler_address, progress=False)
    for c in range(2):
        assert rows(ref, c) == rows(run, c)


@pytest.mark.parametrize("store_cls", [MemoryStore, SQLiteStore])
def test_stores_share_one_interface(tmp_path, store_cls):
    st = store_cls() if store_cls is MemoryStore else store_cls(tmp_path / "s.sqlite")
    sc = {c: float(j) for j, c in enumerate(SCALARS)}
    for s in (2, 4, 6):
        st.add(s, '{"theta":[0.0],"observed":[true],"edges":[]}', sc)
    st.flush()
    assert st.count() == 3 and st.last_sweep() == 6
    assert st.truncate_after(3) == 2
    assert st.count() == 1 and st.scalars()["sweep"] == [2]
    with pytest.raises(ValueError, match="stored twice"):
        st.add(2, "{}", sc)
        st.flush()
    st.close()


def test_cli_mcmc_summary_export(tmp_path, capsys):
    out = tmp_path / "run"
    args = ["prior", "mcmc", "--num-observed", "3", "--observed-order", "0", "--gamma", "1.5", "--sweeps", "200",
            "--burn-in", "50", "--chains", "2", "--seed", "1", "--no-progress", "--out", str(out)]
    assert main(args) == 0
    assert (out / "traces.nc").exists()
    text = capsys.readouterr().out
    assert "r_hat" in text and "ess_bulk" in text
    assert main(args) == 2  # refuses to overwrite
    assert "--force" in capsys.readouterr().err
    assert main(["summary", str(out), "--plot"]) == 0
    text = capsys.readouterr().out
    assert "posterior of num_nodes" in text and (out / "traces.png").exists()
    assert main(["export", str(out), "--format", "jsonl", "--out", str(tmp_path / "g.jsonl")]) == 0
    from chefs import read_jsonl

    graphs = list(read_jsonl(tmp_path / "g.jsonl"))
    assert len(graphs) == 2 * 150 and all(g.num_observed == 3 for g in graphs)
    assert main(["export", str(out), "--format", "graphml", "--out", str(tmp_path / "g.graphml")]) == 0
    assert main(["summary", str(tmp_path / "nope")]) == 2
    # an existing output is kept: refused without --force, untouched when the run does not exist
    before = (tmp_path / "g.jsonl").read_bytes()
    assert main(["export", str(out), "--out", str(tmp_path / "g.jsonl")]) == 2
    assert main(["export", str(tmp_path / "nope"), "--out", str(tmp_path / "g.jsonl"), "--force"]) == 2
    assert (tmp_path / "g.jsonl").read_bytes() == before
    assert main(["export", str(out), "--out", str(tmp_path / "g.jsonl"), "--force"]) == 0
    assert main(["export", str(out), "--out", str(out / "config.json"), "--force"]) == 2  # the run's own file
    assert "inside the run" in capsys.readouterr().err
    # a directory as --out: a clear error, and no stray .part file
    (tmp_path / "d").mkdir()
    assert main(["export", str(out), "--out", str(tmp_path / "d"), "--force"]) == 2
    assert not list(tmp_path.glob("*.part"))


def test_invalid_run_arguments(tmp_path):
    config = ChainConfig(2, 0.0)
    with pytest.raises(ValueError):
        create_run(tmp_path / "x", config, sweeps=10, burn_in=10)
    with pytest.raises(ValueError):
        create_run(tmp_path / "y", config, sweeps=10, thin=0)
    with pytest.raises(ValueError):
        create_run(tmp_path / "z", config, sweeps=10, checkpoint_every=0)
    with pytest.raises(ValueError, match="no sample would be kept"):  # checked before any sampling
        create_run(tmp_path / "t", config, sweeps=10, burn_in=5, thin=6)
    assert not (tmp_path / "t").exists()


def test_unreachable_scheduler_is_a_clear_error():
    """No traceback for a Dask scheduler that is not there: a ValueError naming it."""
    pytest.importorskip("distributed")
    import dask

    from chefs.mcmc.run import make_executor

    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        with pytest.raises(ValueError, match="cannot reach the Dask scheduler at 'tcp://127.0.0.1:9'"):
            make_executor(2, "tcp://127.0.0.1:9")


def test_cli_mcmc_scheduler_reached_before_the_run_exists(tmp_path, capsys):
    """An unreachable --scheduler leaves no run directory behind (it needed --force
    before); a reachable one runs the chains there, with the numbers of a local run."""
    distributed = pytest.importorskip("distributed")
    import dask

    args = ["prior", "mcmc", "--num-observed", "2", "--observed-order", "0", "--sweeps", "60", "--burn-in", "20",
            "--chains", "2", "--seed", "3", "--no-progress"]
    bad = tmp_path / "bad"
    with dask.config.set({"distributed.comm.timeouts.connect": "1s"}):
        assert main(args + ["--scheduler", "tcp://127.0.0.1:9", "--out", str(bad)]) == 2
    assert "cannot reach" in capsys.readouterr().err and not bad.exists()
    local, remote = tmp_path / "local", tmp_path / "remote"
    assert main(args + ["--out", str(local)]) == 0
    with distributed.LocalCluster(n_workers=1, threads_per_worker=2, processes=False, dashboard_address=None) as cl:
        assert main(args + ["--scheduler", cl.scheduler_address, "--out", str(remote)]) == 0
    for c in range(2):
        assert rows(local, c) == rows(remote, c)


def test_bar_shows_the_models_acceptance_and_counts_the_pilots_first():
    """A belief network's chain counts its moves in the model, not in the chain state:
    the chain's bar reads the model once run_chain binds it (control: unbound, the
    state's zero counters). Pilot sweeps come first in the bar."""
    from types import SimpleNamespace

    import numpy as np

    import chefs.mcmc.run as R

    class Bar:
        n, post, text = 0, None, None

        def set_postfix(self, refresh=True, **kw):
            self.post = kw

        def set_postfix_str(self, s, refresh=True):
            self.text = s

        def refresh(self):
            pass

    stats = np.zeros((7, 2))
    stats[0] = (10, 5)
    state = SimpleNamespace(stats=np.zeros((4, 2)), graph=SimpleNamespace(num_nodes=4))
    for bind, edge in ((False, "0.00"), (True, "0.50")):
        bar = Bar()
        cb = R._bar_callback(bar, offset=18)
        cb.pilots(10, 18)
        assert bar.n == 10 and bar.text == "pilots 10/18"
        if bind:
            cb.bind_model(SimpleNamespace(stats=stats))
        cb(3, state)
        assert bar.n == 21 and bar.post["edge"] == edge and bar.post["K"] == 4


def test_force_replaces_only_a_run_directory(tmp_path, capsys, monkeypatch):
    """--force deletes an existing run directory, never a folder that is not one, nor the current directory, nor
    one holding the --data file (an audit at stop 45 wiped a project folder and the input CSV with it)."""
    import numpy as np

    base = ["prior", "mcmc", "--num-observed", "2", "--sweeps", "5", "--no-progress", "--force", "--out"]
    proj = tmp_path / "proj"
    proj.mkdir()
    (proj / "notes.txt").write_text("keep me")
    assert main(base + [str(proj)]) == 2
    assert "not a chefs run directory" in capsys.readouterr().err and (proj / "notes.txt").read_text() == "keep me"
    monkeypatch.chdir(proj)
    assert main(base + ["."]) == 2 and main(base + [str(tmp_path)]) == 2  # the current directory, or above it
    assert "current directory" in capsys.readouterr().err and (proj / "notes.txt").exists()
    monkeypatch.chdir(tmp_path)
    run = tmp_path / "run"
    assert main(base + [str(run)]) == 0 and main(base + [str(run)]) == 0  # a run is replaced
    same = tmp_path / "ring"  # a run named as its data set is replaced too (the name is not a file inside it)
    ring = ["fit", "--data", "ring", "--sweeps", "6", "--burn-in", "2", "--thin", "1", "--pilots", "1", "--no-progress",
            "--out", "ring"]
    assert main(ring) == 0 and main(ring + ["--force"]) == 0 and (same / "config.json").exists()
    np.savetxt(run / "data.csv", np.random.default_rng(0).normal(size=(30, 2)), delimiter=",")
    fit = ["fit", "--data", str(run / "data.csv"), "--sweeps", "6", "--burn-in", "2", "--pilots", "1", "--no-progress",
           "--force", "--out", str(run)]
    capsys.readouterr()
    assert main(fit) == 2 and "lies inside --out" in capsys.readouterr().err and (run / "data.csv").exists()
    # a named data set whose --data-dir (or CHEFS_DATA) lies inside --out
    import shutil

    from .conftest import shared_data_dir

    (run / "data").mkdir()
    shutil.copy(shared_data_dir() / "geyser.csv", run / "data" / "geyser.csv")
    named = ["fit", "--data", "geyser", "--sweeps", "6", "--burn-in", "2", "--pilots", "1", "--no-progress",
             "--force", "--out", str(run)]
    assert main(named + ["--data-dir", str(run / "data")]) == 2
    assert "--data-dir" in capsys.readouterr().err and (run / "data" / "geyser.csv").exists()
    monkeypatch.setenv("CHEFS_DATA", str(run / "data"))
    assert main(named) == 2
    assert "CHEFS_DATA" in capsys.readouterr().err and (run / "data" / "geyser.csv").exists()


def test_damaged_run_files_are_one_line_errors(tmp_path, capsys):
    """A damaged config.json (valid JSON without a run's keys, or not JSON) or samples.sqlite: exit 2 and one line
    naming the file, not a KeyError or sqlite3 traceback (found by the CLI audit at stop 45)."""
    import shutil

    run = tmp_path / "pm"
    assert main(["prior", "mcmc", "--num-observed", "2", "--sweeps", "20", "--no-progress", "--out", str(run)]) == 0
    bad = tmp_path / "bad"
    for text, msg in (('{"kind": "icp-mcmc"}', "missing config"), ("[1, 2]", "missing kind"), ("{", "not valid JSON")):
        shutil.rmtree(bad, ignore_errors=True)
        shutil.copytree(run, bad)
        (bad / "config.json").write_text(text)
        capsys.readouterr()
        for cmd in (["summary", str(bad)], ["resume", str(bad)]):
            assert main(cmd) == 2
            err = capsys.readouterr().err
            assert msg in err and "config.json" in err and len(err.strip().splitlines()) == 1, err
    shutil.rmtree(bad)
    shutil.copytree(run, bad)
    for f in (bad / "chain-0").glob("samples.sqlite*"):
        f.unlink()
    (bad / "chain-0" / "samples.sqlite").write_text("not a database")
    capsys.readouterr()
    assert main(["summary", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "samples.sqlite is damaged" in err and len(err.strip().splitlines()) == 1, err
    # a store that cannot be opened (here a directory in its place) is not called damaged
    (bad / "chain-0" / "samples.sqlite").unlink()
    (bad / "chain-0" / "samples.sqlite").mkdir()
    assert main(["summary", str(bad)]) == 2
    err = capsys.readouterr().err
    assert "cannot be opened" in err and "is damaged" not in err and len(err.strip().splitlines()) == 1, err


def test_out_of_memory_is_a_one_line_error(capsys, monkeypatch):
    """A MemoryError (a count far beyond the machine) ends in one line and exit 2, not a traceback."""
    import chefs.cli as cli

    parser = cli.build_parser()

    def boom(args):
        raise MemoryError

    args = parser.parse_args(["data", "list"])
    monkeypatch.setattr(args, "func", boom, raising=False)
    monkeypatch.setattr(cli, "build_parser", lambda: type("P", (), {"parse_args": lambda self, a: args})())
    assert cli.main([]) == 2
    assert "not enough memory" in capsys.readouterr().err


def test_run_size_limits_and_a_complete_run_resumed(tmp_path, capsys):
    """--chains beyond MAX_CHAINS is refused before anything is written (a typo hung instead); resuming a complete
    run samples nothing and says so (CLI audit, stop 45)."""
    from chefs.mcmc.run import MAX_CHAINS

    out = tmp_path / "pm"
    base = ["prior", "mcmc", "--num-observed", "2", "--sweeps", "10", "--no-progress", "--out", str(out)]
    assert main(base + ["--chains", str(MAX_CHAINS + 1)]) == 2
    assert "more than a run holds" in capsys.readouterr().err and not out.exists()
    assert main(base) == 0
    capsys.readouterr()
    assert main(["resume", str(out)]) == 0
    assert "is complete" in capsys.readouterr().out


@pytest.mark.skipif(sys.platform == "win32", reason="the chain lock is POSIX flock")
def test_a_chain_running_elsewhere_is_not_run_twice(tmp_path, capsys):
    """While another process holds a chain's lock (here: another open file of this process, which flock treats
    alike), resuming the run refuses with a one-line error and leaves RUN/stop in place, so that the running chain
    still sees it and stops; two writers in one chain directory corrupted its checkpoints (found in review). Once
    the lock is released (the process ended), the resume runs the chain to its end, as the uninterrupted run."""
    import fcntl

    from chefs.mcmc.run import LOCK_FILE, STOP_FILE

    a = small_run(tmp_path / "a", sweeps=30)
    run_chain(a, 0, stop_after=10)
    (a / STOP_FILE).write_text("stop\n")
    with open(a / "chain-0" / LOCK_FILE, "a") as fh:
        fcntl.flock(fh.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
        with pytest.raises(ValueError, match="running in another process"):
            run_chains(a, progress=False)
        with pytest.raises(ValueError, match="running in another process"):
            run_chain(a, 0)
        assert (a / STOP_FILE).exists()
        assert json.loads((a / "chain-0" / "checkpoint.json").read_text())["sweep"] == 10  # nothing ran
        assert main(["resume", str(a), "--no-progress"]) == 2
        err = capsys.readouterr().err.strip()
        assert "running in another process" in err and len(err.splitlines()) == 1
    run_chains(a, progress=False)
    b = small_run(tmp_path / "b", sweeps=30)
    run_chain(b, 0)
    assert rows(a) == rows(b)
