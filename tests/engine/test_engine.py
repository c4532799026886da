"""The linear engine: the dual solver against scikit-learn's LIBLINEAR, soft targets by hand,
the label tree's balance and grouping, beam search against brute force."""

from __future__ import annotations

import sys
from dataclasses import replace
from pathlib import Path

import numba
import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.linear_model import LogisticRegression
from sklearn.svm import LinearSVC

from gandalf_xmc.engine.beam_search import TreeWeights
from gandalf_xmc.engine.huge_pages import advise_huge_pages, huge_empty, huge_full, huge_page_span
from gandalf_xmc.engine.label_tree import build_tree, label_blocks, label_vectors
from gandalf_xmc.engine.level_store import copy_range
from gandalf_xmc.engine.linear_solver import WEIGHT_PREFETCH_BYTES, SolverConfig, _UnitQueue, _work_units, train_level
from gandalf_xmc.engine.prefetch import prefetch

TIGHT = SolverConfig(C=1.0, eps=1e-6, max_iter=5000, threshold=0.0, positive_cost=1.0)


def one_node(X, t, weights=None, config=TIGHT, positive_weights=None):
    """Train a single classifier (one node under the root) on every row of X with targets t."""
    n = X.shape[0]
    T = sp.csr_matrix(np.asarray(t, dtype=np.float32).reshape(-1, 1))
    active = sp.csr_matrix(np.ones((n, 1), dtype=np.float32))
    w = np.ones(n) if weights is None else weights
    level = train_level(sp.csr_matrix(X), T, active, np.zeros(1, dtype=np.int64), w, config, positive_weights=positive_weights)
    return level.toarray()[0]


def test_hard_targets_match_liblinear():
    rng = np.random.default_rng(0)
    X = sp.random(80, 12, density=0.4, random_state=1, format="csr", dtype=np.float64)
    X = sp.hstack([X, np.ones((80, 1))], format="csr")  # a bias column, as the model adds
    margin = X @ rng.normal(size=13) + 0.1 * rng.normal(size=80)
    y = (margin > np.median(margin)).astype(float)
    ours = one_node(X, y)
    svc = LinearSVC(C=1.0, loss="squared_hinge", dual=True, fit_intercept=False, tol=1e-8, max_iter=100000).fit(X, y)
    np.testing.assert_allclose(ours, svc.coef_[0], atol=2e-4)


def rows_with_own_features(n=60):
    """``n`` rows over 5 shared features, one feature of each row's own and a bias; targets hard for
    the first half, soft for the rest (a soft target t is the row twice: a positive of weight Cp t
    and a negative of weight 1 - t), and the generator for more draws."""
    rng = np.random.default_rng(7)
    shared = sp.random(n, 5, density=0.5, random_state=8, format="csr")
    own = sp.diags(rng.uniform(0.5, 1.5, size=n), format="csr")
    X = sp.hstack([shared, own, np.ones((n, 1))], format="csr")
    t = np.where(np.arange(n) < n // 2, (rng.random(n) > 0.5).astype(float), rng.uniform(0.05, 0.95, size=n))
    return X, t, rng


def as_weighted_rows(X, t, cp, weights):
    """The rows with soft targets as weighted hard rows: (rows, labels 0/1, sample weights); ``cp``
    one positive cost, or one a row."""
    pos, neg = t > 0, t < 1
    cp = np.broadcast_to(cp, t.shape)
    X2 = sp.vstack([X[pos], X[neg]], format="csr")
    y2 = np.r_[np.ones(pos.sum()), np.zeros(neg.sum())]
    return X2, y2, np.r_[cp[pos] * t[pos] * weights[pos], (1 - t[neg]) * weights[neg]]


def test_features_of_one_row_equal_liblinear_with_hard_and_soft_targets():
    # each row has a feature no other row uses (the solver keeps those out of its weight block and
    # carries them in the row's dual variables). A soft target t is, in LIBLINEAR's terms, the row
    # twice: a positive of weight Cp t and a negative of weight 1 - t (sample weights), whose
    # optimum is the same; rows 0-29 hard, 30-59 soft.
    n = 60
    X, t, _ = rows_with_own_features(n)
    cp = 2.0
    ours = one_node(X, t, config=replace(TIGHT, positive_cost=cp))
    X2, y2, w2 = as_weighted_rows(X, t, cp, np.ones(n))
    svc = LinearSVC(C=1.0, loss="squared_hinge", dual=True, fit_intercept=False, tol=1e-10, max_iter=1000000)
    svc.fit(X2, y2, sample_weight=w2)
    np.testing.assert_allclose(ours, svc.coef_[0], atol=2e-4)
    assert np.all(ours[5 : 5 + n] != 0)  # every row's own feature kept its weight


def test_positive_weights_scale_each_rows_positive_cost_alone():
    # a row's positive weight p makes its positive entry cost Cp p t w and leaves its negative part
    # (1 - t) w as it was: LIBLINEAR on the weighted hard rows, with and without instance weights
    n = 60
    X, t, rng = rows_with_own_features(n)
    p = rng.choice([1.0, 0.5, 4.0, 8.0], size=n)
    w = rng.uniform(0.5, 2.0, size=n)
    cp = 2.0
    for weights in (np.ones(n), w):
        ours = one_node(X, t, weights=weights, config=replace(TIGHT, positive_cost=cp), positive_weights=p)
        X2, y2, w2 = as_weighted_rows(X, t, cp * p, weights)
        svc = LinearSVC(C=1.0, loss="squared_hinge", dual=True, fit_intercept=False, tol=1e-10, max_iter=1000000)
        np.testing.assert_allclose(ours, svc.fit(X2, y2, sample_weight=w2).coef_[0], atol=2e-4)
    # by hand on one point x = [1], target t, C = 1: w = 2 (cp p t - (1 - t)) / (1 + 2 (cp p t + 1 - t))
    for p1, t1 in ((4.0, 0.25), (0.5, 1.0)):
        config = SolverConfig(eps=1e-9, max_iter=10000, threshold=0.0, positive_cost=cp)
        w1 = one_node(np.ones((1, 1)), [t1], config=config, positive_weights=np.array([p1]))[0]
        assert w1 == pytest.approx(2 * (cp * p1 * t1 - (1 - t1)) / (1 + 2 * (cp * p1 * t1 + 1 - t1)), abs=1e-6)


def test_positive_weights_of_one_are_no_positive_weights_bit_for_bit():
    X, t, _ = rows_with_own_features(60)
    for config in (SolverConfig(), replace(SolverConfig(), loss="logistic")):
        np.testing.assert_array_equal(one_node(X, t, config=config), one_node(X, t, config=config, positive_weights=np.ones(60)))


@pytest.mark.parametrize("bad", [np.zeros(3), np.array([1.0, np.nan, 1.0]), np.ones(2), np.array([1.0, -1.0, 1.0])])
def test_positive_weights_must_be_one_positive_number_a_row(bad):
    with pytest.raises(ValueError, match="positive_weights must be 3 finite numbers > 0"):
        one_node(sp.identity(3, format="csr"), [1.0, 0.0, 1.0], positive_weights=bad)


def test_pruning_keeps_exactly_the_weights_past_the_threshold_private_features_included():
    # 40 children side by side over 300 rows, each row with three features no other row uses
    # (their weights come from the rows' dual variables, filtered by each row's largest such
    # value): pruning at 0.1 keeps exactly the weights of the unpruned run above 0.1 in size
    rng = np.random.default_rng(12)
    n, n_k = 300, 40
    shared = sp.random(n, 30, density=0.15, random_state=13, format="csr")
    own = sp.csr_matrix((rng.uniform(0.05, 2.0, size=3 * n), np.arange(3 * n), np.arange(0, 3 * n + 1, 3)), shape=(n, 3 * n))
    X = sp.hstack([shared, own, np.ones((n, 1))], format="csr")
    t = np.where(rng.random((n, n_k)) < 0.08, rng.choice([1.0, 0.4, 0.7], size=(n, n_k)), 0.0).astype(np.float32)
    active = sp.csr_matrix(np.ones((n, 1), dtype=np.float32))
    args = (X, sp.csr_matrix(t), active, np.zeros(n_k, dtype=np.int64), rng.uniform(0.5, 1.5, size=n))
    full = train_level(*args, replace(SolverConfig(), threshold=0.0)).toarray()
    pruned = train_level(*args, SolverConfig()).toarray()
    kept = np.where(np.abs(full) > 0.1, full, 0.0)
    private = np.abs(full[:, 30 : 30 + 3 * n])
    assert (private > 0.1).sum() > 100 and ((private > 0) & (private <= 0.1)).sum() > 100  # both sides occur
    np.testing.assert_array_equal(pruned, kept)


def test_a_soft_target_sets_the_margin_at_two_t_minus_one():
    # one point x = [1] with target t: the primal 0.5 w^2 + C (Cp t (1 - w)^2 + (1 - t) (1 + w)^2)
    # is minimised at w = 2 C (Cp t - (1 - t)) / (1 + 2 C (Cp t + 1 - t)), which is
    # 2 C (2 t - 1) / (1 + 2 C) for Cp = 1; by hand for C = 1 and C = 50, Cp = 1 and 2
    for C in (1.0, 50.0):
        for cp in (1.0, 2.0):
            for t in (0.0, 0.3, 0.75, 1.0):
                config = SolverConfig(C=C, eps=1e-9, max_iter=10000, threshold=0.0, positive_cost=cp)
                w = one_node(np.ones((1, 1)), [t], config=config)
                # float32 dual variables: at C = 50 they reach ~100, so about 1e-5 of the weight is left
                assert w[0] == pytest.approx(2 * C * (cp * t - (1 - t)) / (1 + 2 * C * (cp * t + 1 - t)), abs=1e-5)
    assert one_node(np.ones((1, 1)), [1.0], config=SolverConfig(eps=1e-9, max_iter=10000, threshold=0.0))[0] == pytest.approx(
        4 / 5
    )  # the default: positives at twice the cost


def test_instance_weight_scales_the_cost():
    # weight 3 on a point is the same problem as C = 3 on it
    a = one_node(np.ones((1, 1)), [1.0], weights=np.array([3.0]))
    b = one_node(np.ones((1, 1)), [1.0], config=SolverConfig(C=3.0, eps=1e-9, max_iter=10000, threshold=0.0, positive_cost=1.0))
    assert a[0] == pytest.approx(b[0]) and a[0] == pytest.approx(6 / 7)


def test_a_point_of_weight_zero_trains_nothing():
    # weight 0 is a point with no loss (e.g. --extra-weight 0): its targets cannot matter, and a
    # lone positive and a lone negative of weight 1 beside it keep their one-point optima, 2/3 and -2/3
    X = sp.identity(3, format="csr")
    active = sp.csr_matrix(np.ones((3, 1), dtype=np.float32))
    weights = np.array([1.0, 0.0, 1.0])
    for middle in (0.0, 1.0, 0.4):
        T = sp.csr_matrix(np.array([[1.0], [middle], [0.0]], dtype=np.float32))
        w = train_level(X, T, active, np.zeros(1, dtype=np.int64), weights, TIGHT).toarray()[0]
        np.testing.assert_allclose(w, [2 / 3, 0.0, -2 / 3], atol=1e-6)


def test_instance_weights_equal_repeated_instances():
    # the primal with weight 3 on a row is the primal with that row three times: the same optimum
    rng = np.random.default_rng(4)
    X = sp.random(30, 8, density=0.5, random_state=5, format="csr")
    t = (rng.random(30) > 0.5).astype(float)
    weights = np.ones(30)
    weights[[3, 7]] = 3.0
    repeated = sp.vstack([X] + [X[[3, 7]]] * 2, format="csr")
    np.testing.assert_allclose(one_node(X, t, weights), one_node(repeated, np.concatenate([t, t[[3, 7]], t[[3, 7]]])), atol=1e-5)


def test_threshold_prunes_small_weights():
    X = sp.csr_matrix(np.array([[1.0, 0.05], [0.0, 1.0]]))
    full = one_node(X, [1.0, 0.0])
    pruned = one_node(X, [1.0, 0.0], config=replace(TIGHT, threshold=0.5))
    assert np.all((np.abs(full) <= 0.5) | (pruned == full)) and np.all(pruned[np.abs(full) <= 0.5] == 0)


def test_children_train_on_their_parents_active_rows_only():
    # two parents; node 0 (parent 0) sees rows 0-1, node 1 (parent 1) sees rows 2-3
    X = sp.identity(4, format="csr")
    T = sp.csr_matrix(np.array([[1, 0], [0, 0], [0, 1], [0, 0]], dtype=np.float32))
    active = sp.csr_matrix(np.array([[1, 0], [1, 0], [0, 1], [0, 1]], dtype=np.float32))
    W = train_level(X, T, active, np.array([0, 1]), np.ones(4), TIGHT).toarray()
    assert np.all(W[0, 2:] == 0) and np.all(W[1, :2] == 0)
    # a lone positive (x = e_i) gets 2/3, a lone negative -2/3: each its own one-point problem
    np.testing.assert_allclose(W, [[2 / 3, -2 / 3, 0, 0], [0, 0, 2 / 3, -2 / 3]], atol=1e-6)


def test_a_weak_member_of_a_parent_is_no_negative_of_its_siblings():
    # row 2's target of parent 0 is 0.3 (a soft target of child 0 alone). Identity rows make every
    # weight its own one-point problem: a positive 2/3, a negative -2/3, a soft target t
    # 2 (2 t - 1) / 3. With min_parent_target 0.5 row 2 still trains child 0 but not child 1.
    X = sp.identity(3, format="csr")
    T = sp.csr_matrix(np.array([[1, 0], [0, 1], [0.3, 0]], dtype=np.float32))
    active = sp.csr_matrix(np.array([[1], [1], [0.3]], dtype=np.float32))

    def level(min_parent_target):
        config = replace(TIGHT, min_parent_target=min_parent_target)
        return train_level(X, T, active, np.array([0, 0]), np.ones(3), config).toarray()

    soft = 2 * (2 * 0.3 - 1) / 3
    np.testing.assert_allclose(level(0.5), [[2 / 3, -2 / 3, soft], [-2 / 3, 2 / 3, 0]], atol=1e-6)
    np.testing.assert_allclose(level(0.0), [[2 / 3, -2 / 3, soft], [-2 / 3, 2 / 3, -2 / 3]], atol=1e-6)


@pytest.mark.parametrize("loss", ["squared-hinge", "logistic"])
def test_same_result_on_one_and_two_threads(loss):
    rng = np.random.default_rng(3)
    X = sp.random(200, 30, density=0.2, random_state=2, format="csr")
    T = sp.csr_matrix((rng.random((200, 6)) > 0.7).astype(np.float32))
    active = sp.csr_matrix(np.ones((200, 2), dtype=np.float32))
    parent = np.array([0, 0, 0, 1, 1, 1])
    config = SolverConfig(loss=loss)
    a = train_level(X, T, active, parent, np.ones(200), config, seed=5, threads=1)
    b = train_level(X, T, active, parent, np.ones(200), config, seed=5, threads=2)
    assert (a != b).nnz == 0 and a.nnz > 0


def test_tree_is_balanced_and_keeps_groups_together():
    rng = np.random.default_rng(0)
    # 8 groups of 16 labels around 8 orthogonal directions: bisection depths 1-3, branching 4
    # keeps depths 3 (the 8 leaves) and 1 (the top takes the rest: 2 nodes)
    V = np.vstack([np.eye(64)[g * 8] * 3 + np.abs(rng.normal(scale=0.2, size=(16, 64))) for g in range(8)])
    tree = build_tree(sp.csr_matrix(V), branching=4, leaf_size=16, seed=0)
    assert [b.tolist() for b in tree.bounds] == [[0, 64, 128], [16 * i for i in range(9)]]
    leaves = tree.order.reshape(8, 16) // 16
    assert all(len(set(row.tolist())) == 1 for row in leaves)  # every leaf is one group
    assert sorted(tree.order.tolist()) == list(range(128))
    # the same seed gives the same tree on one or two threads
    again = build_tree(sp.csr_matrix(V), branching=4, leaf_size=16, seed=0, threads=1)
    assert np.array_equal(again.order, tree.order)


def test_tree_children_and_node_of_label():
    tree = build_tree(sp.csr_matrix(np.eye(10)), branching=2, leaf_size=3, seed=1)
    # 10 -> 5|5 -> 3,2|3,2 -> leaves of at most 3 labels (binary depths 1, 2)
    assert [b.tolist() for b in tree.bounds] == [[0, 5, 10], [0, 3, 5, 8, 10]]
    assert tree.children(0).tolist() == [0, 2, 4] and tree.children(1).tolist() == [0, 3, 5, 8, 10]
    node = tree.node_of_label(1)
    for k in range(4):
        assert sorted(np.flatnonzero(node == k).tolist()) == sorted(tree.order[tree.bounds[1][k] : tree.bounds[1][k + 1]])


def test_label_vectors_use_text_for_labels_without_points():
    X = sp.csr_matrix(np.array([[1.0, 0, 0]]))
    Y = sp.csr_matrix(np.array([[1.0, 0.0]]))
    Z = sp.csr_matrix(np.array([[0, 1.0, 0], [0, 0, 2.0]]))
    R = label_vectors(X, Y, Z, text_weight=1.0).toarray()
    np.testing.assert_allclose(R, [[2**-0.5, 2**-0.5, 0], [0, 0, 1]], atol=1e-6)


def dense_label_vectors(X, Y, Z, text_weight):
    """The label vectors by the definition, in dense float64."""

    def unit(M):
        n = np.linalg.norm(M, axis=1, keepdims=True)
        return np.divide(M, n, out=np.zeros_like(M), where=n > 0)

    return unit(unit(Y.T @ X) + text_weight * unit(Z))


def test_label_vectors_in_blocks_equal_the_definition():
    rng = np.random.default_rng(3)
    X = sp.random(60, 40, density=0.15, random_state=4, format="csr", dtype=np.float32)
    Y = sp.random(60, 25, density=0.1, random_state=5, format="csr", dtype=np.float32)  # soft targets in (0, 1)
    Z = sp.csr_matrix(rng.random((25, 40)) * (rng.random((25, 40)) < 0.1))
    want = dense_label_vectors(X.toarray(), Y.toarray(), Z.toarray(), 2.0)
    one = label_vectors(X, Y, Z, 2.0)
    blocks = label_vectors(X, Y, Z, 2.0, partial_sums_per_block=3)  # every label a block or nearly
    np.testing.assert_allclose(one.toarray(), want, atol=1e-6)
    for name in ("indptr", "indices", "data"):
        assert np.array_equal(getattr(one, name), getattr(blocks, name))


def test_label_vectors_over_the_budget_keep_each_labels_largest_features():
    X = sp.csr_matrix(np.array([[4.0, 3, 2, 1, 0], [0, 1, 0, 0, 5]]))
    Y = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 1, 1]]))
    Z = sp.csr_matrix((3, 5))
    # 3 labels, at most 6 entries: each label keeps its 2 largest features, then unit length
    R = label_vectors(X, Y, Z, 0.0, max_entries=6).toarray()
    full = dense_label_vectors(X.toarray(), Y.toarray(), np.zeros((3, 5)), 0.0)
    for row, f in zip(R, full):
        top = np.argsort(-f, kind="stable")[:2]
        want = np.zeros(5)
        want[top] = f[top] / np.linalg.norm(f[top])
        np.testing.assert_allclose(row, want, atol=1e-6)
    assert (R > 0).sum(axis=1).tolist() == [2, 2, 2]
    # label 0 (row 0 only): features 0 and 1, 4 : 3
    np.testing.assert_allclose(R[0], [0.8, 0.6, 0, 0, 0], atol=1e-6)


def test_label_vectors_within_the_budget_are_exact_however_long_a_row():
    X = sp.csr_matrix(np.array([[4.0, 3, 2, 1, 0], [0, 1, 0, 0, 5]]))
    Y = sp.csr_matrix(np.array([[1.0, 0, 1], [0, 1, 1]]))
    Z = sp.csr_matrix((3, 5))
    # partial sums 4 + 2 + 6 = 12 bound the entries: a budget of 12 keeps label 2's 5 features (12 // 3 = 4)
    R = label_vectors(X, Y, Z, 0.0, max_entries=12).toarray()
    np.testing.assert_allclose(R, dense_label_vectors(X.toarray(), Y.toarray(), np.zeros((3, 5)), 0.0), atol=1e-6)
    assert (label_vectors(X, Y, Z, 0.0, max_entries=11).toarray() > 0).sum(axis=1).tolist() == [3, 2, 3]


def test_label_blocks_cover_the_labels_within_the_budget():
    assert label_blocks(np.array([2, 2, 2, 5, 1, 1]), 4) == [(0, 2), (2, 3), (3, 4), (4, 6)]
    assert label_blocks(np.array([]), 4) == []


def brute_force_paths(levels, children, q, beam, k, sigmoid=False):
    """Beam search written plainly: every level's scores from dense weights."""

    def score(z):
        return 1 / (1 + np.exp(-z)) if sigmoid else np.exp(-(np.maximum(0, 1 - z) ** 3))

    cands, parent = list(range(levels[0].shape[0])), [1.0] * levels[0].shape[0]
    for t, W in enumerate(levels):
        s = [parent[i] * score(W[c] @ q) for i, c in enumerate(cands)]
        order = sorted(range(len(cands)), key=lambda i: (-s[i], i))
        if t == len(levels) - 1:
            return [(cands[i], s[i]) for i in order[:k]]
        keep = order[:beam]
        nxt, ps = [], []
        for i in keep:
            for ch in range(children[t][cands[i]], children[t][cands[i] + 1]):
                nxt.append(ch)
                ps.append(s[i])
        cands, parent = nxt, ps


def test_beam_search_matches_brute_force():
    rng = np.random.default_rng(7)
    D = 20
    levels = [
        sp.random(4, D, density=0.5, random_state=1, format="csr") * 2 - sp.random(4, D, density=0.3, random_state=2),
        sp.random(12, D, density=0.5, random_state=3, format="csr"),
        sp.random(30, D, density=0.4, random_state=4, format="csr"),
    ]
    children = [np.array([0, 3, 6, 9, 12]), np.array([0, 2, 5, 7, 10, 12, 15, 17, 20, 22, 25, 27, 30])]
    Q = sp.random(25, D, density=0.3, random_state=5, format="csr")
    dense = [W.toarray() for W in levels]
    for sigmoid in (False, True):  # l3-hinge scores, and the logistic loss's sigmoid
        for chunk_entries in (10**8, 0):  # the chunk layout, and the rows
            weights = TreeWeights(levels, children, chunk_entries=chunk_entries, sigmoid=sigmoid)
            for q in (Q, Q[3]):  # a batch, and a single query
                pos, sc = weights.search(q, beam=2, k=5)
                for i in range(q.shape[0]):
                    want = brute_force_paths(dense, children, q[i].toarray()[0], beam=2, k=5, sigmoid=sigmoid)
                    assert pos[i, : len(want)].tolist() == [c for c, _ in want]
                    np.testing.assert_allclose(sc[i, : len(want)], [s for _, s in want], rtol=1e-5)
    assert rng is not None


def test_search_in_rows_equals_search_in_chunks():
    """Past ``chunk_entries`` the levels are searched in their own CSR rows: the same positions and
    scores, bit for bit, as the chunk layout (which the brute force above checks)."""
    D = 40
    levels = [
        sp.random(4, D, density=0.5, random_state=11, format="csr", dtype=np.float32) * 2
        - sp.random(4, D, density=0.3, random_state=12, dtype=np.float32),
        sp.random(12, D, density=0.5, random_state=13, format="csr", dtype=np.float32),
        sp.random(30, D, density=0.4, random_state=14, format="csr", dtype=np.float32),
    ]
    children = [np.array([0, 3, 6, 9, 12]), np.array([0, 2, 5, 7, 10, 12, 15, 17, 20, 22, 25, 27, 30])]
    chunks = TreeWeights(levels, children)
    rows = TreeWeights(levels, children, chunk_entries=0)
    assert all(c is not None for c in chunks.chunks) and all(c is None for c in rows.chunks)
    Q = sp.random(60, D, density=0.2, random_state=15, format="csr", dtype=np.float32)
    Q = sp.vstack([Q, sp.csr_matrix((1, D), dtype=np.float32)], format="csr")  # and an empty query
    for beam, k in ((1, 3), (2, 5), (3, 30)):
        a, b = chunks.search(Q, beam, k), rows.search(Q, beam, k)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])


def test_a_level_spilled_to_files_equals_the_level_in_memory(tmp_path):
    """With a directory and a budget smaller than any unit's weights, each thread's finished
    units go to files and the level is assembled there: the same matrix, mapped read-only, and
    the threads' temporary files gone."""
    rng = np.random.default_rng(4)
    n, d = 300, 60
    X = sp.random(n, d, density=0.1, random_state=8, format="csr", dtype=np.float32)
    T = sp.csr_matrix((rng.random((n, 24)) < 0.1).astype(np.float32))
    parent = np.repeat(np.arange(6), 4)
    active = sp.csr_matrix(np.stack([T[:, 4 * p : 4 * p + 4].toarray().max(axis=1) for p in range(6)], axis=1))
    for threads in (1, 2):
        held = train_level(X, T, active, parent, np.ones(n), SolverConfig(), seed=2, threads=threads)
        folder = tmp_path / f"t{threads}"
        folder.mkdir()
        spilled = train_level(
            X, T, active, parent, np.ones(n), SolverConfig(), seed=2, threads=threads, spill_dir=folder, spill_bytes=1
        )
        assert held.nnz > 0 and (held != spilled).nnz == 0 and np.array_equal(held.indices, spilled.indices)
        assert not spilled.data.flags.writeable
        assert sorted(p.name for p in folder.iterdir()) == ["data.npy", "indices.npy", "indptr.npy"]
        # a budget no unit passes keeps the level in memory and writes nothing
        other = tmp_path / f"m{threads}"
        other.mkdir()
        kept = train_level(X, T, active, parent, np.ones(n), SolverConfig(), seed=2, threads=threads, spill_dir=other)
        assert (kept != held).nnz == 0 and kept.data.flags.writeable and not any(other.iterdir())


def test_a_level_partly_spilled_equals_the_level_in_memory(tmp_path):
    """A budget that some units pass leaves a thread's later units in memory beside its files:
    the assembled level is the same matrix."""
    rng = np.random.default_rng(4)
    n, d = 300, 60
    X = sp.random(n, d, density=0.1, random_state=8, format="csr", dtype=np.float32)
    T = sp.csr_matrix((rng.random((n, 24)) < 0.1).astype(np.float32))
    parent = np.repeat(np.arange(6), 4)
    active = sp.csr_matrix(np.stack([T[:, 4 * p : 4 * p + 4].toarray().max(axis=1) for p in range(6)], axis=1))
    held = train_level(X, T, active, parent, np.ones(n), SolverConfig(), seed=2, threads=2)
    partly = train_level(
        X, T, active, parent, np.ones(n), SolverConfig(), seed=2, threads=2, spill_dir=tmp_path, spill_bytes=8 * held.nnz // 5
    )
    assert (held != partly).nnz == 0 and np.array_equal(held.indices, partly.indices)
    assert not partly.data.flags.writeable


@pytest.mark.parametrize("kernel_copy", [True, False])
def test_copy_range_copies_the_bytes_between_offsets(tmp_path, monkeypatch, kernel_copy):
    """Bytes 5..5+n of one file land at 3..3+n of another, the rest of the target untouched, in
    blocks smaller than the copy, with the kernel's copy or (without it) through memory; a source
    that ends early is an error."""
    if not kernel_copy:
        monkeypatch.delattr("os.copy_file_range", raising=False)
    payload = bytes(range(256)) * 4
    source, target = tmp_path / "source", tmp_path / "target"
    source.write_bytes(b"xxxxx" + payload)
    target.write_bytes(b"\xff" * (3 + len(payload) + 7))
    with open(source, "rb") as s, open(target, "r+b") as t, open(tmp_path / "other", "wb") as other:
        copy_range(s.fileno(), t.fileno(), len(payload), 5, 3, block=100)
        with pytest.raises(OSError, match="ended"):
            copy_range(s.fileno(), other.fileno(), 10, len(payload), 0, block=4)
    written = target.read_bytes()
    assert written[3 : 3 + len(payload)] == payload
    assert written[:3] == b"\xff" * 3 and written[3 + len(payload) :] == b"\xff" * 7


def test_beam_search_with_weightless_parents_and_empty_queries():
    """A parent whose children have no weights scores them all exp(-1) (margin 0); a query with
    no features does the same everywhere, so ties keep the tree order."""
    top = sp.csr_matrix(np.array([[1.0, 0, 0, 0, 0, 0], [0, 1.0, 0, 0, 0, 0]], dtype=np.float32))
    leaves = sp.csr_matrix(
        np.array([[0, 0, 2.0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0]], dtype=np.float32)
    )  # parent 1's children: no weights
    weights = TreeWeights([top, leaves], [np.array([0, 2, 4])])
    Q = sp.csr_matrix(np.array([[0, 3.0, 0, 0, 0, 0], [0, 0, 0, 0, 0, 0], [1.0, 0, 1.0, 0, 0, 0]], dtype=np.float32))
    pos, sc = weights.search(Q, beam=1, k=2)
    e1 = np.exp(-1.0)
    # query 0 keeps parent 1 (margin 3): its children both score 1 * exp(-1)
    assert pos[0].tolist() == [2, 3] and np.allclose(sc[0], [e1, e1])
    # query 1: every margin is 0; parent 0 first by tree order, then its children in order
    assert pos[1].tolist() == [0, 1] and np.allclose(sc[1], [e1 * e1, e1 * e1])
    # query 2: parent 0 (margin 1, score 1); child 0 has margin 2 (score 1), child 1 margin 0
    assert pos[2].tolist() == [0, 1] and np.allclose(sc[2], [1.0, e1])
    for i in range(Q.shape[0]):
        want = brute_force_paths([W.toarray() for W in (top, leaves)], [np.array([0, 2, 4])], Q[i].toarray()[0], 1, 2)
        assert pos[i].tolist() == [c for c, _ in want]


def test_siblings_trained_side_by_side_equal_each_trained_alone():
    # five children of one parent share its rows and one coordinate order; run to convergence,
    # each must reach its own problem's optimum (hard, soft and absent targets mixed)
    rng = np.random.default_rng(7)
    X = sp.hstack([sp.random(60, 10, density=0.3, random_state=8, format="csr"), np.ones((60, 1))], format="csr")
    t = rng.choice([0.0, 0.0, 0.3, 1.0], size=(60, 5)).astype(np.float32)
    t[:, 3] = 0.0  # a child without positives stops passes before the rest: the others go on
    t[:, 4] = 0.0
    t[:3, 4] = 1.0
    w = rng.uniform(0.5, 2.0, size=60)
    active = sp.csr_matrix(np.ones((60, 1), dtype=np.float32))
    together = train_level(X, sp.csr_matrix(t), active, np.zeros(5, dtype=np.int64), w, TIGHT).toarray()
    for k in range(5):
        np.testing.assert_allclose(together[k], one_node(X, t[:, k], w), atol=1e-4)


def test_siblings_with_a_weight_block_past_the_prefetch_size_equal_each_trained_alone():
    # 120 children over the ~86,000 features their 3,000 rows use: the block of their weights is
    # past WEIGHT_PREFETCH_BYTES, so the descent also prefetches weight rows; a lone child's is not
    n, d, n_k, per_row = 3000, 1_000_000, 120, 30
    rng = np.random.default_rng(11)
    cols = rng.integers(0, d, size=(n, per_row))
    X = sp.csr_matrix(
        (rng.uniform(0.1, 1.0, size=n * per_row), cols.ravel(), np.arange(0, n * per_row + 1, per_row)), shape=(n, d)
    )
    X = sp.hstack([X, np.ones((n, 1))], format="csr")
    assert np.unique(X.indices).size * n_k * 4 > WEIGHT_PREFETCH_BYTES
    t = (rng.random((n, n_k)) < 0.05).astype(np.float32)
    active = sp.csr_matrix(np.ones((n, 1), dtype=np.float32))
    together = train_level(X, sp.csr_matrix(t), active, np.zeros(n_k, dtype=np.int64), np.ones(n), TIGHT)
    for k in (0, 57, 119):
        np.testing.assert_allclose(together[k].toarray()[0], one_node(X, t[:, k]), atol=1e-4)


def test_prefetch_is_only_a_hint():
    @numba.njit
    def total(values, order):
        s = 0.0
        for i in range(order.size):
            prefetch(values, order[min(i + 4, order.size - 1)])
            s += values[order[i]]
        return s

    order = np.random.default_rng(0).permutation(1000)
    assert total(np.arange(1000, dtype=np.float64), order) == 499500.0
    assert total(np.arange(5, dtype=np.int32), np.array([4, 0, 2])) == 6.0


def test_work_units_split_the_children_of_few_parents():
    # MIN_UNITS = 2: one parent of 20 children is two units of 10; two or more parents, one unit each
    assert _work_units(np.array([0, 20])).tolist() == [[0, 0, 10], [0, 10, 20]]
    assert _work_units(np.array([0, 1])).tolist() == [[0, 0, 1]]
    assert _work_units(np.array([0, 3, 6])).tolist() == [[0, 0, 3], [1, 3, 6]]


def test_a_split_parent_gives_the_same_weights_on_any_thread_count():
    rng = np.random.default_rng(4)
    X = sp.random(150, 25, density=0.2, random_state=6, format="csr")
    T = sp.csr_matrix((rng.random((150, 12)) > 0.8).astype(np.float32))
    active = sp.csr_matrix(np.ones((150, 1), dtype=np.float32))
    runs = [
        train_level(X, T, active, np.zeros(12, dtype=np.int64), np.ones(150), SolverConfig(), seed=3, threads=n)
        for n in (1, 2, 3)
    ]
    assert all((runs[0] != r).nnz == 0 for r in runs[1:])


def test_the_unit_queue_hands_out_each_unit_once_from_either_end():
    units = np.arange(15).reshape(5, 3)
    queue = _UnitQueue(units)
    taken = [queue.take(from_front=f) for f in (True, False, False, True, True)]
    assert [int(u[0]) for u in taken] == [0, 12, 9, 3, 6]
    assert queue.take(from_front=True) is None and queue.take(from_front=False) is None


def _many_units_level():
    """A level of 40 parents with two children each (40 work units), every instance active under
    every parent."""
    rng = np.random.default_rng(3)
    X = sp.csr_matrix(rng.random((30, 8), dtype=np.float32))
    T = sp.csr_matrix((rng.random((30, 80)) < 0.3).astype(np.float32))
    active = sp.csr_matrix(np.ones((30, 40), dtype=np.float32))
    return X, T, active, np.repeat(np.arange(40), 2), np.ones(30)


@pytest.mark.parametrize("stop", ["interrupt", "error"])
def test_an_interrupted_or_failed_level_stops_after_the_running_units(stop):
    """SIGINT in the main thread while the lanes train (or a lane's error) stops the level after
    the units the lanes hold, not after all 40: the pool's join is short."""
    import os
    import signal
    import threading
    import time

    calls: list[float] = []
    lock = threading.Lock()

    def on_progress(share: float) -> None:
        with lock:
            calls.append(share)
            n = len(calls)
        if n == 3:
            if stop == "error":
                raise RuntimeError("a lane failed")
            os.kill(os.getpid(), signal.SIGINT)
        # each unit takes a while, so what runs after the stop is visible; after it, long enough for
        # the main thread to see the stop even on a loaded machine
        time.sleep(0.02 if n < 3 else 0.3)

    # Python's own SIGINT handler, even where the launching shell started it with SIGINT ignored (a background job)
    previous = signal.signal(signal.SIGINT, signal.default_int_handler)
    try:
        with pytest.raises(KeyboardInterrupt if stop == "interrupt" else RuntimeError):
            train_level(*_many_units_level(), TIGHT, threads=2, on_progress=on_progress)
    finally:
        signal.signal(signal.SIGINT, previous)
    assert 3 <= len(calls) <= 5  # the third unit's lane and at most one more unit on each lane
    done = len(calls)
    time.sleep(0.1)
    assert len(calls) == done  # every lane was joined


def test_a_raised_stop_flag_abandons_a_unit_before_its_passes(monkeypatch):
    """The solver reads the level's stop flag before each pass: raised from the start, no unit
    makes a pass, so no weight moves from 0 (a unit stopped mid-way ends within its pass)."""
    import gandalf_xmc.engine.linear_solver as solver

    level = _many_units_level()
    assert train_level(*level, TIGHT).nnz > 0

    class Stopped(solver._UnitQueue):
        def __init__(self, units):
            super().__init__(units)
            self.stop[0] = 1

    monkeypatch.setattr(solver, "_UnitQueue", Stopped)
    assert train_level(*level, TIGHT).nnz == 0


def test_huge_page_span_is_the_whole_2mib_pages_inside_the_range():
    mib = 1 << 20
    assert huge_page_span(0, 4 * mib) == (0, 4 * mib)
    assert huge_page_span(1, 4 * mib) == (2 * mib, 2 * mib)  # [1, 4 MiB + 1) holds one whole page
    assert huge_page_span(4096, 2 * mib) == (2 * mib, 0)  # straddles a boundary: none fits
    assert huge_page_span(6 * mib, 2 * mib - 1) == (6 * mib, 0)


def _vm_flags_at(address: int) -> list[str]:
    """The VmFlags of the mapping of this process that holds ``address`` (from /proc/self/smaps)."""
    inside = False
    for line in open("/proc/self/smaps"):
        head = line.split()[0]
        if "-" in head and not head.endswith(":"):
            lo, hi = (int(x, 16) for x in head.split("-"))
            inside = lo <= address < hi
        elif inside and head == "VmFlags:":
            return line.split()[1:]
    raise AssertionError(f"no mapping holds {address:#x}")


def test_huge_full_has_the_values_and_asks_the_kernel_for_huge_pages():
    a = huge_full(3_000_000, 7.5, np.float32)  # 12 MB: several whole 2 MiB pages
    assert a.dtype == np.float32 and a.shape == (3_000_000,) and np.all(a == 7.5)
    b = huge_empty(1000, np.int64)  # too small for a huge page: an ordinary array
    assert b.shape == (1000,) and b.dtype == np.int64 and advise_huge_pages(b) == 1
    if not (sys.platform.startswith("linux") and Path("/sys/kernel/mm/transparent_hugepage").exists()):
        pytest.skip("transparent huge pages are a Linux feature this kernel lacks")
    start, length = huge_page_span(a.ctypes.data, a.nbytes)
    # "hg": the mapping was advised MADV_HUGEPAGE (the kernel's "always" mode does not set it)
    assert "hg" in _vm_flags_at(start) and "hg" in _vm_flags_at(start + length - 1)


def test_kernels_cached_reads_numba_s_index_for_this_python(tmp_path, monkeypatch):
    """An empty NUMBA_CACHE_DIR is a cold cache (the first training announces a compile); an index
    file of the solver for this Python makes it warm; one for another Python does not."""
    from gandalf_xmc.engine.linear_solver import kernels_cached

    monkeypatch.setenv("NUMBA_CACHE_DIR", str(tmp_path))
    assert not kernels_cached()
    other = f"py{sys.version_info.major}{sys.version_info.minor + 1}"
    (tmp_path / "engine").mkdir()
    (tmp_path / "engine" / f"linear_solver._shuffle-122.{other}.nbi").touch()
    assert not kernels_cached()
    this = f"py{sys.version_info.major}{sys.version_info.minor}"
    (tmp_path / "engine" / f"linear_solver._shuffle-122.{this}.nbi").touch()
    assert kernels_cached()


def test_a_level_reports_the_share_of_its_work_done_and_trains_the_same():
    """One report a work unit: on one thread the shares are the cumulative costs (active rows x
    children + 1) of the units in the order they are taken, largest first, ending at 1; the weights
    do not depend on being watched."""
    rng = np.random.default_rng(3)
    n, parents, children = 40, 3, 2
    X = sp.random(n, 8, density=0.5, random_state=4, format="csr", dtype=np.float32)
    active = sp.csr_matrix((rng.random((n, parents)) < np.array([0.2, 0.5, 0.9])).astype(np.float32))
    T = sp.csr_matrix((rng.random((n, parents * children)) < 0.3).astype(np.float32))
    parent_of = np.repeat(np.arange(parents), children)
    args = (X, T, active, parent_of, np.ones(n), SolverConfig())
    shares: list[float] = []
    watched = train_level(*args, threads=1, on_progress=shares.append)
    child_ptr = np.arange(0, parents * children + 1, children)
    units = _work_units(child_ptr)
    rows = np.asarray((active != 0).sum(axis=0)).ravel()
    cost = np.sort(rows[units[:, 0]] * (units[:, 2] - units[:, 1]) + 1.0)[::-1]
    np.testing.assert_allclose(shares, np.cumsum(cost) / cost.sum())
    assert shares[-1] == 1.0
    np.testing.assert_array_equal(watched.toarray(), train_level(*args, threads=1).toarray())
    two: list[float] = []
    np.testing.assert_array_equal(train_level(*args, threads=2, on_progress=two.append).toarray(), watched.toarray())
    assert len(two) == len(units) and max(two) == 1.0


LOGISTIC = replace(TIGHT, loss="logistic")


def test_logistic_loss_with_hard_targets_matches_logistic_regression():
    # scikit-learn's LogisticRegression solves the primal (L-BFGS): the dual's weights must equal them
    rng = np.random.default_rng(0)
    X = sp.random(80, 12, density=0.4, random_state=1, format="csr", dtype=np.float64)
    X = sp.hstack([X, np.ones((80, 1))], format="csr")
    margin = X @ rng.normal(size=13) + 0.3 * rng.normal(size=80)
    y = (margin > np.median(margin)).astype(float)
    for C in (1.0, 10.0):
        ours = one_node(X, y, config=replace(LOGISTIC, C=C))
        primal = LogisticRegression(C=C, fit_intercept=False, tol=1e-12, max_iter=100000).fit(X, y)
        np.testing.assert_allclose(ours, primal.coef_[0], atol=1e-3 * C)


def test_logistic_loss_with_soft_targets_and_private_features_matches_weighted_logistic_regression():
    # a soft target t is the cross-entropy of t: the row as a positive of weight Cp t and as a
    # negative of weight 1 - t; each row also has a feature no other row uses (kept in its dual
    # variables); instance weights scale both
    n = 60
    X, t, rng = rows_with_own_features(n)
    w = rng.uniform(0.5, 2.0, size=n)
    cp = 2.0
    ours = one_node(X, t, weights=w, config=replace(LOGISTIC, positive_cost=cp))
    X2, y2, w2 = as_weighted_rows(X, t, cp, w)
    primal = LogisticRegression(C=1.0, fit_intercept=False, tol=1e-12, max_iter=100000).fit(X2, y2, sample_weight=w2)
    np.testing.assert_allclose(ours, primal.coef_[0], atol=1e-3)
    assert np.all(ours[5 : 5 + n] != 0)
    # each row's own factor on its positive cost: the positive copy's weight, the negative's unchanged
    p = rng.choice([1.0, 0.5, 4.0], size=n)
    ours = one_node(X, t, weights=w, config=replace(LOGISTIC, positive_cost=cp), positive_weights=p)
    X2, y2, w2 = as_weighted_rows(X, t, cp * p, w)
    primal = LogisticRegression(C=1.0, fit_intercept=False, tol=1e-12, max_iter=100000).fit(X2, y2, sample_weight=w2)
    np.testing.assert_allclose(ours, primal.coef_[0], atol=1e-3)


def test_logistic_loss_on_one_point_solves_its_stationarity_equation():
    # one point x = [1], target t: the primal 0.5 w^2 + C (Cp t log(1 + e^-w) + (1 - t) log(1 + e^w))
    # is minimised where w = C (Cp t sigmoid(-w) - (1 - t) sigmoid(w)); solved here by bisection
    def optimum(C, cp, t):
        lo, hi = -100.0, 100.0
        for _ in range(200):
            mid = (lo + hi) / 2
            if mid - C * (cp * t / (1 + np.exp(mid)) - (1 - t) / (1 + np.exp(-mid))) > 0:
                hi = mid
            else:
                lo = mid
        return lo

    for C in (1.0, 50.0):
        for cp in (1.0, 2.0):
            for t in (0.0, 0.3, 0.75, 1.0):
                w = one_node(np.ones((1, 1)), [t], config=replace(LOGISTIC, C=C, positive_cost=cp))
                assert w[0] == pytest.approx(optimum(C, cp, t), abs=2e-3)
    # with a large cost the margin of a soft target approaches its log-odds log(Cp t / (1 - t))
    w = one_node(np.ones((1, 1)), [0.75], config=replace(LOGISTIC, C=1e4, positive_cost=1.0))
    assert w[0] == pytest.approx(np.log(3.0), abs=2e-3)


def test_logistic_siblings_trained_side_by_side_equal_each_trained_alone():
    rng = np.random.default_rng(7)
    X = sp.hstack([sp.random(60, 10, density=0.3, random_state=8, format="csr"), np.ones((60, 1))], format="csr")
    t = rng.choice([0.0, 0.0, 0.3, 1.0], size=(60, 5)).astype(np.float32)
    t[:, 3] = 0.0
    w = rng.uniform(0.5, 2.0, size=60)
    active = sp.csr_matrix(np.ones((60, 1), dtype=np.float32))
    together = train_level(X, sp.csr_matrix(t), active, np.zeros(5, dtype=np.int64), w, LOGISTIC).toarray()
    for k in range(5):
        np.testing.assert_allclose(together[k], one_node(X, t[:, k], w, config=LOGISTIC), atol=1e-4)


def test_logistic_weak_rows_train_only_the_children_they_are_positives_of():
    # rows whose target of the parent is below min_parent_target are no negatives of its children:
    # the same weights as training each child on its strong rows and its own weak positives
    rng = np.random.default_rng(3)
    n = 50
    X = sp.hstack([sp.random(n, 8, density=0.4, random_state=4, format="csr"), np.ones((n, 1))], format="csr")
    t = np.where(rng.random((n, 3)) < 0.3, 1.0, 0.0).astype(np.float32)
    parent = np.where(np.arange(n) < 35, 1.0, 0.2).astype(np.float32)
    t[35:] *= 0.2  # a weak row's targets are at most its parent's
    active = sp.csr_matrix(parent.reshape(-1, 1))
    together = train_level(X, sp.csr_matrix(t), active, np.zeros(3, dtype=np.int64), np.ones(n), LOGISTIC).toarray()
    for k in range(3):
        rows = np.flatnonzero((np.arange(n) < 35) | (t[:, k] > 0))
        alone = one_node(X[rows], t[rows, k], config=LOGISTIC)
        np.testing.assert_allclose(together[k], alone, atol=1e-4)


def test_an_unknown_loss_is_refused_in_one_line():
    with pytest.raises(ValueError, match="solver.loss must be one of squared-hinge, logistic"):
        SolverConfig(loss="hinge")
