"""chefs: Bayesian nonparametric structure learning of DAGs with hidden units,
built on the Indian Chefs Process (Dallaire et al.)."""

from .graph import DAG, read_jsonl, write_jsonl
from .priors.icp import ICP

__version__ = "0.1.0"
__all__ = ["DAG", "ICP", "CIBP", "ECIBP", "BeliefNetwork", "CausalDiscovery", "OutTree", "read_jsonl", "write_jsonl", "__version__"]


def __getattr__(name):  # lazy: keep `import chefs` light
    if name == "BeliefNetwork":
        from .density import BeliefNetwork

        return BeliefNetwork
    if name in ("CIBP", "ECIBP"):
        from . import priors

        return getattr(priors, name)
    if name == "CausalDiscovery":
        from .causal import CausalDiscovery

        return CausalDiscovery
    if name == "OutTree":
        from .outtree import OutTree

        return OutTree
    raise AttributeError(f"module 'chefs' has no attribute {name!r}")
