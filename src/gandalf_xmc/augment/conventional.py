"""Conventional augmentations the paper compares Gandalf with (its Table 6): synonym replacement,
MixUp and Label-MixUp.

* :class:`SynonymReplacement` rewrites texts: a word is replaced by one of its nearest words in
  an embedding space (the paper picks synonyms "via BERT similarity"; here the space is
  all-MiniLM-L6-v2's sentence embedding of each word, the offline BERT at hand). Targets are kept.
  It is a batch transform ``(texts, Y) -> (texts, Y)`` like :class:`~gandalf_xmc.augment.LabelMix`.
* :class:`FeatureMix` mixes in the model's input space (TF-IDF rows, sentence embeddings):
  ``mixup`` interpolates two training points and their targets; ``label-mixup`` interpolates a
  point with the input vector of one of its labels' texts, whose target is the label itself. The
  mixed points are drawn once, seeded, and added to the training points.
"""

from __future__ import annotations

import re
from typing import Literal

import numpy as np
import scipy.sparse as sp

from ..text import WORD as _WORD
from ..text import words as split_words


def synonym_table(
    words: list[str], vectors: np.ndarray, n: int = 5, min_similarity: float = 0.6, block: int = 2048
) -> dict[str, list[str]]:
    """Each word's up to ``n`` nearest other words by cosine of ``vectors`` (rows l2-normalised
    here), keeping those with similarity >= ``min_similarity``; words without any are left out."""
    V = np.asarray(vectors, dtype=np.float32)
    V = V / np.maximum(np.linalg.norm(V, axis=1, keepdims=True), 1e-12)
    table: dict[str, list[str]] = {}
    n_take = min(n + 1, len(words))
    for start in range(0, len(words), block):
        S = V[start : start + block] @ V.T
        rows = np.arange(S.shape[0])
        S[rows, start + rows] = -np.inf  # a word is not its own synonym
        top = (
            np.argpartition(-S, n_take - 1, axis=1)[:, :n_take]
            if n_take < len(words)
            else np.tile(np.arange(len(words)), (S.shape[0], 1))
        )
        for r in rows:
            cand = top[r][np.argsort(-S[r, top[r]], kind="stable")]
            near = [words[c] for c in cand[:n] if S[r, c] >= min_similarity]
            if near:
                table[words[start + r]] = near
    return table


def word_synonyms(texts: list[str], n: int = 5, min_similarity: float = 0.6, min_count: int = 2) -> dict[str, list[str]]:
    """Synonym table of the words (TF-IDF tokens) seen at least ``min_count`` times in ``texts``,
    nearest by their all-MiniLM-L6-v2 sentence embeddings (cached on disk like every embedding)."""
    from collections import Counter

    from .. import sentence

    counts = Counter(w for t in texts for w in split_words(t))
    words = sorted(w for w, c in counts.items() if c >= min_count and not w.isdigit())
    if len(words) < 2:
        return {}
    return synonym_table(words, sentence.embed(words), n, min_similarity)


class SynonymReplacement:
    """With probability ``prob`` rewrite a point's text: each word with synonyms is replaced, with
    probability ``word_prob``, by one of them drawn uniformly. Targets are unchanged.

    The transform owns a generator seeded with ``seed``: the same seed and the same sequence of
    batches give the same result.
    """

    acts_on: Literal["texts", "features"] = "texts"  # see augment.transforms

    def __init__(self, synonyms: dict[str, list[str]], prob: float = 0.4, word_prob: float = 0.3, seed: int = 0):
        if not (0.0 <= prob <= 1.0 and 0.0 <= word_prob <= 1.0):
            raise ValueError("prob and word_prob must be in [0, 1]")
        self.synonyms, self.prob, self.word_prob = synonyms, prob, word_prob
        self.rng = np.random.default_rng(seed)

    def rewrite(self, text: str) -> str:
        def swap(match: re.Match) -> str:
            near = self.synonyms.get(match.group(0).lower())
            if not near or self.rng.random() >= self.word_prob:
                return match.group(0)
            return near[int(self.rng.integers(len(near)))]

        return _WORD.sub(swap, text)

    def __call__(self, texts: list[str], Y: sp.csr_matrix) -> tuple[list[str], sp.csr_matrix]:
        draws = self.rng.random(len(texts))
        return [self.rewrite(t) if d < self.prob else t for t, d in zip(texts, draws)], sp.csr_matrix(Y)


class FeatureMix:
    """Mixed points in the input space, drawn once: ``share x N`` of them, each from a distinct
    training point a (drawn without replacement), with ``lam = max(u, 1 - u)``, ``u ~ Beta(alpha,
    alpha)``, so that the drawn point dominates.

    * ``mixup``: a partner b drawn uniformly; ``x = lam x_a + (1 - lam) x_b``, ``y = lam y_a + (1 - lam) y_b``.
    * ``label-mixup``: one of a's positive labels j, drawn with probability proportional to
      ``label_weights[j]`` (tail-skewed); ``x = lam x_a + (1 - lam) z_j``, ``y = lam y_a + (1 - lam) e_j``,
      so ``y[j] = 1`` stays. Points without positives are skipped.
    """

    KINDS = ("mixup", "label-mixup")
    acts_on: Literal["texts", "features"] = "features"  # see augment.transforms

    def __init__(self, kind: str, share: float = 0.4, alpha: float = 0.4, label_weights: np.ndarray | None = None, seed: int = 0):
        if kind not in self.KINDS:
            raise ValueError(f"unknown mix {kind!r}; choose one of {', '.join(self.KINDS)}")
        if not 0.0 < share <= 1.0:
            raise ValueError("share must be in (0, 1]")
        self.kind, self.share, self.alpha, self.seed = kind, share, alpha, seed
        self.label_weights = label_weights

    def __call__(self, X, Y: sp.csr_matrix, Z=None):
        """The mixed points ``(X_mixed, Y_mixed)`` for inputs ``X`` (CSR or dense rows) with targets
        ``Y``; ``Z`` are the label texts' inputs (needed by ``label-mixup``)."""
        rng = np.random.default_rng([self.seed, 11])
        Y = sp.csr_matrix(Y, dtype=np.float32)
        n = Y.shape[0]
        a = np.sort(rng.choice(n, size=max(1, int(round(self.share * n))), replace=False))
        u = rng.beta(self.alpha, self.alpha, size=a.size)
        lam = np.maximum(u, 1.0 - u).astype(np.float32)
        if self.kind == "mixup":
            b = rng.integers(0, n, size=a.size)
            return _mix(X[a], X[b], lam), _mix(Y[a], Y[b], lam)
        if Z is None:
            raise ValueError("label-mixup needs the label texts' inputs")
        weights = np.ones(Y.shape[1]) if self.label_weights is None else np.asarray(self.label_weights, dtype=np.float64)
        picks = rng.random(a.size)
        keep, chosen = [], []
        for i, r in enumerate(a):
            lo, hi = Y.indptr[r], Y.indptr[r + 1]
            labels = Y.indices[lo:hi][Y.data[lo:hi] > 0]
            if labels.size == 0:
                continue
            cdf = np.cumsum(weights[labels]) / weights[labels].sum()
            keep.append(i)
            chosen.append(int(labels[min(int(np.searchsorted(cdf, picks[i], side="right")), labels.size - 1)]))
        keep_idx = np.asarray(keep, dtype=np.int64)
        chosen_idx = np.asarray(chosen, dtype=np.int64)
        E = sp.csr_matrix(
            (np.ones(chosen_idx.size, dtype=np.float32), (np.arange(chosen_idx.size), chosen_idx)),
            shape=(chosen_idx.size, Y.shape[1]),
        )
        rows, lam = a[keep_idx], lam[keep_idx]
        return _mix(X[rows], Z[chosen_idx], lam), _mix(Y[rows], E, lam)


def _mix(A, B, lam: np.ndarray):
    """Row-wise ``lam A + (1 - lam) B`` for sparse or dense rows."""
    if sp.issparse(A):
        return sp.csr_matrix(sp.diags(lam) @ sp.csr_matrix(A) + sp.diags(1.0 - lam) @ sp.csr_matrix(B), dtype=np.float32)
    return (lam[:, None] * np.asarray(A) + (1.0 - lam[:, None]) * np.asarray(B)).astype(np.float32)


def append_mixed(
    mix: FeatureMix,
    X,
    Y: sp.csr_matrix,
    Z,
    sample_weight: np.ndarray | None,
    label_points,
    positive_weight: np.ndarray | None = None,
):
    """Inputs, targets, weights, label-point marks (a ``LabelPoints`` or None) and factors on the
    positives' cost with ``mix``'s points appended, as original points (weight and factor 1): like
    LabelMix's, they stand for training points, not label points."""
    Xm, Ym = mix(X, Y, Z)
    X_all = sp.vstack([X, Xm], format="csr") if sp.issparse(X) else np.concatenate([X, Xm])
    ones = np.ones(Ym.shape[0], dtype=np.float32)
    if sample_weight is not None:
        sample_weight = np.concatenate([sample_weight, ones])
    if positive_weight is not None:
        positive_weight = np.concatenate([positive_weight, ones])
    if label_points is not None:
        label_points = label_points.extended(Ym.shape[0])
    return X_all, sp.vstack([Y, Ym], format="csr", dtype=np.float32), sample_weight, label_points, positive_weight
