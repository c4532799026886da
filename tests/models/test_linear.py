"""The XR-Linear model: predictions against a dense recomputation, soft targets and instance
weights, determinism, save/load without pickles or torch, and the top-k kernel."""

from __future__ import annotations

import json
import re
import subprocess
import sys

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.augment import TrainingSet
from gandalf_xmc.data.dataset import Split
from gandalf_xmc.engine.beam_search import TreeWeights
from gandalf_xmc.engine.layout_format import CHUNK_FILES, has_chunks
from gandalf_xmc.engine.level_chunks import to_csr
from gandalf_xmc.engine.linear_solver import SolverConfig
from gandalf_xmc.engine.node_targets import SHORT_ROW, node_targets
from gandalf_xmc.errors import ConfigError
from gandalf_xmc.models.linear import LinearConfig, XRLinear
from gandalf_xmc.models.registry import MODELS, build_model, load_trained, model_config
from gandalf_xmc.row_ops import row_times, top_k_of_row
from gandalf_xmc.sparse_ops import row_times_compiled, top_k_per_row
from gandalf_xmc.workflow.fitting import fit_arguments, fit_model

TEXTS = ["alpha beta", "gamma delta", "alpha gamma", "epsilon zeta", "beta zeta", "delta omega", "alpha alpha"]
LABELS = ["alpha", "gamma", "zeta", "omega"]
Y = sp.csr_matrix(
    np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0], [0, 0, 0, 1], [1, 0, 0, 0]], dtype=np.float32)
)
EXACT = SolverConfig(C=1.0, eps=1e-7, max_iter=20000, threshold=0.0)


def small(**changes) -> LinearConfig:
    return LinearConfig(**{"branching": 2, "leaf_size": 2, "threads": 1, **changes})


def random_sparse(rng, n, m, density, levels=4):
    # few distinct values, so that ties are common
    S = sp.random(n, m, density=density, format="csr", random_state=rng, dtype=np.float32)
    S.data = np.ceil(S.data * levels).astype(np.float32)
    return S


def test_top_k_per_row_matches_brute_force_with_ties():
    rng = np.random.default_rng(0)
    S = random_sparse(rng, 40, 30, 0.3)
    for k in (1, 3, 7, 50):
        T = top_k_per_row(S, k).toarray()
        D = S.toarray()
        for i in range(D.shape[0]):
            nz = np.flatnonzero(D[i])
            want = set(sorted(nz, key=lambda c: (-D[i, c], c))[:k])
            assert set(np.flatnonzero(T[i])) == want
            assert np.array_equal(T[i][list(want)], D[i][list(want)])


def test_top_k_of_one_row_is_the_batch_paths_row_with_ties_duplicates_and_unsorted_columns():
    """A single query's rows take their own path (no batch bookkeeping): the same entries, values,
    column order and dtypes as the same row inside a batch, and the caller's matrix is not changed."""
    rng = np.random.default_rng(3)
    S = random_sparse(rng, 60, 40, 0.3).tocoo()
    extra = rng.choice(S.nnz, 80)  # entries repeated with another value: duplicates to be summed
    rows, cols = np.concatenate([S.row, S.row[extra]]), np.concatenate([S.col, S.col[extra]])
    vals = np.concatenate([S.data, np.ceil(rng.random(80) * 4).astype(np.float32)])
    for distinct, (r, c, v) in ((True, (S.row, S.col, S.data)), (False, (rows, cols, vals))):
        for i in range(S.shape[0]):
            at = rng.permutation(np.flatnonzero(r == i))  # the row's entries in a shuffled order
            row = sp.csr_matrix((v[at], c[at], np.array([0, at.size])), shape=(1, S.shape[1]))
            before = (row.data.copy(), row.indices.copy())
            for k in (1, 3, 7, 50):
                one = top_k_per_row(row, k, distinct=distinct)
                batch = top_k_per_row(sp.vstack([row, row], format="csr"), k, distinct=distinct)[0]
                assert np.array_equal(one.indices, batch.indices) and np.array_equal(one.data, batch.data)
                assert one.data.dtype == batch.data.dtype == np.float32 and one.has_sorted_indices
            assert np.array_equal(row.data, before[0]) and np.array_equal(row.indices, before[1])
    assert top_k_per_row(sp.csr_matrix((1, 5), dtype=np.float32), 3).nnz == 0


def test_a_row_times_a_matrix_is_scipys_product_bit_for_bit():
    """A single query's product without matrices (the knn's two products) gives scipy's float32
    sums, zero sums left out (a cancellation in the last case), and its top-k is top_k_per_row's row."""
    rng = np.random.default_rng(5)
    M = sp.csr_matrix(random_sparse(rng, 50, 70, 0.2) - random_sparse(rng, 50, 70, 0.1), dtype=np.float32)
    cases = []
    for size in (0, 1, 7, 30):
        ids = np.sort(rng.choice(50, size, replace=False)).astype(np.int32)
        cases.append((M, ids, (rng.random(size) + 0.1).astype(np.float32)))
    # column 3: 1 * 0.5 + 1 * -0.5 = 0, left out as scipy leaves it out; column 9 kept
    cancel = sp.csr_matrix(np.array([[0, 0, 0, 0.5, 0, 0, 0, 0, 0, 1.0], [0, 0, 0, -0.5] + [0] * 6], dtype=np.float32))
    cases.append((cancel, np.array([0, 1], dtype=np.int32), np.ones(2, dtype=np.float32)))
    for A, ids, values in cases:
        want = sp.csr_matrix((values, ids, [0, ids.size]), shape=(1, A.shape[0])) @ A
        want.sort_indices()
        for product in (row_times, row_times_compiled):  # numpy's, and the compiled twin
            cols, sums = product(ids, values, A.indptr, A.indices, A.data, A.shape[1])
            order = np.argsort(cols)
            assert np.array_equal(cols[order], want.indices) and np.array_equal(sums[order], want.data)
            assert sums.dtype == np.float32
            for k in (1, 5, 100):  # against the batch path's top k (a matrix of two rows)
                top = top_k_per_row(sp.vstack([want, want], format="csr"), k, distinct=True)[0]
                got = top_k_of_row(cols, sums, k)
                assert np.array_equal(got[0], top.indices) and np.array_equal(got[1], top.data)
    for product in (row_times, row_times_compiled):
        args = (np.array([0, 1], np.int32), np.ones(2, np.float32), cancel.indptr, cancel.indices, cancel.data, 10)
        assert product(*args)[0].tolist() == [9]


def test_node_targets_take_the_largest_target_of_a_nodes_labels():
    Ys = sp.csr_matrix(np.array([[0.2, 0.7, 0, 0], [0, 0, 0.4, 0], [1, 0, 0, 0.3]], dtype=np.float32))
    T = node_targets(Ys, np.array([0, 0, 1, 1]), 2).toarray()
    np.testing.assert_allclose(T, [[0.7, 0], [0, 0.4], [1, 0.3]])
    # a stored zero is no target; labels listed out of node order merge all the same
    Z = sp.csr_matrix(
        (np.array([0.0, 0.5, 0.9, 0.1], dtype=np.float32), np.array([3, 1, 2, 0]), np.array([0, 2, 4])), shape=(2, 4)
    )
    T = node_targets(Z, np.array([0, 0, 1, 1]), 2)
    assert T.nnz == 3 and T.has_sorted_indices
    np.testing.assert_allclose(T.toarray(), [[0.5, 0], [0.1, 0.9]])


def test_node_targets_equal_a_dense_maximum_for_short_and_long_rows():
    """Rows of up to SHORT_ROW labels (sorted by insertion) and longer ones (by argsort) give a
    node the largest target of its labels, as a dense maximum over each node's columns does."""
    rng = np.random.default_rng(3)
    n_labels, n_nodes = 3 * SHORT_ROW, 13
    node_of_label = rng.integers(0, n_nodes, size=n_labels)
    lengths = [0, 1, 5, 90, SHORT_ROW, SHORT_ROW + 1, 2 * SHORT_ROW]
    rows = [rng.choice(n_labels, size=k, replace=False) for k in lengths]
    Ys = sp.csr_matrix(
        (
            np.concatenate([rng.random(k).astype(np.float32) for k in lengths]),
            np.concatenate(rows),
            np.concatenate([[0], np.cumsum(lengths)]),
        ),
        shape=(len(lengths), n_labels),
    )
    D = Ys.toarray()
    want = np.stack([D[:, node_of_label == k].max(axis=1, initial=0.0) for k in range(n_nodes)], axis=1)
    T = node_targets(Ys, node_of_label, n_nodes)
    assert all(np.all(np.diff(T.indices[a:b]) > 0) for a, b in zip(T.indptr[:-1], T.indptr[1:]))  # ascending, merged
    np.testing.assert_array_equal(T.toarray(), want)


def test_predictions_equal_a_dense_recomputation_of_the_tree():
    model = XRLinear(small(beam=8)).fit(TEXTS, Y, LABELS, progress=False)
    queries = ["alpha zeta", "gamma", "delta omega beta", "nothing known"]
    P = model.predict(queries, k=4).toarray()
    Q = model.features(queries).toarray()
    dense = [W.toarray() for W in model.weights.levels]

    def level(z):
        return np.exp(-(np.maximum(0, 1 - z) ** 3))

    position = np.empty(len(LABELS), dtype=int)
    position[model.tree.order] = np.arange(len(LABELS))
    for i, q in enumerate(Q):
        for label in range(len(LABELS)):
            pos, score = position[label], 1.0
            for t, bounds in enumerate(model.tree.bounds):
                node = np.searchsorted(bounds, pos, side="right") - 1
                score *= level(dense[t][node] @ q)
            score *= level(dense[-1][pos] @ q)
            # a beam this wide keeps every path, so every label is scored
            assert P[i, label] == pytest.approx(score, rel=1e-5)


def test_it_learns_the_obvious_labels():
    model = XRLinear(small()).fit(TEXTS, Y, LABELS, progress=False)
    top = model.predict(["alpha beta", "epsilon zeta", "delta omega"], k=1)
    assert top.indices.tolist() == [0, 2, 3]


def test_training_says_how_far_a_long_level_is_and_not_a_short_one(capsys, monkeypatch):
    """With progress on, a level whose training outlasts LEVEL_PROGRESS_SECONDS says its share of
    work done; at the default 15 s these tiny levels say nothing between their start and end."""
    from gandalf_xmc.engine import tree_levels

    XRLinear(small()).fit(TEXTS, Y, LABELS, progress=True)
    assert "classifiers' work" not in capsys.readouterr().out
    monkeypatch.setattr(tree_levels, "LEVEL_PROGRESS_SECONDS", 0.0)
    XRLinear(small()).fit(TEXTS, Y, LABELS, progress=True)
    said = [line for line in capsys.readouterr().out.splitlines() if "classifiers' work" in line]
    assert said and all("% of its classifiers' work" in line and "100%" not in line for line in said), said


def test_soft_targets_rank_as_their_values():
    texts = ["shared words here"] * 2
    Ys = sp.csr_matrix(np.array([[0.9, 0.0, 0.0], [0.0, 0.3, 0.0]], dtype=np.float32))
    model = XRLinear(LinearConfig(leaf_size=10, threads=1, solver=EXACT)).fit(texts, Ys, ["a", "b", "c"], progress=False)
    p = model.predict(["shared words here"], k=3).toarray()[0]
    assert p[0] > p[1] > p[2]


def test_label_point_weight_reaches_the_solver_as_instance_weights(monkeypatch):
    from gandalf_xmc.engine import tree_levels

    seen = []
    real = tree_levels.train_level

    def spy(X, T, active, parent_of, weights, config, **options):
        seen.append(np.asarray(weights).copy())
        return real(X, T, active, parent_of, weights, config, **options)

    monkeypatch.setattr(tree_levels, "train_level", spy)
    split = Split([str(i) for i in range(7)], TEXTS, sp.csr_matrix(Y))
    train = TrainingSet(split, np.array([False] * 5 + [True] * 2), label_point_weight=0.25)
    fit_model(XRLinear(small()), train, LABELS, progress=False)
    assert seen and all(w.tolist() == [1.0] * 5 + [0.25] * 2 for w in seen)


def test_label_point_positive_cost_reaches_the_solver_for_label_points_alone(monkeypatch):
    from gandalf_xmc.engine import tree_levels

    seen = []
    real = tree_levels.train_level

    def spy(X, T, active, parent_of, weights, config, **options):
        seen.append((np.asarray(weights).copy(), options["positive_weights"]))
        return real(X, T, active, parent_of, weights, config, **options)

    monkeypatch.setattr(tree_levels, "train_level", spy)
    split = Split([str(i) for i in range(7)], TEXTS, sp.csr_matrix(Y))
    mask = np.array([False] * 5 + [True] * 2)
    for name in ("linear", "linear-knn"):
        seen.clear()
        model = build_model(model_config(name, seed=0, threads=1))
        fit_model(model, TrainingSet(split, mask, label_point_weight=0.5, label_point_positive_cost=4.0), LABELS, progress=False)
        assert seen and all(w.tolist() == [1.0] * 5 + [0.5] * 2 and p.tolist() == [1.0] * 5 + [4.0] * 2 for w, p in seen)
    seen.clear()
    fit_model(XRLinear(small()), TrainingSet(split, mask), LABELS, progress=False)  # the default: no factors at all
    assert seen and all(p is None for _, p in seen)


def test_a_label_point_positive_cost_is_refused_by_models_without_a_loss():
    split = Split([str(i) for i in range(7)], TEXTS, sp.csr_matrix(Y))
    train = TrainingSet(split, np.array([False] * 5 + [True] * 2), label_point_positive_cost=4.0)
    message = "a label-point positive cost (--label-point-positive-cost, gandalf-tempered-firm) applies to the models trained with a loss, not to knn"
    with pytest.raises(ConfigError, match=re.escape(message)):
        fit_arguments(train, MODELS["knn"])
    for name in ("astec", "inceptionxml", "inceptionxml-lf", "dual-encoder", "ngame", "linear-knn"):  # every row with a loss
        assert fit_arguments(train, MODELS[name])[3]["positive_weight"].tolist() == [1.0] * 5 + [4.0] * 2
    assert fit_arguments(TrainingSet(split, np.zeros(7, dtype=bool), label_point_positive_cost=4.0), MODELS["knn"])[3] == {}


def test_bad_positive_weights_are_refused():
    for bad in (np.array([1.0] * 6 + [0.0]), np.array([1.0] * 6 + [np.inf]), np.ones(6)):
        with pytest.raises(ConfigError, match="positive_weight must be 7 finite numbers > 0"):
            XRLinear(small()).fit(TEXTS, Y, LABELS, progress=False, positive_weight=bad)


def test_points_of_weight_zero_train_and_bad_weights_are_refused():
    model = XRLinear(small()).fit(TEXTS, Y, LABELS, progress=False, sample_weight=np.array([1.0] * 5 + [0.0] * 2))
    assert np.all(np.isfinite(model.predict(["alpha beta"], k=2).data))
    for bad in (np.array([1.0] * 6 + [-1.0]), np.array([1.0] * 6 + [np.nan]), np.ones(6)):
        with pytest.raises(ConfigError, match="sample_weight"):
            XRLinear(small()).fit(TEXTS, Y, LABELS, progress=False, sample_weight=bad)


def test_label_points_without_negatives_or_shares_are_refused_for_models_without_epochs():
    split = Split([str(i) for i in range(7)], TEXTS, sp.csr_matrix(Y))
    mask = np.array([False] * 5 + [True] * 2)
    for name in ("linear", "knn", "linear-knn"):
        with pytest.raises(ConfigError, match="--no-label-point-negatives applies to the models trained in epochs"):
            fit_arguments(TrainingSet(split, mask, label_point_negatives=False), MODELS[name])
        with pytest.raises(ConfigError, match="--label-point-share applies to the models trained in epochs"):
            fit_arguments(TrainingSet(split, mask, label_point_share=0.5), MODELS[name])


def test_same_seed_same_weights_on_one_or_two_threads(tmp_path):
    a = XRLinear(small(threads=1)).fit(TEXTS * 30, sp.vstack([Y] * 30), LABELS, progress=False)
    b = XRLinear(small(threads=2)).fit(TEXTS * 30, sp.vstack([Y] * 30), LABELS, progress=False)
    a.save(tmp_path / "a")
    b.save(tmp_path / "b")
    files = sorted(f.relative_to(tmp_path / "a") for f in (tmp_path / "a").rglob("*") if f.is_file())
    assert files == sorted(f.relative_to(tmp_path / "b") for f in (tmp_path / "b").rglob("*") if f.is_file())
    for f in files:
        if f.name != "model.json":  # the record holds timings and the thread count
            assert (tmp_path / "a" / f).read_bytes() == (tmp_path / "b" / f).read_bytes(), f


def test_levels_written_to_disk_keep_their_layout_alone_in_float16(tmp_path, monkeypatch):
    """A model whose levels outgrow memory (here: every level, from a one-byte budget) is trained,
    saved and loaded from files: each level is its search layout alone, whose weights are the
    in-memory model's rounded to float16, and it predicts exactly as the in-memory model with its
    weights so rounded."""
    from gandalf_xmc.engine import linear_solver

    texts, targets = TEXTS * 30, sp.vstack([Y] * 30)
    held = XRLinear(small(threads=2)).fit(texts, targets, LABELS, progress=False)
    monkeypatch.setattr(linear_solver, "SPILL_BYTES", 1)
    spilled = XRLinear(small(threads=2)).fit(texts, targets, LABELS, checkpoint_dir=tmp_path / "ckpt", progress=False)
    assert all(f is not None for f in spilled._level_files)  # each level went to files
    assert all(c.value.dtype == np.float16 and not c.value.flags.writeable for c in spilled.weights.chunks)  # mapped
    rounded = [
        sp.csr_matrix((W.data.astype(np.float16).astype(np.float32), W.indices, W.indptr), shape=W.shape)
        for W in held.weights.levels
    ]
    for t, (want, level, chunks) in enumerate(zip(rounded, spilled.weights.levels, spilled.weights.chunks)):
        assert np.array_equal(level.indptr, want.indptr) and level.shape == want.shape
        got = to_csr(chunks, spilled.weights.bounds[t], want.shape[1])
        assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
        assert np.array_equal(got.data, want.data)
    held.save(tmp_path / "held")
    spilled.save(tmp_path / "spilled")
    for t in range(len(held.weights.levels)):
        names = sorted(f.name for f in (tmp_path / "spilled" / f"weights_level{t}").iterdir())
        assert names == sorted(["indptr.npy", *(f"chunk_{name}.npy" for name in CHUNK_FILES)])
        level = f"weights_level{t}/indptr.npy"
        assert (tmp_path / "held" / level).read_bytes() == (tmp_path / "spilled" / level).read_bytes()
    reloaded = XRLinear.load(tmp_path / "spilled")
    assert not any(has_chunks(f) for f in (tmp_path / "held").glob("weights_level*"))
    assert [c.name for c in reloaded.weights.chunks + spilled.weights.chunks] == 2 * [
        str(tmp_path / "spilled" / f"weights_level{t}") for t in range(len(held.weights.levels))
    ]
    as_rounded = TreeWeights(rounded, [held.tree.children(t) for t in range(len(held.tree.bounds))])
    queries = ["alpha delta", "zeta omega", "beta"]
    Q = held.featurizer.transform(queries)
    want_positions, want_scores = as_rounded.search(held._with_bias(Q), held.config.beam, 3)
    for model in (spilled, reloaded):
        positions, scores = model.weights.search(held._with_bias(Q), held.config.beam, 3)
        assert np.array_equal(positions, want_positions) and np.array_equal(scores, want_scores)
        one = model.weights.search(held._with_bias(Q[1]), held.config.beam, 3)
        assert np.array_equal(one[0][0], want_positions[1]) and np.array_equal(one[1][0], want_scores[1])
        got, want = model.predict(queries, k=3), held.predict(queries, k=3)
        assert np.array_equal(got.indices, want.indices)  # rounding moves no label here
        np.testing.assert_allclose(got.data, want.data, rtol=1e-2)
    # training's files went once the model was saved, with the checkpoint directory made for them
    assert not (tmp_path / "ckpt").exists()
    # a model never saved takes them with it; a checkpoint directory that was there stays
    (tmp_path / "ckpt").mkdir()
    (tmp_path / "ckpt" / "other").write_text("kept")
    unsaved = XRLinear(small(threads=2)).fit(texts, targets, LABELS, checkpoint_dir=tmp_path / "ckpt", progress=False)
    assert sorted(p.name for p in (tmp_path / "ckpt").iterdir()) == sorted(["other", unsaved._scratch.path.name])
    del unsaved
    import gc

    gc.collect()
    assert [p.name for p in (tmp_path / "ckpt").iterdir()] == ["other"]


def test_save_load_predicts_the_same_without_pickles_or_torch(tmp_path):
    model = XRLinear(small()).fit(TEXTS, Y, LABELS, progress=False)
    model.save(tmp_path / "m")
    again = load_trained(tmp_path / "m")
    queries = ["alpha zeta", "unknown words", "gamma"]
    a, b = model.predict(queries, k=3), again.predict(queries, k=3)
    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.indptr, b.indptr)
    np.testing.assert_allclose(a.data, b.data, rtol=1e-6)  # older scipy sums a product in another order
    for f in (tmp_path / "m").glob("*.np[yz]"):
        np.load(f, allow_pickle=False)  # would raise on a pickled object
    code = (
        "import sys; from gandalf_xmc.models.registry import load_trained; "
        f"load_trained({str(tmp_path / 'm')!r}).predict(['alpha'], k=2); print('torch' in sys.modules)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "False"
    assert json.loads((tmp_path / "m" / "model.json").read_text())["kind"] == "linear"


def test_page_in_reads_the_mapped_search_layout_and_changes_nothing(tmp_path, monkeypatch):
    from gandalf_xmc.engine import linear_solver

    small_model = XRLinear(small()).fit(TEXTS * 5, sp.vstack([Y] * 5), LABELS, progress=False)
    small_model.save(tmp_path / "small")
    assert small_model.page_in() == 0 and load_trained(tmp_path / "small").page_in() == 0  # searched in memory
    monkeypatch.setattr(linear_solver, "SPILL_BYTES", 1)  # every level to files, its search layout too
    model = XRLinear(small()).fit(TEXTS * 5, sp.vstack([Y] * 5), LABELS, checkpoint_dir=tmp_path / "c", progress=False)
    model.save(tmp_path / "m")
    again = load_trained(tmp_path / "m")
    # the layouts' per-entry arrays are read mapped (read-only); their per-parent pointers are copies
    arrays = [a for chunks in again.weights.chunks for a in chunks.arrays]
    want = sum(a.nbytes for a in arrays if not a.flags.writeable)
    entry_files = [
        f
        for name in ("feat", "feat_end", "end_mark", "child", "value")
        for f in (tmp_path / "m").glob(f"weights_level*/chunk_{name}.npy")
    ]
    assert want > 0 and want == sum(f.stat().st_size - 128 for f in entry_files)  # each less its header
    queries = ["alpha zeta", "gamma", "omega delta"]
    before = again.predict(queries, k=3)
    assert again.page_in() == want and model.page_in() == want
    after = again.predict(queries, k=3)
    assert (before != after).nnz == 0 and np.array_equal(before.indices, after.indices)


def test_saving_over_a_model_leaves_none_of_its_layouts_behind(tmp_path, monkeypatch):
    """A model saved where a larger one was (the CLI's --force) must not keep that one's search
    layouts: a layout that matches the tree's shape would be searched instead of the new weights."""
    from gandalf_xmc.engine import linear_solver

    texts, targets = TEXTS * 30, sp.vstack([Y] * 30)
    with monkeypatch.context() as patch:
        patch.setattr(linear_solver, "SPILL_BYTES", 1)
        XRLinear(small(seed=1)).fit(texts, targets, LABELS, checkpoint_dir=tmp_path / "c", progress=False).save(tmp_path / "m")
    assert any(has_chunks(f) for f in (tmp_path / "m").glob("weights_level*"))
    held = XRLinear(small(seed=2)).fit(texts[::-1], targets[::-1], LABELS, progress=False)
    held.save(tmp_path / "m")
    assert not any(has_chunks(f) for f in (tmp_path / "m").glob("weights_level*"))
    queries = ["alpha delta", "zeta omega", "gamma"]
    got, want = XRLinear.load(tmp_path / "m").predict(queries, k=3), held.predict(queries, k=3)
    assert np.array_equal(got.indices, want.indices) and np.array_equal(got.data, want.data)


def test_a_model_of_its_own_features_given_as_rows_equals_the_model_of_texts(tmp_path):
    """The TF-IDF rows (and label rows) the model computes from texts, given by hand as a matrix,
    train the same model bit for bit; dense rows too. Saved and loaded it predicts the same,
    ranked answers name labels by position, and texts or rows of another width get one line."""
    from gandalf_xmc.features import TextFeaturizer
    from gandalf_xmc.predictor import load_predictor

    cfg = small()
    featurizer = TextFeaturizer(cfg.ngram_max, min_df=cfg.min_df, char_ngrams=cfg.char_ngrams)
    XZ = featurizer.fit_transform(TEXTS + LABELS)
    X, Z = XZ[: len(TEXTS)], XZ[len(TEXTS) :]
    queries = ["alpha zeta", "gamma", "delta omega beta"]
    by_text = XRLinear(cfg).fit(TEXTS, Y, LABELS, progress=False).predict(queries, k=4)
    rows_model = XRLinear(cfg).fit(X, Y, label_features=Z, progress=False)
    Q = featurizer.transform(queries)
    assert (rows_model.predict(Q, k=4) != by_text).nnz == 0
    dense = XRLinear(cfg).fit(X.toarray(), Y, label_features=Z.toarray(), progress=False)
    assert (dense.predict(Q.toarray(), k=4) != by_text).nnz == 0
    rows_model.save(tmp_path / "m")
    loaded = load_trained(tmp_path / "m")
    assert (loaded.predict(Q, k=4) != by_text).nnz == 0
    light = load_predictor(tmp_path / "m", light=True).model  # the numpy-only reader hands it to the full one
    assert isinstance(light, XRLinear)
    top = light.predict_labels(Q, k=1)
    assert [t[0]["id"] for t in top] == [str(j) for j in by_text.toarray().argmax(axis=1)]
    with pytest.raises(ConfigError, match="precomputed features"):
        light.predict_labels(["alpha"], k=1)
    with pytest.raises(ConfigError, match="columns"):
        loaded.predict(sp.csr_matrix((1, X.shape[1] + 1), dtype=np.float32))
    with pytest.raises(ConfigError, match="reads texts"):
        XRLinear(cfg).fit(TEXTS, Y, LABELS, progress=False).predict(Q)


def test_character_ngrams_up_to_a_number_of_texts_and_the_saved_settings_say_which(tmp_path):
    # 7 training texts and 4 label texts: 11 texts
    with_chars = XRLinear(small()).fit(TEXTS, Y, LABELS, progress=False)
    assert with_chars.config.char_ngrams == (3, 5) and with_chars.featurizer.char_vectorizer is not None
    words = XRLinear(small(char_ngrams_max_texts=10)).fit(TEXTS, Y, LABELS, progress=False)
    assert words.config.char_ngrams is None and words.featurizer.char_vectorizer is None
    assert words.featurizer.n_features < with_chars.featurizer.n_features
    at_limit = XRLinear(small(char_ngrams_max_texts=11)).fit(TEXTS, Y, LABELS, progress=False)
    assert at_limit.config.char_ngrams == (3, 5)
    words.save(tmp_path / "m")
    saved = json.loads((tmp_path / "m" / "model.json").read_text())["model"]
    assert saved["char_ngrams"] is None and "char_vocabulary" not in json.loads((tmp_path / "m" / "features.json").read_text())
