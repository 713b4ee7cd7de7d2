"""Out-tree (tdid) nonparametric density estimation with variational Bayes.

Paper 004 (Jebara, "Out-Tree Dependent Nonparametric Bayesian Inference").
Derivations and departures from the printed paper: ``docs/derivations-outtree.md``.
"""

from .estimator import OutTree, validate_data
from .gaussian import MNIW, NIW
from .matrix_tree import (
    brute_force,
    enumerate_out_trees,
    log_partition,
    log_partition_all_roots,
    root_entropy,
    root_marginals,
    root_mixture,
)
from .predictive import Predictive
from .vb import VBInfo, VBState, elbo_terms, init_state, run_vb, vb_step

__all__ = [
    "OutTree", "validate_data", "MNIW", "NIW", "Predictive",
    "brute_force", "enumerate_out_trees", "log_partition", "log_partition_all_roots",
    "root_entropy", "root_marginals", "root_mixture",
    "VBInfo", "VBState", "elbo_terms", "init_state", "run_vb", "vb_step",
]
