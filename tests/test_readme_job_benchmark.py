"""benchmarks/readme_job.py: its summary counts the fits within the target, and a bad --arm is refused."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import pytest

_spec = importlib.util.spec_from_file_location("readme_job", Path(__file__).parents[1] / "benchmarks" / "readme_job.py")
rj = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(rj)


def test_summary_counts_fits_within_the_target():
    rows = [{"arm": "a", "seed": str(s), "hd": str(h), "heldout": "-1.0", "wall_s": str(w), "cpu_s": "1"}
            for s, h, w in ((1, 0.05, 10), (2, 0.0836, 30), (3, 0.0837, 20))]
    rows.append({"arm": "b", "seed": "1", "hd": "", "heldout": "", "wall_s": "5", "cpu_s": "1"})  # a failed fit
    text = rj.summary(rows, {"a": [], "b": ["--noncentred"]}, 0.0836)
    line = next(x for x in text.splitlines() if x.startswith("| a |"))
    assert "2 of 3" in line and "| 20 |" in line  # at the threshold counts; median wall 20
    assert not any(x.startswith("| b |") for x in text.splitlines())  # no scored fit: no row


def test_bad_arm_is_refused(tmp_path):
    with pytest.raises(SystemExit) as e:
        rj.main(["--out", str(tmp_path), "--seeds", "0", "--arm", "noflags"])
    assert e.value.code == 2
    assert not (tmp_path / "results.csv").exists()
