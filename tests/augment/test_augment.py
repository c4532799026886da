"""Augmentation: Gandalf points, Table 2 training sets, subsampling, LabelMix and the written files."""

from __future__ import annotations

import gzip
import json

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.augment import AugmentConfig, LabelMix, graph_for, select_labels, training_set
from gandalf_xmc.augment.export import write_augmented_dataset
from gandalf_xmc.data import load_dataset, read_lf_json, read_sparse_text
from gandalf_xmc.data.stats import frequency_bins
from gandalf_xmc.graph import GraphConfig, label_graph

from helpers import LABELS, TRAIN, run_cli


def test_gandalf_training_set_by_hand(tiny_dir):
    ds = load_dataset(tiny_dir)
    g = training_set(ds, AugmentConfig("gandalf", GraphConfig(delta=0.1)))
    assert len(g) == len(TRAIN) + len(LABELS)
    assert g.texts[: len(TRAIN)] == [t for t, _ in TRAIN] and g.texts[len(TRAIN) :] == LABELS
    # label 0 ("red apple") is in points 0, 1, 2; label 1 in 0, 1; label 2 in 1, 3
    np.testing.assert_allclose(
        g.Y[len(TRAIN) :].toarray(),
        [
            [1, 2 / 3, 1 / 3, 0],
            [1, 1, 1 / 2, 0],
            [1 / 2, 1 / 2, 1, 0],
            [0, 0, 0, 1],
        ],
        rtol=1e-6,
    )
    z = training_set(ds, AugmentConfig("z-only"))
    assert z.texts == LABELS
    ident = training_set(ds, AugmentConfig("identity"))
    np.testing.assert_array_equal(ident.Y[len(TRAIN) :].toarray(), np.eye(4))
    none = training_set(ds, AugmentConfig("none"))
    assert none.texts == [t for t, _ in TRAIN]


def test_uniform_sample_has_n_points_from_g(tiny_dir):
    ds = load_dataset(tiny_dir)
    g = training_set(ds, AugmentConfig("gandalf"))
    u = training_set(ds, AugmentConfig("uniform", seed=1))
    assert len(u) == len(TRAIN)
    assert set(u.uids) <= set(g.uids) and len(set(u.uids)) == len(u.uids)
    assert training_set(ds, AugmentConfig("uniform", seed=1)).uids == u.uids


def test_select_labels_random_and_tail():
    freq = np.array([50, 40, 30, 5, 4, 3, 2, 1, 1, 0, 0, 0])
    r = select_labels(freq, 0.5, "random", seed=0)
    assert r.size == 6 and np.all(np.diff(r) > 0)
    assert np.array_equal(r, select_labels(freq, 0.5, "random", seed=0))
    # total 136, bins of 27.2: label 0 -> bin 0, 1 -> bin 1, 2 -> bin 3, labels 3..11 -> bin 4 (tail)
    np.testing.assert_array_equal(frequency_bins(freq), [0, 1, 3] + [4] * 9)
    t = select_labels(freq, 0.25, "tail", seed=0)
    assert t.size == 3 and set(t) <= set(range(3, 12))
    np.testing.assert_array_equal(select_labels(freq, 10 / 12, "tail", seed=0), [2] + list(range(3, 12)))
    full = select_labels(freq, 1.0, "tail")
    assert np.array_equal(full, np.arange(freq.size))
    with pytest.raises(ValueError):
        select_labels(freq, 0.0)


def test_tail_sampling_fills_from_tail_bins_first():
    freq = np.array([100] + [1] * 100)  # label 0 is the head; bins 1.. hold the singletons
    picked = select_labels(freq, 50 / 101, "tail", seed=0)
    assert 0 not in picked and picked.size == 50


def test_labelmix_by_hand():
    Y = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 1, 0, 0]], dtype=np.float32))
    graph = sp.csr_matrix(np.array([[1, 0.05, 0.6, 0], [0, 1, 0, 0.3], [0, 0, 1, 0], [0, 0, 0, 1]], dtype=np.float32))
    mix = LabelMix(graph, ["z0", "z1", "z2", "z3"], weights=np.ones(4), prob=1.0, seed=0)
    texts, Ya = mix(["x0", "x1"], Y)
    assert texts == ["x0 z0", "x1 z1"]
    # y + graph[j], clipped at 1, entries <= 0.1 dropped (0.05 goes)
    np.testing.assert_allclose(Ya.toarray(), [[1, 0, 0.6, 0], [0, 1, 0, 0.3]], rtol=1e-6)
    none = LabelMix(graph, ["z0", "z1", "z2", "z3"], weights=np.ones(4), prob=0.0, seed=0)
    texts, Yn = none(["x0", "x1"], Y)
    assert texts == ["x0", "x1"] and (Yn != Y).nnz == 0


def test_labelmix_is_seeded_and_tail_skewed():
    Y = sp.csr_matrix(np.ones((2000, 2), dtype=np.float32))
    graph = sp.identity(2, format="csr", dtype=np.float32)
    weights = np.array([1.0, 9.0])  # label 1 should be picked ~90% of the time
    texts = ["x"] * 2000
    a = LabelMix(graph, ["a", "b"], weights, prob=0.4, seed=5)(texts, Y)[0]
    b = LabelMix(graph, ["a", "b"], weights, prob=0.4, seed=5)(texts, Y)[0]
    assert a == b
    mixed = [t for t in a if t != "x"]
    assert 0.35 < len(mixed) / 2000 < 0.45
    assert 0.85 < sum(t == "x b" for t in mixed) / len(mixed) < 0.95


def test_written_files_are_plug_and_play(tiny_dir, tmp_path):
    ds = load_dataset(tiny_dir)
    out = tmp_path / "aug"
    meta = write_augmented_dataset(ds, out, AugmentConfig("gandalf", GraphConfig(delta=0.4)))
    assert meta["n_original_train"] == 4 and meta["n_extra"] == 4
    aug = read_lf_json(out / "aug.json.gz", 4)
    assert aug.texts == LABELS and aug.uids[0] == "label:L0"
    want = label_graph(ds.train.Y, GraphConfig(delta=0.4)).toarray()
    np.testing.assert_allclose(aug.Y.toarray(), want, rtol=1e-6)
    np.testing.assert_allclose(read_sparse_text(out / "aug_X_Y.txt", relevance=True).toarray(), want, rtol=1e-6)
    trn = read_lf_json(out / "trn.json.gz", 4)
    assert trn.texts == [t for t, _ in TRAIN] + LABELS
    first = json.loads(gzip.decompress((out / "aug.json.gz").read_bytes()).decode().splitlines()[0])
    assert set(first) == {"uid", "title", "target_ind", "target_rel"}
    # read back as a dataset: propensities still come from the 4 original points
    back = load_dataset(out)
    assert back.n_original_train == 4 and len(back.train) == 8
    np.testing.assert_array_equal(back.label_frequencies(), ds.label_frequencies())
    assert back.name == ds.name and len(back.test) == len(ds.test)
    np.testing.assert_array_equal(back.test.filter_pairs, ds.test.filter_pairs)


def test_subsampled_labels_are_written_in_label_order(tiny_dir, tmp_path):
    ds = load_dataset(tiny_dir)
    write_augmented_dataset(ds, tmp_path / "a", AugmentConfig("gandalf", labels_fraction=0.5, labels_sampling="random", seed=3))
    ids = [int(x) for x in (tmp_path / "a" / "label_ids.txt").read_text().split()]
    assert len(ids) == 2 and ids == sorted(ids)
    aug = read_lf_json(tmp_path / "a" / "aug.json.gz", 4)
    assert aug.texts == [LABELS[i] for i in ids]


def _plain_sparse_text(path) -> list[dict[int, float]]:
    """The sparse text format read without the library: header, then 'i:v' tokens a row."""
    lines = path.read_text().splitlines()
    n_rows, _ = map(int, lines[0].split())
    rows = [{int(t.split(":")[0]): float(t.split(":")[1]) for t in line.split()} for line in lines[1:]]
    assert len(rows) == n_rows
    return rows


@pytest.mark.parametrize("export", ["lf", "text", "npz", "bow"])
def test_every_layout_reads_back_without_the_library(tiny_dir, tmp_path, export):
    """What other tools read: the combined training set in each layout, checked with plain json /
    text parsing and scipy (an independent route), against the graph computed by hand in
    test_graph (delta 0.4 keeps the conditionals above it)."""
    import scipy.sparse as sp

    ds = load_dataset(tiny_dir)
    augment = AugmentConfig("identity" if export == "bow" else "gandalf", GraphConfig(delta=0.4))
    out = tmp_path / "aug"
    write_augmented_dataset(ds, out, augment, export=export)
    extra = label_graph(ds.train.Y, graph_for(augment)).toarray()
    want = np.vstack([ds.train.Y.toarray(), extra])
    lf = [json.loads(line) for line in gzip.decompress((out / "trn.json.gz").read_bytes()).decode().splitlines()]
    got = np.zeros_like(want)
    for i, row in enumerate(lf):
        got[i, row["target_ind"]] = row.get("target_rel", [1.0] * len(row["target_ind"]))
    np.testing.assert_allclose(got, want, rtol=1e-6)
    if export == "text":
        texts = (out / "trn_X.txt").read_text().splitlines()
        assert texts == [t for t, _ in TRAIN] + LABELS
        assert (out / "lbl_X.txt").read_text().splitlines() == LABELS
        rows = _plain_sparse_text(out / "trn_X_Y.txt")
        dense = np.zeros_like(want)
        for i, r in enumerate(rows):
            dense[i, list(r)] = list(r.values())
        np.testing.assert_allclose(dense, want, rtol=1e-5)
        assert len(_plain_sparse_text(out / "tst_X_Y.txt")) == 3
    if export == "npz":
        Y = sp.load_npz(out / "Y.trn.npz").toarray()
        R = sp.load_npz(out / "R.trn.npz").toarray()
        X = sp.load_npz(out / "X.trn.npz")
        np.testing.assert_array_equal(Y, (want > 0).astype(Y.dtype))
        np.testing.assert_allclose(R, want, rtol=1e-6)
        assert X.shape[0] == 8 and np.allclose(np.asarray(X.multiply(X).sum(axis=1)).ravel(), 1.0)
        assert sp.load_npz(out / "X.tst.npz").shape == (3, X.shape[1])
    if export == "bow":
        lines = (out / "train.txt").read_text().splitlines()
        n, d, n_labels = map(int, lines[0].split())
        assert (n, n_labels) == (8, 4)
        for i, line in enumerate(lines[1:]):
            labels = line.split(" ")[0]
            assert sorted(int(x) for x in labels.split(",") if x) == np.flatnonzero(want[i]).tolist()


def test_text_transform_drawn_once_appends_only_changed_points():
    import scipy.sparse as sp

    from gandalf_xmc.augment.transforms import append_text_draw

    class Upper:
        acts_on = "texts"

        def __call__(self, texts, Y):  # changes the texts that start with "a", and their targets
            Y2 = sp.csr_matrix(Y, copy=True)
            Y2.data[:] = 0.5
            return [t.upper() if t.startswith("a") else t for t in texts], Y2

    texts, Y = ["apple", "berry", "avocado"], sp.csr_matrix(np.eye(3, dtype=np.float32))
    got_texts, got_Y, got_w = append_text_draw(Upper(), texts, Y, np.array([1.0, 2.0, 3.0]))
    assert got_texts == ["apple", "berry", "avocado", "APPLE", "AVOCADO"]
    np.testing.assert_allclose(got_Y.toarray(), [[1, 0, 0], [0, 1, 0], [0, 0, 1], [0.5, 0, 0], [0, 0, 0.5]])
    np.testing.assert_allclose(got_w, [1, 2, 3, 1, 3])
    assert texts == ["apple", "berry", "avocado"]  # the caller's list is not changed


@pytest.mark.parametrize(
    "name",
    [
        "none",
        "gandalf",
        "identity",
        "z-only",
        "uniform",
        "glas",
        "random-walk",
        "labelmix",
        pytest.param("synonym", marks=pytest.mark.neural),
        "mixup",
    ],
)  # synonyms need MiniLM
def test_built_training_set_marks_its_label_points(tiny_dir, name):
    from gandalf_xmc.augment import AugmentConfig, build_training_set, training_set
    from gandalf_xmc.data import load_dataset

    ds = load_dataset(tiny_dir)
    built = build_training_set(ds, AugmentConfig(name, seed=1))
    # the mask the builder knows equals the label points named by their uids ("label:" + label uid)
    label_uids = {"label:" + u for u in ds.label_uids}
    assert built.is_label_point.tolist() == [u in label_uids for u in built.split.uids]
    if name != "uniform":  # a uniform draw keeps some of the 4 label points
        assert built.is_label_point.sum() == (4 if name in ("gandalf", "identity", "z-only", "glas", "random-walk") else 0)
    assert built.split.uids == training_set(ds, AugmentConfig(name, seed=1)).uids
    assert (built.batch_transform is not None) == (name in ("labelmix", "synonym", "mixup"))
    if built.batch_transform is not None:
        assert built.batch_transform.acts_on == ("features" if name == "mixup" else "texts")


def test_built_training_set_of_a_written_directory(tiny_dir, tmp_path, capsys):
    from gandalf_xmc.augment import AugmentConfig, build_training_set
    from gandalf_xmc.data import load_dataset

    code, _, err = run_cli(["augment", "--data", str(tiny_dir), "--out", str(tmp_path / "aug")], capsys)
    assert code == 0, err
    ds = load_dataset(tmp_path / "aug")
    built = build_training_set(ds, AugmentConfig("none"))
    n = len(ds.train) - ds.n_labels
    assert built.is_label_point.tolist() == [False] * n + [True] * ds.n_labels
    assert all(u.startswith("label:") for u in built.split.uids[n:])


def test_augment_json_records_the_graph_as_built(tiny_dir, tmp_path, capsys):
    code, _, err = run_cli(
        ["augment", "--data", str(tiny_dir), "--out", str(tmp_path / "aug"), "--augment", "glas", "--seed", "3"], capsys
    )
    assert code == 0, err
    graph = json.loads((tmp_path / "aug" / "augment.json").read_text())["config"]["graph"]
    assert graph["kind"] == "glas" and graph["walk"]["seed"] == 3  # the one seed, not the section's default 0


def test_label_point_positive_cost_is_checked_kept_in_records_and_given_to_label_points_alone():
    from dataclasses import asdict

    from gandalf_xmc.augment import TrainingSet
    from gandalf_xmc.data.dataset import Split
    from gandalf_xmc.errors import ConfigError

    for bad in (0.0, -1.0, float("inf"), float("nan")):
        with pytest.raises(ConfigError, match="label-point positive cost must be a finite number > 0"):
            AugmentConfig("gandalf", label_point_positive_cost=bad).validate()
    config = AugmentConfig("gandalf", label_point_positive_cost=4.0)
    assert AugmentConfig.from_dict(asdict(config)) == config
    split = Split(["a", "b", "c"], ["x", "y", "z"], sp.csr_matrix(np.eye(3, dtype=np.float32)))
    mask = np.array([False, True, True])
    assert TrainingSet(split, mask, label_point_positive_cost=4.0).positive_weight.tolist() == [1.0, 4.0, 4.0]
    assert TrainingSet(split, mask).positive_weight is None
    assert TrainingSet(split, np.zeros(3, dtype=bool), label_point_positive_cost=4.0).positive_weight is None
