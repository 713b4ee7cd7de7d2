import os

import numba
import pytest

from chefs._threads import launch_numba_threads, limit_numba_threads


def _seen(monkeypatch):
    """Record OMP_WAIT_POLICY at the moment numba's pool would start."""
    seen = []
    real = numba.get_num_threads
    monkeypatch.setattr(numba, "get_num_threads", lambda: (seen.append(os.environ.get("OMP_WAIT_POLICY")), real())[1])
    return seen


def test_pool_starts_passive_and_the_environment_is_restored(monkeypatch):
    monkeypatch.delenv("OMP_WAIT_POLICY", raising=False)
    seen = _seen(monkeypatch)
    launch_numba_threads()
    assert seen == ["PASSIVE"] and "OMP_WAIT_POLICY" not in os.environ
    threads = numba.get_num_threads()
    seen.clear()
    try:
        limit_numba_threads(1)  # goes through the same launch
    finally:
        numba.set_num_threads(threads)
    assert seen[0] == "PASSIVE" and "OMP_WAIT_POLICY" not in os.environ


@pytest.mark.parametrize("value", ["ACTIVE", "passive"])
def test_a_users_policy_is_kept(monkeypatch, value):
    monkeypatch.setenv("OMP_WAIT_POLICY", value)
    seen = _seen(monkeypatch)
    launch_numba_threads()
    assert seen == [value] and os.environ["OMP_WAIT_POLICY"] == value
