"""Sub-commands of the ``chefs`` CLI, discovered automatically: every public
module here defines ``register(subparsers)``."""
