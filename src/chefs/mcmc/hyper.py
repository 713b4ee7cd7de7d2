"""Hyperparameter updates for alpha, gamma, phi (002 section 4.1 priors).

Priors (shape, rate), configurable::

    gamma   ~ Gamma(0.5, 0.5)
    1/alpha ~ Gamma(0.5, 0.5)
    phi     ~ Gamma(0.5, 0.5)

gamma is updated by Gibbs: eq. 9 depends on gamma only through
gamma^H exp(-alpha gamma S), so gamma | G ~ Gamma(a + H, b + alpha S).
alpha and phi are updated by slice sampling (Neal 2003, stepping out) on the
log scale, the target including the Jacobian of the log transform.
"""

from __future__ import annotations

import math
from dataclasses import asdict, dataclass

import numpy as np

HYPER_NAMES = ("alpha", "gamma", "phi")


@dataclass(frozen=True)
class HyperPriors:
    """Shape and rate of the Gamma priors on gamma, 1/alpha and phi.

    Defaults: the Gamma(0.5, 0.5) priors of 002 section 4.1.
    """

    gamma_shape: float = 0.5
    gamma_rate: float = 0.5
    inv_alpha_shape: float = 0.5
    inv_alpha_rate: float = 0.5
    phi_shape: float = 0.5
    phi_rate: float = 0.5

    def __post_init__(self):
        for k, v in asdict(self).items():
            if not (isinstance(v, (int, float)) and math.isfinite(v) and v > 0):
                raise ValueError(f"hyperprior {k} must be a positive number, got {v!r}")

    def log_density_log_scale(self, name: str, x: float) -> float:
        """log prior density of log(x) (prior of x times the Jacobian x;
        docs/derivations.md section 2.6)."""
        if name == "gamma":
            return self.gamma_shape * math.log(x) - self.gamma_rate * x
        if name == "phi":
            return self.phi_shape * math.log(x) - self.phi_rate * x
        if name == "alpha":  # 1/alpha ~ Gamma(a, b): p(alpha) = b^a/G(a) alpha^(-a-1) exp(-b/alpha)
            return -self.inv_alpha_shape * math.log(x) - self.inv_alpha_rate / x
        raise ValueError(f"unknown hyperparameter {name!r}")

    def sample(self, rng: np.random.Generator) -> dict:
        """One draw of (alpha, gamma, phi) from the priors."""
        return {
            "alpha": 1.0 / rng.gamma(self.inv_alpha_shape, 1.0 / self.inv_alpha_rate),
            "gamma": rng.gamma(self.gamma_shape, 1.0 / self.gamma_rate),
            "phi": rng.gamma(self.phi_shape, 1.0 / self.phi_rate),
        }


def slice_sample_log(rng: np.random.Generator, logf, x0: float, width: float = 1.0, max_steps: int = 50) -> float:
    """One slice-sampling update of y = log(x) for the log-density ``logf(y)``
    (Neal 2003, stepping out; docs/derivations.md section 2.6)."""
    y0 = math.log(x0)
    f0 = logf(y0)
    level = f0 + math.log(rng.random())
    left = y0 - width * rng.random()
    right = left + width
    j = int(max_steps * rng.random())
    k = max_steps - 1 - j
    while j > 0 and logf(left) > level:
        left -= width
        j -= 1
    while k > 0 and logf(right) > level:
        right += width
        k -= 1
    while True:
        y = left + (right - left) * rng.random()
        if logf(y) > level:
            return math.exp(y)
        if y < y0:
            left = y
        else:
            right = y


def update_hyper(rng: np.random.Generator, state, hyper: dict, priors: HyperPriors, names) -> dict:
    """Update the hyperparameters listed in ``names`` given the graph state.

    gamma by Gibbs from ``Gamma(a + H, b + alpha S)``, alpha and phi by slice
    sampling on the log scale, with eq. 9 of 002 as the likelihood
    (docs/derivations.md section 2.6).
    """
    hyper = dict(hyper)
    if "gamma" in names:
        S = state.interval_sum(hyper["alpha"])
        H = state.num_hidden()
        hyper["gamma"] = rng.gamma(priors.gamma_shape + H, 1.0 / (priors.gamma_rate + hyper["alpha"] * S))
    for name in ("alpha", "phi"):
        if name in names:
            def logf(y, name=name):
                x = math.exp(y)
                if not (1e-300 < x < 1e300):
                    return -math.inf
                h = dict(hyper)
                h[name] = x
                return state.log_prior(h["alpha"], h["gamma"], h["phi"]) + priors.log_density_log_scale(name, x)

            hyper[name] = slice_sample_log(rng, logf, hyper[name])
    return hyper
