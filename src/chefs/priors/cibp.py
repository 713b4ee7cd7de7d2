"""The cascading Indian buffet process (CIBP) of Adams, Wallach and Ghahramani
(003, section 3.2) as a prior on layered networks (``chefs.DAG``).

Layer 0 holds the D observed units. For l = 1, 2, ...: the K_{l-1} units of
layer l - 1 are the customers of a two-parameter IBP(alpha_l, beta_l) (003
section 3.1: customer j takes dish k with probability eta_k / (j + beta - 1)
and Poisson(alpha beta / (j + beta - 1)) new dishes); its dishes are the units
of layer l, and an edge k -> i means customer i took dish k. The cascade stops
at the first empty layer (with probability one, 003 section 3.2).

Graph form: layer l at theta = 1 - 2^-l (observed layer at 0), so edges go
strictly down and units of one layer never connect. Densities, moves and their
Hastings ratios: ``docs/derivations-cibp.md``.
"""

from __future__ import annotations

from ._cibp_common import BirthDeathToken, LayeredPrior, automorphisms, expected_next_width, layer_theta, theta_layer

__all__ = ["CIBP", "BirthDeathToken", "automorphisms", "expected_next_width", "layer_theta", "theta_layer"]


class CIBP(LayeredPrior):
    """The CIBP prior (003) with per-layer ``alpha``, ``beta`` and top-hat hyperpriors.

    Parameters
    ----------
    alpha, beta : float or sequence
        IBP mass and concentration of each layer's restaurant (alpha^(m),
        beta^(m) of 003 section 3.2); a sequence gives layers 1, 2, ..., the
        last value repeating deeper.
    alpha_bounds, beta_bounds : (low, high)
        Top-hat priors of the per-layer hyperparameters (003 section 3.2).
    max_layers : int
        Depth limit (see :class:`~chefs.priors._cibp_common.LayeredPrior`).

    Notes
    -----
    Methods: :meth:`sample` (forward draw), :meth:`log_prob` (exact
    probability of an unlabelled network, eq. (2.3) of the derivations),
    :meth:`log_prob_labelled`, and the prior-move API used by the MCMC
    (:meth:`edge_candidates`, :meth:`edge_prior_prob`,
    :meth:`propose_birth_death`, :meth:`undo`, :meth:`log_prob_state`,
    :meth:`update_hyper`, :meth:`initial_state`).
    """

    skip = False
    name = "CIBP"
