"""chefs: Bayesian nonparametric structure learning of DAGs with hidden units,
built on the Indian Chefs Process (Dallaire et al.)."""

from .graph import DAG, read_jsonl, write_jsonl
from .priors.icp import ICP

__version__ = "0.1.0"
__all__ = ["DAG", "ICP", "read_jsonl", "write_jsonl", "__version__"]
