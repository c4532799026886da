"""The mix each dataset left out chooses in benchmarks/encoder_hybrid.py, on scores worked out by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # encoder_hybrid.py imports its neighbour suite.py
spec = importlib.util.spec_from_file_location("encoder_hybrid", BENCHMARKS / "encoder_hybrid.py")
encoder_hybrid = importlib.util.module_from_spec(spec)
spec.loader.exec_module(encoder_hybrid)


def _row(dataset: str, base: float, peaks: dict[float, float]) -> dict:
    """A result row whose validation P@1 is ``base`` at every mix but ``peaks``; test P@1 is 1 more."""
    valid = {f"{m:g}": {"P@1": peaks.get(m, base)} for m in encoder_hybrid.MIXES}
    test = {key: {"P@1": v["P@1"] + 1} for key, v in valid.items()}
    return {"dataset": dataset, "seed": 0, "grid": {"valid": valid, "test": test}}


def test_each_left_out_dataset_gets_the_mix_best_on_the_others_the_smaller_on_a_tie():
    rows = [_row("a", 10, {0.5: 20}), _row("b", 30, {1.0: 40}), _row("c", 5, {0.5: 6, 1.0: 7})]
    # a out: over b, c 0.5 -> 18, 1 -> 23.5, the rest 17.5: 1, where a scores 10 (test 11)
    # b out: over a, c 0.5 -> 13, 1 -> 8.5, the rest 7.5: 0.5, where b scores 30
    # c out: over a, b 0.5 -> 25, 1 -> 25, the rest 20: a tie, the smaller 0.5, where c scores 6
    assert encoder_hybrid.left_out_mixes(rows) == [
        ["a", "1", "10.00", "11.00"],
        ["b", "0.5", "30.00", "31.00"],
        ["c", "0.5", "6.00", "7.00"],
    ]
    assert encoder_hybrid.chosen_mix(rows[2]["grid"]) == 1.0
    assert encoder_hybrid.chosen_mix(_row("d", 3, {})["grid"]) == 0.0  # all tied: the blend alone


def test_p1_on_a_subset_of_rows_renumbers_its_filter_pairs():
    from types import SimpleNamespace

    import numpy as np
    import scipy.sparse as sp

    # four rows, labels 0..2; each row's best label first: 0, 1, 2, 0; truth 0, 2, 2, 1
    top = sp.csr_matrix(np.array([[0.9, 0.1, 0], [0, 0.8, 0.5], [0, 0.2, 0.7], [0.6, 0.3, 0]]))
    Y = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 1], [0, 0, 1], [0, 1, 0]]))
    split = SimpleNamespace(Y=Y, filter_pairs=np.array([[1, 1], [3, 0]]))  # filtered: row 1's label 1, row 3's label 0
    # rows 1 and 3: filters leave row 1 ranking 2 first (right) and row 3 ranking 1 first (right)
    assert encoder_hybrid.subset_p1(top, split, np.array([False, True, False, True])) == 100.0
    # rows 0 and 2 have no filter pair: 0 right, 2 right
    assert encoder_hybrid.subset_p1(top, split, np.array([True, False, True, False])) == 100.0
    unfiltered = SimpleNamespace(Y=Y, filter_pairs=None)  # rows 1 and 3 rank 1 and 0 first: both wrong
    assert encoder_hybrid.subset_p1(top, unfiltered, np.array([False, True, False, True])) == 0.0
    assert encoder_hybrid.subset_p1(top, unfiltered, np.zeros(4, dtype=bool)) is None
