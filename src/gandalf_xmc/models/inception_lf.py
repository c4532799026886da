"""InceptionXML-LF's label classifiers (the earlier Gandalf paper's Appendix A, after ECLARE).

The query side is InceptionXML's encoder (:class:`.inception.InceptionEncoder`). A label's
classifier is not a free vector alone but an attention-weighted sum of three (Appendix A.3):

- ``z1_l = E . z0_l / sqrt(dim)``: the label text's word embeddings (``E``, shared with the query encoder),
  weighted by ``z0_l``, the text's TF-IDF row (IDF of the encoder, l2-normalised), through a
  frugal encoder ``Phi_l``;
- ``z2_l = E . (G z0)_l``: the same for the graph-weighted label texts, ``G`` the label
  co-occurrence graph of the training points (P[m | l], thresholded as Gandalf's), through
  ``Phi_g``;
- ``w_l``: a free vector per label, used in the second phase only.

``Phi(z) = alpha * R(GELU(z)) + beta * z`` with ``R`` a spectrally normalised linear layer that
starts as the identity and ``alpha``, ``beta`` learned. The attention scores each component with
one linear unit and takes a softmax over the components, label by label.

Two phases (Appendix A.4, :meth:`.neural_xmc.NeuralXMC.fit`): the first trains everything
without the free vectors, so the label side learns only through ``E`` and the two encoders
(joint query-label word embeddings); the second reclusters the labels on their learnt ``z1``,
starts a fresh meta-classifier, adds ``w_l`` initialised at ``z1_l`` and trains again.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize
from torch import nn
from torch.nn import functional as F
from torch.nn.utils.parametrizations import spectral_norm

from ..graph import GraphConfig, label_graph
from ..sparse_ops import top_k_per_row
from .network import XMCNetwork, grouped_sum

GRAPH_WORDS = 64  # words kept in a graph-weighted label text (the heaviest): bounds a label's cost
_BAG_FIELDS = ("indptr", "indices", "weights")
_TABLE_CHUNK = 4096  # labels embedded at once when the whole table is built
_PAD_FROM = 1024  # padded sizes: powers of two up to here, then steps of an eighth


def label_text_bags(label_ids: np.ndarray, token_weight: np.ndarray) -> sp.csr_matrix:
    """``z0``: each label text's TF-IDF row over the word vocabulary (``L x V``), from its word ids
    (``L x seq_len``, 0 = padding) and the words' IDF, l2-normalised (a text without a known word
    keeps an empty row)."""
    n, vocab = label_ids.shape[0], token_weight.size
    rows = np.repeat(np.arange(n), label_ids.shape[1])
    flat = label_ids.ravel()
    keep = flat > 0
    counts = sp.csr_matrix((np.ones(int(keep.sum()), dtype=np.float64), (rows[keep], flat[keep])), shape=(n, vocab))
    counts.sum_duplicates()
    tfidf = counts @ sp.diags(np.asarray(token_weight, dtype=np.float64))
    return normalize(sp.csr_matrix(tfidf), norm="l2").astype(np.float32)


def graph_text_bags(
    text_bags: sp.csr_matrix, Y: sp.spmatrix, config: GraphConfig | None = None, keep: int = GRAPH_WORDS
) -> sp.csr_matrix:
    """``G z0``: each label's graph-weighted label texts (``L x V``), ``G`` the co-occurrence graph of
    the original points' targets ``Y`` (binarised; row l: P[m | l] above delta, 1 for l itself),
    rows normalised to sum 1; each row then keeps its ``keep`` heaviest words and is l2-normalised."""
    G = label_graph(sp.csr_matrix((sp.csr_matrix(Y) > 0).astype(np.float32)), config or GraphConfig())
    G = sp.diags(1.0 / np.maximum(np.asarray(G.sum(1)).ravel(), 1e-12)) @ G
    kept = top_k_per_row(G @ text_bags, keep, distinct=True)  # a product: no repeated column in a row
    return normalize(kept, norm="l2").astype(np.float32)


def padded_size(n: int) -> int:
    """The smallest size of the series 1, 2, 4, ..., 1,024, then each an eighth larger, that holds ``n``."""
    size = 1
    while size < n:
        size = size * 2 if size < _PAD_FROM else size + size // 8
    return size


class WeightedBags(torch.autograd.Function):
    """``embedding_bag``'s weighted sums of rows of ``vectors`` (constant weights), with the
    gradient of ``vectors`` summed word by word by :func:`.network.grouped_sum`, in place of
    ``embedding_bag``'s own backward on the CPU (docs/decisions.md, "Neural training on the CPU")."""

    @staticmethod
    def forward(ctx, vectors: torch.Tensor, cols: torch.Tensor, offsets: torch.Tensor, weights: torch.Tensor) -> torch.Tensor:
        ctx.save_for_backward(cols, offsets, weights)
        ctx.n_words = vectors.shape[0]
        return F.embedding_bag(cols, vectors, offsets, mode="sum", per_sample_weights=weights)

    @staticmethod
    def backward(ctx, grad: torch.Tensor):  # type: ignore[override]
        cols, offsets, weights = ctx.saved_tensors
        lengths = torch.diff(offsets, append=offsets.new_tensor([cols.numel()]))
        bags = torch.repeat_interleave(torch.arange(offsets.numel(), device=cols.device), lengths, output_size=cols.numel())
        return grouped_sum(grad, bags, cols, weights.to(grad.dtype), ctx.n_words), None, None, None


class LabelTextEncoder(nn.Module):
    """``Phi(z) = alpha * R(GELU(z)) + beta * z`` (Astec's frugal encoder with learned mixing)."""

    def __init__(self, dim: int):
        super().__init__()
        layer = nn.Linear(dim, dim)
        with torch.no_grad():  # the identity at the start (Appendix A.4)
            layer.weight.copy_(torch.eye(dim))
            layer.bias.zero_()
        self.residual = spectral_norm(layer)
        self.alpha = nn.Parameter(torch.ones(()))
        self.beta = nn.Parameter(torch.ones(()))

    def forward(self, z: torch.Tensor) -> torch.Tensor:
        return self.alpha * self.residual(F.gelu(z)) + self.beta * z


class LabelFeatureNetwork(XMCNetwork):
    """:class:`~.network.XMCNetwork` whose label classifiers are built from the label texts, the
    label graph and (second phase) free vectors; see the module's docstring."""

    free_weights: torch.Tensor  # buffer: 1 once the free vectors join (second phase)

    def __init__(self, encoder: nn.Module, dim: int, n_labels: int, n_clusters: int):
        super().__init__(encoder, dim, n_labels, n_clusters)
        self.text_encoder = LabelTextEncoder(dim)
        self.graph_encoder = LabelTextEncoder(dim)
        # no bias: a softmax over the components ignores it (its gradient is rounding noise, which Adam amplifies)
        self.attention = nn.Linear(dim, 1, bias=False)
        for kind in ("text", "graph"):
            for name in _BAG_FIELDS:
                dtype = torch.float32 if name == "weights" else torch.int64
                self.register_buffer(f"{kind}_{name}", torch.zeros(1 if name == "indptr" else 0, dtype=dtype))
        self.register_buffer("free_weights", torch.zeros((), dtype=torch.bool))
        with torch.no_grad():
            self.labels.weight.zero_()

    def set_label_bags(self, text_bags: sp.csr_matrix, graph_bags: sp.csr_matrix) -> None:
        """The labels' ``z0`` and ``G z0`` rows (``L x V`` CSR, from :func:`label_text_bags` and
        :func:`graph_text_bags`)."""
        for kind, bags in (("text", text_bags), ("graph", graph_bags)):
            bags = sp.csr_matrix(bags)
            for name, array, dtype in zip(_BAG_FIELDS, (bags.indptr, bags.indices, bags.data), (np.int64, np.int64, np.float32)):
                setattr(self, f"{kind}_{name}", torch.from_numpy(np.asarray(array, dtype=dtype)).to(self.device))

    def load_state_dict(self, state_dict, strict: bool = True, assign: bool = False):
        """As the parent's, but the label bags take the saved shapes (they start empty)."""
        for kind in ("text", "graph"):
            for name in _BAG_FIELDS:
                key = f"{kind}_{name}"
                if key in state_dict:
                    setattr(self, key, torch.empty_like(state_dict[key], device=self.device))
        return super().load_state_dict(state_dict, strict=strict, assign=assign)

    def _bag_entries(self, ids: torch.Tensor, kind: str) -> tuple[torch.Tensor, torch.Tensor, torch.Tensor]:
        """Labels ``ids``' ``kind`` bags as ``embedding_bag`` takes them: each bag's offset, then the
        bags' words and weights one after the other."""
        indptr, indices, weights = (getattr(self, f"{kind}_{name}") for name in _BAG_FIELDS)
        starts = torch.index_select(indptr, 0, ids)
        lengths = torch.index_select(indptr, 0, ids + 1) - starts
        offsets = torch.cumsum(lengths, 0) - lengths
        total = int(lengths.sum())
        positions = torch.repeat_interleave(starts - offsets, lengths, output_size=total) + torch.arange(total, device=ids.device)
        return offsets, torch.index_select(indices, 0, positions), torch.index_select(weights, 0, positions)

    def _embedded_bags(self, ids: torch.Tensor, kinds: tuple[str, ...] = ("text", "graph")) -> list[torch.Tensor]:
        """``E . bag_l / sqrt(dim)`` of labels ``ids``' bags of each of ``kinds`` (each ``n x dim``).

        Each distinct word is looked up once and the bags are summed from those rows, so ``E``'s
        sparse gradient has a row a distinct word, not one a (label, word) entry.
        The ``dim ** -0.5``: unit-variance word vectors give a classifier of about unit norm, as the
        free classifiers start, so the first logits are small."""
        embed = self.encoder.embed
        assert isinstance(embed, nn.Embedding)  # the query encoder's word embeddings (InceptionEncoder)
        parts = [self._bag_entries(ids, kind) for kind in kinds]
        words, columns = torch.unique(torch.cat([part[1] for part in parts]), return_inverse=True)
        vectors = F.embedding(words, embed.weight, sparse=embed.sparse)
        out, at = [], 0
        for offsets, entries, weights in parts:
            cols = columns[at : at + entries.numel()]
            at += entries.numel()
            scaled = weights * self.dim**-0.5  # on the entries: fewer than the sums' dim x labels
            if vectors.device.type == "cpu":
                out.append(WeightedBags.apply(vectors, cols, offsets, scaled))
            else:
                out.append(F.embedding_bag(cols, vectors, offsets, mode="sum", per_sample_weights=scaled))
        return out

    def label_text_vectors(self) -> np.ndarray:
        """Every label's ``z1 = E . z0`` (``L x dim``), as the second phase reclusters on them."""
        with torch.no_grad():
            return self._every_label(lambda ids: self._embedded_bags(ids, ("text",))[0]).float().cpu().numpy()

    def _every_label(self, rows) -> torch.Tensor:
        """``rows(ids)`` of every label (``L x dim``), :data:`_TABLE_CHUNK` labels at a time."""
        ids = torch.arange(self.labels.num_embeddings, device=self.device)
        parts = [rows(ids[i : i + _TABLE_CHUNK]) for i in range(0, ids.numel(), _TABLE_CHUNK)]
        return torch.cat(parts) if parts else torch.zeros(0, self.dim, device=self.device)

    def _combined(self, ids: torch.Tensor) -> torch.Tensor:
        text, graph = self._embedded_bags(ids)
        components = [self.text_encoder(text), self.graph_encoder(graph)]
        if bool(self.free_weights):
            components.append(self.labels(ids))
        stacked = torch.stack(components, dim=1)  # n x components x dim
        weights = torch.softmax(self.attention(stacked).squeeze(-1), dim=1)
        return (weights.unsqueeze(-1) * stacked).sum(1)

    def _label_weights(self, ids: torch.Tensor) -> torch.Tensor:
        if not self.training and not torch.is_grad_enabled():
            return torch.index_select(self._label_table(), 0, ids)
        # padded to few sizes, which the allocator reuses: sizes that change every batch grow glibc's heap
        n = ids.numel()
        return self._combined(torch.cat([ids, ids.new_zeros(padded_size(n) - n)]))[:n]

    def _label_table(self) -> torch.Tensor:
        """Every label's classifier, for inference: built once and kept until a parameter or a
        buffer changes (their version counters)."""
        tensors = [*self.parameters(), *self.buffers()]
        key = tuple((t.data_ptr(), t._version) for t in tensors)
        if getattr(self, "_table_key", None) != key:
            with torch.no_grad():
                self._table = self._every_label(self._combined)
            self._table_key = key
        return self._table

    @torch.no_grad()
    def start_second_phase(self, label_vectors: np.ndarray, n_clusters: int) -> None:
        """The second phase: a fresh meta-classifier over ``n_clusters`` clusters and the free
        vectors ``w_l`` joining the classifiers, initialised at ``label_vectors`` (the learnt ``z1``)."""
        device = self.device
        self.meta = nn.Embedding(n_clusters, self.dim, sparse=True).to(device)
        self.meta_bias = nn.Embedding(n_clusters, 1, sparse=True).to(device)
        nn.init.normal_(self.meta.weight, std=self.dim**-0.5)
        nn.init.constant_(self.meta_bias.weight, self.init_bias)
        self.all_clusters = torch.arange(n_clusters, device=device)
        self.labels.weight.copy_(torch.from_numpy(np.ascontiguousarray(label_vectors, dtype=np.float32)))
        self.free_weights.fill_(True)
