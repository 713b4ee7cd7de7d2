"""An extended CIBP (ECIBP): layered networks whose hidden units may also
connect to non-adjacent lower layers; observed units only in the bottom layer.

002 (introduction, section 4.1) describes the ECIBP of Dallaire et al. (2014)
only by these two properties; that paper is not available here, so this module
implements the following definition (``docs/derivations-cibp.md`` §4):

Layer 0 holds the D observed units. For l = 1, 2, ...: restaurant l has as
customers first the K_{l-1} units of layer l - 1 (the *creating* customers),
then the units of layers 0..l-2 (the *skip* customers), N_l = K_0 + ... + K_{l-1}
in all. Customer j takes each existing dish k with probability
eta_k / (j + beta_l - 1); only creating customers also order
Poisson(alpha_l beta_l / (j + beta_l - 1)) new dishes. The dishes are the units
of layer l; the cascade stops at the first empty layer.

Consequences: the layer widths follow exactly the CIBP's Markov chain (eq. 1 of
003), so the ECIBP terminates whenever the CIBP does; edges between adjacent
layers have the CIBP's law; a unit's layer is its height (longest path down to
layer 0). The density has the CIBP's form with N_l (all lower units) in place
of K_{l-1} in the Beta functions.
"""

from __future__ import annotations

from ._cibp_common import BirthDeathToken, LayeredPrior

__all__ = ["ECIBP", "BirthDeathToken"]


class ECIBP(LayeredPrior):
    """The extended CIBP defined above, with per-layer ``alpha``, ``beta`` and
    top-hat hyperpriors (same parameters and methods as
    :class:`~chefs.priors.cibp.CIBP`); the baseline of Table 1 of 002, derived in
    docs/derivations-cibp.md section 4."""

    skip = True
    name = "ECIBP"
