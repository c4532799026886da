"""Astec-style frugal encoder: a TF-IDF weighted bag of word/bigram embeddings and a residual layer.

``z = h + R(dropout(h))`` with ``h = GELU(sum_t tfidf_t * E_t)`` and ``R`` a spectrally
normalised linear layer followed by GELU (DeepXML/Astec). The embeddings are trained with sparse
gradients, from a random start, or (``pretrained_words``) from all-MiniLM-L6-v2's word pieces.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.parametrizations import spectral_norm

from .network import FeatureBatch

INIT_STD = 0.1  # the feature embeddings' random start


class BagOfEmbeddings(nn.Module):
    def __init__(self, n_features: int, dim: int = 256, dropout: float = 0.2):
        super().__init__()
        self.embed = nn.EmbeddingBag(n_features, dim, mode="sum", sparse=True)
        nn.init.normal_(self.embed.weight, std=INIT_STD)
        self.residual = spectral_norm(nn.Linear(dim, dim))
        self.dropout = nn.Dropout(dropout)

    @torch.no_grad()
    def init_pretrained(self, vectors: np.ndarray, seed: int) -> None:
        """Start the first ``len(vectors)`` feature embeddings from ``vectors`` (Astec starts from
        pre-trained word vectors), taken to this table's width by a seeded random orthonormal
        projection and rescaled to the random start's spread, so that the residual layer and the
        classifiers see the scale they would; features past them keep their random start."""
        V = torch.from_numpy(np.asarray(vectors, dtype=np.float32))
        dim = self.embed.weight.shape[1]
        if V.shape[1] != dim:  # a random rotation, then the first dim coordinates (zeros past the vectors' own)
            Q, _ = torch.linalg.qr(torch.randn(V.shape[1], V.shape[1], generator=torch.Generator().manual_seed(seed)))
            V = F.pad(V @ Q, (0, max(dim - V.shape[1], 0)))[:, :dim]
        std = V.std()
        if std > 0:
            self.embed.weight[: len(V)] = V * (INIT_STD / std)

    def forward(self, batch: FeatureBatch):
        h = F.gelu(self.embed(batch.indices, batch.offsets, per_sample_weights=batch.weights))
        return h + F.gelu(self.residual(self.dropout(h)))
