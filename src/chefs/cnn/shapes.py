"""Tensor shapes as a function of the order value (eqs. 18-19 of 002).

A node's order value ``theta`` in [0, 1] is mapped to one of ``n_bins`` bins,
the bin fixing the number of channels and the spatial resolution of the node's
tensor. Bin 0 (``theta`` near 1, next to the input image) has the most pixels
and the fewest channels; deeper bins (smaller ``theta``) double the channels
and halve the image side.

The exact rule (documented in ``docs/derivations-cnn.md``)::

    b(theta)        = min(floor(n_bins * (1 - theta)), n_bins - 1)
    channels(theta) = base_channels * 2**b          ("product", default)
                    = 2**b + base_channels          ("printed", eq. 18 as printed)
    side(theta)     = ceil(S / 2**b)                 for each image side S

The printed eq. 18 gives ``2**0 + N0 = 5`` channels in the first bin although
the text says the first convolutional layer has four channels, so the default
reads eq. 18 as ``N0 * 2**b`` (four channels in the first layer, doubling per
bin). Eq. 19 halves the *number of pixels* per bin, which does not give integer
sides (784 / 2 = 392 is not a square); halving each side (so the pixel count
falls by four per bin, while the tensor size ``channels * pixels`` halves)
keeps integer sides and matches stride-2 downsampling, the common practice the
paper describes.

The input node X keeps the shape of the images (its channels are the image's
channels); the output node Y has no tensor (it is a softmax head, eq. 20).
This module needs numpy only.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

__all__ = ["ShapeRule"]

_CHANNEL_RULES = ("product", "printed")
MAX_CHANNELS = 4096  # largest channel count a shape rule may give


@dataclass(frozen=True)
class ShapeRule:
    """Map order values to tensor shapes (eqs. 18-19 of 002, rule above).

    Parameters
    ----------
    n_bins : int
        ``N_bins``, the number of different tensor shapes (paper: 5).
    base_channels : int
        ``N_0``, the channels of the first convolutional bin (paper: 4).
    channel_rule : {"product", "printed"}
        ``"product"``: ``N_0 * 2**b``; ``"printed"``: ``2**b + N_0`` (eq. 18
        exactly as printed).
    """

    n_bins: int = 5
    base_channels: int = 4
    channel_rule: str = "product"

    def __post_init__(self):
        for name in ("n_bins", "base_channels"):
            v = getattr(self, name)
            if isinstance(v, bool) or not isinstance(v, (int, np.integer)) or v < 1:
                raise ValueError(f"{name} must be a positive integer, got {v!r}")
            object.__setattr__(self, name, int(v))
        if self.channel_rule not in _CHANNEL_RULES:
            raise ValueError(f"channel_rule must be one of {_CHANNEL_RULES}, got {self.channel_rule!r}")
        b = self.n_bins - 1  # the deepest bin has the most channels; an edge between two such nodes holds
        top = self.base_channels * 2 ** b if self.channel_rule == "product" else 2 ** b + self.base_channels
        if top > MAX_CHANNELS:  # channels^2 x 9 weights (4,096: 150 million)
            raise ValueError(f"n_bins={self.n_bins} with base_channels={self.base_channels} gives {top} channels in "
                             f"the deepest bin, more than {MAX_CHANNELS}; use fewer bins or base channels")

    def bin(self, theta: float) -> int:
        """Bin index ``b(theta) = min(floor(n_bins (1 - theta)), n_bins - 1)`` (the exponent of
        eqs. 18-19 of 002; docs/derivations-cnn.md section 2)."""
        theta = float(theta)
        if not 0.0 <= theta <= 1.0:
            raise ValueError(f"order values must lie in [0, 1], got {theta}")
        return min(int(math.floor(self.n_bins * (1.0 - theta))), self.n_bins - 1)

    def channels(self, theta: float) -> int:
        """Number of channels ``N_c(theta)`` (eq. 18 of 002, rule above)."""
        b = self.bin(theta)
        if self.channel_rule == "product":
            return self.base_channels * 2 ** b
        return 2 ** b + self.base_channels

    def side(self, theta: float, image_hw: tuple[int, int]) -> tuple[int, int]:
        """Spatial shape ``(ceil(H / 2**b), ceil(W / 2**b))`` (eq. 19 of 002, rule above)."""
        b = self.bin(theta)
        h, w = (int(s) for s in image_hw)
        if h < 1 or w < 1:
            raise ValueError(f"image sides must be positive, got {image_hw}")
        return (-(-h // 2 ** b), -(-w // 2 ** b))

    def shape(self, theta: float, image_hw: tuple[int, int]) -> tuple[int, int, int]:
        """``(channels, height, width)`` of a hidden node's tensor (eqs. 18-19 of 002, rule above)."""
        return (self.channels(theta),) + self.side(theta, image_hw)

    def to_dict(self) -> dict:
        return {"n_bins": self.n_bins, "base_channels": self.base_channels, "channel_rule": self.channel_rule}
