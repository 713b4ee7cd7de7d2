"""Priors on ordered DAGs: the ICP and the CIBP / ECIBP baselines."""
from .cibp import CIBP
from .ecibp import ECIBP
from .icp import ICP, check_hyper, observed_orders

__all__ = ["ICP", "CIBP", "ECIBP", "check_hyper", "observed_orders"]
