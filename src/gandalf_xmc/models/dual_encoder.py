"""Dual-encoder family (the paper's NGAME + Renee setting, with a frozen encoder): frozen
all-MiniLM-L6-v2 embeddings of the input and one-vs-all label classifiers initialised from the
label texts' embeddings; only the classifiers (and the meta-classifier) are trained (why no
adapter on the embeddings: docs/decisions.md, "The neural models"). Their scores are mixed with the
nearest training points' vote in the same space (:mod:`.neighbours`), the mix chosen on validation.
"""

from __future__ import annotations

import torch
from torch import nn


class FrozenEmbeddings(nn.Module):
    """The input is already the sentence embedding: pass it through."""

    def forward(self, e: torch.Tensor) -> torch.Tensor:
        return e
