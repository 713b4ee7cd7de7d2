"""benchmarks/pilot_length.py: a quick smoke run (rows, summary, figure), resuming from its CSV,
--plot-only, and its option checks."""

from __future__ import annotations

import csv

import pytest

from .conftest import load_script

pl = load_script("benchmarks/pilot_length.py")


def test_quick_run_resumes_and_replots(tmp_path, capsys):
    out = tmp_path / "pl"
    argv = ["--out", str(out), "--quick", "--datasets", "iris", "--seeds", "0",
            "--icp", "a={}", "--icp", 'b={"pilot_sweeps": 4, "pilot_draws": 8}', "--icp", 'e={"prior": "ecibp"}']
    assert pl.main(argv) == 0
    rows = list(csv.DictReader(open(out / "pilot_length.csv")))
    assert sorted((r["model"], r["config"]) for r in rows) == [("dpgmm", ""), ("ecibp", "e"), ("icp", "a"),
                                                                ("icp", "b")]
    assert all(0 <= float(r["hellinger"]) <= 1 and float(r["cpu_seconds"]) > 0 for r in rows)
    md = (out / "pilot_length.md").read_text()
    assert "| iris | icp b | 1 |" in md and "| iris | ecibp e | 1 |" in md and "HD better than a" in md
    assert "smoke run" in md
    assert (out / "pilot_length.png").stat().st_size > 0
    capsys.readouterr()
    assert pl.main(argv) == 0  # everything is in the CSV: nothing runs again
    assert "4 rows kept, 0 fits to run" in capsys.readouterr().out
    assert len(list(csv.DictReader(open(out / "pilot_length.csv")))) == 4
    (out / "pilot_length.png").unlink()
    assert pl.main(argv + ["--plot-only"]) == 0 and (out / "pilot_length.png").exists()


@pytest.mark.parametrize("argv, msg", [(["--seeds", "1,1"], "--seeds"), (["--datasets", "nope"], "unknown data set"),
                                       (["--icp", "a={}", "--icp", "a={}"], "labels must differ"),
                                       (["--icp", 'a={"sweeps": 5}'], "--sweeps"), (["--jobs", "0"], "--jobs"),
                                       (["--plot-only"], "does not exist"),
                                       (["--icp", 'a={"observed_order": "fixed"}'], "observed_order takes only")])
def test_bad_options_are_one_line_errors(tmp_path, capsys, argv, msg):
    assert pl.main(["--out", str(tmp_path / "o"), *argv]) == 2
    assert msg in capsys.readouterr().err
    assert not (tmp_path / "o").exists()


def test_plot_only_wraps_many_data_sets(tmp_path):
    """Six data sets: two bands of rows (five panels across, then one), each panel from the CSV."""
    out = tmp_path / "pl"
    out.mkdir()
    names = ["ring", "two-moons", "pinwheel", "geyser", "iris", "yeast"]
    with open(out / "pilot_length.csv", "w", newline="") as fh:
        w = csv.DictWriter(fh, fieldnames=pl.FIELDS)
        w.writeheader()
        for k, ds in enumerate(names):
            for cfg, hd in (("a", 0.1 + k / 100), ("b", 0.2 + k / 100)):
                w.writerow({"dataset": ds, "seed": 3, "model": "icp", "config": cfg, "hellinger": hd,
                            "heldout_loglik": -1.0 - k, "cpu_seconds": 1.0, "truth": ""})
    assert pl.main(["--out", str(out), "--plot-only", "--datasets", ",".join(names), "--seeds", "3",
                    "--icp", "a={}", "--icp", 'b={"margin": 0.2}']) == 0
    md = (out / "pilot_length.md").read_text()
    assert all(f"| {ds} | icp b | 1 | {0.2 + k / 100:.4f} |" in md for k, ds in enumerate(names))
    assert (out / "pilot_length.png").stat().st_size > 0


def test_free_observed_orders_hook_samples_the_orders():
    """``"observed_order": "free"`` (docs/derivations.md 3.22) fits with the observed units' orders sampled: they
    leave 0, where the default keeps them."""
    import numpy as np

    nets = {}
    for label, kw in (("default", {}), ("free", {"observed_order": "free", "rotate": False})):
        nets[label] = pl.cell_network("iris", 0, kw, None, quick=True)[0]
    theta = {k: np.array([[t for t, o in zip(s["theta"], s["observed"]) if o] for s in net.samples_])
             for k, net in nets.items()}
    assert np.all(theta["default"] == 0)
    assert np.all(theta["free"] > 0) and len(np.unique(theta["free"])) > 4
