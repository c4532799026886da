"""What every neural model shares: an encoder, a meta-classifier over label clusters and a
one-vs-all label classifier, both as sparse embedding tables (trained with SparseAdam)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn


@dataclass
class FeatureBatch:
    """Rows of a TF-IDF CSR matrix in EmbeddingBag form."""

    indices: torch.Tensor
    offsets: torch.Tensor
    weights: torch.Tensor

    @classmethod
    def from_csr(cls, X: sp.csr_matrix) -> FeatureBatch:
        X = sp.csr_matrix(X)
        return cls(torch.from_numpy(X.indices.astype(np.int64)), torch.from_numpy(X.indptr[:-1].astype(np.int64)),
                   torch.from_numpy(X.data.astype(np.float32)))


class XMCNetwork(nn.Module):
    """Encoder + meta-classifier (clusters) + extreme classifier (labels).

    ``candidate_scores(z, ids)`` scores only each point's own candidate labels, so training and
    prediction cost grows with the shortlist, not with L.
    """

    def __init__(self, encoder: nn.Module, dim: int, n_labels: int, n_clusters: int, init_bias: float = -4.0):
        super().__init__()
        self.encoder = encoder
        self.dim = dim
        self.meta = nn.Embedding(n_clusters, dim, sparse=True)
        self.meta_bias = nn.Embedding(n_clusters, 1, sparse=True)
        self.labels = nn.Embedding(n_labels, dim, sparse=True)
        self.label_bias = nn.Embedding(n_labels, 1, sparse=True)
        for table in (self.meta, self.labels):
            nn.init.normal_(table.weight, std=dim ** -0.5)
        for bias in (self.meta_bias, self.label_bias):
            nn.init.constant_(bias.weight, init_bias)  # labels are rare: start from a low prior
        self.register_buffer("all_clusters", torch.arange(n_clusters), persistent=False)

    def encode(self, batch: FeatureBatch) -> torch.Tensor:
        return self.encoder(batch)

    def meta_scores(self, z: torch.Tensor) -> torch.Tensor:
        """``B x C`` logits of every cluster (looked up, so that their gradient stays sparse)."""
        ids = self.all_clusters
        return z @ self.meta(ids).T + self.meta_bias(ids).T

    def candidate_scores(self, z: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``B x K`` logits where row i scores its own ``candidates[i]`` (ids >= 0)."""
        # look each distinct label up once: the sparse gradient then has one row per label
        uniq, inverse = torch.unique(candidates.clamp(min=0), return_inverse=True)
        W = self.labels(uniq)[inverse]  # B x K x d
        b = self.label_bias(uniq).squeeze(-1)[inverse]
        return torch.einsum("bd,bkd->bk", z, W) + b

    def sparse_parameters(self) -> list[nn.Parameter]:
        return [p for m in self.modules() if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse
                for p in m.parameters(recurse=False)]

    def dense_parameters(self) -> list[nn.Parameter]:
        sparse = {id(p) for p in self.sparse_parameters()}
        return [p for p in self.parameters() if id(p) not in sparse]
