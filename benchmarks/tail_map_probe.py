"""A prototype unit map with compressed outer tails, measured outside the library (issue 21;
docs/derivations.md 3.16). Not used by ``chefs``: a measurement for the next change.

    python benchmarks/tail_map_probe.py --datasets abalone --seeds 10,11,12 [--jobs 2]

Each cell is Table 1's full-settings ICP cell of that split (its training subsample and chain
seed; 3,000 sweeps, burn-in 1,500, thin 30, 3 pilots), fitted with ``rotate=False`` on data
the script has already transformed: standardised, rotated onto the training data's principal
axes (as ``rotate=True``), then mapped per axis by a monotone piecewise-linear ``g``. ``g``
sends the training data's central range, between the 0.1% and 99.9% quantiles, onto
[-1, 1], and each outer tail (the training extreme beyond that quantile) onto a stretch of
length 0.1 beside it, extended linearly beyond the training range. With ``--isolated F`` a
tail is compressed only where it is longer than F times the central range; with ``--no-stretch``
a tail's slope is at most the bulk's, so tails shorter than 5% of the central range keep the
affine map (stop 40). One isolated extreme
then no longer sets the scale of the bulk (3.15, abalone's heights). The library's range
map then acts on ``g``'s output as usual.

Fantasy data are ``g``'s inverse of the network's fantasy, rotated back. The held-out
log-density per test point adds ``sum log g'`` and ``-sum log sd`` to the network's own
(512 importance draws, 20 posterior samples, as Table 1). Points outside the support are
left out of the mean and counted. HD: Table 1's rule. One JSON row per cell.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from multiprocessing import Pool

import numpy as np

Q, TAIL = 0.001, 0.1  # fixed before any run


def knots(z, isolated=None):
    """``(lo, qlo, qhi, hi)`` per axis. ``isolated``: compress a tail only where its length
    exceeds that fraction of the central range (otherwise the knot sits at the extreme and
    the axis is mapped affinely on that side), so that small data sets keep the plain map."""
    lo, hi = z.min(0), z.max(0)
    qlo, qhi = np.quantile(z, Q, axis=0), np.quantile(z, 1 - Q, axis=0)
    if isolated is not None:
        qlo = np.where(qlo - lo > isolated * (qhi - qlo), qlo, lo)
        qhi = np.where(hi - qhi > isolated * (qhi - qlo), qhi, hi)
    return lo, qlo, qhi, hi


NO_STRETCH = False  # set per cell by --no-stretch


def _slopes(k):
    lo, qlo, qhi, hi = k
    sb = 2.0 / (qhi - qlo)
    sl = np.where(qlo > lo, TAIL / np.maximum(qlo - lo, 1e-300), sb)
    sh = np.where(hi > qhi, TAIL / np.maximum(hi - qhi, 1e-300), sb)
    if NO_STRETCH:  # a tail is only ever compressed: never steeper than the bulk
        sl, sh = np.minimum(sl, sb), np.minimum(sh, sb)
    return sb, sl, sh


def g(z, k):
    """``g(z)`` per axis and ``sum log g'(z)`` per point."""
    _, qlo, qhi, _ = k
    sb, sl, sh = _slopes(k)
    out = np.where(z < qlo, -1 + (z - qlo) * sl, np.where(z > qhi, 1 + (z - qhi) * sh, -1 + (z - qlo) * sb))
    slope = np.where(z < qlo, sl, np.where(z > qhi, sh, sb))
    return out, np.log(slope).sum(1)


def g_inverse(y, k):
    _, qlo, qhi, _ = k
    sb, sl, sh = _slopes(k)
    return np.where(y < -1, qlo + (y + 1) / sl, np.where(y > 1, qhi + (y - 1) / sh, qlo + (y + 1) / sb))


def cell(task):
    global NO_STRETCH
    ds, seed, data_dir, isolated, NO_STRETCH = task
    from chefs._threads import limit_threads
    from chefs.bench.table1 import _training_split, cell_rng, chain_settings
    from chefs.density import BeliefNetwork, principal_axes
    from chefs.evaluation import hellinger

    limit_threads(1)
    settings, _ = chain_settings()
    train, test = _training_split(ds, seed, settings, data_dir)
    rng = cell_rng(seed, "icp")  # Table 1's stream of the ICP cell
    c, s = train.mean(0), train.std(0)
    R = principal_axes((train - c) / s)
    ztr, zte = ((train - c) / s) @ R, ((test - c) / s) @ R
    k = knots(ztr, isolated)
    t0 = time.process_time()
    net = BeliefNetwork(sweeps=settings["sweeps"], burn_in=settings["burn_in"], thin=settings["thin"],
                        seed=int(rng.integers(2**31)), progress=False, num_tries=settings["num_tries"],
                        margin=settings["margin"], pilots=settings["pilots"], rotate=False).fit(g(ztr, k)[0])
    cpu = time.process_time() - t0
    fantasy = (g_inverse(net.sample(test.shape[0], rng=rng), k) @ R.T) * s + c
    yte, log_slope = g(zte, k)
    lp = net.score_samples(yte, num_is=512, max_samples=20) + log_slope - np.log(s).sum()
    ok = np.isfinite(lp)
    return {"dataset": ds, "seed": seed, "isolated": isolated, "no_stretch": NO_STRETCH, "hellinger": float(hellinger(fantasy, test)),
            "heldout_loglik": float(lp[ok].mean()), "outside": int((~ok).sum()), "cpu_seconds": cpu}


def main(argv=None) -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--datasets", default="abalone")
    ap.add_argument("--seeds", default="10,11,12", help="comma-separated splits (development splits by default)")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--isolated", type=float, default=None,
                    help="compress a tail only where it is longer than this fraction of the central range")
    ap.add_argument("--no-stretch", action="store_true",
                    help="a tail's slope is at most the bulk's: short tails keep the affine map (stop 40)")
    ap.add_argument("--data-dir", default=os.environ.get("CHEFS_DATA"))
    a = ap.parse_args(argv)
    tasks = [(d, int(x), a.data_dir, a.isolated, a.no_stretch) for d in a.datasets.split(",") for x in a.seeds.split(",")]
    with Pool(a.jobs) as pool:
        for row in pool.imap_unordered(cell, tasks):
            print(json.dumps(row), flush=True)


if __name__ == "__main__":
    main()
