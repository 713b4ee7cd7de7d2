"""Likelihood models whose structure carries an ICP prior."""
from .nlgbn import NLGBN

__all__ = ["NLGBN"]
