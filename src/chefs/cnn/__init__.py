"""Bayesian nonparametric convolutional architectures (section 4.2 of 002).

An ICP DAG with an input node X (``theta = 1``) and an output node Y
(``theta = 0``) defines a convolutional network (eqs. 17-20); Metropolis-
Hastings over structures with a point estimate of the evidence (eq. 21)
samples architectures. Modules:

* :mod:`~chefs.cnn.shapes` - order value -> tensor shape (eqs. 18-19)
* :mod:`~chefs.cnn.network` - reachable subgraph, parameter keys, Figure 5 statistics
* :mod:`~chefs.cnn.proposals` - pluggable structure proposals
* :mod:`~chefs.cnn.builder` - DAG -> ``torch.nn.Module`` (torch)
* :mod:`~chefs.cnn.train` - Adam training and the evidence (torch)
* :mod:`~chefs.cnn.data` - MNIST 1-2-3, 8x8 digits, NPZ files
* :mod:`~chefs.cnn.chain` - the MH kernel and parallel chains
* :mod:`~chefs.cnn.store` - run directories (JSONL + NPZ + config JSON)
* :mod:`~chefs.cnn.report` - Figure 5 statistics and plots

The numpy-only parts import eagerly; the torch parts on first use, so
``import chefs.cnn`` works without torch.
"""

from __future__ import annotations

import importlib

from .data import Dataset, load_data
from .network import architecture_stats, io_nodes, network_edges, network_key, reachable_mask
from .proposals import EdgeToggle, Mixture, NodeBirthDeath, default_proposal, removable_nodes
from .shapes import ShapeRule

_LAZY = {
    "build_network": "builder", "ICPConvNet": "builder", "init_arrays": "builder",
    "TrainConfig": "train", "Evaluator": "train", "FitResult": "train",
    "ChainConfig": "chain", "ChainState": "chain", "StepInfo": "chain", "ChainResult": "chain",
    "bare_graph": "chain", "init_state": "chain", "mh_step": "chain", "sample": "chain",
    "run_chain": "chain", "run_chains": "chain",
    "write_run": "store", "read_run": "store",
    "make_report": "report", "summarize": "report",
}

__all__ = [
    "Dataset", "load_data", "architecture_stats", "io_nodes", "network_edges", "network_key",
    "reachable_mask", "EdgeToggle", "Mixture", "NodeBirthDeath", "default_proposal",
    "removable_nodes", "ShapeRule", *_LAZY,
]


def __getattr__(name):
    mod = _LAZY.get(name)
    if mod is None:
        raise AttributeError(f"module 'chefs.cnn' has no attribute {name!r}")
    return getattr(importlib.import_module(f"{__name__}.{mod}"), name)
