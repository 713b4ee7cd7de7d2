"""Priors on ordered DAGs: the ICP (and, later, the CIBP and ECIBP baselines)."""
from .icp import ICP, check_hyper, observed_orders

__all__ = ["ICP", "check_hyper", "observed_orders"]
