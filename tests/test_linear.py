"""The sparse linear model, its shortlist and the sparse kernels, against brute-force versions."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
import torch

from gandalf_xmc.models.linear import LinearConfig, SparseLinearXMC, WeightTable
from gandalf_xmc.models.registry import load_trained
from gandalf_xmc.sparse_ops import top_k_per_row, union_of_top_k
from gandalf_xmc.train.loop import TrainConfig
from gandalf_xmc.train.shortlist import NeighbourShortlist

TEXTS = ["alpha beta", "gamma delta", "alpha gamma", "epsilon zeta", "beta zeta"]
LABELS = ["alpha", "gamma", "zeta", "omega"]
Y = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]], dtype=np.float32))


def random_sparse(rng, n, m, density, levels=4):
    # few distinct values, so that ties are common
    S = sp.random(n, m, density=density, format="csr", random_state=rng, dtype=np.float32)
    S.data = np.ceil(S.data * levels).astype(np.float32)
    return S


def brute_top_k(row: np.ndarray, k: int) -> set[int]:
    nz = np.flatnonzero(row)
    order = sorted(nz, key=lambda c: (-row[c], c))
    return set(order[:k])


def test_top_k_per_row_matches_brute_force_with_ties():
    rng = np.random.default_rng(0)
    S = random_sparse(rng, 40, 30, 0.3)
    for k in (1, 3, 7, 50):
        T = top_k_per_row(S, k).toarray()
        D = S.toarray()
        for i in range(D.shape[0]):
            want = brute_top_k(D[i], k)
            assert set(np.flatnonzero(T[i])) == want
            assert np.array_equal(T[i][list(want)], D[i][list(want)])


def test_union_of_top_k_matches_brute_force():
    rng = np.random.default_rng(1)
    V, T, E = random_sparse(rng, 25, 40, 0.3), random_sparse(rng, 25, 40, 0.3), random_sparse(rng, 25, 40, 0.05)
    indptr, cols, feats = union_of_top_k(V, T, 4, 3, E)
    Vd, Td, Ed = V.toarray(), T.toarray(), E.toarray()
    for i in range(25):
        want = sorted(brute_top_k(Vd[i], 4) | brute_top_k(Td[i], 3) | set(np.flatnonzero(Ed[i])))
        got = cols[indptr[i]:indptr[i + 1]]
        assert got.tolist() == want
        assert np.array_equal(feats[indptr[i]:indptr[i + 1], 0], Vd[i, want])
        assert np.array_equal(feats[indptr[i]:indptr[i + 1], 1], Td[i, want])


def test_weight_table_bags_match_a_dictionary():
    rng = np.random.default_rng(2)
    n_features, n_labels = 12, 9
    keys = np.unique(rng.integers(0, n_features * n_labels, size=60))
    table = WeightTable.from_keys(keys, n_features, n_labels)
    position = {int(k): i for i, k in enumerate(keys)}
    X = random_sparse(rng, 6, n_features, 0.4)
    rows = rng.integers(0, 6, size=20)
    labels = rng.integers(0, n_labels, size=20)
    ids, values, offsets = table.bags(X, rows, labels)
    for p in range(20):
        r = rows[p]
        feats = X.indices[X.indptr[r]:X.indptr[r + 1]]
        want = [position.get(int(f) * n_labels + int(labels[p]), table.size) for f in feats]
        assert ids[offsets[p]:offsets[p + 1]].tolist() == want
        assert np.array_equal(values[offsets[p]:offsets[p + 1]], X.data[X.indptr[r]:X.indptr[r + 1]])


def test_neighbour_shortlist_leaves_the_point_out_and_scores_votes_and_text():
    X = sp.csr_matrix(np.array([[1, 0, 0], [0.6, 0.8, 0], [0, 0, 1]], dtype=np.float32))
    Yt = sp.csr_matrix(np.array([[1, 0, 0], [0, 0.5, 0], [0, 0, 1]], dtype=np.float32))
    Z = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 0], [1, 0, 0]], dtype=np.float32))
    shortlist = NeighbourShortlist(n_neighbours=1, knn_labels=5, text_labels=1).fit(X, Yt, Z)
    indptr, labels, feats = shortlist.pairs(X, exclude_self=True)
    # point 0 (left out): nearest other point is 1 (cos 0.6) -> label 1 with vote 0.36*0.5, normalised to 1;
    # label 2's text equals point 0's text (cos 1)
    assert labels[indptr[0]:indptr[1]].tolist() == [1, 2]
    assert feats[indptr[0]:indptr[1]].tolist() == [[1.0, 0.0], [0.0, 1.0]]
    # without leaving out, point 0 is its own nearest neighbour
    indptr, labels, feats = shortlist.pairs(X)
    assert labels[indptr[0]:indptr[1]].tolist() == [0, 2]


def test_neighbour_index_limited_to_some_rows_matches_an_index_of_those_rows():
    rng = np.random.default_rng(1)
    X = sp.random(40, 25, density=0.2, random_state=rng, format="csr", dtype=np.float32)
    Yt = sp.random(40, 12, density=0.15, random_state=rng, format="csr", dtype=np.float32)
    Z = sp.random(12, 25, density=0.2, random_state=rng, format="csr", dtype=np.float32)
    indexed = rng.random(40) < 0.6
    kw = dict(n_neighbours=3, knn_labels=6, text_labels=2)
    limited = NeighbourShortlist(**kw).fit(X, Yt, Z, rows=indexed).pairs(X, exclude_self=True)
    sub = NeighbourShortlist(**kw).fit(X[indexed], Yt[indexed], Z)
    inside = sub.pairs(X[indexed], exclude_self=True)  # indexed rows leave themselves out
    outside = sub.pairs(X[~indexed])  # the others are not in the index at all
    got = [limited[1][limited[0][i]:limited[0][i + 1]].tolist() for i in range(40)]
    want_in = [inside[1][inside[0][i]:inside[0][i + 1]].tolist() for i in range(int(indexed.sum()))]
    want_out = [outside[1][outside[0][i]:outside[0][i + 1]].tolist() for i in range(int((~indexed).sum()))]
    assert [g for g, m in zip(got, indexed) if m] == want_in
    assert [g for g, m in zip(got, indexed) if not m] == want_out


def small_linear(pair_init=3.0, **train):
    base = dict(epochs=3, batch_size=2, lr=0.05, dense_lr=0.01, seed=0, threads=1)
    base.update(train)
    return LinearConfig(n_neighbours=2, knn_labels=4, text_labels=2, pair_init=pair_init, train=TrainConfig(**base))


def test_linear_learns_a_soft_target():
    texts = ["alpha beta", "gamma delta"]
    Ysoft = sp.csr_matrix(np.array([[0.35, 0, 0, 0], [0, 1, 0, 0]], dtype=np.float32))
    # pair scores off: a training text is its own neighbour at prediction time (left out in training)
    model = SparseLinearXMC(small_linear(pair_init=0.0, epochs=300, batch_size=1, lr=0.05, dense_lr=0.0))
    model.fit(texts, Ysoft, LABELS, progress=False)
    p = model.predict(["alpha beta"], k=4).toarray()[0]
    assert p[0] == pytest.approx(0.35, abs=0.03)


def test_linear_same_seed_same_model_resume_and_save_load(tmp_path):
    a = SparseLinearXMC(small_linear(epochs=4)).fit(TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "a", progress=False)
    b = SparseLinearXMC(small_linear(epochs=4)).fit(TEXTS, Y, LABELS, progress=False)
    SparseLinearXMC(small_linear(epochs=2)).fit(TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", progress=False)
    c = SparseLinearXMC(small_linear(epochs=4)).fit(TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", resume=True,
                                                     progress=False)
    for other in (b, c):
        for (name, x), (_, y) in zip(a.scorer.state_dict().items(), other.scorer.state_dict().items()):
            assert torch.equal(x, y), name
    a.save(tmp_path / "m")
    again = load_trained(tmp_path / "m")
    queries = ["alpha zeta", "unknown words", "gamma"]
    assert (a.predict(queries, k=3) != again.predict(queries, k=3)).nnz == 0


def test_linear_scores_equal_a_dense_recomputation():
    model = SparseLinearXMC(small_linear(epochs=5)).fit(TEXTS, Y, LABELS, progress=False)
    X = model.features(["alpha gamma zeta"])
    indptr, labels, feats = model.shortlist.pairs(X)
    W = np.zeros((X.shape[1], len(LABELS)))
    w = model.scorer.weights.weight.detach().numpy()[:, 0]
    for f in range(X.shape[1]):
        lo, hi = model.table.indptr[f], model.table.indptr[f + 1]
        W[f, model.table.labels[lo:hi]] = w[lo:hi]
    bias = model.scorer.bias.weight.detach().numpy()[:, 0]
    a = model.scorer.pair.weight.detach().numpy()[0]
    a0 = float(model.scorer.pair.bias.detach())
    want = (X.toarray() @ W)[0, labels] + bias[labels] + feats @ a + a0
    P = model.predict(["alpha gamma zeta"], k=4).toarray()[0]
    assert np.allclose(P[labels], 1 / (1 + np.exp(-want)), atol=1e-5)
