"""What every neural model shares: an encoder, a meta-classifier over label clusters and a
one-vs-all label classifier, both as sparse embedding tables (trained with SparseAdam)."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn
from torch.nn import functional as F

PAIR_CHUNK = 1024  # pairs scored at once on the CPU: two chunk x dim blocks stay in a core's cache


@dataclass
class FeatureBatch:
    """Rows of a TF-IDF CSR matrix in EmbeddingBag form."""

    indices: torch.Tensor
    offsets: torch.Tensor
    weights: torch.Tensor

    @staticmethod
    def of_rows(
        X: sp.csr_matrix | np.ndarray, rows: np.ndarray | slice, device: torch.device | None = None
    ) -> FeatureBatch | torch.Tensor:
        """The model input for some rows, on ``device`` (the CPU when None): EmbeddingBag form for
        sparse features, a tensor for dense ones."""
        if sp.issparse(X):
            batch = FeatureBatch.from_csr(X[rows])
            return batch if device is None else batch.to(device)
        if np.issubdtype(X.dtype, np.integer):  # token ids
            out = torch.from_numpy(np.ascontiguousarray(X[rows], dtype=np.int64))
        else:
            out = torch.from_numpy(np.ascontiguousarray(X[rows], dtype=np.float32))
        return out if device is None else out.to(device)

    def to(self, device) -> FeatureBatch:
        return FeatureBatch(self.indices.to(device), self.offsets.to(device), self.weights.to(device))

    @classmethod
    def from_csr(cls, X: sp.csr_matrix) -> FeatureBatch:
        X = sp.csr_matrix(X)
        return cls(
            torch.from_numpy(X.indices.astype(np.int64)),
            torch.from_numpy(X.indptr[:-1].astype(np.int64)),
            torch.from_numpy(X.data.astype(np.float32)),
        )


class XMCNetwork(nn.Module):
    all_clusters: torch.Tensor  # buffers
    label_prior: torch.Tensor
    meta_prior: torch.Tensor
    """Encoder + meta-classifier (clusters) + extreme classifier (labels).

    ``candidate_scores(z, ids)`` scores only each point's own candidate labels, so training and
    prediction cost grows with the shortlist, not with L.
    """

    def __init__(self, encoder: nn.Module, dim: int, n_labels: int, n_clusters: int, init_bias: float = -4.0):
        super().__init__()
        self.encoder = encoder
        self.dim = dim
        self.init_bias = init_bias
        self.meta = nn.Embedding(n_clusters, dim, sparse=True)
        self.meta_bias = nn.Embedding(n_clusters, 1, sparse=True)
        self.labels = nn.Embedding(n_labels, dim, sparse=True)
        self.label_bias = nn.Embedding(n_labels, 1, sparse=True)
        for table in (self.meta, self.labels):
            nn.init.normal_(table.weight, std=dim**-0.5)
        for bias in (self.meta_bias, self.label_bias):
            nn.init.constant_(bias.weight, init_bias)  # labels are rare: start from a low prior
        self.register_buffer("all_clusters", torch.arange(n_clusters), persistent=False)
        # fixed starting points of the classifiers (label-text vectors); the tables then hold corrections
        self.register_buffer("label_prior", torch.zeros(0))
        self.register_buffer("meta_prior", torch.zeros(0))

    @property
    def device(self) -> torch.device:
        """Where the network's weights are (the device it trains and predicts on)."""
        return self.labels.weight.device

    def encode(self, batch: FeatureBatch | torch.Tensor) -> torch.Tensor:
        return self.encoder(batch)

    @torch.no_grad()
    def init_from_label_vectors(self, label_vectors: np.ndarray, assign: np.ndarray, scale: float) -> None:
        """Classifiers become ``w_l = scale * v_l + eta_l`` (cluster: its centroid + eta), eta starting at 0.

        ``v_l`` is label l's text vector (the self-proximity postulate, w_l ~ Phi(z_l)); training
        moves only the corrections ``eta``, which :meth:`correction_penalty` keeps small.
        """
        V = torch.from_numpy(np.ascontiguousarray(label_vectors, dtype=np.float32)).to(self.device)
        centroids = torch.zeros(self.meta.num_embeddings, V.shape[1], device=self.device)
        centroids.index_add_(0, torch.from_numpy(assign).to(self.device), V)
        self.label_prior = scale * V
        self.meta_prior = scale * torch.nn.functional.normalize(centroids, dim=1)
        self.labels.weight.zero_()
        self.meta.weight.zero_()

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """As nn.Module's, but the label-text priors take the saved shapes (they start empty)."""
        for name in ("label_prior", "meta_prior"):
            if name in state_dict:
                setattr(self, name, torch.empty_like(state_dict[name], device=self.device))
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _merged_tables(self) -> tuple[torch.Tensor, torch.Tensor]:
        """Label and cluster weights with the label-text priors added, for inference: built once
        and kept until a parameter changes (their version counters), so a single query gathers
        from one table instead of adding two. The price is one more copy of the tables in memory
        while predicting (only models with priors, the dual-encoder, have them)."""
        tensors = (self.labels.weight, self.meta.weight, self.label_prior, self.meta_prior)
        key = tuple((t.data_ptr(), t._version) for t in tensors)
        if getattr(self, "_merged_key", None) != key:
            with torch.no_grad():
                self._merged = (self.labels.weight + self.label_prior, self.meta.weight + self.meta_prior)
            self._merged_key = key
        return self._merged

    def _label_weights(self, ids: torch.Tensor) -> torch.Tensor:
        if not self.label_prior.numel():
            return self.labels(ids)
        if not self.training and not torch.is_grad_enabled():
            # index_select, not W[ids]: torch's advanced indexing is the slow path for a single query
            return torch.index_select(self._merged_tables()[0], 0, ids)
        return self.labels(ids) + torch.index_select(self.label_prior, 0, ids)

    def correction_penalty(self, label_ids: torch.Tensor) -> torch.Tensor:
        """Mean squared norm of the corrections of the given labels and of all clusters (0 without priors)."""
        if not self.label_prior.numel():
            return torch.zeros((), device=self.device)
        uniq = torch.unique(label_ids.clamp(min=0))
        return self.labels(uniq).pow(2).sum(1).mean() + self.meta(self.all_clusters).pow(2).sum(1).mean()

    def meta_scores(self, z: torch.Tensor) -> torch.Tensor:
        """``B x C`` logits of every cluster (looked up, so that their gradient stays sparse)."""
        ids = self.all_clusters
        if self.meta_prior.numel() and not self.training and not torch.is_grad_enabled():
            W = self._merged_tables()[1]
        else:
            W = self.meta(ids) + self.meta_prior if self.meta_prior.numel() else self.meta(ids)
        return z @ W.T + self.meta_bias(ids).T

    def candidate_scores(self, z: torch.Tensor, candidates: torch.Tensor) -> torch.Tensor:
        """``B x K`` logits where row i scores its own ``candidates[i]`` (ids >= 0)."""
        # score the batch against its distinct candidates once (B x U), then pick each row's own
        uniq, inverse = torch.unique(candidates.clamp(min=0), return_inverse=True)
        S = z @ self._label_weights(uniq).T + self.label_bias(uniq).T
        return torch.gather(S, 1, inverse)

    def pair_scores(self, z: torch.Tensor, rows: torch.Tensor, label_ids: torch.Tensor) -> torch.Tensor:
        """Logits of flat (point, label) pairs: ``z[rows[i]] . w[label_ids[i]] + b[label_ids[i]]``.

        Cost follows the number of pairs, so a point with hundreds of soft targets does not widen
        everybody else's shortlist.
        """
        uniq, inverse = torch.unique(label_ids, return_inverse=True)
        W = self._label_weights(uniq)
        b = self.label_bias(uniq).squeeze(-1)
        if z.device.type == "cpu":
            return PairDots.apply(z, W, rows, inverse) + torch.index_select(b, 0, inverse)
        # index_select, not z[rows]: advanced indexing's backward adds repeated rows in a thread-dependent order
        pick = torch.index_select
        return (pick(z, 0, rows) * pick(W, 0, inverse)).sum(1) + pick(b, 0, inverse)

    def sparse_parameters(self) -> list[nn.Parameter]:
        return [
            p
            for m in self.modules()
            if isinstance(m, (nn.Embedding, nn.EmbeddingBag)) and m.sparse
            for p in m.parameters(recurse=False)
        ]

    def dense_parameters(self) -> list[nn.Parameter]:
        sparse = {id(p) for p in self.sparse_parameters()}
        return [p for p in self.parameters() if id(p) not in sparse]


def grouped_sum(
    source: torch.Tensor, picks: torch.Tensor, groups: torch.Tensor, weights: torch.Tensor, n_groups: int
) -> torch.Tensor:
    """``out[g] = sum of weights[e] * source[picks[e]]`` over the entries ``e`` of group ``g``
    (``n_groups x dim``; a group without entries is 0), by ``embedding_bag``: the entries are read
    group by group, in a fixed order, without an entries x dim tensor."""
    order = torch.argsort(groups, stable=True)
    counts = torch.bincount(groups, minlength=n_groups)
    offsets = torch.cumsum(counts, 0) - counts
    picked, weighted = torch.index_select(picks, 0, order), torch.index_select(weights, 0, order)
    return F.embedding_bag(picked, source, offsets, mode="sum", per_sample_weights=weighted)


class PairDots(torch.autograd.Function):
    """``(z[rows] * W[cols]).sum(1)`` computed :data:`PAIR_CHUNK` pairs at a time, its backward
    by :func:`grouped_sum`: autograd's own writes and reads two pairs x dim tensors each way,
    which on the CPU costs more than the arithmetic (docs/decisions.md, "Neural training on the CPU")."""

    @staticmethod
    def forward(ctx, z: torch.Tensor, W: torch.Tensor, rows: torch.Tensor, cols: torch.Tensor) -> torch.Tensor:
        dtype = torch.promote_types(z.dtype, W.dtype)
        ctx.dtypes = (z.dtype, W.dtype)
        z, W = z.to(dtype), W.to(dtype)
        ctx.save_for_backward(z, W, rows, cols)
        out = torch.empty(rows.numel(), dtype=dtype, device=z.device)
        for start in range(0, rows.numel(), PAIR_CHUNK):
            part = slice(start, start + PAIR_CHUNK)
            out[part] = (torch.index_select(z, 0, rows[part]) * torch.index_select(W, 0, cols[part])).sum(1)
        return out

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        z, W, rows, cols = ctx.saved_tensors
        grad = grad.to(z.dtype)
        z_dtype, W_dtype = ctx.dtypes
        grad_z = grouped_sum(W, cols, rows, grad, z.shape[0]).to(z_dtype) if ctx.needs_input_grad[0] else None
        grad_W = grouped_sum(z, rows, cols, grad, W.shape[0]).to(W_dtype) if ctx.needs_input_grad[1] else None
        return grad_z, grad_W, None, None
