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
    synthetic.generate(tmp_path / "s", n_points=3000, n_labels=1500, labels_per_point=6.0, words_per_point=8.0,
                       n_test=500, seed=1)
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
