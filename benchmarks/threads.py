"""The NLGBN activation update on numba's threads, on an idle and on a busy machine.

The multiple-try Metropolis update of all hidden units' activations runs in one
parallel region per sweep (``_nlgbn_kernels.mtm_units``), and ``chefs`` starts
numba's OpenMP thread pool with the passive wait policy
(``chefs._threads.launch_numba_threads``). This script shows why: it times the
update of 15 hidden units (2-3 children each, 2000 points, 4 tries), as one
region per unit (``mtm_unit`` in a loop, as before) and as one region, in fresh
processes, for

* the wait policy: ``spin`` (OpenMP's default, numba's pool started before
  chefs is imported, as before the change) or ``passive`` (what chefs does);
* 1 or 2 numba threads;
* an idle machine, or one where ``--busy`` other processes (default 2) each
  keep a core busy.

It prints the median milliseconds per update over about ``--seconds`` of updates
(with a 2 ms pause between them, the rest of a sweep), and the ratio of the two
layouts.

Usage: python benchmarks/threads.py [--seconds 5] [--busy 2]
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys

CHILD = r"""
import json, sys, time
import numpy as np
policy, threads, seconds = sys.argv[1], int(sys.argv[2]), float(sys.argv[3])
if policy == "spin":
    import numba
    numba.get_num_threads()  # the pool starts before chefs can choose the policy
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

BUSY = "import time\nt = time.time()\nwhile time.time() - t < {s}: pass\n"


def measure(policy: str, threads: int, seconds: float) -> dict:
    out = subprocess.run([sys.executable, "-c", CHILD, policy, str(threads), str(seconds)],
                         capture_output=True, text=True, check=True)
    return json.loads(out.stdout.strip().splitlines()[-1])


def main(seconds: float = 5.0, busy: int = 2) -> None:
    configs = [("spin", 1), ("spin", 2), ("passive", 1), ("passive", 2)]
    for label, nbusy in (("idle", 0), (f"{busy} busy processes", busy)):
        procs = [subprocess.Popen([sys.executable, "-c", BUSY.format(s=3600)])
                 for _ in range(nbusy)]
        try:
            res = {c: measure(*c, seconds) for c in configs}
        finally:
            for p in procs:
                p.kill()
        print(f"{label}: ms per activation update of 15 hidden units, 2000 points (median)")
        for policy, threads in configs:
            r = res[(policy, threads)]
            print(f"  {policy:8s} {threads} thread(s): per-unit regions {r['per-unit']:7.2f} ms, "
                  f"one region {r['fused']:6.2f} ms (x{r['per-unit'] / r['fused']:.2f})")

if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seconds", type=float, default=5.0)
    ap.add_argument("--busy", type=int, default=2)
    a = ap.parse_args()
    main(a.seconds, a.busy)
