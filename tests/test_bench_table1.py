"""chefs bench table1 --quick on one data set: the long-form CSV has the
contract's columns, a baseline row, one row per model, and the markdown and
toy-set figure are written."""

import csv
import json

import pytest

from chefs.bench.table1 import run_table1
from chefs.cli import main


def test_table1_quick_ring(tmp_path, capsys):
    out = tmp_path / "t1"
    assert main(["bench", "table1", "--out", str(out), "--datasets", "ring", "--models", "icp,kde,dpgmm",
                 "--quick"]) == 0
    rows = list(csv.DictReader(open(out / "table1.csv")))
    assert {"dataset", "model", "seed", "hellinger", "heldout_loglik", "seconds"} <= set(rows[0])
    assert [r["model"] for r in rows] == ["baseline", "icp", "kde", "dpgmm"]
    for r in rows:
        assert 0.0 <= float(r["hellinger"]) <= 1.0
    assert {r["settings"] for r in rows} == {"quick,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512"}
    text = (out / "table1.md").read_text()
    assert "paper" in text and "| icp |" in text
    assert "Quick settings" in text and "not comparable" in text  # a smoke run says so
    assert "ahead of both CIBP and ECIBP: not evaluated" in text  # no cibp/ecibp rows in this run
    assert (out / "fantasy_toy.png").exists()
    assert main(["bench", "table1", "--out", str(out), "--datasets", "nope"]) == 2
    # an existing table is not replaced without --force (nothing is run)
    before = (out / "table1.csv").read_bytes()
    assert main(["bench", "table1", "--out", str(out), "--datasets", "ring", "--models", "kde", "--quick"]) == 2
    assert "--force" in capsys.readouterr().err
    assert (out / "table1.csv").read_bytes() == before


def _write(path, rows):
    with open(path, "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=["dataset", "model", "seed", "hellinger", "heldout_loglik", "seconds", "note"])
        w.writeheader()
        for ds, m, hd in rows:
            w.writerow({"dataset": ds, "model": m, "seed": 0, "hellinger": hd, "heldout_loglik": "", "seconds": 1,
                        "note": ""})


def test_table1_merge_counts_targets(tmp_path, capsys):
    """Two partial runs merge into one table; the target lines count the data
    sets where the ICP beats both layered priors and where its ratio to the
    baseline is no worse than the paper's (ring: 1.29, two-moons: 2.48)."""
    a, b = tmp_path / "a.csv", tmp_path / "b.csv"
    _write(a, [("ring", "baseline", 0.03), ("ring", "icp", 0.036), ("ring", "cibp", 0.05), ("ring", "ecibp", 0.04),
               ("iris", "baseline", 0.3), ("iris", "icp", 0.5)])  # iris: no reference model, not counted
    _write(b, [("two-moons", "baseline", 0.04), ("two-moons", "icp", 0.2), ("two-moons", "cibp", 0.1),
               ("two-moons", "ecibp", 0.3), ("two-moons", "kde", 0.09), ("ring", "kde", 0.045),
               ("ring", "outtree", 0.05)])
    out = tmp_path / "m"
    assert main(["bench", "table1-merge", str(a), str(b), "--out", str(out)]) == 0
    text = (out / "table1.md").read_text()
    assert "ahead of both CIBP and ECIBP: 1 of 2 (ring)" in text
    assert "paper's ICP ratio: 1 of 3 (ring)" in text
    # ring's best reference 0.045 / 0.03 = 1.5 > 1.29; two-moons 0.09 / 0.04 = 2.25 <= 2.48
    assert "outtree meets the paper's ICP ratio on 1 of 2 (two-moons); where it does not (ring)" in text
    assert len(list(csv.DictReader(open(out / "table1.csv")))) == 13
    # the held-out table's truth row: the generators' own mean log p(test); iris has no known density
    from chefs.datasets import true_heldout_loglik

    assert [ln for ln in text.splitlines() if ln.startswith("| truth |")] == [
        f"| truth | {true_heldout_loglik('ring', 0):.4f} | {true_heldout_loglik('two-moons', 0):.4f} | — |"]
    bad = tmp_path / "bad.csv"
    bad.write_text("x,y\n1,2\n")
    assert main(["bench", "table1-merge", str(bad), "--out", str(out)]) == 2
    # the same (data set, model, seed) twice is refused, not averaged twice
    assert main(["bench", "table1-merge", str(a), str(a), "--out", str(tmp_path / "m2")]) == 2
    assert "appears twice" in capsys.readouterr().err
    assert main(["bench", "table1-merge", str(a), str(b), "--out", str(out)]) == 2  # exists: needs --force
    assert main(["bench", "table1-merge", str(a), str(b), "--out", str(out), "--force"]) == 0
    # ring: ICP 0.036 <= DP-GMM? no DP-GMM row anywhere, so that line is left out
    assert "at or below DP-GMM" not in (out / "table1.md").read_text()


def test_table1_merge_checks_every_row_before_writing(tmp_path, capsys):
    """A bad value, unknown data set or model, or a missing column: exit 2 with the file and line, and the
    existing merged table (both files) left as it was (found by the CLI audit at stop 45: the CSV was written
    before the check, leaving table1.csv and table1.md out of step)."""
    a = tmp_path / "a.csv"
    _write(a, [("ring", "baseline", 0.03), ("ring", "icp", 0.036), ("ring", "dpgmm", 0.05)])
    out = tmp_path / "m"
    assert main(["bench", "table1-merge", str(a), "--out", str(out)]) == 0
    assert "ICP at or below DP-GMM's HD: 1 of 1 (ring)" in (out / "table1.md").read_text()
    before = {f: (out / f).read_bytes() for f in ("table1.csv", "table1.md")}
    good = a.read_text().splitlines()
    for i, (old, new, msg) in enumerate([("ring,icp,0,0.036", "ring,icp,0,abc", "line 3: hellinger 'abc'"),
                                         ("ring,icp,0,0.036", "moon,icp,0,0.036", "line 3: unknown data set"),
                                         ("ring,icp,0,0.036", "ring,gmm,0,0.036", "line 3: unknown model"),
                                         ("ring,icp,0,0.036", "ring,icp,x,0.036", "line 3: seed 'x'")]):
        bad = tmp_path / f"bad{i}.csv"
        bad.write_text("\n".join(ln.replace(old, new) for ln in good) + "\n")
        capsys.readouterr()
        assert main(["bench", "table1-merge", str(bad), "--out", str(out), "--force"]) == 2
        err = capsys.readouterr().err
        assert msg in err and str(bad) in err, err
        assert {f: (out / f).read_bytes() for f in before} == before
    short = tmp_path / "short.csv"
    short.write_text("dataset,model,seed,hellinger\nring,icp,0,0.1\n")
    assert main(["bench", "table1-merge", str(short), "--out", str(out), "--force"]) == 2
    assert "heldout_loglik" in capsys.readouterr().err and not list(out.glob("*.part"))


def test_table1_first_seed_and_jobs(tmp_path, capsys):
    """--first-seed F --seeds S runs seeds F..F+S-1 (the CSV's seed column says
    which); --jobs 2 runs the cells in two processes with the same numbers as a
    serial run of the same cell."""
    out = tmp_path / "s"
    assert main(["bench", "table1", "--out", str(out), "--datasets", "ring", "--models", "kde", "--quick",
                 "--first-seed", "2", "--seeds", "2", "--jobs", "2"]) == 0
    rows = list(csv.DictReader(open(out / "table1.csv")))
    assert sorted((r["seed"], r["model"]) for r in rows) == [("2", "baseline"), ("2", "kde"), ("3", "baseline"),
                                                            ("3", "kde")]
    by = {(r["seed"], r["model"]): r["hellinger"] for r in rows}
    assert by[("2", "baseline")] != by[("3", "baseline")]  # different splits
    assert (out / "fantasy_toy.png").exists()
    serial = tmp_path / "one"
    assert main(["bench", "table1", "--out", str(serial), "--datasets", "ring", "--models", "kde", "--quick",
                 "--first-seed", "3"]) == 0
    one = {(r["seed"], r["model"]): r["hellinger"] for r in csv.DictReader(open(serial / "table1.csv"))}
    assert one == {k: v for k, v in by.items() if k[0] == "3"}
    with pytest.raises(ValueError, match="jobs"):
        run_table1(out, ("ring",), ("kde",), jobs=0)


def test_table1_reports_a_missing_data_file_before_running(tmp_path, monkeypatch, capsys):
    monkeypatch.delenv("CHEFS_DATA", raising=False)
    monkeypatch.setenv("CHEFS_CACHE", str(tmp_path / "cache"))
    (tmp_path / "empty").mkdir()
    out = tmp_path / "t"
    assert main(["bench", "table1", "--out", str(out), "--datasets", "ring,geyser", "--models", "kde", "--quick",
                 "--data-dir", str(tmp_path / "empty")]) == 2
    assert "geyser.csv" in capsys.readouterr().err
    assert not out.exists()  # nothing ran (ring comes first) and nothing was written


@pytest.mark.parametrize("flags, msg", [
    (["--datasets", "ring,ring"], "data set(s) ['ring'] listed more than once in --datasets"),
    (["--datasets", ""], "--datasets is empty"),
    (["--datasets", "ring", "--models", ""], "--models is empty"),
    (["--datasets", "ring", "--models", ","], "--models is empty"),
    (["--datasets", "ring", "--models", "foo", "--sweeps", "4"], "unknown model(s) ['foo']"),  # not a flag's
])
def test_table1_refuses_duplicate_or_empty_lists(tmp_path, capsys, flags, msg):
    """A data set listed twice ran twice and showed a fake "± 0.0000" spread; an
    empty --models gave only the baseline row, an empty --datasets all nine."""
    out = tmp_path / "t"
    assert main(["bench", "table1", "--out", str(out), "--quick"] + flags) == 2
    err = capsys.readouterr().err
    assert err.startswith("chefs: error:") and msg in err and err.count("\n") == 1
    assert not out.exists()


@pytest.mark.parametrize("command", [["table1", "--datasets", "ring", "--models", "kde", "--quick"],
                                     ["reconstruct", "--quick"]])
def test_bench_out_that_is_a_file_is_one_clear_error(tmp_path, capsys, command):
    f = tmp_path / "s.jsonl"
    f.write_text("keep\n")
    assert main(["bench"] + command + ["--out", str(f)]) == 2
    assert capsys.readouterr().err == f"chefs: error: --out takes a directory; {f} is a file\n"
    assert f.read_text() == "keep\n"


def test_table1_chain_length_options(tmp_path, capsys):
    """--sweeps/--burn-in/--thin reach the belief-network fits, label the rows,
    and runs of different lengths are not merged into one table."""
    from chefs.bench.table1 import chain_settings
    from chefs.mcmc.run import load_spec

    out = tmp_path / "long"
    assert main(["bench", "table1", "--out", str(out), "--datasets", "ring", "--models", "icp", "--quick",
                 "--sweeps", "12", "--burn-in", "6", "--thin", "3", "--margin", "0.12"]) == 0
    spec = load_spec(out / "runs" / "ring-icp-0")
    assert (spec["sweeps"], spec["burn_in"], spec["thin"]) == (12, 6, 3)
    assert json.loads((out / "runs" / "ring-icp-0" / "unitmap.json").read_text())["margin"] == 0.12
    rows = list(csv.DictReader(open(out / "table1.csv")))
    assert {r["settings"] for r in rows} == {"quick,sweeps=12,burn_in=6,thin=3,margin=0.12,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512"}
    assert "sweeps=12, burn_in=6, thin=3, margin=0.12" in (out / "table1.md").read_text()
    assert "Unit-map margin of the belief networks: 0.12" in (out / "table1.md").read_text()
    quick = tmp_path / "quick"
    assert main(["bench", "table1", "--out", str(quick), "--datasets", "ring", "--models", "kde", "--quick",
                 "--first-seed", "1"]) == 0
    # the chain settings and margin concern the belief networks only: another quick run's reference
    # rows merge with them, and a baseline row present in both runs (the same split) is kept once
    assert main(["bench", "table1-merge", str(out / "table1.csv"), str(quick / "table1.csv"),
                 "--out", str(tmp_path / "m")]) == 0
    merged = list(csv.DictReader(open(tmp_path / "m" / "table1.csv")))
    assert sorted((r["model"], r["seed"]) for r in merged) == [("baseline", "0"), ("baseline", "1"), ("icp", "0"),
                                                              ("kde", "1")]
    base = tmp_path / "base.csv"
    text = (out / "table1.csv").read_text().splitlines()
    base.write_text("\n".join([text[0]] + [ln for ln in text[1:] if ",baseline," in ln]) + "\n")
    assert main(["bench", "table1-merge", str(out / "table1.csv"), str(base), "--out", str(tmp_path / "m4")]) == 0
    assert len(list(csv.DictReader(open(tmp_path / "m4" / "table1.csv")))) == 2
    # ... but not a baseline that differs, nor quick rows with full ones
    row = next(ln for ln in text[1:] if ",baseline," in ln).split(",")
    row[3] = "0.5"
    base.write_text(text[0] + "\n" + ",".join(row) + "\n")
    assert main(["bench", "table1-merge", str(out / "table1.csv"), str(base), "--out", str(tmp_path / "m5")]) == 2
    assert "appears twice" in capsys.readouterr().err
    full = tmp_path / "full.csv"
    full.write_text((quick / "table1.csv").read_text().replace(",quick", ",full"))
    assert main(["bench", "table1-merge", str(out / "table1.csv"), str(full), "--out", str(tmp_path / "m6")]) == 2
    assert "different settings" in capsys.readouterr().err
    # the same seed at another length: refused for its settings, not as a duplicate
    other = tmp_path / "other.csv"
    other.write_text((out / "table1.csv").read_text().replace("sweeps=12,", "sweeps=10,"))
    assert main(["bench", "table1-merge", str(out / "table1.csv"), str(other), "--out", str(tmp_path / "m2")]) == 2
    assert "different settings" in capsys.readouterr().err
    # a file from before the margin column (its networks used 0.3) does not merge with margin 0.12
    old = tmp_path / "old.csv"
    with open(out / "table1.csv", newline="") as fh, open(old, "w", newline="") as oh:
        rd = list(csv.DictReader(fh))
        wr = csv.DictWriter(oh, fieldnames=[k for k in rd[0] if k != "margin"], extrasaction="ignore")
        wr.writeheader()
        wr.writerows({**r, "seed": "1"} for r in rd)
    assert main(["bench", "table1-merge", str(out / "table1.csv"), str(old), "--out", str(tmp_path / "m3")]) == 2
    assert "unit-map margins (0.12, 0.3" in capsys.readouterr().err
    # ... and at another margin
    other.write_text((out / "table1.csv").read_text().replace("margin=0.12", "margin=0.2"))
    assert main(["bench", "table1-merge", str(out / "table1.csv"), str(other), "--out", str(tmp_path / "m2")]) == 2
    assert "different settings" in capsys.readouterr().err
    # defaults: half the sweeps as burn-in, as many kept samples as the base settings (full 50, quick 10)
    full, label = chain_settings()
    assert label == "full,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512" and full["pilots"] == 3 and (full["sweeps"], full["burn_in"], full["thin"]) == (3000, 1500, 30)
    assert chain_settings(sweeps=15000) == ({**full, "sweeps": 15000, "burn_in": 7500, "thin": 150},
                                            "full,sweeps=15000,burn_in=7500,thin=150,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512")
    assert chain_settings(quick=True, sweeps=400)[1] == "quick,sweeps=400,burn_in=200,thin=20,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512"
    assert chain_settings(quick=True, sweeps=400, pilots=1)[1] == "quick,sweeps=400,burn_in=200,thin=20,rotate=auto,tails=auto,noncentred"
    assert chain_settings(burn_in=2000)[1] == "full,sweeps=3000,burn_in=2000,thin=20,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512"
    # the base settings spelt out are the base settings (same label, so such runs merge)
    assert chain_settings(sweeps=3000, burn_in=1500, thin=30)[1] == "full,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512"
    assert chain_settings(quick=True, sweeps=80)[1] == "quick,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512"
    assert chain_settings(quick=True, sweeps=80, pilots=1, rotate=False, tails=False,
                          noncentred=False)[1] == "quick"  # runs before stop 25
    with pytest.raises(ValueError, match="pilots"):
        chain_settings(pilots=0)
    # the unit map's margin: labelled when it is not the default, refused outside (0, 0.5)
    from chefs.density import MARGIN

    assert chain_settings(margin=MARGIN) == (full, "full,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512")
    other_margin = 0.12
    s, lab = chain_settings(margin=other_margin)
    assert s["margin"] == other_margin and lab == f"full,margin={other_margin:g},pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512"
    assert chain_settings(sweeps=600, margin=other_margin)[1] == f"full,sweeps=600,burn_in=300,thin=6,margin={other_margin:g},pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512"
    with pytest.raises(ValueError, match="margin"):
        chain_settings(margin=0.5)
    # nothing kept: refused before anything runs
    bad = tmp_path / "bad"
    assert main(["bench", "table1", "--out", str(bad), "--datasets", "ring", "--models", "icp",
                 "--sweeps", "10", "--burn-in", "10"]) == 2
    assert "no sample would be kept" in capsys.readouterr().err and not bad.exists()
    # chain settings without a belief network to use them
    assert main(["bench", "table1", "--out", str(bad), "--datasets", "ring", "--models", "kde",
                 "--sweeps", "6000"]) == 2
    assert "none of icp, cibp, ecibp" in capsys.readouterr().err and not bad.exists()
    for kw in ({"burn_in": -1}, {"sweeps": float("inf")}, {"thin": 2.5}, {"sweeps": True}):
        with pytest.raises(ValueError, match=next(iter(kw))):
            chain_settings(**kw)


def test_a_model_row_does_not_depend_on_the_other_models(tmp_path, capsys):
    """Each model has its own random stream: kde's row is the same run alone or
    after dpgmm, so separate --models runs merge into the one-run table; a model
    listed twice is refused."""
    from chefs.bench.table1 import QUICK, _cell_rows

    def row(models):
        rows = [r for r, _, _ in _cell_rows("ring", 0, models, dict(QUICK, margin=0.3), None, tmp_path, 1,
                                             log=lambda s: None)]
        return next(r for r in rows if r["model"] == "kde")

    alone, after = row(("kde",)), row(("dpgmm", "kde"))
    assert (alone["hellinger"], alone["heldout_loglik"]) == (after["hellinger"], after["heldout_loglik"])
    assert main(["bench", "table1", "--out", str(tmp_path / "t"), "--datasets", "ring", "--models", "kde,kde",
                 "--quick"]) == 2
    assert "more than once" in capsys.readouterr().err


def test_table1_resume_finishes_an_interrupted_run(tmp_path, capsys):
    """--resume keeps the finished rows (nothing of them is rerun) and runs only
    the missing ones (a row cut short by the crash counts as missing); the finished
    table has the rows that one uninterrupted run gives, value for value, and the
    figure is drawn from the stored fantasy data of both parts. Refused: other
    settings, or --force with --resume."""
    args = ["bench", "table1", "--datasets", "ring", "--quick"]
    whole, part = tmp_path / "whole", tmp_path / "part"
    # --resume where no run started is an error, not a silent full run (CLI audit, stop 45)
    assert main(args + ["--out", str(tmp_path / "none"), "--models", "kde", "--resume"]) == 2
    assert "nothing to resume" in capsys.readouterr().err and not (tmp_path / "none").exists()
    assert main(args + ["--out", str(whole), "--models", "kde,dpgmm"]) == 0
    assert main(args + ["--out", str(part), "--models", "kde"]) == 0  # "interrupted" after kde
    first = (part / "table1.csv").read_text()
    with open(part / "table1.csv", "a") as fh:  # the crash came while dpgmm's row was being written
        fh.write("ring,dpgmm,0,0.1,,3.2,,quick,")  # every field there, but the line not finished
    capsys.readouterr()
    assert main(args + ["--out", str(part), "--models", "kde,dpgmm", "--resume"]) == 0
    log = capsys.readouterr().out
    assert "2 finished rows kept, 1 (data set, seed) cells to run" in log
    assert " kde " not in log.split("resuming", 1)[1].split("wrote", 1)[0]  # kde not rerun
    assert (part / "table1.csv").read_text().startswith(first)  # the kept rows are untouched

    def values(out):
        return {(r["model"], r["seed"]): (r["hellinger"], r["heldout_loglik"], r["settings"])
                for r in csv.DictReader(open(out / "table1.csv"))}

    assert values(part) == values(whole) and len(values(part)) == 3
    assert sorted(p.name for p in (part / "fantasy").glob("*.npz")) == ["ring-dpgmm-0.npz", "ring-kde-0.npz"]
    assert (part / "fantasy_toy.png").exists()
    # nothing left to run: the table is rewritten from the kept rows alone
    assert main(args + ["--out", str(part), "--models", "kde,dpgmm", "--resume"]) == 0
    assert "0 (data set, seed) cells to run" in capsys.readouterr().out
    assert values(part) == values(whole)
    # another run's settings, or both flags: one clear error, the file untouched
    before = (part / "table1.csv").read_bytes()
    assert main(["bench", "table1", "--datasets", "ring", "--models", "kde", "--out", str(part), "--resume"]) == 2
    assert "other settings (quick)" in capsys.readouterr().err
    assert main(args + ["--out", str(part), "--models", "kde", "--resume", "--force"]) == 2
    assert "give one of them" in capsys.readouterr().err
    assert (part / "table1.csv").read_bytes() == before
    # a file with a row twice, or with a row that is not a finished one, is not resumed
    lines = before.decode().splitlines(keepends=True)
    for bad, msg in ((lines + [lines[-1]], "appears twice"), (lines + ["ring,icp,x,0.1,,1,,quick,0.3\n"], "line 5")):
        (part / "table1.csv").write_text("".join(bad))
        assert main(args + ["--out", str(part), "--models", "kde,dpgmm", "--resume"]) == 2
        assert msg in capsys.readouterr().err
    # pooled chains are part of the belief networks' settings: one chain's rows are not resumed with two
    (part / "table1.csv").write_bytes(before)
    assert main(args + ["--out", str(part), "--models", "icp,kde", "--chains", "2", "--resume"]) == 2
    assert "than this run (quick,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,chains=2)" in capsys.readouterr().err


def test_table1_interrupt_points_to_resume(tmp_path, monkeypatch, capsys):
    """Ctrl-C during a table run ends with exit status 130 and says how to finish it."""
    from chefs.bench import table1

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(table1, "run_table1", interrupted)
    assert main(["bench", "table1", "--out", str(tmp_path / "t"), "--datasets", "ring", "--quick"]) == 130
    assert "--resume" in capsys.readouterr().err


def test_table1_pilot_draws_label_and_runs(tmp_path, capsys):
    """``chefs bench table1 --pilot-draws D``: the rows are labelled ',pilot_draws=D' and the belief networks'
    runs carry it; 32 (every run's before stop 49) leaves the label as it was, and so does one start (no pilots to
    rank). The default since stop 49 is 512 with the non-centred updates; --no-noncentred leaves them out."""
    from chefs.bench.table1 import chain_settings

    settings, label = chain_settings(quick=True, pilot_draws=512)
    assert settings["pilot_draws"] == 512 and label.endswith(",pilot_draws=512")
    settings, label = chain_settings(quick=True, pilot_draws=32)
    assert settings["pilot_draws"] == 32 and "pilot_draws" not in label
    settings, label = chain_settings(quick=True)
    assert settings["pilot_draws"] == 512 and settings["noncentred"] and label.endswith(",noncentred,pilot_draws=512")
    assert "pilot_draws" not in chain_settings(quick=True, pilots=1)[1]
    for bad in (0, -1, 2.5, True, "512"):
        with pytest.raises(ValueError, match="pilot_draws must be a positive integer"):
            chain_settings(quick=True, pilot_draws=bad)
    out = tmp_path / "t"
    assert main(["bench", "table1", "--out", str(out), "--datasets", "iris", "--models", "icp", "--seeds", "1",
                 "--quick", "--noncentred", "--pilot-draws", "64"]) == 0
    assert ",noncentred,pilot_draws=64" in (out / "table1.csv").read_text()
    configs = list(out.rglob("config.json"))
    assert configs and all(json.loads(c.read_text())["model"]["pilot_draws"] == 64 for c in configs)
    old = tmp_path / "old"  # stop 48's default, spelt out
    assert main(["bench", "table1", "--out", str(old), "--datasets", "iris", "--models", "icp", "--seeds", "1",
                 "--quick", "--no-noncentred", "--pilot-draws", "32"]) == 0
    assert {r["settings"] for r in csv.DictReader(open(old / "table1.csv"))} == {"quick,pilots=3,rotate=auto,tails=auto"}
    models = [json.loads(c.read_text())["model"] for c in old.rglob("config.json")]
    assert models and all(m["pilot_draws"] == 32 and "noncentred" not in m for m in models)
    # a table started with stop 48's default is not resumed with today's (the rows would mix), and the error says
    # which flags resume it; with them it resumes
    capsys.readouterr()
    resume = ["bench", "table1", "--out", str(old), "--datasets", "iris", "--models", "icp", "--seeds", "1", "--quick",
              "--resume"]
    assert main(resume) == 2
    assert "before stop 49 without --noncentred: --no-noncentred --pilot-draws 32" in capsys.readouterr().err
    assert main(resume + ["--no-noncentred", "--pilot-draws", "32"]) == 0
    assert "0 (data set, seed) cells to run" in capsys.readouterr().out
    capsys.readouterr()
    assert main(["bench", "table1", "--out", str(tmp_path / "k"), "--datasets", "iris", "--models", "kde",
                 "--quick", "--pilot-draws", "64"]) == 2
    assert "--pilot-draws" in capsys.readouterr().err
