"""`gandalf reproduce` and what it brings: conventional augmentations, dataset sampling, the
report's seed-spread rule. Expectations by hand or by an independent route."""

from __future__ import annotations

import json
import re
import struct

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.augment import FeatureMix, SynonymReplacement, build_training_set
from gandalf_xmc.augment.conventional import synonym_table
from gandalf_xmc.data import load_dataset, sample_dataset, write_dataset
from gandalf_xmc.experiments.plan import ABLATION_SETTINGS, TABLE3_SETTINGS, ReproduceConfig, plan
from gandalf_xmc.experiments.report import Results
from gandalf_xmc.sparse_ops import top_k_per_row, unique_int


def test_unique_int_matches_numpy_unique():
    a = np.random.default_rng(0).integers(0, 50, size=1000)
    assert np.array_equal(unique_int(a), np.unique(a))
    assert unique_int(np.zeros(0, dtype=np.int64)).size == 0


def test_top_k_of_a_product_needs_no_duplicate_merge():
    rng = np.random.default_rng(1)
    A = sp.random(30, 20, density=0.3, random_state=2, format="csr", dtype=np.float32)
    B = sp.random(20, 40, density=0.3, random_state=3, format="csr", dtype=np.float32)
    S = (A @ B).tocsr()
    rng.shuffle(S.indices[S.indptr[0] : S.indptr[1]])  # products need not be sorted; top-k must not care
    assert (top_k_per_row(S, 5, distinct=True) != top_k_per_row(S, 5)).nnz == 0


def test_synonym_table_by_hand():
    words = ["car", "automobile", "banana"]
    vectors = np.array([[1.0, 0.1], [0.9, 0.2], [0.0, 1.0]])
    table = synonym_table(words, vectors, n=2, min_similarity=0.9)
    # cos(car, automobile) = 0.99; banana is far from both (cos 0.10 and 0.22)
    assert table == {"car": ["automobile"], "automobile": ["car"]}


def test_synonym_replacement_rewrites_only_words_with_synonyms_and_is_seeded():
    Y = sp.csr_matrix(np.eye(2, dtype=np.float32))
    always = SynonymReplacement({"car": ["automobile"]}, prob=1.0, word_prob=1.0, seed=0)
    texts, Y2 = always(["Red car, fast car", "banana split"], Y)
    assert texts == ["Red automobile, fast automobile", "banana split"]
    assert (Y2 != Y).nnz == 0
    table = {"a": ["b", "c"], "b": ["a"], "c": ["a"]}
    runs = [
        SynonymReplacement(table, prob=0.5, word_prob=0.5, seed=7)(["a b c"] * 20, sp.csr_matrix((20, 2)))[0] for _ in range(2)
    ]
    assert runs[0] == runs[1]
    assert any(t != "a b c" for t in runs[0]) and any(t == "a b c" for t in runs[0])


def test_mixup_points_are_convex_combinations_of_inputs_and_targets():
    X = sp.csr_matrix(np.array([[1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0], [1.0, 1.0, 0.0]], dtype=np.float32))
    Y = sp.csr_matrix(np.array([[1, 0], [0, 1], [1, 1], [0, 1]], dtype=np.float32))
    Xm, Ym = FeatureMix("mixup", share=1.0, seed=3)(X, Y)
    assert Xm.shape == (4, 3) and Ym.shape == (4, 2)
    Xd, Yd, X0, Y0 = Xm.toarray(), Ym.toarray(), X.toarray(), Y.toarray()
    for i in range(4):
        # some lam >= 0.5 and two source rows a, b explain both the input and the target
        found = False
        for a in range(4):
            for b in range(4):
                lam = np.linalg.lstsq((X0[a] - X0[b])[:, None], Xd[i] - X0[b], rcond=None)[0][0] if a != b else 1.0
                if lam < 0.5 - 1e-6:
                    continue
                if np.allclose(Xd[i], lam * X0[a] + (1 - lam) * X0[b], atol=1e-5) and np.allclose(
                    Yd[i], lam * Y0[a] + (1 - lam) * Y0[b], atol=1e-5
                ):
                    found = True
        assert found, i
    again = FeatureMix("mixup", share=1.0, seed=3)(X, Y)
    assert (again[0] != Xm).nnz == 0


def test_label_mixup_keeps_the_chosen_label_at_one():
    X = np.array([[1.0, 0.0], [0.0, 1.0]], dtype=np.float32)
    Z = np.array([[0.0, 0.0], [10.0, 10.0], [20.0, 20.0]], dtype=np.float32)  # label inputs
    Y = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 0]], dtype=np.float32))  # point 1 has no label: skipped
    Xm, Ym = FeatureMix("label-mixup", share=1.0, seed=0)(X, Y, Z)
    assert Xm.shape == (1, 2)
    lam = 1.0 - Xm[0, 1] / 10.0  # x = lam (1, 0) + (1 - lam) (10, 10)
    assert lam >= 0.5
    assert np.isclose(Xm[0, 0], lam + (1 - lam) * 10.0, atol=1e-5)
    assert np.allclose(Ym.toarray(), [[0.0, 1.0, 0.0]])


def test_sample_dataset_keeps_the_labels_of_its_points(tmp_path):
    ds = load_dataset()
    small = sample_dataset(ds, 300, 80, seed=1)
    assert len(small.train) == 300 and len(small.test) <= 80
    uid_of = {u: i for i, u in enumerate(ds.train.uids)}
    for k in (0, 150, 299):  # brute force: the same label uids as in the full dataset
        i = uid_of[small.train.uids[k]]
        full = {ds.label_uids[j] for j in ds.train.Y[i].indices}
        mine = {small.label_uids[j] for j in small.train.Y[k].indices}
        assert full == mine
    assert np.diff(small.test.Y.indptr).min() > 0
    back = load_dataset(write_dataset(small, tmp_path / "s"))
    assert (back.test.Y != small.test.Y).nnz == 0 and back.label_texts == small.label_texts


def test_seed_spread_rule_by_hand():
    runs = [
        {"model": "m", "setting": s, "seed": i, "metrics": {"P@1": v}}
        for s, vals in (("none", (10.0, 12.0)), ("a", (13.0, 15.0)), ("b", (11.0, 14.0)), ("c", (7.0, 7.2)))
        for i, v in enumerate(vals)
    ]
    res = Results(runs)
    # none: mean 11, std 1.414; a: mean 14, std 1.414 -> |3| >= 2.83: better
    assert res.compare("m", "a", "none", "P@1") == (pytest.approx(3.0), "better")
    # b: mean 12.5, std 2.121 -> |1.5| < 3.54: within spread
    assert res.compare("m", "b", "none", "P@1") == (pytest.approx(1.5), "within spread")
    assert res.compare("m", "c", "none", "P@1")[1] == "worse"
    assert res.marked("m", "b", "none", "P@1") == "12.50 ± 2.12 (+1.50≈)"


def test_plan_has_every_run_once():
    config = ReproduceConfig(models=("linear", "knn"), seeds=(0, 1))
    runs = plan(config)
    # by hand: the ablation tables need 19 training sets (6 + tempered + 3 conventional + delta 0,
    # 0.2 and random walk + 6 subsamplings) and Table 3 adds labelmix: 20 for linear, 4 for knn, x 2 seeds
    assert len(runs) == 48
    needed = {s for part in ABLATION_SETTINGS.values() for s in part}
    assert {(r.setting, r.seed) for r in runs if r.model == "linear"} == {
        (s, seed) for s in needed | set(TABLE3_SETTINGS) for seed in (0, 1)
    }
    assert {r.setting for r in runs if r.model == "knn"} == set(TABLE3_SETTINGS)


def test_transforms_of_the_training_sets(tiny_dir):
    from gandalf_xmc.augment import AugmentConfig, LabelMix

    ds = load_dataset(tiny_dir)

    def transform(name):
        return build_training_set(ds, AugmentConfig(name)).batch_transform

    assert isinstance(transform("mixup"), FeatureMix)
    assert transform("gandalf") is None
    labelmix = transform("labelmix")
    assert isinstance(labelmix, LabelMix)
    # its graph is the co-occurrence graph of the training labels: P[1 | 0] = 2/3 (labels 0 and 1
    # share 2 of label 0's 3 points), P[2 | 3] = 0 (label 3 has no point)
    G = labelmix.graph.toarray()
    assert G.shape == (4, 4) and G[0, 1] == pytest.approx(2 / 3) and G[3].tolist() == [0, 0, 0, 1]


def _png_size(path) -> tuple[int, int]:
    head = path.read_bytes()[:24]
    assert head[:8] == b"\x89PNG\r\n\x1a\n"
    return struct.unpack(">II", head[16:24])


@pytest.mark.neural
@pytest.mark.plots
def test_reproduce_quick_writes_every_table_and_plot_and_resumes(tmp_path):
    from typer.testing import CliRunner

    from gandalf_xmc.cli import app

    out = tmp_path / "report"
    runner = CliRunner()
    result = runner.invoke(app, ["reproduce", "--quick", "--seeds", "2", "--parallel", "2", "--out", str(out)])
    assert result.exit_code == 0, result.output
    text = (out / "report.md").read_text()
    for title in (
        "Table 1",
        "Table 2",
        "Table 3",
        "Table 4",
        "Table 5",
        "Table 6",
        "Table 7",
        "Figure 2",
        "Figure 3 (a, b)",
        "Figure 3 (c, d)",
    ):
        assert f"## {title}" in text, title
    for name in ("fig2_bins.png", "fig3_training.png", "fig3_subsampling.png"):
        w, h = _png_size(out / name)
        assert w >= 600 and h >= 300
    results = json.loads((out / "results.json").read_text())
    keys = {(r["model"], r["setting"], r["seed"]) for r in results["runs"]}
    assert keys == {(r.model, r.setting, r.seed) for r in plan(ReproduceConfig(seeds=(0, 1)))}

    # independent route: P@1 of the `none` runs from their saved top 5 and the sample's test labels
    ds = load_dataset(out / "data" / "debian-bookworm-sample")
    Y = ds.test.Y.tolil()
    for r, c in ds.test.filter_pairs:
        Y[r, c] = 0
    Y = Y.tocsr()
    Y.eliminate_zeros()
    p1 = []
    for seed in (0, 1):
        top = np.load(out / "runs" / f"linear__none__s{seed}.top5.npy")
        has = np.diff(Y.indptr) > 0
        p1.append(100.0 * np.mean([top[i, 0] in set(Y.indices[Y.indptr[i] : Y.indptr[i + 1]]) for i in np.flatnonzero(has)]))
        run = next(x for x in results["runs"] if x["setting"] == "none" and x["seed"] == seed and x["model"] == "linear")
        assert run["metrics"]["P@1"] == pytest.approx(p1[-1])
    row = next(line for line in text.splitlines() if line.startswith("| D (original points) `none`"))
    assert re.search(rf"\| {np.mean(p1):.2f} ± {np.std(p1, ddof=1):.2f} \|", row), row

    again = runner.invoke(app, ["reproduce", "--quick", "--seeds", "2", "--out", str(out)])
    assert again.exit_code == 0, again.output
    assert "(40 already done)" in again.output
