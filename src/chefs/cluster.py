"""Running chains and Table 1 cells on a Dask distributed cluster.

One path for every command that takes ``--scheduler ADDR`` (``chefs prior mcmc``,
``chefs resume``, ``chefs fit``, ``chefs bench table1``, ``chefs cnn sample``):
:func:`connect` reaches the scheduler and checks its workers before anything is
written, and :class:`ClusterExecutor` is the ``concurrent.futures`` executor the
local process pools are swapped for. A task whose worker dies is run again by
Dask on another worker (``distributed.scheduler.allowed-failures`` times); chains
resume from their last checkpoint, so the numbers are those of an uninterrupted
run.

Files: a chain writes its checkpoints and samples into the run directory, so
``chefs fit``, ``prior mcmc`` and ``resume`` need the run directory on a file
system the workers share (:func:`check_shared_dir` says so before the run is
created). Table 1 cells get their data as arrays and send their rows back, so
its workers need neither the data directory nor ``--out``.
"""

from __future__ import annotations

import concurrent.futures as cf
import os
import tempfile
import warnings
from pathlib import Path

#: seconds to wait for the first worker of a scheduler that has none yet
WORKER_WAIT = 60.0


def _one_line(err) -> str:
    return " ".join(str(err).split())


def connect(scheduler: str):
    """A ``distributed.Client`` for the scheduler at ``scheduler`` and what its
    workers reported (``{address: facts}``, :func:`chefs._probe.worker_facts`).

    Raises ``ValueError`` (one line) when dask.distributed is missing, the
    scheduler cannot be reached, no worker joins within :data:`WORKER_WAIT`
    seconds, or the scheduler or a worker cannot import chefs or runs another
    version of it (the scheduler unpickles the tasks, the workers run them).
    """
    if not isinstance(scheduler, str) or not scheduler.strip():
        raise ValueError(f"--scheduler takes a Dask scheduler address such as tcp://10.0.0.5:8786, got {scheduler!r}")
    try:
        from distributed import Client
    except ImportError:
        raise ValueError("--scheduler needs dask.distributed: pip install 'indian-chefs[cluster]'") from None
    try:
        client = Client(scheduler)
    except (OSError, ValueError) as err:  # unreachable address, refused connection, timeout, bad address
        raise ValueError(f"cannot reach the Dask scheduler at {scheduler!r}: {_one_line(err)}") from None
    try:
        facts = _check_workers(client, scheduler)
    except BaseException:
        client.close()
        raise
    return client, facts


def _check_workers(client, scheduler: str) -> dict:
    import cloudpickle

    from . import __version__, _probe

    try:
        client.wait_for_workers(1, timeout=WORKER_WAIT)
    except TimeoutError:
        raise ValueError(f"the Dask scheduler at {scheduler!r} has no workers (waited {WORKER_WAIT:g} s): "
                         "start some (`dask worker ADDR`) or scale the cluster up") from None
    # by value: a worker without chefs runs it and says so (by reference it could not even unpickle it)
    cloudpickle.register_pickle_by_value(_probe)
    # the scheduler unpickles the tasks (which name chefs functions): it needs chefs too
    here = client.run_on_scheduler(_probe.worker_facts)
    if here.get("chefs") != __version__:
        got = f"cannot import chefs ({_one_line(here['error'])})" if "error" in here else f"runs chefs {here['chefs']}"
        raise ValueError(f"the Dask scheduler at {scheduler!r} {got}: install indian-chefs {__version__} in the "
                         "scheduler's environment too (it unpickles the tasks)")
    facts = client.run(_probe.worker_facts)
    broken = {a: f["error"] for a, f in facts.items() if "error" in f}
    if broken:
        addr, err = next(iter(broken.items()))
        raise ValueError(f"{len(broken)} of {len(facts)} Dask worker(s) cannot import chefs (first: {addr}: "
                         f"{_one_line(err)}); install indian-chefs {__version__} in the workers' environment")
    other = {a: f["chefs"] for a, f in facts.items() if f["chefs"] != __version__}
    if other:
        addr, v = next(iter(other.items()))
        raise ValueError(f"{len(other)} of {len(facts)} Dask worker(s) run chefs {v} (first: {addr}), this client "
                         f"{__version__}: install the same version on both sides")
    import numpy

    numpys = sorted({f["numpy"] for f in facts.values()} - {numpy.__version__})
    if numpys:
        warnings.warn(f"Dask workers run numpy {', '.join(numpys)} and this client {numpy.__version__}: the "
                      "numbers may differ from a run on local processes", UserWarning, stacklevel=3)
    return facts


def numba_threads_by_host(client, facts: dict) -> dict:
    """numba threads per task on each host: its cores shared equally among the Dask
    threads of all workers there (as local process pools share them), at least one."""
    nthreads = client.nthreads()
    threads, cores = {}, {}
    for addr, f in facts.items():
        threads[f["host"]] = threads.get(f["host"], 0) + int(nthreads.get(addr, 1))
        cores[f["host"]] = max(cores.get(f["host"], 0), int(f["cores"]))
    return {h: max(1, cores[h] // max(1, threads[h])) for h in threads}


#: glibc's ``mallopt`` parameters (malloc.h) and the values :func:`undo_malloc_trim` sets: glibc's own
#: upper bounds for its dynamic thresholds on 64-bit (mmap 32 MiB; trim twice that, as glibc keeps them)
M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3
MMAP_THRESHOLD, TRIM_THRESHOLD = 32 * 1024 * 1024, 64 * 1024 * 1024
_malloc_undone = False


def undo_malloc_trim() -> bool:
    """Give a Dask worker process back glibc's heap behaviour; True when it acted.

    Dask's nanny starts workers with ``MALLOC_TRIM_THRESHOLD_=65536``
    (``distributed.nanny.pre-spawn-environ``) so that freed memory returns to the
    OS. Setting a threshold in the environment also turns off glibc's dynamic
    mmap threshold, so that every NumPy temporary above 128 KiB is a fresh
    ``mmap`` whose pages fault in again: the belief network's sweeps then cost
    about 30 % more CPU than in a local process (docs/commands.md, "On a
    cluster"). When that variable is set (Linux with glibc only), the mmap and
    trim thresholds are set once per process to glibc's upper bounds, so that
    large temporaries reuse heap memory; a worker then holds at most about
    64 MiB more freed memory than before. A worker started with
    ``CHEFS_KEEP_MALLOC_TRIM=1`` keeps its malloc settings as they are."""
    global _malloc_undone
    if _malloc_undone or "MALLOC_TRIM_THRESHOLD_" not in os.environ or os.environ.get("CHEFS_KEEP_MALLOC_TRIM"):
        return False
    import ctypes
    import ctypes.util

    name = ctypes.util.find_library("c")
    try:
        libc = ctypes.CDLL(name or "libc.so.6")
        mallopt = libc.mallopt
    except (OSError, AttributeError):  # not glibc
        return False
    _malloc_undone = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) & bool(mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))
    return _malloc_undone


def run_task(threads_by_host: dict, fn, *args, **kwargs):
    """On a worker: glibc's heap behaviour back (:func:`undo_malloc_trim`), numba's
    threads set to this host's share, then ``fn(*args, **kwargs)``."""
    import socket

    from ._threads import available_cores, limit_numba_threads

    num = threads_by_host.get(socket.gethostname())
    if num is None:  # a worker that joined after the client connected
        from distributed import get_worker

        num = available_cores() // max(1, get_worker().state.nthreads)
    undo_malloc_trim()
    limit_numba_threads(num)
    return fn(*args, **kwargs)


class LostTaskError(ConnectionError):
    """A task whose workers kept dying (Dask gave up on it): one line for the CLI."""


class ClusterExecutor(cf.Executor):
    """The client's ``concurrent.futures`` executor, each task run through
    :func:`run_task`. ``shutdown(wait=False)`` cancels the tasks not yet finished;
    the client stays open (its owner closes it). A task on which Dask gives up
    (``distributed.scheduler.allowed-failures`` workers died running it) fails
    with :class:`LostTaskError`."""

    def __init__(self, client, facts: dict):
        self.client = client
        self.threads = numba_threads_by_host(client, facts)
        self._pool = client.get_executor()

    def submit(self, fn, /, *args, **kwargs):
        """Submit ``fn(*args, **kwargs)`` through :func:`run_task`; returns a
        :class:`concurrent.futures.Future` that the task's Dask future resolves."""
        inner = self._pool.submit(run_task, self.threads, fn, *args, **kwargs)
        outer = cf.Future()
        inner.add_done_callback(lambda f: _relay(f, outer))
        return outer

    def shutdown(self, wait=True, *, cancel_futures=False):
        self._pool.shutdown(wait=wait)


def _relay(inner: cf.Future, outer: cf.Future) -> None:
    """``inner``'s outcome to ``outer``, Dask's KilledWorker as :class:`LostTaskError`."""
    from distributed import KilledWorker

    if inner.cancelled():
        outer.cancel()
        outer.set_running_or_notify_cancel()  # wakes concurrent.futures.wait / as_completed
        return
    err = inner.exception()
    if err is None:
        outer.set_result(inner.result())
    elif isinstance(err, KilledWorker):
        outer.set_exception(LostTaskError(
            "Dask gave up on a task after its workers died running it (distributed.scheduler.allowed-failures); "
            "what finished is kept (`chefs resume RUN`, `chefs bench table1 --resume`): look at the workers' "
            "logs and memory"))
    else:
        outer.set_exception(err)


def blind_workers(client, path) -> dict:
    """``{address: host}`` of the workers that cannot see the directory ``path``
    (absolute here; it need not exist yet): a temporary file made in it, or in its
    nearest existing ancestor, must be visible to each worker under the same name."""
    from . import _probe

    where = Path(path).absolute()
    while not where.is_dir():
        where = where.parent
    fd, token = tempfile.mkstemp(prefix=".chefs-shared-", dir=where)
    os.close(fd)
    try:
        facts = client.run(_probe.worker_facts, [token])
    finally:
        os.unlink(token)
    return {a: f["host"] for a, f in facts.items() if not f["sees"][0]}


def check_shared_dir(client, path, what: str) -> None:
    """``ValueError`` unless every worker sees the directory ``path``; ``what`` says
    why it must (e.g. "chefs fit --scheduler writes each chain's checkpoints there")."""
    blind = blind_workers(client, path)
    if blind:
        addr, host = next(iter(blind.items()))
        n = len(client.nthreads())
        raise ValueError(f"{len(blind)} of {n} Dask worker(s) cannot see {Path(path).absolute()} (first: {addr} on "
                         f"{host}); {what}: give a directory on a file system the workers share")
