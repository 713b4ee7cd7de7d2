"""Evaluation metrics: the Hellinger distance of Table 1 of 001/002."""

from .hellinger import (
    DEFAULT_NUM_MC,
    MIN_NUM_MC,
    HellingerEstimate,
    gaussian_bhattacharyya,
    gaussian_hellinger,
    hellinger,
    hellinger_estimate,
    scott_factor,
)

__all__ = [
    "DEFAULT_NUM_MC",
    "MIN_NUM_MC",
    "HellingerEstimate",
    "gaussian_bhattacharyya",
    "gaussian_hellinger",
    "hellinger",
    "hellinger_estimate",
    "scott_factor",
]
