"""Label clusters for shortlisting (as in InceptionXML/Astec): a meta-classifier picks clusters,
their labels become the candidates (hard negatives while training, the only labels scored at
prediction time).

Labels are represented by PIFA (the normalised sum of the TF-IDF features of their training
points) plus their own text's features, reduced to a few dense dimensions, and split by balanced
hierarchical 2-means into clusters of at most ``max_cluster_size`` labels.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.preprocessing import normalize
from tqdm.auto import tqdm

from ..sparse_ops import top_k_per_row, union_of_top_k


def label_representations(point_features: sp.csr_matrix, Y: sp.csr_matrix, label_features: sp.csr_matrix,
                          dim: int = 64, seed: int = 0) -> np.ndarray:
    """Dense, l2-normalised ``L x dim`` label vectors: PIFA + label text, reduced by truncated SVD."""
    pifa = normalize(sp.csr_matrix(Y).T @ point_features)
    rep = normalize(pifa + normalize(label_features))
    dim = max(1, min(dim, rep.shape[1] - 1, rep.shape[0] - 1))
    dense = TruncatedSVD(n_components=dim, random_state=seed, algorithm="randomized", n_iter=4).fit_transform(rep)
    return normalize(dense).astype(np.float32)


def balanced_clusters(vectors: np.ndarray, max_cluster_size: int, seed: int = 0, iterations: int = 6) -> np.ndarray:
    """Cluster id of each row: recursive balanced 2-means (halves by projection onto the centroid gap)."""
    n = vectors.shape[0]
    rng = np.random.default_rng(seed)
    assign = np.zeros(n, dtype=np.int64)
    stack = [np.arange(n)]
    next_id = 0
    while stack:
        idx = stack.pop()
        if idx.size <= max_cluster_size:
            assign[idx] = next_id
            next_id += 1
            continue
        V = vectors[idx]
        centers = V[rng.choice(idx.size, size=2, replace=False)].copy()
        half = idx.size // 2
        for _ in range(iterations):
            score = V @ (centers[0] - centers[1])
            order = np.argsort(-score, kind="stable")
            left, right = order[:half], order[half:]
            centers = np.stack([V[left].mean(axis=0), V[right].mean(axis=0)])
        stack.append(idx[right])
        stack.append(idx[left])
    return assign


def cluster_members(assign: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Padded ``C x max_size`` table of each cluster's labels (-1 = padding) and the cluster sizes."""
    n_clusters = int(assign.max()) + 1 if assign.size else 0
    sizes = np.bincount(assign, minlength=n_clusters)
    table = np.full((n_clusters, int(sizes.max()) if sizes.size else 0), -1, dtype=np.int64)
    order = np.argsort(assign, kind="stable")
    starts = np.concatenate([[0], np.cumsum(sizes)[:-1]])
    pos = np.arange(assign.size) - np.repeat(starts, sizes)
    table[assign[order], pos] = order
    return table, sizes


def shortlist_recall(candidates: sp.csr_matrix, truth: sp.csr_matrix) -> float:
    """Share of the true (point, label) pairs that the candidate sets contain, in percent."""
    T = sp.csr_matrix(truth)
    T.data = (T.data > 0).astype(np.float32)
    C = sp.csr_matrix(candidates)
    C.data[:] = 1.0
    hit = T.multiply(C).sum()
    return 100.0 * float(hit) / max(float(T.sum()), 1.0)


class NeighbourShortlist:
    """A text's candidate labels: the labels of its nearest training points plus the labels whose
    own text is most similar to it (both TF-IDF cosine).

    For every candidate pair it also gives two scores that a ranker can use as features: the
    neighbours' vote (sum of ``cos^2 x target`` over the ``n_neighbours`` nearest points, divided by
    the row's largest vote) and the cosine between the text and the label's text. The label-text
    half finds labels with few or no training points, which the neighbours rarely offer.
    """

    N_FEATURES = 2

    def __init__(self, n_neighbours: int = 30, knn_labels: int = 100, text_labels: int = 50, batch_size: int = 2048):
        self.n_neighbours, self.knn_labels, self.text_labels = n_neighbours, knn_labels, text_labels
        self.batch_size = batch_size
        self.XT: sp.csr_matrix | None = None
        self.ZT: sp.csr_matrix | None = None
        self.Y: sp.csr_matrix | None = None
        self.position: np.ndarray | None = None  # training row -> its row in the index (-1: not indexed)

    def fit(self, X: sp.csr_matrix, Y: sp.csr_matrix, Z: sp.csr_matrix, rows: np.ndarray | None = None
            ) -> NeighbourShortlist:
        """Index training features ``X`` with (soft) targets ``Y`` and label-text features ``Z``;
        ``rows`` (bool mask or ids) limits the neighbour index to those training rows."""
        X, Y = sp.csr_matrix(X, dtype=np.float32), sp.csr_matrix(Y, dtype=np.float32)
        self.position = None
        if rows is not None:
            ids = np.flatnonzero(rows) if np.asarray(rows).dtype == bool else np.asarray(rows, dtype=np.int64)
            self.position = np.full(X.shape[0], -1, dtype=np.int64)
            self.position[ids] = np.arange(ids.size)
            X, Y = X[ids], Y[ids]
        self.XT = X.T.tocsr()
        self.Y = Y
        self.ZT = sp.csr_matrix(Z, dtype=np.float32).T.tocsr()
        return self

    def _block(self, Q: sp.csr_matrix, first_row: int | None, extra: sp.csr_matrix | None):
        S = (Q @ self.XT).tocsr()
        if first_row is not None:  # leave each training point out of its own neighbours
            own = np.arange(first_row, first_row + S.shape[0])
            if self.position is not None:
                own = self.position[own]
            r = np.repeat(np.arange(S.shape[0]), np.diff(S.indptr))
            S.data[S.indices == own[r]] = 0.0
            S.eliminate_zeros()
        S = top_k_per_row(S, self.n_neighbours, distinct=True)  # products have one entry per column
        S.data = np.square(np.maximum(S.data, 0.0))
        votes = (S @ self.Y).tocsr()
        peak = np.zeros(votes.shape[0], dtype=np.float32)
        np.maximum.at(peak, np.repeat(np.arange(votes.shape[0]), np.diff(votes.indptr)), votes.data)
        votes = sp.diags(1.0 / np.maximum(peak, 1e-12)) @ votes
        return union_of_top_k(votes, (Q @ self.ZT).tocsr(), self.knn_labels, self.text_labels, extra, distinct=True)

    def pairs(self, Q: sp.csr_matrix, exclude_self: bool = False, extra: sp.csr_matrix | None = None,
              progress: bool = False) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Candidate pairs of the rows of ``Q`` as (indptr, labels, features): row i's candidates are
        ``labels[indptr[i]:indptr[i+1]]`` (ascending), with ``features`` of shape (pairs, 2).

        ``exclude_self``: ``Q`` is the training matrix itself (leave-one-out neighbours);
        ``extra``: labels to add to each row's candidates (training positives).
        """
        assert self.XT is not None, "fit the shortlist first"
        Q = sp.csr_matrix(Q, dtype=np.float32)
        indptrs, cols, feats = [np.zeros(1, dtype=np.int64)], [], []
        for start in tqdm(range(0, Q.shape[0], self.batch_size), desc="shortlist", disable=not progress, unit="batch"):
            stop = start + self.batch_size
            ip, c, f = self._block(Q[start:stop], start if exclude_self else None,
                                   None if extra is None else extra[start:stop])
            indptrs.append(ip[1:].astype(np.int64) + indptrs[-1][-1])
            cols.append(c.astype(np.int64))
            feats.append(f)
        if not cols:
            return indptrs[0], np.zeros(0, dtype=np.int64), np.zeros((0, self.N_FEATURES), dtype=np.float32)
        return np.concatenate(indptrs), np.concatenate(cols), np.concatenate(feats)

    @staticmethod
    def candidate_matrix(pairs: tuple[np.ndarray, np.ndarray, np.ndarray], n_labels: int) -> sp.csr_matrix:
        """Binary ``n x L`` matrix of the candidates in ``pairs`` (from :meth:`pairs`), for shortlist recall."""
        indptr, cols, _ = pairs
        return sp.csr_matrix((np.ones(cols.size, dtype=np.float32), cols, indptr), shape=(indptr.size - 1, n_labels))

    def save(self, directory: str | Path, prefix: str = "shortlist") -> None:
        d = Path(directory)
        sp.save_npz(d / f"{prefix}_points.npz", self.XT.T.tocsr(), compressed=False)
        sp.save_npz(d / f"{prefix}_targets.npz", self.Y, compressed=False)
        sp.save_npz(d / f"{prefix}_label_texts.npz", self.ZT.T.tocsr(), compressed=False)

    def load_arrays(self, directory: str | Path, prefix: str = "shortlist") -> NeighbourShortlist:
        d = Path(directory)
        return self.fit(sp.load_npz(d / f"{prefix}_points.npz"), sp.load_npz(d / f"{prefix}_targets.npz"),
                        sp.load_npz(d / f"{prefix}_label_texts.npz"))
