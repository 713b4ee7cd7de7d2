"""The unit map with compressed outer tails (``tails``; docs/derivations.md 3.17): the map's
knots and slopes, its inverse, its per-point Jacobian (against central differences and by
exact integration of a data-space density, each with a planted-error control), ``tails="auto"``
(with the rotation only; the default since stop 40), saving and loading, and the inputs it refuses."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from scipy.integrate import quad

import chefs.density as density
from chefs.cli import main
from chefs.density import TAIL_LENGTH, TAIL_QUANTILE, BeliefNetwork, UnitMap, tail_knots

from .test_rotate import _numeric_log_jacobian, assert_cannot_impute  # shared with the rotated map's tests


def _with_outlier(n=1000, seed=0):
    """A normal sample and one isolated extreme, 12 standard deviations out."""
    x = np.random.default_rng(seed).normal(size=n)
    return np.append(x, 12.0)[:, None]


def _thin_with_outlier(n=600, seed=3):
    """Three columns with a thin direction (the third about the sum of the first two, so that
    ``rotate="auto"`` rotates) and one isolated point far out along the first column."""
    rng = np.random.default_rng(seed)
    a, b = rng.normal(size=(2, n))
    X = np.column_stack([a, b, a + b + 0.1 * rng.normal(size=n)])
    X[0] = [9.0, 0.0, 9.0]
    return X


def test_knots_and_slopes():
    z = np.append(np.linspace(0.0, 1.0, 1001), 10.0)[:, None]  # one extreme 9 central ranges beyond the rest
    (qlo, qhi), (below, mid, above) = tail_knots(z)
    assert qlo[0] == pytest.approx(np.quantile(z, TAIL_QUANTILE)) and qhi[0] == pytest.approx(np.quantile(z, 0.999))
    assert mid[0] == pytest.approx(2.0 / (qhi[0] - qlo[0]))
    # the short lower tail (0.1% of the range) would be stretched: it keeps the central slope
    assert below[0] == mid[0]
    # the long upper tail goes onto exactly TAIL_LENGTH beside [-1, 1]
    assert above[0] == pytest.approx(TAIL_LENGTH / (10.0 - qhi[0])) and above[0] < mid[0] / 50
    y = density._compress(z, *tail_knots(z))
    assert y[0, 0] == pytest.approx(-1 - (qlo[0] - 0.0) * mid[0])
    assert y[-1, 0] == pytest.approx(1 + TAIL_LENGTH) and np.all(np.diff(y[:, 0]) > 0)
    # an axis whose central range is empty (nearly all points equal) keeps one slope from end to end
    flat = np.append(np.zeros(5000), [1.0, 2.0])[:, None]
    (qlo, qhi), (below, mid, above) = tail_knots(flat)
    assert (qlo[0], qhi[0]) == (0.0, 2.0) and below[0] == mid[0] == above[0] == 1.0


@settings(max_examples=60, deadline=None)
@given(st.integers(0, 2**31 - 1), st.integers(20, 3000), st.floats(0.0, 50.0), st.floats(0.01, 100.0))
def test_tail_map_is_monotone_invertible_and_never_stretches(seed, n, outlier, scale):
    """For any sample (normal bulk, one point ``outlier`` standard deviations out, any scale):
    the map is increasing, sends the quantiles to -1 and 1, its tails are never steeper than the
    bulk and span at most TAIL_LENGTH over the training range, and its inverse undoes it."""
    z = np.append(np.random.default_rng(seed).normal(size=n - 1), outlier)[:, None] * scale
    knots, slopes = tail_knots(z)
    assert np.all(slopes[[0, 2]] <= slopes[1]) and np.all(slopes > 0)
    assert np.allclose(density._compress(knots[:, None, :], knots, slopes)[:, 0, 0], [-1, 1])
    grid = np.linspace(z.min() - 3 * scale, z.max() + 3 * scale, 501)[:, None]
    y = density._compress(grid, knots, slopes)
    assert np.all(np.diff(y[:, 0]) > 0)
    assert np.allclose(density._expand(y, knots, slopes), grid, rtol=1e-9, atol=1e-9 * scale)
    yz = density._compress(z, knots, slopes)
    assert yz.min() >= -1 - TAIL_LENGTH - 1e-9 and yz.max() <= 1 + TAIL_LENGTH + 1e-9


def test_map_round_trip_and_extension_beyond_the_training_range():
    X = _with_outlier()
    m = UnitMap.fit(X, 0.3, tails=True)
    assert m.tailed and not m.rotated
    U = m.forward(X)
    assert U.min() == pytest.approx(0.3) and U.max() == pytest.approx(0.7)
    assert np.allclose(m.inverse(U), X, atol=1e-12)
    # the bulk keeps most of [0.3, 0.7]: the extreme no longer squeezes it (the affine map leaves it 0.17)
    inner = m.forward(np.quantile(X, [0.001, 0.999])[:, None])[:, 0]
    affine = UnitMap.fit(X, 0.3).forward(np.quantile(X, [0.001, 0.999])[:, None])[:, 0]
    assert inner[1] - inner[0] > 0.35 and affine[1] - affine[0] < 0.2
    # beyond the training range the map goes on with the tail's slope, and back
    far = np.array([[-8.0], [30.0]])
    assert np.allclose(m.inverse(m.forward(far)), far, atol=1e-12)
    again = UnitMap.from_dict(json.loads(json.dumps(m.to_dict())))
    assert again.tailed and np.array_equal(again.forward(X), U)
    assert np.array_equal(again.log_jacobian_points(X), m.log_jacobian_points(X))
    with pytest.raises(ValueError, match="per point"):
        m.log_jacobian()


def _num(m: UnitMap) -> int:
    """The compressed tails counted from the slopes directly."""
    return sum(int(m.slopes[k, d] < m.slopes[1, d]) for k in (0, 2) for d in range(m.slopes.shape[1]))


def _jacobian_gap(m: UnitMap, X: np.ndarray) -> float:
    """The largest |formula - central differences| of log |det J| over the rows of ``X``."""
    return max(abs(a - _numeric_log_jacobian(m, x, h=1e-6)) for a, x in zip(m.log_jacobian_points(X), X))


def test_per_point_jacobian_of_the_rotated_map_with_tails(monkeypatch):
    X = _thin_with_outlier()
    m = UnitMap.fit(X, 0.3, rotate="auto", tails="auto")
    assert m.rotated and m.tailed and m.compressed_tails == _num(m)
    # points in the bulk, in compressed tails (the outlier's neighbourhood) and beyond the training range,
    # none within 1e-4 of a knot (where the slope jumps)
    pts = np.vstack([X[1:40], [[8.0, 0.1, 8.2], [-5.0, 4.0, -1.0], [14.0, -2.0, 12.0]]])
    Z = m._axes(pts)
    assert np.abs(Z[:, :, None] - m.knots.T[None]).min() > 1e-4
    slopes = m.slopes[np.where(Z < m.knots[0], 0, np.where(Z > m.knots[1], 2, 1)), np.arange(3)]
    assert (slopes < m.slopes[1]).any()  # some of the points do sit in a compressed tail
    assert _jacobian_gap(m, pts) < 1e-5
    # control: the central slope used everywhere (the tails' Jacobian forgotten) is caught
    with monkeypatch.context() as mp:
        mp.setattr(density, "_log_slope", lambda Z, knots, slopes: np.log(slopes[1]).sum() + 0 * Z[..., 0])
        assert _jacobian_gap(m, pts) > 1.0


def _one_column_net(m: UnitMap) -> BeliefNetwork:
    """A fitted-looking network over one column whose unit-space density is exact:
    logit u ~ N(0.2, 1/3), with the map ``m``."""
    net = BeliefNetwork.__new__(BeliefNetwork)
    net.map_, net.inputs = m, ()
    net.samples_ = [{"theta": [0.0], "observed": [True], "edges": [], "fixed": [True], "bias": [0.2],
                     "precision": [3.0], "weights": []}]
    return net


def _integral(net: BeliefNetwork) -> float:
    """The data-space density integrated over the model's support, exactly: adaptive quadrature
    on each piece between the knots (the density jumps there)."""
    m = net.map_
    ends = m.inverse(np.array([[0.0], [1.0]]))[:, 0]
    cuts = np.sort(np.concatenate([ends, m.knots[:, 0]]))

    def p(x):
        return float(np.exp(net.score_samples(np.array([[x], [x]]), num_is=1, max_samples=1)[0]))

    return sum(quad(p, a, b, epsabs=1e-12, epsrel=1e-10, limit=200)[0] for a, b in zip(cuts[:-1], cuts[1:]))


def test_data_space_density_with_tails_integrates_to_one(monkeypatch):
    """p(x) = p_U(forward(x)) |forward'(x)| integrates to 1 (to 1e-8) with both tails of the
    outlier's data; with the tails' slopes left out of the Jacobian (a planted error) it does not."""
    m = UnitMap.fit(_with_outlier(), 0.3, tails=True)
    assert m.slopes[2, 0] < m.slopes[1, 0]
    net = _one_column_net(m)
    assert _integral(net) == pytest.approx(1.0, abs=1e-8)
    with monkeypatch.context() as mp:
        mp.setattr(density, "_log_slope", lambda Z, knots, slopes: np.log(slopes[1]).sum() + 0 * Z[..., 0])
        assert abs(_integral(net) - 1.0) > 0.1


def test_auto_goes_with_the_rotation_and_leaves_other_maps_as_they_were():
    X = _thin_with_outlier()
    assert density.TAILS == "auto" and BeliefNetwork().tails == "auto"  # stop 40's second pre-registered rule
    assert not UnitMap.fit(X, 0.3, rotate="auto").tailed  # UnitMap.fit itself leaves the tails off unless asked
    # no rotation, no tails: the map is the affine one, bit for bit
    for rotate in (False, "auto"):
        two = X[:, :2]  # two columns: "auto" does not rotate
        a, b = UnitMap.fit(two, 0.3, rotate=rotate, tails="auto"), UnitMap.fit(two, 0.3, rotate=rotate, tails=False)
        assert not a.tailed and not a.rotated and np.array_equal(a.forward(two), b.forward(two))
    m = UnitMap.fit(X, 0.3, rotate="auto", tails="auto")
    assert m.rotated and m.tailed
    # a rotated map with no tail long enough to compress stays the affine rotated map: iris (150 points, so the
    # 0.1% quantiles lie between the two most extreme values of each axis)
    from sklearn.datasets import load_iris

    iris = load_iris().data
    r, t = UnitMap.fit(iris, 0.3, rotate="auto", tails=False), UnitMap.fit(iris, 0.3, rotate="auto", tails="auto")
    assert r.rotated and not t.tailed and np.array_equal(r.forward(iris), t.forward(iris))


def test_fit_load_and_fantasy_with_tails(tmp_path):
    X = _thin_with_outlier(200)
    net = BeliefNetwork(sweeps=6, burn_in=2, thin=2, pilots=1, tails="auto", out=tmp_path / "r",
                        progress=False).fit(X)
    assert net.map_.rotated and net.map_.tailed
    assert "knots" in json.loads((tmp_path / "r" / "unitmap.json").read_text())
    back = BeliefNetwork.load(tmp_path / "r")
    assert back.tails and back.map_.tailed
    assert np.array_equal(back.score_samples(X[:5], num_is=8), net.score_samples(X[:5], num_is=8))
    f = net.sample(300, rng=0)
    U = net.map_.forward(f)
    assert np.all(np.isfinite(f)) and np.all((U > 0) & (U < 1))
    assert np.allclose(np.load(tmp_path / "r" / "train01.npy"), net.map_.forward(X))


def test_tails_refuses_what_it_cannot_do(tmp_path):
    for bad in ("yes", 1, None):
        with pytest.raises(ValueError, match="tails must be True, False or 'auto'"):
            BeliefNetwork(tails=bad)
    X = _with_outlier(60)
    with pytest.raises(ValueError, match="tails=False"):
        BeliefNetwork(tails=True, inputs=[0], sweeps=4, burn_in=2, thin=2, progress=False).fit(np.hstack([X, X]))
    from chefs.causal import CausalDiscovery

    with pytest.raises(ValueError, match="tails must be False"):
        CausalDiscovery(tails=True)
    # imputation averages unit values and maps the mean back, which only an affine map allows
    Y = np.hstack([_with_outlier(), _with_outlier(seed=1)])
    net = BeliefNetwork(sweeps=4, burn_in=2, thin=2, pilots=1, tails=True, out=tmp_path / "t", progress=False).fit(Y)
    assert net.map_.tailed
    assert_cannot_impute(net, Y, "imputation needs a network fitted with tails=False")


def test_cli_tails_flag(tmp_path, capsys):
    csv = tmp_path / "x.csv"
    np.savetxt(csv, _thin_with_outlier(1200), delimiter=",")  # 1,200 points: the 99.9% quantile is in the bulk
    short = ["--sweeps", "4", "--burn-in", "2", "--thin", "2", "--pilots", "1", "--no-progress"]
    assert main(["fit", "--data", str(csv), "--out", str(tmp_path / "a")] + short) == 0  # the default: with the rotation
    assert "knots" in json.loads((tmp_path / "a" / "unitmap.json").read_text())
    assert "compressed beyond the 0.1% and 99.9% training quantiles (with the rotation" in capsys.readouterr().out
    assert main(["fit", "--data", str(csv), "--out", str(tmp_path / "n"), "--no-tails"] + short) == 0
    um = json.loads((tmp_path / "n" / "unitmap.json").read_text())
    assert "rotation" in um and "knots" not in um
    assert "compressed" not in capsys.readouterr().out
    # 80 points: the 99.9% quantile lies between the two largest values, so the outlier's tail is not compressed
    small = tmp_path / "small.csv"
    np.savetxt(small, _thin_with_outlier(80), delimiter=",")
    assert main(["fit", "--data", str(small), "--out", str(tmp_path / "s"), "--tails"] + short) == 0
    assert "knots" not in json.loads((tmp_path / "s" / "unitmap.json").read_text())
    assert "longer than 5% of its axis's central range" in capsys.readouterr().out


def test_table1_settings_label_tails():
    from chefs.bench.table1 import chain_settings

    s, label = chain_settings()
    assert s["tails"] == "auto" and label == "full,pilots=3,rotate=auto,tails=auto,noncentred,pilot_draws=512,heldout_draws=512"
    assert chain_settings(tails="auto")[1] == label
    s, label = chain_settings(tails=False, noncentred=False, pilot_draws=32)
    assert s["tails"] is False and label == "full,pilots=3,rotate=auto,heldout_draws=512"  # stop 39's rows
    assert ",tails," in chain_settings(tails=True)[1]
    with pytest.raises(ValueError, match="tails"):
        chain_settings(tails="no")
