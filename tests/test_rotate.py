"""The unit map on the principal axes (``rotate=True``; docs/derivations.md 3.14): the map,
its Jacobian, the data-space density it gives (integrating to one), the inputs it refuses, and
the default ``rotate="auto"``'s thin-axis rule (3.15)."""

from __future__ import annotations

import json

import numpy as np
import pytest

import chefs
from chefs.cli import main
from chefs.density import THIN_AXIS, BeliefNetwork, UnitMap, principal_axes, thin_axis


def _correlated(n=300, seed=0):
    """Two columns on very different scales (spreads about 3 and 0.5), correlated 0.9."""
    rng = np.random.default_rng(seed)
    z = rng.multivariate_normal([0, 0], [[1, 0.9], [0.9, 1]], size=n)
    return z * [3.0, 0.5] + [10.0, -2.0]


def _numeric_log_jacobian(m: UnitMap, x: np.ndarray, h: float = 1e-3) -> float:
    """log |det d forward / d x| by central differences (exact for an affine map up to rounding)."""
    D = x.size
    J = np.empty((D, D))
    for j in range(D):
        e = np.zeros(D)
        e[j] = h
        J[:, j] = (m.forward(x + e) - m.forward(x - e)) / (2 * h)
    return float(np.linalg.slogdet(J)[1])


def test_rotated_map_round_trip_axes_and_jacobian():
    X = _correlated()
    m = UnitMap.fit(X, 0.3, rotate=True)
    U = m.forward(X)
    assert np.allclose(m.inverse(U), X, atol=1e-12)
    assert U.min(axis=0) == pytest.approx([0.3, 0.3]) and U.max(axis=0) == pytest.approx([0.7, 0.7])
    R = m.rotation
    assert np.allclose(R.T @ R, np.eye(2), atol=1e-12)
    Z = ((X - m.center) / m.spread) @ R
    v = Z.var(axis=0)
    assert v[0] > v[1] and abs(np.corrcoef(Z.T)[0, 1]) < 1e-10  # principal axes, largest first
    # the largest entry of each axis is positive, whatever sign the eigen-solver returns
    assert np.array_equal(principal_axes(-((X - m.center) / m.spread)), R)
    assert np.all(R[np.argmax(np.abs(R), axis=0), [0, 1]] > 0)
    # the Jacobian of the actual map, at two points, against the formula
    for x in (X[0], X[17] + 0.3):
        assert m.log_jacobian() == pytest.approx(_numeric_log_jacobian(m, x), abs=1e-8)
    # control: the formula without the standardisation's term is off by sum(log spread), about 0.4 here
    planted = float(np.sum(np.log(m.scale)))
    assert abs(planted - _numeric_log_jacobian(m, X[0])) > 0.3
    again = UnitMap.from_dict(json.loads(json.dumps(m.to_dict())))
    assert again.rotated and np.array_equal(again.forward(X), U)
    plain = UnitMap.fit(X, 0.3)
    assert not plain.rotated and "rotation" not in plain.to_dict()


def _only_observed(net: BeliefNetwork) -> None:
    """Replace the posterior by one network without hidden units, whose unit-space density is
    exact (no importance sampling): logit u_d ~ N(b_d, 1/rho_d)."""
    net.samples_ = [{"theta": [0.0, 0.0], "observed": [True, True], "edges": [], "fixed": [True, True],
                     "bias": [0.2, -0.3], "precision": [3.0, 5.0], "weights": []}]


def _integral(net: BeliefNetwork, n: int = 500) -> float:
    """The data-space density summed over a grid on the box around the model's support."""
    corners = net.map_.inverse(np.array([[0, 0], [0, 1], [1, 0], [1, 1]], float))
    lo, hi = corners.min(axis=0), corners.max(axis=0)
    g0, g1 = np.linspace(lo[0], hi[0], n), np.linspace(lo[1], hi[1], n)
    G = np.stack(np.meshgrid(g0, g1, indexing="ij"), -1).reshape(-1, 2)
    lp = net.score_samples(G, num_is=1, max_samples=1)
    return float(np.exp(lp[np.isfinite(lp)]).sum() * (g0[1] - g0[0]) * (g1[1] - g1[0]))


def test_rotated_density_integrates_to_one_in_data_space(tmp_path, monkeypatch):
    """The end-to-end check of the change of variables: p(x) = p_U(forward(x)) |det J| must
    integrate to 1 over the data space. A Riemann sum on 500 x 500 points over the support's
    box reads 1 - 2e-14 (the density vanishes smoothly at the box's edges, so the sum converges
    fast; 1e-4 is allowed); with the Jacobian's standardisation term dropped (a planted error)
    the integral is prod(spread) = 1.51 instead."""
    X = _correlated()
    net = BeliefNetwork(sweeps=4, burn_in=2, thin=2, rotate=True, tails=False, pilots=1, out=tmp_path / "r",
                        progress=False).fit(X)  # tails=False: the planted error below replaces the constant Jacobian
    _only_observed(net)
    assert _integral(net) == pytest.approx(1.0, abs=1e-4)
    planted = float(np.sum(np.log(net.map_.scale)))
    with monkeypatch.context() as mp:
        mp.setattr(UnitMap, "log_jacobian", lambda self, columns=None: planted)
        assert _integral(net) == pytest.approx(np.prod(net.map_.spread), rel=1e-4)
        assert abs(np.prod(net.map_.spread) - 1.0) > 0.2
    # the unrotated map of the same data integrates to 1 as well
    flat = BeliefNetwork(sweeps=4, burn_in=2, thin=2, pilots=1, out=tmp_path / "f", progress=False).fit(X)
    _only_observed(flat)
    assert _integral(flat) == pytest.approx(1.0, abs=1e-4)


def test_rotated_fit_run_directory_and_fantasy(tmp_path):
    X = _correlated(200, seed=1)
    net = BeliefNetwork(sweeps=20, burn_in=10, thin=2, rotate=True, pilots=1, out=tmp_path / "r", progress=False).fit(X)
    back = BeliefNetwork.load(tmp_path / "r")
    assert back.rotate and back.map_.rotated
    assert np.array_equal(back.score_samples(X[:5], num_is=8), net.score_samples(X[:5], num_is=8))
    f = net.sample(400, rng=0)
    assert f.shape == (400, 2) and np.all(np.isfinite(f))
    # fantasy points lie in the model's support: the rotated box mapped back
    U = net.map_.forward(f)
    assert np.all((U > 0) & (U < 1))
    assert np.allclose(np.load(tmp_path / "r" / "train01.npy"), net.map_.forward(X))


def test_rotate_refuses_what_it_cannot_do(tmp_path):
    X = _correlated(60)
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="rotate must be True, False or 'auto'"):
            BeliefNetwork(rotate=bad)
    with pytest.raises(ValueError, match="input columns apart"):
        BeliefNetwork(rotate=True, inputs=[0], sweeps=4, burn_in=2, thin=2, progress=False).fit(X)
    collinear = np.column_stack([X[:, 0], 2 * X[:, 0] + 1.0, X[:, 1]])
    with pytest.raises(ValueError, match="collinear"):
        UnitMap.fit(collinear, rotate=True)
    from chefs.causal import CausalDiscovery

    with pytest.raises(ValueError, match="rotate must be False"):
        CausalDiscovery(rotate=True)
    net = BeliefNetwork(sweeps=4, burn_in=2, thin=2, rotate=True, pilots=1, out=tmp_path / "r", progress=False).fit(X)
    assert_cannot_impute(net, X, "rotate=False")


def assert_cannot_impute(net: BeliefNetwork, X: np.ndarray, match: str) -> None:
    """``predict_missing`` of one hidden entry of ``X`` is refused with an error matching ``match``."""
    mask = np.zeros_like(X, bool)
    mask[0, 1] = True
    with pytest.raises(ValueError, match=match):
        net.predict_missing(np.where(mask, np.nan, X), mask)


def test_cli_rotate_flag(tmp_path, capsys):
    csv = tmp_path / "x.csv"
    np.savetxt(csv, _correlated(60), delimiter=",")
    out = tmp_path / "run"
    assert main(["fit", "--data", str(csv), "--out", str(out), "--sweeps", "4", "--burn-in", "2", "--thin", "2",
                 "--pilots", "1", "--rotate", "--no-progress"]) == 0
    assert "rotation" in json.loads((out / "unitmap.json").read_text())
    assert "principal axes (--rotate)" in capsys.readouterr().out
    assert main(["fit", "--data", str(csv), "--out", str(tmp_path / "r2"), "--sweeps", "4", "--burn-in", "2",
                 "--thin", "2", "--rotate", "--inputs", "0", "--no-progress"]) == 2
    err = capsys.readouterr().err.strip()
    assert "input columns apart" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "r2").exists()
    # the default decides by the thin-axis rule (3.15), and says so; --no-rotate keeps the columns
    thin = tmp_path / "thin.csv"
    np.savetxt(thin, _three_columns(0.1, n=60), delimiter=",")
    short = ["--sweeps", "4", "--burn-in", "2", "--thin", "2", "--pilots", "1", "--no-progress"]
    assert main(["fit", "--data", str(thin), "--out", str(tmp_path / "a")] + short) == 0
    assert "rotation" in json.loads((tmp_path / "a" / "unitmap.json").read_text())
    assert "principal axes (a thin axis; --no-rotate keeps the columns)" in capsys.readouterr().out
    assert main(["fit", "--data", str(thin), "--out", str(tmp_path / "n"), "--no-rotate"] + short) == 0
    assert "rotation" not in json.loads((tmp_path / "n" / "unitmap.json").read_text())
    assert "principal axes" not in capsys.readouterr().out


def test_table1_settings_label_rotation():
    from chefs.bench.table1 import chain_settings

    s, label = chain_settings(rotate=True)
    assert s["rotate"] is True and ",rotate" in label.split("heldout")[0]
    s, label = chain_settings(rotate=False)
    assert s["rotate"] is False and "rotate" not in label
    with pytest.raises(ValueError, match="rotate"):
        chain_settings(rotate="no")
    from chefs.density import ROTATE

    assert chefs.BeliefNetwork().rotate == ROTATE == chain_settings()[0]["rotate"] == "auto"
    s, label = chain_settings()
    assert ",rotate=auto" in label and chain_settings(rotate="auto")[1] == label


def _three_columns(relation_sd, n=400, seed=2):
    """Three standard-normal-ish columns, the third the sum of the first two plus noise of
    ``relation_sd``: the smaller it is, the thinner the direction (1, 1, -1)."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(2, n))
    return np.column_stack([a, b, a + b + relation_sd * rng.normal(size=n)])


def _smallest_eigenvalue(X):
    return float(np.linalg.eigvalsh(np.corrcoef(X.T))[0])


def test_auto_rotation_follows_the_thin_axis_rule(tmp_path):
    thin, wide = _three_columns(0.1), _three_columns(3.0)
    assert _smallest_eigenvalue(thin) < THIN_AXIS < _smallest_eigenvalue(wide)
    assert thin_axis(thin) and not thin_axis(wide)
    # the rule's boundary: a relation whose eigenvalue straddles 0.1 as its noise grows
    sds = np.linspace(0.2, 1.5, 27)
    assert [thin_axis(_three_columns(sd)) for sd in sds] == [_smallest_eigenvalue(_three_columns(sd)) < 0.1
                                                             for sd in sds]
    assert any(thin_axis(_three_columns(sd)) for sd in sds) and not all(thin_axis(_three_columns(sd)) for sd in sds)
    # two columns are never rotated, however correlated
    two = _correlated()
    assert _smallest_eigenvalue(two) < THIN_AXIS and not thin_axis(two)
    assert UnitMap.fit(thin, rotate="auto").rotated and not UnitMap.fit(wide, rotate="auto").rotated
    assert np.array_equal(UnitMap.fit(thin, rotate="auto").forward(thin), UnitMap.fit(thin, rotate=True).forward(thin))
    assert np.array_equal(UnitMap.fit(wide, rotate="auto").forward(wide), UnitMap.fit(wide).forward(wide))
    # exactly collinear columns: rotate=True refuses them, "auto" leaves the columns as they are
    collinear = np.column_stack([thin[:, 0], 2 * thin[:, 0] + 1.0, thin[:, 1]])
    assert thin_axis(collinear) and not UnitMap.fit(collinear, rotate="auto").rotated
    with pytest.raises(ValueError, match="constant"):
        thin_axis(np.column_stack([thin, np.ones(len(thin))]))
    # the data sets that ship with the packages: iris has a thin axis (petal length and width), two-moons has not
    from chefs.datasets import load

    assert thin_axis(load("iris", dequantize=False)) and not thin_axis(load("two-moons", seed=0))
    # a conditional model keeps its columns: "auto" does not rotate with inputs, the default does without
    kw = dict(sweeps=4, burn_in=2, thin=2, pilots=1, progress=False)
    assert not BeliefNetwork(inputs=[0], out=tmp_path / "c", **kw).fit(thin).map_.rotated
    net = BeliefNetwork(out=tmp_path / "d", **kw).fit(thin)
    assert net.map_.rotated and BeliefNetwork.load(tmp_path / "d").map_.rotated
    assert not BeliefNetwork(rotate=False, out=tmp_path / "e", **kw).fit(thin).map_.rotated
