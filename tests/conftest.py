import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import settings

# property tests draw the same examples on every run (deterministic CI)
settings.register_profile("chefs", derandomize=True, deadline=None, database=None)
settings.load_profile("chefs")

REPO = Path(__file__).resolve().parents[1]


def load_script(relpath: str):
    """A script of the repository that is not part of the package (``benchmarks/*.py``,
    ``docs/check_links.py``), imported as a module so that tests can call its functions."""
    import importlib.util

    path = REPO / relpath
    spec = importlib.util.spec_from_file_location(path.stem, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod

if os.environ.get("PYTEST_XDIST_WORKER"):
    # pytest-xdist runs one worker per core: numba's threads would oversubscribe them
    from chefs._threads import limit_numba_threads, share_cores

    limit_numba_threads(share_cores(int(os.environ.get("PYTEST_XDIST_WORKER_COUNT", "1"))))

    # each of the first two workers compiles its share of the numba kernels (tests/_warm.py)
    from ._warm import warm

    warm(os.environ["PYTEST_XDIST_WORKER"])


class DataCoupled:
    """Mixin for a model's test functions: adds ``obs_rss``, the observed units' precision-weighted residual sum of
    squares, a function coupled to the data that the joint-draw checks with the data held need
    (docs/derivations.md 3.25)."""

    def test_functions(self, state):
        obs = np.flatnonzero(state.alive & state.obs)
        r = self.Y[obs] - self.MU[obs]
        return {**super().test_functions(state), "obs_rss": float((self.rho[obs] * (r * r).sum(1)).sum())}


@pytest.fixture
def rng():
    return np.random.default_rng(20261122)


def shared_data_dir() -> Path:
    env = os.environ.get("CHEFS_DATA")
    return Path(env) if env else REPO.parent / "shared" / "data"


def chain_rows(run_dir, chain: int = 0) -> list:
    """Every stored sample row of one chain of a run directory (resume tests compare them)."""
    from chefs.mcmc.store import SQLiteStore

    st = SQLiteStore(Path(run_dir) / f"chain-{chain}" / "samples.sqlite")
    try:
        return st.rows()
    finally:
        st.close()
