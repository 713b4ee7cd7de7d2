"""Sub-commands of the ``chefs`` CLI. Every module listed in :data:`MODULES`
defines ``register(subparsers)``; :func:`chefs.cli.build_parser` calls them in
this order, which is also the order of ``chefs --help``."""

#: ``runs`` (``prior mcmc``) and ``cibp_figures`` (``prior cibp-figures``) add actions
#: under the ``prior`` command, so they come after ``prior``
MODULES = ("bench", "cnn", "data", "discover", "fit", "outtree", "prior", "runs", "cibp_figures")
