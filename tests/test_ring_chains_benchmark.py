"""benchmarks/ring_chains.py (issue 21's ring target): its test of a hidden common ancestor, with planted graphs
that have one and that do not, and a quick smoke run."""

import csv
import subprocess
import sys
from pathlib import Path

import pytest

BENCH = Path(__file__).resolve().parents[1] / "benchmarks"
sys.path.insert(0, str(BENCH))
from ring_chains import shared_fraction  # noqa: E402


def _g(n_obs, n_hidden, edges):
    # observed units at order 0, hidden units above them (higher ids higher up)
    return {"theta": [0.0] * n_obs + [0.1 * (k + 1) for k in range(n_hidden)],
            "observed": [True] * n_obs + [False] * n_hidden, "edges": edges}


def test_shared_fraction_finds_a_hidden_common_ancestor_and_only_that():
    both = _g(2, 1, [[2, 0], [2, 1]])                  # one unit above both columns
    apart = _g(2, 2, [[2, 0], [3, 1]])                 # each column its own unit: independent columns
    deep = _g(2, 2, [[3, 2], [2, 0], [3, 1]])          # unit 3 reaches column 0 through unit 2, column 1 directly
    one_side = _g(2, 2, [[3, 2], [2, 0]])              # unit 3 reaches column 0 only
    none = _g(2, 0, [])
    assert shared_fraction([both]) == (1.0, 1.0)
    assert shared_fraction([apart]) == (0.0, 2.0)
    assert shared_fraction([deep])[0] == 1.0 and shared_fraction([one_side])[0] == 0.0
    assert shared_fraction([both, apart, deep, none]) == (0.5, 1.25)
    with pytest.raises(ValueError):
        shared_fraction([])
    with pytest.raises(ValueError, match="two observed units"):
        shared_fraction([_g(3, 1, [[3, 0], [3, 1], [3, 2]])])


def test_ring_chains_quick_run(tmp_path):
    out = tmp_path / "r.csv"
    r = subprocess.run([sys.executable, str(BENCH / "ring_chains.py"), "--out", str(out), "--splits", "0",
                        "--chains", "1", "--jobs", "1", "--quick", "--icp", '{"pilots": 1}'],
                       capture_output=True, text=True, timeout=600)
    assert r.returncode == 0, r.stderr
    rows = list(csv.DictReader(open(out)))
    assert len(rows) == 1 and 0.0 < float(rows[0]["hellinger"]) < 1.0 and float(rows[0]["truth"]) < 0
    assert (rows[0]["noncentred"], rows[0]["pilot_draws"]) == ("True", "512")  # the library's default of the day
    independent = int(float(rows[0]["shared_fraction"]) < 0.5)  # the summary line counts what the CSV holds
    assert f"{independent} of 1 chains end with the columns modelled as independent" in r.stdout
