"""Label clusters for the neural models' shortlists (as in InceptionXML/Astec): a meta-classifier picks clusters,
their labels become the candidates (hard negatives while training, the only labels scored at
prediction time).

Labels are represented by PIFA (the normalised sum of the TF-IDF features of their training
points) plus their own text's features, reduced to a few dense dimensions, and split by balanced
hierarchical 2-means into clusters of at most ``max_cluster_size`` labels.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp
from sklearn.decomposition import TruncatedSVD
from sklearn.preprocessing import normalize


def label_representations(
    point_features: sp.csr_matrix, Y: sp.csr_matrix, label_features: sp.csr_matrix, dim: int = 64, seed: int = 0
) -> np.ndarray:
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
