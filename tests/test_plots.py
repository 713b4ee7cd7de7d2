"""chefs.plots: the matplotlib backend it picks."""

import os
import subprocess
import sys


def test_plots_keep_a_backend_the_user_chose():
    """chefs.plots switches to Agg only when nothing chose a backend: a session already
    running pyplot (a notebook's inline backend, here svg) keeps its own, so its later
    figures still show; a fresh process (the CLI) gets Agg."""
    user = ("import matplotlib.pyplot as plt; plt.switch_backend('svg'); import chefs.plots as p; p._mpl(); "
            "import matplotlib; print(matplotlib.get_backend())")
    fresh = "import chefs.plots as p; p._mpl(); import matplotlib; print(matplotlib.get_backend())"
    env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}
    out = [subprocess.run([sys.executable, "-c", c], capture_output=True, text=True, env=env, check=True).stdout.strip()
           for c in (user, fresh)]
    assert [b.lower() for b in out] == ["svg", "agg"], out
