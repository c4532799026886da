"""Label graphs: hand-computed cases and equality with a brute-force dense computation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.errors import ConfigError
from gandalf_xmc.graph import GraphConfig, RandomWalkConfig, conditional_graph, label_graph, random_walk_counts

from helpers import Y_HAND

# 4 points, 4 labels; label 3 has no positives.
# G00=3, G11=2, G22=2, G01=2, G02=1, G12=1


def test_cooccurrence_by_hand():
    got = label_graph(Y_HAND, GraphConfig(delta=0.1)).toarray()
    want = np.array(
        [
            [1, 2 / 3, 1 / 3, 0],
            [1, 1, 1 / 2, 0],
            [1 / 2, 1 / 2, 1, 0],
            [0, 0, 0, 1],  # no positives: self-annotation only
        ]
    )
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_self_scale_multiplies_only_the_self_entries_and_drops_zeros():
    """By hand from the graph above: 0 leaves only co-labels (label 3, without co-labels, an empty
    row and no stored zero); 0.5 with co_label_scale 0.5 halves every entry."""
    without_self = label_graph(Y_HAND, GraphConfig(delta=0.1, self_scale=0.0))
    np.testing.assert_allclose(
        without_self.toarray(), [[0, 2 / 3, 1 / 3, 0], [1, 0, 1 / 2, 0], [1 / 2, 1 / 2, 0, 0], [0, 0, 0, 0]], rtol=1e-6
    )
    assert without_self.nnz == 6 and np.diff(without_self.indptr).tolist() == [2, 2, 2, 0]
    halved = label_graph(Y_HAND, GraphConfig(delta=0.1, self_scale=0.5, co_label_scale=0.5)).toarray()
    np.testing.assert_allclose(halved, 0.5 * label_graph(Y_HAND, GraphConfig(delta=0.1)).toarray(), rtol=1e-6)
    with pytest.raises(ConfigError, match="self_scale"):
        GraphConfig(self_scale=-0.1).validate()


def test_threshold_is_strict():
    got = label_graph(Y_HAND, GraphConfig(delta=0.5)).toarray()
    # 0.5 entries are dropped, 2/3 and 1 are kept, self stays
    np.testing.assert_allclose(got, [[1, 2 / 3, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 0, 1]], rtol=1e-6)


def test_glas_by_hand():
    got = label_graph(Y_HAND, GraphConfig(kind="glas", delta=0.1)).toarray()
    sig = lambda x: 1 / (1 + np.exp(-x))  # noqa: E731
    s01, s02, s12 = 0.5 * (2 / 3 + 1), 0.5 * (1 / 3 + 1 / 2), 0.5 * (1 / 2 + 1 / 2)
    want = np.array(
        [
            [sig(1), sig(s01), sig(s02), 0],
            [sig(s01), sig(1), sig(s12), 0],
            [sig(s02), sig(s12), sig(1), 0],
            [0, 0, 0, sig(1)],
        ]
    )
    np.testing.assert_allclose(got, want, rtol=1e-6)


def test_identity():
    np.testing.assert_array_equal(label_graph(Y_HAND, GraphConfig(kind="identity")).toarray(), np.eye(4))


def brute_force(Y, delta, top_k=None, shrinkage=0.0, weights=None, symmetric=False):
    D = Y.toarray().astype(np.float64)
    w = np.ones(D.shape[0]) if weights is None else weights
    G = D.T @ (D * w[:, None])
    diag = np.diag(G).copy()
    L = G.shape[0]
    out = np.zeros((L, L))
    for j in range(L):
        if diag[j] > 0:
            for i in range(L):
                if i == j or G[j, i] == 0:
                    continue
                v = 0.5 * (G[j, i] / diag[j] + G[j, i] / diag[i]) if symmetric else G[j, i] / (diag[j] + shrinkage)
                if v > delta:
                    out[j, i] = v
            if top_k is not None:
                row = out[j].copy()
                nz = np.flatnonzero(row)
                order = sorted(nz, key=lambda i: (-row[i], i))
                out[j] = 0
                out[j, order[:top_k]] = row[order[:top_k]]
        out[j, j] = 1.0
    return out


def random_labels(seed, n=300, L=60, density=0.05):
    rng = np.random.default_rng(seed)
    Y = sp.random(n, L, density=density, random_state=rng, format="csr")
    Y.data[:] = 1.0
    return Y.astype(np.float32)


@pytest.mark.parametrize("seed", range(4))
@pytest.mark.parametrize("delta", [0.0, 0.1, 0.3])
def test_matches_brute_force(seed, delta):
    Y = random_labels(seed)
    np.testing.assert_allclose(conditional_graph(Y, delta=delta).toarray(), brute_force(Y, delta), rtol=1e-6)


@pytest.mark.parametrize("seed", range(3))
def test_variants_match_brute_force(seed):
    Y = random_labels(seed, density=0.08)
    w = 1.0 / np.maximum(np.diff(Y.indptr), 1)
    np.testing.assert_allclose(conditional_graph(Y, delta=0.05, top_k=3).toarray(), brute_force(Y, 0.05, top_k=3), rtol=1e-6)
    np.testing.assert_allclose(
        conditional_graph(Y, delta=0.05, shrinkage=2.0).toarray(), brute_force(Y, 0.05, shrinkage=2.0), rtol=1e-6
    )
    np.testing.assert_allclose(
        conditional_graph(Y, delta=0.05, point_weights=w).toarray(), brute_force(Y, 0.05, weights=w), rtol=1e-5
    )
    np.testing.assert_allclose(
        conditional_graph(Y, delta=0.1, symmetric=True).toarray(), brute_force(Y, 0.1, symmetric=True), rtol=1e-6
    )
    via_config = label_graph(Y, GraphConfig(delta=0.05, point_weights="inverse-size")).toarray()
    np.testing.assert_allclose(via_config, brute_force(Y, 0.05, weights=w), rtol=1e-5)


@pytest.mark.parametrize("wave_entries", [1, 7, 64])
def test_rows_computed_in_waves_match_brute_force(wave_entries):
    # soft targets, empty points, a label without positives and one label on every point: each
    # row's slot comes from an upper bound, and small waves cut the rows into many passes
    rng = np.random.default_rng(3)
    Y = random_labels(5, n=200, L=40, density=0.1).tolil()
    Y[:, 7] = 0.0
    Y[:, 3] = 1.0
    Y[10] = 0.0
    Y = Y.tocsr()
    Y.eliminate_zeros()
    Y.data = rng.uniform(0.05, 1.0, Y.nnz).astype(np.float32)
    w = rng.uniform(0.2, 2.0, Y.shape[0])
    for kwargs, expected in [
        (dict(delta=0.0), brute_force(Y, 0.0)),
        (dict(delta=0.1, shrinkage=0.5, point_weights=w), brute_force(Y, 0.1, shrinkage=0.5, weights=w)),
        (dict(delta=0.02, top_k=4), brute_force(Y, 0.02, top_k=4)),
        (dict(delta=0.1, symmetric=True), brute_force(Y, 0.1, symmetric=True)),
    ]:
        got = conditional_graph(Y, wave_entries=wave_entries, **kwargs)
        np.testing.assert_allclose(got.toarray(), expected, rtol=1e-5, err_msg=str(kwargs))
        assert got.has_sorted_indices


def test_one_point_labels_fill_their_bound_exactly():
    # label 0 is seen once, with 9 co-labels: each conditional is 1.0, and the mass bound
    # (T_0 / delta = 9 / 0.99 -> 9 entries + self) is met with equality
    Y = sp.csr_matrix(np.ones((1, 10), dtype=np.float32))
    G = conditional_graph(Y, delta=0.99, wave_entries=1)
    np.testing.assert_array_equal(G.toarray(), np.ones((10, 10)))


def test_top_k_ties_go_to_lower_label_id():
    # label 0 co-occurs once with each of labels 1..4: all conditionals are 1/4... make them equal
    Y = sp.csr_matrix(np.array([[1, 1, 0, 0, 0], [1, 0, 1, 0, 0], [1, 0, 0, 1, 0], [1, 0, 0, 0, 1]], dtype=np.float32))
    row = conditional_graph(Y, delta=0.0, top_k=2).toarray()[0]
    np.testing.assert_allclose(row, [1, 0.25, 0.25, 0, 0])


def test_random_walk_properties_and_determinism():
    Y = random_labels(7, n=400, L=50, density=0.06)
    cfg = GraphConfig(kind="random-walk", delta=0.1, walk=RandomWalkConfig(walk_length=200, seed=3))
    A = label_graph(Y, cfg)
    B = label_graph(Y, cfg)
    assert (A != B).nnz == 0, "same seed must give the same graph"
    C = label_graph(Y, GraphConfig(kind="random-walk", delta=0.1, walk=RandomWalkConfig(walk_length=200, seed=4)))
    assert (A != C).nnz > 0, "another seed gives other walks"
    np.testing.assert_allclose(A.diagonal(), 1.0)
    off = A - sp.diags(A.diagonal())
    off.eliminate_zeros()
    assert off.data.size and off.data.min() > 0.1 and off.data.max() <= 1.0
    assert np.diff(A.indptr).max() <= 11  # top 10 neighbours + self


def test_random_walk_only_visits_co_labels_in_one_hop():
    # with restart probability 1 every step starts at the seed: visits = one-hop neighbours only
    counts = random_walk_counts(Y_HAND, walk_length=500, restart_prob=1.0, seed=0).toarray()
    G = (Y_HAND.T @ Y_HAND).toarray()
    assert np.all((counts > 0) <= (G > 0))
    assert counts[3].sum() == 0  # no positives: no walk
    # from label 2: points {1, 3}; point 1 has labels {0, 1, 2}, point 3 has {2}
    # P(visit 2) = 1/2 * 1/3 + 1/2 * 1 = 2/3
    assert abs(counts[2, 2] / 500 - 2 / 3) < 0.08


def test_head_labels_get_only_a_self_loop():
    Y = random_labels(1, n=400, L=30, density=0.1)
    freq = np.bincount(Y.indices, minlength=30)
    threshold = int(np.sort(freq)[-3])  # the 2 most frequent labels are "head"
    head = np.flatnonzero(freq > threshold)
    A = label_graph(
        Y, GraphConfig(kind="random-walk", delta=0.0, walk=RandomWalkConfig(head_threshold=threshold, walk_length=100))
    ).toarray()
    for h in head:
        assert A[h].nonzero()[0].tolist() == [h]
        assert np.all(A[:, h][np.arange(30) != h] == 0)


def test_random_walk_refuses_co_occurrence_options_and_takes_the_augmentation_seed():
    from dataclasses import replace

    from gandalf_xmc.augment import AugmentConfig, graph_for

    for changes in ({"top_k": 3}, {"shrinkage": 1.0}, {"point_weights": "inverse-size"}):
        with pytest.raises(ConfigError, match="for the co-occurrence graphs only, not random-walk"):
            GraphConfig(kind="random-walk", **changes).validate()
    graph = graph_for(AugmentConfig("random-walk", seed=3))
    assert graph.kind == "random-walk" and graph.walk.seed == 3
    Y = random_labels(7, n=400, L=50, density=0.06)
    walk = RandomWalkConfig(walk_length=200)
    a = label_graph(Y, graph_for(AugmentConfig("random-walk", replace(GraphConfig(), walk=walk), seed=3)))
    b = label_graph(Y, GraphConfig(kind="random-walk", walk=replace(walk, seed=3)))
    c = label_graph(Y, GraphConfig(kind="random-walk", walk=walk))
    assert (a != b).nnz == 0 and (a != c).nnz > 0


def test_invalid_config():
    with pytest.raises(ConfigError):
        label_graph(Y_HAND, GraphConfig(kind="nope"))
    with pytest.raises(ConfigError):
        label_graph(Y_HAND, GraphConfig(delta=1.5))
