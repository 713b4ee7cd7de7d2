"""The NLGBN activation update on numba's threads, on an idle and on a busy machine.

The multiple-try Metropolis update of all hidden units' activations runs in one
parallel region per sweep (``_nlgbn_kernels.mtm_units``). This script shows why:
it times the update of 15 hidden units (2-3 children each, 2000 points, 4 tries)
as one parallel region per unit (``mtm_unit`` in a loop, as before) and as one
region, in fresh processes, with 1 or 2 numba threads, on an idle machine and
while ``--busy`` other processes (default 2) each keep a core busy. With one
region per unit, OpenMP's spinning threads wait at every unit's barrier for a
thread the busy machine has descheduled.

It prints the median milliseconds per update over about ``--seconds`` of updates
(with a 2 ms pause between them, the rest of a sweep), and the ratio of the two
layouts. ``--policy passive`` runs the children with ``OMP_WAIT_POLICY=PASSIVE``
(tried at stop 16: no gain with one region, slower on an idle machine).

Usage: python benchmarks/threads.py [--seconds 6] [--busy 2] [--policy default|passive]
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
threads, seconds = int(sys.argv[1]), float(sys.argv[2])
from chefs.models import _nlgbn_kernels as K
import numba
numba.set_num_threads(threads)
rng = np.random.default_rng(0)
N, D, H, J = 2000, 2, 15, 4  # 15 hidden units above 2 observed ones, 2-3 children each
C = D + H
Y = rng.standard_normal((C, N)); U = 1 / (1 + np.exp(-Y)); MU = rng.standard_normal((C, N))
W = rng.standard_normal((C, C)); rho = np.full(C, 3.0)
hidden = np.arange(C - 1, D - 1, -1)
kids = [np.sort(rng.choice(np.arange(h), size=min(h, 2 + h % 2), replace=False)).astype(np.int64) for h in hidden]
ptr = np.concatenate([[0], np.cumsum([k.size for k in kids])]).astype(np.int64)
idx = np.concatenate(kids)
z = rng.standard_normal((H, 2 * J - 1, N)); uu = rng.random((H, 2, N))

def per_unit():
    for u in range(H):
        K.mtm_unit(Y, U, MU, W, rho, hidden[u], kids[u], J, z[u], uu[u])

def fused():
    K.mtm_units(Y, U, MU, W, rho, hidden, ptr, idx, J, z, uu)

res = {}
for name, f in (("per-unit", per_unit), ("fused", fused)):
    f()
    ts = []
    t0 = time.perf_counter()
    while time.perf_counter() - t0 < seconds / 2:
        t = time.perf_counter()
        f()
        ts.append(time.perf_counter() - t)
        time.sleep(0.002)  # the rest of a sweep
    res[name] = 1e3 * float(np.median(ts))
print(json.dumps(res))
"""

BUSY = "while True: pass\n"


def measure(threads: int, seconds: float, policy: str) -> dict:
    env = dict(os.environ)
    if policy == "passive":
        env["OMP_WAIT_POLICY"] = "PASSIVE"
    out = subprocess.run([sys.executable, "-c", CHILD, str(threads), str(seconds)],
                         capture_output=True, text=True, check=True, env=env)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(seconds: float = 6.0, busy: int = 2, policy: str = "default") -> None:
    for label, nbusy in (("idle", 0), (f"{busy} busy processes", busy)):
        procs = [subprocess.Popen([sys.executable, "-c", BUSY]) for _ in range(nbusy)]
        try:
            res = {t: measure(t, seconds, policy) for t in (1, 2)}
        finally:
            for p in procs:
                p.kill()
        print(f"{label} (OpenMP wait policy: {policy}): ms per activation update of 15 hidden units, "
              "2000 points (median)")
        for t, r in res.items():
            print(f"  {t} thread(s): one region per unit {r['per-unit']:7.2f} ms, one region {r['fused']:6.2f} ms "
                  f"(x{r['per-unit'] / r['fused']:.2f})")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=6.0)
    ap.add_argument("--busy", type=int, default=2)
    ap.add_argument("--policy", choices=("default", "passive"), default="default")
    a = ap.parse_args()
    main(a.seconds, a.busy, a.policy)
