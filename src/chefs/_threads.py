"""Sharing the cores between processes and their numba (and BLAS) threads.

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


def limit_numba_threads(num: int) -> None:
    """Use at most ``num`` numba threads in this process (at least one)."""
    import numba

    numba.set_num_threads(max(1, min(int(num), numba.config.NUMBA_NUM_THREADS)))


def limit_threads(num: int) -> None:
    """At most ``num`` numba threads and ``num`` BLAS threads in this process (the
    initializer of local process pools; Dask workers start with one BLAS thread).
    Without it each process's BLAS takes all cores, so that parallel processes
    oversubscribe them."""
    import scipy.linalg  # noqa: F401  (loads scipy's own BLAS, so that the limit reaches it too)
    from threadpoolctl import threadpool_limits

    limit_numba_threads(num)
    threadpool_limits(limits=max(1, int(num)), user_api="blas")


def share_cores(workers: int) -> int:
    """numba threads per process when ``workers`` processes share the cores."""
    return max(1, available_cores() // max(1, int(workers)))
