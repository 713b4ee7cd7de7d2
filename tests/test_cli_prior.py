import numpy as np
import pytest

from chefs import ICP, read_jsonl
from chefs.cli import main


def test_sample_logprob_draw(tmp_path, capsys):
    out = tmp_path / "g.jsonl"
    assert main(["prior", "sample", "--num-observed", "4", "--observed-order", "0", "--alpha", "1", "--gamma", "2",
                 "--phi", "1", "--num", "5", "--seed", "3", "--out", str(out)]) == 0
    graphs = list(read_jsonl(out))
    assert len(graphs) == 5 and all(g.fixed[:4].all() for g in graphs)
    capsys.readouterr()
    assert main(["prior", "logprob", str(out), "--alpha", "1", "--gamma", "2", "--phi", "1"]) == 0
    vals = [float(x) for x in capsys.readouterr().out.split()]
    prior = ICP(1, 2, 1)
    assert np.allclose(vals, [prior.log_prob(g) for g in graphs], rtol=1e-14)
    assert main(["prior", "draw", str(out), "--index", "1", "--out", str(tmp_path / "g.png")]) == 0
    assert (tmp_path / "g.png").stat().st_size > 1000
    # same seed, same graphs
    out2 = tmp_path / "h.jsonl"
    main(["prior", "sample", "--num-observed", "4", "--observed-order", "0", "--alpha", "1", "--gamma", "2",
          "--phi", "1", "--num", "5", "--seed", "3", "--out", str(out2)])
    assert out.read_text() == out2.read_text()
    # an existing file is kept unless --force
    args = ["prior", "sample", "--num-observed", "2", "--num", "3", "--seed", "4", "--out", str(out2)]
    assert main(args) == 2 and out2.read_text() == out.read_text()
    assert main(args + ["--force"]) == 0 and out2.read_text() != out.read_text()


@pytest.mark.parametrize("content", ['{"theta": [0.1, 0.5], "observed": [true, true], "edges": [[0, 1]]}\n',
                                     "{not json\n", '{"theta": [0.5, 0.1], "observed": [false, true], "edges": []}\n',
                                     ""])  # an empty file: "holds no graphs", not silence
def test_bad_input_is_one_line_exit_2(tmp_path, capsys, content):
    f = tmp_path / "bad.jsonl"
    f.write_text(content)
    assert main(["prior", "logprob", str(f)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error:") and err.count("\n") == 1


def test_negative_hyperparameter_exit_2(tmp_path):
    with pytest.raises(SystemExit) as e:
        main(["prior", "sample", "--num-observed", "2", "--gamma", "-1", "--out", str(tmp_path / "x.jsonl")])
    assert e.value.code == 2


def test_draw_reports_the_file_written(tmp_path, capsys):
    """`--out d` writes d.png (matplotlib appends the extension): say so. A drawing
    is rewritten in place (README: figures derived from a file)."""
    g = tmp_path / "g.jsonl"
    assert main(["prior", "sample", "--num-observed", "2", "--num", "2", "--out", str(g)]) == 0
    capsys.readouterr()
    assert main(["prior", "draw", str(g), "--out", str(tmp_path / "d")]) == 0
    assert capsys.readouterr().out.strip() == f"wrote {tmp_path / 'd.png'}"
    assert (tmp_path / "d.png").stat().st_size > 1000 and not (tmp_path / "d").exists()


def test_calibrate_hits_target(capsys):
    assert main(["prior", "calibrate", "--expected-nodes", "6", "--alpha", "1", "--num-observed", "2",
                 "--num", "1500", "--seed", "1"]) == 0
    line = capsys.readouterr().out
    est, se = line.split("E[K+] = ")[1].split(" from")[0].split(" ± ")
    assert abs(float(est) - 6) < 4 * float(se)


def test_calibrate_large_target_converges(capsys):
    """Many nodes: the importance weights degenerate a few percent away from the
    drawing gamma. The solver used to flip-flop between its bracket's ends and
    report gamma = 48 with E[K+] = 229 for a target of 60, exit 0."""
    assert main(["prior", "calibrate", "--expected-nodes", "60", "--num-observed", "1", "--num", "200",
                 "--seed", "0"]) == 0
    line = capsys.readouterr().out
    est, se = line.split("E[K+] = ")[1].split(" from")[0].split(" ± ")
    assert abs(float(est) - 60) < 4 * float(se)
    assert "within 4 SE" in line and "NOT" not in line


def test_calibrate_reports_a_missed_target(capsys, monkeypatch):
    from chefs.priors import study

    def fake(*args, **kwargs):
        return {"gamma": 2.0, "expected_nodes": 4.5, "expected_nodes_se": 0.1, "solver_se": 0.0, "z": -5.0, "rounds": 12,
                "converged": False, "last_move": 0.05}

    monkeypatch.setattr(study, "calibrate_gamma", fake)
    assert main(["prior", "calibrate", "--expected-nodes", "5", "--num-observed", "3"]) == 1
    cap = capsys.readouterr()
    assert "5.0 SE away (fresh draws' and solver's errors combined), NOT within 4 SE" in cap.out
    assert "more than 4 SE" in cap.err and "still moved by 5.0%" in cap.err


def test_calibrate_unreached_target_is_an_error(capsys, monkeypatch):
    """A root beyond what the last round's draws can reach is an error, not a
    gamma at the edge of the search reported with exit status 0."""
    from chefs.priors import study

    # the weights are trusted only at the drawing gamma itself
    monkeypatch.setattr(study, "_ess", lambda logw: float(logw.size) if np.ptp(logw) < 1e-9 else 1.0)
    assert main(["prior", "calibrate", "--expected-nodes", "40", "--num-observed", "1", "--num", "200"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error: calibration did not reach E[K+] = 40") and err.count("\n") == 1


@pytest.mark.parametrize("command", [["prior", "sample"], ["prior", "mcmc", "--sweeps", "5"]])
@pytest.mark.parametrize("order", ["1.5", "0.2,-0.1,0.3", "inf", "0.2,-inf,0.3", "x"])
def test_observed_order_rejects_out_of_range(tmp_path, capsys, command, order):
    with pytest.raises(SystemExit) as e:
        main(command + ["--num-observed", "3", "--observed-order", order, "--out", str(tmp_path / "x")])
    assert e.value.code == 2
    assert "--observed-order: expected numbers in [0, 1] or 'free'" in capsys.readouterr().err
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("free", ["free", "FREE", "none", "nan", ""])
def test_observed_order_free_per_node(tmp_path, free):
    """'free' leaves one node's order free; 'none', 'nan' and an empty field are the
    older spellings prior mcmc took, kept working."""
    out = tmp_path / "g.jsonl"
    assert main(["prior", "sample", "--num-observed", "3", "--observed-order", f"0.2,{free},0.3", "--num", "4",
                 "--out", str(out)]) == 0
    graphs = list(read_jsonl(out))
    assert all(g.fixed[:3].tolist() == [True, False, True] for g in graphs)
    assert all(g.theta[0] == 0.2 and g.theta[2] == 0.3 for g in graphs)


def test_study_writes_csv_and_png(tmp_path):
    assert main(["prior", "study", "--out", str(tmp_path), "--num", "20"]) == 0
    assert (tmp_path / "prior_study.csv").exists() and (tmp_path / "prior_study.png").exists()


@pytest.mark.parametrize("command", [["prior", "study", "--num", "20"], ["prior", "mcmc", "--num-observed", "2",
                                                                          "--sweeps", "5"]])
def test_out_that_is_a_file_is_one_clear_error(tmp_path, capsys, command):
    """--out names a directory: an existing file leaked "[Errno 17] File exists"."""
    f = tmp_path / "s.jsonl"
    f.write_text("keep\n")
    assert main(command + ["--out", str(f)]) == 2
    assert capsys.readouterr().err == f"chefs: error: --out takes a directory; {f} is a file\n"
    assert f.read_text() == "keep\n"


def test_failed_sample_leaves_no_file(tmp_path, capsys):
    """An error while the graphs are drawn leaves no empty file behind, so the
    corrected command needs no --force."""
    out = tmp_path / "x.jsonl"
    assert main(["prior", "sample", "--num-observed", "3", "--method", "finite", "--out", str(out)]) == 2
    assert "finite" in capsys.readouterr().err
    assert not out.exists() and not list(tmp_path.iterdir())
    assert main(["prior", "sample", "--num-observed", "3", "--method", "finite", "--finite-K", "6", "--num", "4",
                 "--out", str(out)]) == 0
    assert len(out.read_text().splitlines()) == 4


def test_finite_K_needs_method_finite(tmp_path, capsys):
    """--finite-K without --method finite was silently ignored."""
    out = tmp_path / "x.jsonl"
    assert main(["prior", "sample", "--num-observed", "3", "--finite-K", "5", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err == ("chefs: error: --finite-K belongs to --method finite; --method chefs draws the infinite "
                   "model\n")
    assert not out.exists()


@pytest.mark.parametrize("kind", ["cibp", "ecibp"])
def test_logprob_layered_priors(tmp_path, capsys, kind):
    from chefs.priors.cibp import CIBP
    from chefs.priors.ecibp import ECIBP

    out = tmp_path / "g.jsonl"
    assert main(["prior", "sample", "--prior", kind, "--num-observed", "3", "--alpha", "1.5", "--beta", "0.7",
                 "--num", "6", "--seed", "2", "--out", str(out)]) == 0
    graphs = list(read_jsonl(out))
    capsys.readouterr()
    assert main(["prior", "logprob", str(out), "--prior", kind, "--alpha", "1.5", "--beta", "0.7"]) == 0
    vals = [float(x) for x in capsys.readouterr().out.split()]
    Prior = CIBP if kind == "cibp" else ECIBP
    prior = Prior(1.5, 0.7, alpha_bounds=(0.05, 2.0), beta_bounds=(0.05, 2.0))
    assert np.allclose(vals, [prior.log_prob(g) for g in graphs], rtol=1e-14)
    assert all(np.isfinite(vals))
    # another beta gives other values: the flag reaches the prior
    assert main(["prior", "logprob", str(out), "--prior", kind, "--alpha", "1.5", "--beta", "2"]) == 0
    other = [float(x) for x in capsys.readouterr().out.split()]
    assert not np.allclose(vals, other)
    # a graph deeper than --max-layers has probability 0 under the truncated prior
    depth = max(int(np.rint(-np.log2(1 - g.theta.max()))) for g in graphs)
    assert depth >= 1
    assert main(["prior", "logprob", str(out), "--prior", kind, "--alpha", "1.5", "--beta", "0.7",
                 "--max-layers", str(depth)]) == 0
    assert [float(x) for x in capsys.readouterr().out.split()] == vals
    if depth > 1:
        assert main(["prior", "logprob", str(out), "--prior", kind, "--alpha", "1.5", "--beta", "0.7",
                     "--max-layers", str(depth - 1)]) == 0
        assert float("-inf") in [float(x) for x in capsys.readouterr().out.split()]
    # the ICP's flags are refused, and the other way round
    assert main(["prior", "logprob", str(out), "--prior", kind, "--gamma", "2"]) == 2
    assert "--gamma" in capsys.readouterr().err
    assert main(["prior", "logprob", str(out), "--beta", "2"]) == 2
    assert "--beta" in capsys.readouterr().err


def test_logprob_layered_rejects_icp_graph(tmp_path, capsys):
    out = tmp_path / "g.jsonl"
    assert main(["prior", "sample", "--num-observed", "2", "--num", "3", "--seed", "5", "--out", str(out)]) == 0
    graphs = list(read_jsonl(out))
    assert any((~g.observed).any() for g in graphs)  # hidden units at non-layer order values
    capsys.readouterr()
    assert main(["prior", "logprob", str(out), "--prior", "cibp"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error:") and err.count("\n") == 1


def test_every_command_module_is_registered_in_order():
    """chefs.commands.MODULES lists every command module (none is left out
    silently), and an action under a command registered too early is an error."""
    import argparse
    import pkgutil

    from chefs import commands
    from chefs.commands._util import actions_of

    public = {i.name for i in pkgutil.iter_modules(commands.__path__) if not i.name.startswith("_")}
    assert set(commands.MODULES) == public and len(commands.MODULES) == len(public)
    from chefs.cli import build_parser

    parser = build_parser()
    assert parser.parse_args(["prior", "mcmc", "--num-observed", "2", "--out", "r"]).func.__name__ == "cmd_prior_mcmc"
    assert parser.parse_args(["prior", "cibp-figures", "--out", "d"]).func.__name__ == "cmd_cibp_figures"
    sub = argparse.ArgumentParser().add_subparsers()
    with pytest.raises(RuntimeError, match="'prior' must come before"):
        actions_of(sub, "prior")


def test_draws_too_large_to_hold_are_refused(tmp_path, capsys):
    """A gamma whose draws cannot be held is one line, not a run until the memory is gone (a review's
    `prior sample --gamma 100000` grew to 13 GB; `prior calibrate --expected-nodes 1e9` doubled gamma into such
    draws): the chefs process stops at max_edges edges (default 10 million), calibration above 1,000 nodes is
    refused before any draw, and nothing is written."""
    from chefs.priors.icp import ICP

    rng = np.random.default_rng(0)
    g = ICP(1.0, 100.0, 1.0).sample(rng, 1, observed_order=0.0)  # about 600 nodes and 30,000 edges
    with pytest.raises(ValueError, match=r"exceeded max_edges=1000 edges; lower gamma \(here 100\)"):
        ICP(1.0, 100.0, 1.0).sample(np.random.default_rng(0), 1, observed_order=0.0, max_edges=1000)
    assert ICP(1.0, 100.0, 1.0).sample(np.random.default_rng(0), 1, observed_order=0.0,
                                       max_edges=g.num_edges).num_edges == g.num_edges  # the cap itself is allowed
    for bad in (0, -1):
        with pytest.raises(ValueError, match="must be positive"):
            ICP(1.0, 1.0, 1.0).sample(rng, 1, max_edges=bad)
    out = tmp_path / "g.jsonl"
    assert main(["prior", "sample", "--num-observed", "1", "--gamma", "100000", "--out", str(out)]) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error: the draw exceeded max_edges=10000000 edges") and err.count("\n") == 1
    assert not out.exists() and not list(tmp_path.iterdir())
    for target in ("1e9", "1002"):
        assert main(["prior", "calibrate", "--expected-nodes", target, "--num-observed", "1"]) == 2
        err = capsys.readouterr().err
        assert "calibration is offered up to E[K+] = 1,000" in err and err.count("\n") == 1
