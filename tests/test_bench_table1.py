"""chefs bench table1 --quick on one data set: the long-form CSV has the
contract's columns, a baseline row, one row per model, and the markdown and
toy-set figure are written."""

import csv

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
    text = (out / "table1.md").read_text()
    assert "paper" in text and "| icp |" in text
    assert (out / "fantasy_toy.png").exists()
    assert main(["bench", "table1", "--out", str(out), "--datasets", "nope"]) == 2
