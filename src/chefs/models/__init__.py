"""Likelihood models whose structure carries an ICP prior.

Importing this package registers each model's builder with the chain driver
(:func:`chefs.mcmc.run.register_model`), which builds a chain's model from the
name in its run directory's spec without importing this layer itself."""
from ..mcmc.run import register_model
from .nlgbn import NLGBN, model_from_spec

register_model("nlgbn", model_from_spec)

__all__ = ["NLGBN"]
