"""Inverted dropout with a cheaper mask sampler.

On CPU, ``torch.nn.functional.dropout`` draws one Bernoulli variate per element, which took about a
quarter of an InceptionXML training step (its activations are ``batch x 48 x 385``). Here one
64-bit random integer gives four 16-bit uniform lanes, each compared with a threshold: an element
is dropped with probability ``round(65536 p) / 65536`` (within 1/131072 of ``p``) and the kept
ones are scaled by the inverse of their exact keep probability, so the expected output equals the
input, as with ``nn.Dropout``. The draws come from PyTorch's global generator, so
``torch.manual_seed`` makes them repeatable.
"""

from __future__ import annotations

import math

import torch
from torch import nn

_LANES = 4  # 16-bit lanes in one 64-bit draw
_LEVELS = 1 << 16


def keep_mask(shape: torch.Size | tuple[int, ...], p: float) -> torch.Tensor:
    """A boolean tensor of ``shape`` whose elements are False with probability ``round(65536 p) / 65536``."""
    n = math.prod(shape)
    draws = torch.empty((n + _LANES - 1) // _LANES, dtype=torch.int64).random_(-(1 << 63), None)  # all 64 bits
    lanes = draws.view(torch.int16)[:n].view(shape)  # uniform over [-32768, 32767]
    return lanes >= -(_LEVELS // 2) + round(p * _LEVELS)


class _MaskedScale(torch.autograd.Function):
    """``x * mask * scale``, keeping only the boolean mask for the backward pass."""

    @staticmethod
    def forward(ctx, x: torch.Tensor, mask: torch.Tensor, scale: float) -> torch.Tensor:
        ctx.save_for_backward(mask)
        ctx.scale = scale
        return torch.mul(x, mask).mul_(scale)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):
        (mask,) = ctx.saved_tensors
        return torch.mul(grad, mask).mul_(ctx.scale), None, None


def fast_dropout(x: torch.Tensor, p: float, training: bool = True) -> torch.Tensor:
    """Inverted dropout of ``x`` (identity when not training or ``p == 0``)."""
    if not training or p <= 0.0:
        return x
    if x.device.type != "cpu":  # the sampler is a CPU saving; a GPU's own dropout is fast
        return torch.nn.functional.dropout(x, p, True)
    drop = round(p * _LEVELS)
    if drop >= _LEVELS:
        return torch.zeros_like(x)
    return _MaskedScale.apply(x, keep_mask(x.shape, p), _LEVELS / (_LEVELS - drop))


class FastDropout(nn.Module):
    """Drop-in for ``nn.Dropout(p)`` with :func:`keep_mask`'s sampler."""

    def __init__(self, p: float = 0.5):
        super().__init__()
        if not 0.0 <= p <= 1.0:
            raise ValueError(f"dropout probability must be in [0, 1], got {p}")
        self.p = p

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return fast_dropout(x, self.p, self.training)

    def extra_repr(self) -> str:
        return f"p={self.p}"
