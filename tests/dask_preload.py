"""Worker preload for tests/test_cluster.py (not a test module): makes a
LocalCluster's workers look like those of another machine.

``CHEFS_TEST_NO_CHEFS=1``: ``import chefs`` fails, as on workers whose
environment lacks the package. ``CHEFS_TEST_HIDE=DIR``: paths under DIR do not
exist for the worker, as a directory on the client's local disk.
"""

import os
import os.path
import sys

if os.environ.get("CHEFS_TEST_NO_CHEFS") and not any(type(f).__name__ == "_NoChefs" for f in sys.meta_path):
    class _NoChefs:
        def find_spec(self, name, path=None, target=None):
            if name == "chefs" or name.startswith("chefs."):
                raise ModuleNotFoundError(f"No module named {name!r}", name=name)
            return None

    sys.meta_path.insert(0, _NoChefs())

_hidden = os.environ.get("CHEFS_TEST_HIDE")
if _hidden and not hasattr(os.path.exists, "chefs_hidden"):  # once, though a preload may run twice

    def _exists_here(path, _exists=os.path.exists):
        return not os.fspath(path).startswith(_hidden) and _exists(path)

    _exists_here.chefs_hidden = True
    os.path.exists = _exists_here
