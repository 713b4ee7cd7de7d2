"""What a Dask worker has, asked before any work is sent to it.

:func:`chefs.cluster.connect` sends :func:`worker_facts` to the workers *by
value* (cloudpickle), so that it runs on a worker that cannot import ``chefs``
and says so, instead of failing to unpickle. Keep this module free of imports
from ``chefs`` at module level.
"""

from __future__ import annotations


def worker_facts(paths=()) -> dict:
    """Host name, usable cores, the versions that decide the numbers, and whether
    each of ``paths`` exists on this worker. ``error`` instead of ``chefs`` when the
    package cannot be imported here."""
    import os
    import socket

    try:
        cores = len(os.sched_getaffinity(0))
    except AttributeError:  # not on Linux
        cores = os.cpu_count() or 1
    facts = {"host": socket.gethostname(), "pid": os.getpid(), "cores": cores,
             "sees": [os.path.exists(p) for p in paths]}
    try:
        import chefs
        import numpy
    except ImportError as err:
        facts["error"] = f"{type(err).__name__}: {err}"
    else:
        facts["chefs"] = chefs.__version__
        facts["numpy"] = numpy.__version__
    return facts
