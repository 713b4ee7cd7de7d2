"""``chefs bench table1 --quick`` on local processes against a Dask LocalCluster.

Times the same table four ways, in one run: ``--jobs 1`` (the cells one after
the other in the chefs process), ``--jobs 2`` (two local processes), and
``--scheduler`` on a LocalCluster of 1 and of 2 worker processes (1 thread each,
loopback). Every run is a fresh ``chefs`` process (the client), and every Dask
run gets a fresh cluster, started before the clock starts, so that the workers
import chefs and load numba's cache inside the timed run as local processes do.
The four settings are interleaved, ``--repeats`` times, and the median wall
time of each is reported with two ratios:

* throughput of 2 Dask workers against 1 (target >= 1.7x);
* Dask against local processes at equal workers (target: within 10 %).

Each run also checks that its table equals the first run's, value for value.

``--one-core-each`` adds two settings, run in the same rounds: ``--jobs 1`` and a
1-worker cluster on one core of their own, as a cluster's single-threaded worker
has (``os.sched_setaffinity``: the ``--jobs 1`` process with one numba and one BLAS
thread; the Dask worker pinned before the client connects, so that chefs counts
one core for it). It then also reports the throughput of 2 workers against that
one-core worker. Without pinning, the one worker of the 1-worker settings may run
its numba threads on both cores of this machine (chefs shares a host's cores among
its Dask threads), so that baseline is partly parallel.
"""

from __future__ import annotations

import argparse
import csv
import os
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"
sys.path.insert(0, str(SRC))  # the LocalCluster's scheduler runs here and unpickles tasks that name chefs


def _table(out: Path) -> dict:
    with open(out / "table1.csv", newline="") as fh:
        return {(r["dataset"], r["model"], r["seed"]): (r["hellinger"], r["heldout_loglik"])
                for r in csv.DictReader(fh)}


ONE_THREAD = ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS")


def _run(args: list[str], out: Path, core: int | None = None) -> float:
    """One ``chefs bench table1 --quick`` process; on the one core ``core`` when given."""
    pin = None if core is None else (lambda: os.sched_setaffinity(0, {core}))
    env = None if core is None else {**os.environ, **{v: "1" for v in ONE_THREAD}}  # not two threads on one core
    t0 = time.perf_counter()
    subprocess.run([sys.executable, "-m", "chefs.cli", "bench", "table1", "--quick", "--out", str(out)] + args,
                   check=True, stdout=subprocess.DEVNULL, preexec_fn=pin, env=env)
    return time.perf_counter() - t0


def _pin(core: int) -> list[int]:
    """On a worker: run on ``core`` only; the cores it may use afterwards."""
    os.sched_setaffinity(0, {core})
    return sorted(os.sched_getaffinity(0))


def _dask(workers: int, args: list[str], out: Path, one_core_each: bool = False) -> float:
    from distributed import Client, LocalCluster

    with LocalCluster(n_workers=workers, threads_per_worker=1, processes=True, host="127.0.0.1",
                      dashboard_address=":0") as cluster:
        if one_core_each:  # before the chefs client connects, so that it counts one core for each worker
            with Client(cluster) as client:
                for core, addr in enumerate(sorted(client.nthreads())):
                    if client.run(_pin, core % os.cpu_count(), workers=[addr])[addr] != [core % os.cpu_count()]:
                        raise SystemExit(f"could not pin the worker {addr} to core {core}")
        return _run(args + ["--scheduler", cluster.scheduler_address], out)


def main(datasets: str | None, models: str | None, repeats: int, one_core_each: bool = False) -> None:
    # this checkout's chefs in the chefs processes and the Dask workers alike
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH")) if p)
    args = (["--datasets", datasets] if datasets else []) + (["--models", models] if models else [])
    settings = {
        "local, --jobs 1": lambda out: _run(args + ["--jobs", "1"], out),
        "local, --jobs 2": lambda out: _run(args + ["--jobs", "2"], out),
        "Dask, 1 worker": lambda out: _dask(1, args, out),
        "Dask, 2 workers": lambda out: _dask(2, args, out),
    }
    if one_core_each:
        settings["local, --jobs 1, 1 core"] = lambda out: _run(args + ["--jobs", "1"], out, core=0)
        settings["Dask, 1 worker, 1 core"] = lambda out: _dask(1, args, out, one_core_each=True)
    times = {name: [] for name in settings}
    reference = None
    with tempfile.TemporaryDirectory(prefix="chefs-dask-bench-") as tmp:
        for r in range(repeats):
            for k, (name, run) in enumerate(settings.items()):
                out = Path(tmp) / f"{r}-{k}"
                times[name].append(run(out))
                table = _table(out)
                if reference is None:
                    reference = table
                elif table != reference:
                    raise SystemExit(f"{name}, repeat {r + 1}: the table differs from the first run's")
                print(f"repeat {r + 1}: {name:24s} {times[name][-1]:7.1f} s", flush=True)
    med = {name: statistics.median(ts) for name, ts in times.items()}
    print(f"\nchefs bench table1 --quick {' '.join(args)}: {len(reference)} rows, wall seconds, median of {repeats} "
          f"({os.cpu_count()} cores)")
    for name, ts in times.items():
        print(f"  {name:24s} median {med[name]:7.1f}   runs {', '.join(f'{t:.1f}' for t in ts)}")
    speedup = med["Dask, 1 worker"] / med["Dask, 2 workers"]
    print(f"throughput, 2 Dask workers / 1: {speedup:.2f}x (target >= 1.7x)")
    if one_core_each:
        print(f"throughput, 2 Dask workers / 1 worker on one core: "
              f"{med['Dask, 1 worker, 1 core'] / med['Dask, 2 workers']:.2f}x (target >= 1.7x)")
        print(f"Dask / local processes, 1 worker on one core: "
              f"{med['Dask, 1 worker, 1 core'] / med['local, --jobs 1, 1 core']:.3f} of the wall time (target <= 1.10)")
    for w, local, dask in ((1, "local, --jobs 1", "Dask, 1 worker"), (2, "local, --jobs 2", "Dask, 2 workers")):
        print(f"Dask / local processes, {w} worker(s): {med[dask] / med[local]:.3f} of the wall time "
              "(target <= 1.10)")


if __name__ == "__main__":
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", default=None, help="comma-separated (default: all nine)")
    ap.add_argument("--models", default=None, help="comma-separated (default: all six)")
    ap.add_argument("--repeats", type=int, default=3)
    ap.add_argument("--one-core-each", action="store_true",
                    help="also run --jobs 1 and a 1-worker cluster each on one core of its own, and report the "
                         "throughput of 2 workers against that worker")
    a = ap.parse_args()
    main(a.datasets, a.models, a.repeats, a.one_core_each)
