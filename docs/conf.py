"""Sphinx configuration of the chefs documentation site.

Build (from the repository root): ``python -m sphinx -W --keep-going -b html docs docs/_build/html``.
Tutorials under ``tutorials/`` are MyST-NB text notebooks executed at every build; a failing cell
fails the build (``nb_execution_raise_on_error``).
"""

from __future__ import annotations

import os
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE / "_ext"))
SRC = HERE.parent / "src"
if SRC.is_dir():  # build the docs of this checkout even when another chefs is installed
    sys.path.insert(0, str(SRC))
    # the notebooks' kernels are separate processes: they find this checkout through PYTHONPATH
    os.environ["PYTHONPATH"] = os.pathsep.join(p for p in (str(SRC), os.environ.get("PYTHONPATH", "")) if p)

import chefs  # noqa: E402

project = "chefs"
author = "chefs developers"
copyright = "chefs developers, MIT License"
version = release = chefs.__version__

extensions = [
    "myst_nb",
    "sphinx.ext.autodoc",
    "sphinx.ext.autosummary",
    "sphinx.ext.napoleon",
    "sphinx.ext.mathjax",
    "sphinx.ext.viewcode",
    "cli_help",  # docs/_ext/cli_help.py: the CLI reference, from the argparse parsers
]

exclude_patterns = ["_build", "jupyter_execute", ".jupyter_cache", "**.ipynb_checkpoints", "README.md"]
templates_path = ["_templates"]
source_suffix = {".rst": "restructuredtext", ".md": "myst-nb"}

# --- MyST: the derivation notes' maths and tables ------------------------------------------------
myst_enable_extensions = ["dollarmath", "amsmath", "colon_fence", "deflist"]
myst_heading_anchors = 3
# the notes link to source files and sibling notes by relative path: those outside docs/ are not pages
suppress_warnings = ["myst.xref_missing"] if os.environ.get("CHEFS_DOCS_LAX") else []

# --- MyST-NB: execute every tutorial at build time -------------------------------------------------
nb_execution_mode = os.environ.get("CHEFS_DOCS_EXECUTE", "force")
nb_execution_timeout = 300
nb_execution_raise_on_error = True
nb_execution_show_tb = True
nb_kernel_rgx_aliases = {".*": "python3"}
nb_merge_streams = True

# --- API reference ---------------------------------------------------------------------------------
autosummary_generate = True
autosummary_ignore_module_all = False
autodoc_default_options = {"members": True, "show-inheritance": True}
autodoc_member_order = "bysource"
autodoc_typehints = "signature"
autodoc_mock_imports: list[str] = []
napoleon_numpy_docstring = True
napoleon_google_docstring = False
napoleon_use_rtype = False
napoleon_use_ivar = True

# --- maths ----------------------------------------------------------------------------------------
# MathJax comes from its CDN (Sphinx's default). To read the site offline, point CHEFS_MATHJAX at a
# local copy, e.g. Debian's libjs-mathjax:
# CHEFS_MATHJAX='file:///usr/share/javascript/mathjax/MathJax.js?config=TeX-AMS-MML_HTMLorMML'
if os.environ.get("CHEFS_MATHJAX"):
    mathjax_path = os.environ["CHEFS_MATHJAX"]
    if "MathJax.js" in mathjax_path:  # MathJax 2: process the maths inside MyST-NB's ignored sections too
        mathjax3_config = None
        mathjax2_config = {"tex2jax": {"processClass": "tex2jax_process|mathjax_process|math|output_area"}}

# --- HTML --------------------------------------------------------------------------------------------
html_theme = "pydata_sphinx_theme"
html_title = f"chefs {release}"
html_theme_options = {
    "navigation_with_keys": False,
    "show_toc_level": 2,
    "secondary_sidebar_items": ["page-toc"],
}
html_show_sourcelink = False
html_last_updated_fmt = None


# --- parallel builds: spread the executed tutorials over the reading processes ---------------------
def _spread_notebooks(app, env, docnames):
    """With ``-j N``, Sphinx reads the sorted documents in consecutive chunks
    (``sphinx.util.parallel.make_chunks``; more chunks than processes), each chunk in the next free
    process. The tutorials, whose cells run at every build, sort together and filled the last
    chunks, so one process ran most of them after the other had finished (stop 36: 88 s of wall
    time for 133 s of cells on two cores). Reordering the list in place (what this event is for)
    puts one tutorial at the head of each chunk in turn, so that the processes run them side by
    side. Their kernels then run one numba and one BLAS thread each: N kernels with a thread per
    core each slowed each other down (the tutorials' cells took 164 s instead of 134 s)."""
    from sphinx.util.parallel import make_chunks

    notebooks = [d for d in docnames if d.startswith("tutorials/") and d != "tutorials/index"]
    if app.parallel <= 1 or len(notebooks) < 2 or not app.is_parallel_allowed("read"):
        return  # a serial read: each kernel keeps every core
    for var in ("NUMBA_NUM_THREADS", "OMP_NUM_THREADS", "OPENBLAS_NUM_THREADS", "MKL_NUM_THREADS"):
        os.environ.setdefault(var, "1")  # inherited by the kernels the reading processes start
    others = [d for d in docnames if d not in notebooks]
    chunks = [list(c) for c in make_chunks(others + notebooks, app.parallel)]
    size = len(chunks[0])
    body = [[] for _ in chunks]
    for k, d in enumerate(notebooks):
        body[k % len(chunks)].append(d)
    rest = iter(others)
    order = []
    for heads in body:
        order += heads
        order += [d for _, d in zip(range(size - len(heads)), rest)]
    order += list(rest)
    docnames[:] = order


def setup(app):
    app.connect("env-before-read-docs", _spread_notebooks)
