"""Astec-style frugal encoder: a TF-IDF weighted bag of word/bigram embeddings and a residual layer.

``z = h + R(dropout(h))`` with ``h = GELU(sum_t tfidf_t * E_t)`` and ``R`` a spectrally
normalised linear layer followed by GELU (DeepXML/Astec). The embeddings are trained from
scratch with sparse gradients.
"""

from __future__ import annotations

from torch import nn
from torch.nn import functional as F
from torch.nn.utils.parametrizations import spectral_norm

from .network import FeatureBatch


class BagOfEmbeddings(nn.Module):
    def __init__(self, n_features: int, dim: int = 256, dropout: float = 0.2):
        super().__init__()
        self.embed = nn.EmbeddingBag(n_features, dim, mode="sum", sparse=True)
        nn.init.normal_(self.embed.weight, std=0.1)
        self.residual = spectral_norm(nn.Linear(dim, dim))
        self.dropout = nn.Dropout(dropout)

    def forward(self, batch: FeatureBatch):
        h = F.gelu(self.embed(batch.indices, batch.offsets, per_sample_weights=batch.weights))
        return h + F.gelu(self.residual(self.dropout(h)))
