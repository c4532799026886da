"""The synthetic dataset generator of benchmarks/ writes valid data with the asked-for statistics."""

from __future__ import annotations

import importlib.util
import time
from pathlib import Path

import pytest

from gandalf_xmc.data import dataset_stats, load_dataset

spec = importlib.util.spec_from_file_location("synthetic", Path(__file__).parents[2] / "benchmarks" / "synthetic.py")
synthetic = importlib.util.module_from_spec(spec)
spec.loader.exec_module(synthetic)


def test_generated_dataset_matches_requested_statistics(tmp_path):
    synthetic.generate(
        tmp_path / "s", n_points=3000, n_labels=1500, labels_per_point=6.0, words_per_point=8.0, n_test=500, seed=1
    )
    ds = load_dataset(tmp_path / "s")
    st = dataset_stats(ds)
    assert st["N"] == 3000 and st["L"] == 1500 and st["N_test"] == 500
    assert st["ALpP"] == pytest.approx(6.0, rel=0.15)
    assert st["AWpP"] == pytest.approx(8.0, rel=0.2)
    assert st["labels_le5_pct"] > 20  # a long tail
    again = tmp_path / "t"
    time.sleep(1.1)  # a gzip header with a time stamp would now differ
    synthetic.generate(again, n_points=3000, n_labels=1500, labels_per_point=6.0, words_per_point=8.0, n_test=500, seed=1)
    # the same seed writes the same bytes (gzip headers carry no name or time)
    for name in ("trn.json.gz", "tst.json.gz", "lbl.json.gz"):
        assert (again / name).read_bytes() == (tmp_path / "s" / name).read_bytes(), name


def test_presets_come_from_the_one_presets_table():
    args = synthetic.preset_arguments("LF-AmazonTitles-1.3M")
    assert args == {"n_points": 2_248_619, "n_labels": 1_305_265, "labels_per_point": 22.2, "words_per_point": 8.74}


def test_the_worst_case_writes_texts_that_share_no_more_with_their_labels_than_chance(tmp_path):
    """``unrelated``: the same labels and statistics, but a point's words are drawn regardless of its
    labels: its text shares a word with its labels' texts as often as with another point's labels
    (chance: frequent Zipf words are everywhere), where every usual point carries its topic's words."""
    import numpy as np

    def share(texts, label_sets, label_words):
        return sum(bool(set(t.split()) & set().union(*(label_words[j] for j in js))) for t, js in zip(texts, label_sets)) / len(
            texts
        )

    kw = dict(n_points=2000, n_labels=1000, labels_per_point=4.0, words_per_point=8.0, n_test=200, seed=3)
    synthetic.generate(tmp_path / "usual", **kw)
    synthetic.generate(tmp_path / "worst", unrelated=True, **kw)
    usual, worst = load_dataset(tmp_path / "usual"), load_dataset(tmp_path / "worst")
    assert dataset_stats(worst)["AWpP"] == pytest.approx(8.0, rel=0.2)
    assert (worst.train.Y != usual.train.Y).nnz == 0  # the same labels
    label_words = [set(t.split()) for t in worst.label_texts]
    own = [worst.train.Y[i].indices for i in range(len(worst.train))]
    others = [own[i] for i in np.random.default_rng(0).permutation(len(own))]
    assert share(usual.train.texts, own, label_words) == 1.0
    assert abs(share(worst.train.texts, own, label_words) - share(worst.train.texts, others, label_words)) < 0.04
