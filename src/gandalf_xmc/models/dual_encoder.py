"""Dual-encoder family (the paper's NGAME + Renee setting, with a frozen encoder): frozen
all-MiniLM-L6-v2 embeddings of the input and one-vs-all label classifiers initialised from the
label texts' embeddings; only the classifiers (and the meta-classifier) are trained.

A trainable adapter on the frozen embeddings was tried and dropped: Adam moves every weight of a
zero-initialised 384 x 384 layer by about the learning rate per step, which swamped the
embeddings and cost validation P@1 (33 -> 17 after three epochs at lr 1e-4).
"""

from __future__ import annotations

import torch
from torch import nn


class FrozenEmbeddings(nn.Module):
    """The input is already the sentence embedding: pass it through."""

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        return e
