"""Sharing the cores between processes and numba's threads.

The NLGBN's activation kernel runs blocks of data points on numba's threads.
When several processes run at once (parallel chains, ``bench table1 --jobs``),
each gets its share of the cores, so that threads do not oversubscribe them.
"""

from __future__ import annotations

import os


def available_cores() -> int:
    """Cores this process may run on."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        return os.cpu_count() or 1


def launch_numba_threads() -> None:
    """Start numba's thread pool, with OpenMP's passive wait policy unless the
    user set ``OMP_WAIT_POLICY``.

    The activation kernel is one short parallel region per hidden unit (about
    0.4 ms on two threads). With OpenMP's default policy the threads spin at
    the region's barrier; when another process keeps a core busy, a spinning
    thread holds it while the thread it waits for is descheduled, and the
    kernel took 7.4 ms instead of 0.8 ms on one thread (two busy processes on
    two cores; ``benchmarks/threads.py``). Passive waiting gave 0.5 ms there
    and the same speed on an idle machine. The variable is read once, when
    the OpenMP runtime loads, so it is set only for that moment and restored
    afterwards (a PyTorch imported later in the process may share the runtime
    and then waits passively too; one imported before keeps its setting, and
    so does numba then).
    """
    import numba

    if "OMP_WAIT_POLICY" in os.environ:
        numba.get_num_threads()  # launches the pool
        return
    os.environ["OMP_WAIT_POLICY"] = "PASSIVE"
    try:
        numba.get_num_threads()
    finally:
        del os.environ["OMP_WAIT_POLICY"]


def limit_numba_threads(num: int) -> None:
    """Use at most ``num`` numba threads in this process (at least one)."""
    import numba

    launch_numba_threads()
    numba.set_num_threads(max(1, min(int(num), numba.config.NUMBA_NUM_THREADS)))


def share_cores(workers: int) -> int:
    """numba threads per process when ``workers`` processes share the cores."""
    return max(1, available_cores() // max(1, int(workers)))
