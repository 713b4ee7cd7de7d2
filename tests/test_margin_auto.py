"""``margin="auto"``: 0.1 for data with three or more columns, 0.3 for fewer
(docs/derivations.md 3.18), through the unit map, the estimator, the CLI and Table 1."""

import csv
import json

import numpy as np
import pytest

import chefs
from chefs.cli import main
from chefs.density import (AUTO_MARGIN_COLUMNS, AUTO_MARGIN_FEW, AUTO_MARGIN_MANY, UnitMap, check_margin,
                           resolve_margin)


def test_resolve_margin_by_columns():
    assert (AUTO_MARGIN_COLUMNS, AUTO_MARGIN_MANY, AUTO_MARGIN_FEW) == (3, 0.1, 0.3)
    assert check_margin("auto") == "auto"
    assert [resolve_margin("auto", d) for d in (1, 2, 3, 11)] == [0.3, 0.3, 0.1, 0.1]
    assert resolve_margin(0.2, 11) == 0.2 and resolve_margin(0.2, 2) == 0.2  # a number is used as given
    for bad in ("Auto", "0.1", None, 0.5):
        with pytest.raises(ValueError, match="margin"):
            resolve_margin(bad, 3)
    with pytest.raises(ValueError, match="margin"):
        check_margin("auto", allow_auto=False)


@pytest.mark.parametrize("D, expected", [(2, 0.3), (3, 0.1), (5, 0.1)])
def test_unit_map_auto_stores_the_number_used(D, expected):
    X = np.random.default_rng(D).normal(size=(60, D))
    m = UnitMap.fit(X, "auto", rotate=False)
    assert m.margin == expected
    U = m.forward(X)
    assert U.min() == pytest.approx(expected) and U.max() == pytest.approx(1 - expected)
    d = json.loads(json.dumps(m.to_dict()))
    assert d["margin"] == expected and UnitMap.from_dict(d).margin == expected
    with pytest.raises(ValueError, match="margin"):  # a stored map always holds a number
        UnitMap.from_dict({**d, "margin": "auto"})
    # the same map as the number given directly, rotated or not
    for rotate in (False, True):
        a, b = UnitMap.fit(X, "auto", rotate=rotate), UnitMap.fit(X, expected, rotate=rotate)
        assert np.array_equal(a.forward(X), b.forward(X)) and a.log_jacobian() == b.log_jacobian()


def test_estimator_with_auto_margin_fits_and_loads(tmp_path):
    X = np.random.default_rng(3).normal(size=(40, 3))
    net = chefs.BeliefNetwork(sweeps=6, burn_in=2, thin=2, out=tmp_path / "run", progress=False, margin="auto",
                              rotate=False).fit(X)
    assert net.margin == "auto" and net.map_.margin == 0.1
    U = np.load(tmp_path / "run" / "train01.npy")
    assert U.min() == pytest.approx(0.1) and U.max() == pytest.approx(0.9)
    back = chefs.BeliefNetwork.load(tmp_path / "run")
    assert back.map_.margin == 0.1
    assert np.allclose(back.score_samples(X[:5], num_is=4), net.score_samples(X[:5], num_is=4))


def test_cli_margin_auto_and_refusals(tmp_path, capsys):
    data = tmp_path / "d.csv"
    np.savetxt(data, np.random.default_rng(4).normal(size=(40, 3)), delimiter=",")
    out = tmp_path / "fit"
    assert main(["fit", "--data", str(data), "--sweeps", "4", "--burn-in", "2", "--thin", "1", "--margin", "auto",
                 "--no-rotate", "--out", str(out)]) == 0
    assert json.loads((out / "unitmap.json").read_text())["margin"] == 0.1
    capsys.readouterr()
    args = ["fit", "--data", str(data), "--sweeps", "4", "--burn-in", "2", "--thin", "1", "--out", str(tmp_path / "bad"),
            "--margin"]
    with pytest.raises(SystemExit) as exc:  # argparse: usage, one-line error, exit 2
        main(args + ["wide"])
    assert exc.value.code == 2 and "expected a number or 'auto', got 'wide'" in capsys.readouterr().err
    assert main(args + ["0.7"]) == 2
    assert "margin must be a number in [1e-06, 0.5) or 'auto'" in capsys.readouterr().err
    assert not (tmp_path / "bad").exists()


def test_table1_auto_margin_per_data_set(tmp_path, capsys):
    from chefs.bench.table1 import chain_settings

    s, label = chain_settings(margin="auto")
    assert s["margin"] == "auto" and label == "full,margin='auto',pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512"
    assert chain_settings(margin=0.3)[1] == "full,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512"
    assert chain_settings(margin=0.3, noncentred=False, pilot_draws=32)[1] == ("full,pilots=3,rotate=auto,tails=auto,"
                                                                            "heldout_draws=512")  # stop 40's label
    out = tmp_path / "t"
    assert main(["bench", "table1", "--out", str(out), "--datasets", "ring,iris", "--models", "icp", "--quick",
                 "--sweeps", "6", "--burn-in", "2", "--thin", "2", "--pilots", "1", "--margin", "auto"]) == 0
    rows = list(csv.DictReader(open(out / "table1.csv")))
    margins = {r["dataset"]: r["margin"] for r in rows if r["model"] == "icp"}
    assert margins == {"ring": "0.3", "iris": "0.1"}  # the number each data set used
    assert json.loads((out / "runs" / "iris-icp-0" / "unitmap.json").read_text())["margin"] == 0.1
    assert "margin of the belief networks: 0.1 (iris); 0.3 (ring)" in (out / "table1.md").read_text()
    assert json.loads((out / "runs" / "ring-icp-0" / "unitmap.json").read_text())["margin"] == 0.3
    # margins differ between data sets in one table, but never within one: a merge refuses that
    other = tmp_path / "other.csv"
    with open(out / "table1.csv", newline="") as fh, open(other, "w", newline="") as oh:
        rd = list(csv.DictReader(fh))
        wr = csv.DictWriter(oh, fieldnames=list(rd[0]))
        wr.writeheader()
        wr.writerows({**r, "seed": "1"} for r in rd)
    assert main(["bench", "table1-merge", str(out / "table1.csv"), str(other), "--out", str(tmp_path / "m")]) == 0
    text = other.read_text().replace(",0.1\n", ",0.3\n").replace(",0.1\r\n", ",0.3\r\n")
    other.write_text(text)
    capsys.readouterr()
    assert main(["bench", "table1-merge", str(out / "table1.csv"), str(other), "--out", str(tmp_path / "m2")]) == 2
    assert "on iris" in capsys.readouterr().err
