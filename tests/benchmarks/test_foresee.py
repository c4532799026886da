"""benchmarks/foresee.py's forecast of a label-point gain, on figures whose answer is worked out by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.data.dataset import Split

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # foresee.py imports its neighbour suite.py
spec = importlib.util.spec_from_file_location("foresee", BENCHMARKS / "foresee.py")
foresee = importlib.util.module_from_spec(spec)
spec.loader.exec_module(foresee)


def rows(dataset, deployment, share, figures):
    return [
        {
            "dataset": dataset,
            "deployment": deployment,
            "share": share,
            "augment": a,
            "seed": 0,
            **f,
            **({"test_gain_se": 1.0} if a != "none" else {}),
        }
        for a, f in figures.items()
    ]


def test_catalogue_items_are_forecast_by_the_random_protocol():
    runs = rows("c", "catalogue items", None, {"none": {"random": 40.0, "test": 41.0}, "gandalf": {"random": 43.0, "test": 40.0}})
    (gain,) = foresee.predicted_gains(runs)
    assert gain["predicted_gain"] == 3.0 and gain["test_gain"] == -1.0
    assert gain["signs_agree"] is False
    assert gain["test_noise"] == 2.0 and gain["beyond_noise"] is False  # one seed: two standard errors of 1


def test_new_items_mix_the_future_gain_with_the_wrong_namesakes_gain_by_the_share():
    figures = {
        "none": {"random": 40.0, "future": 40.0, "namesake_kept": 30.0, "test": 35.0},
        "identity": {"random": 45.0, "future": 46.0, "namesake_kept": 10.0, "test": 30.0},
    }
    (gain,) = foresee.predicted_gains(rows("n", "new items", 0.25, figures))
    # (1 - 0.25) x (46 - 40) + 0.25 x (10 - 30) = 4.5 - 5 = -0.5
    assert gain["predicted_gain"] == pytest.approx(-0.5)
    assert gain["future_gain"] == 6.0 and gain["namesake_kept_gain"] == -20.0
    assert gain["signs_agree"] is True and gain["beyond_noise"] is True


def test_a_forecast_whose_sign_turns_inside_the_shares_interval_is_undecided():
    figures = {
        "none": {"random": 40.0, "future": 40.0, "namesake_kept": 30.0, "test": 35.0},
        "identity": {"random": 45.0, "future": 46.0, "namesake_kept": 10.0, "test": 30.0},
    }
    runs = [{**r, "share_interval": [0.2, 0.35]} for r in rows("n", "new items", 0.25, figures)]
    (gain,) = foresee.predicted_gains(runs)
    # at s = 0.2: 0.8 x 6 - 0.2 x 20 = +0.8; at s = 0.35: 0.65 x 6 - 0.35 x 20 = -3.1
    assert gain["predicted_range"] == [pytest.approx(0.8), pytest.approx(-3.1)]
    assert gain["decided"] is False and "| undecided (share) |" in foresee.table([gain])
    runs = [{**r, "share_interval": [0.24, 0.35]} for r in rows("n", "new items", 0.25, figures)]
    (gain,) = foresee.predicted_gains(runs)
    assert gain["decided"] is True and gain["signs_agree"] is True  # -0.24 .. -3.1: one sign
    assert "signs agree in 1 of the 1 decided pairs (0 undecided)" in foresee.table([gain])


def test_a_forecast_within_two_standard_errors_of_its_validation_is_undecided():
    figures = {"none": {"random": 40.0, "test": 41.0}, "gandalf": {"random": 43.0, "test": 45.0, "random_gain_se": 1.6}}
    (gain,) = foresee.predicted_gains(rows("c", "catalogue items", None, figures))
    assert gain["forecast_noise"] == pytest.approx(3.2) and gain["decided"] is False  # +3 within 2 x 1.6
    assert gain["undecided_by"] == ["noise"] and "undecided (noise)" in foresee.table([gain])
    figures["gandalf"]["random_gain_se"] = 1.4
    (gain,) = foresee.predicted_gains(rows("c", "catalogue items", None, figures))
    assert gain["decided"] is True and gain["signs_agree"] is True
    # new items: the forecast's standard error mixes the two validations' by the share
    figures = {
        "none": {"random": 40.0, "future": 40.0, "namesake_kept": 30.0, "test": 35.0},
        "identity": {
            "random": 45.0,
            "future": 46.0,
            "namesake_kept": 10.0,
            "test": 30.0,
            "future_gain_se": 2.0,
            "namesake_kept_gain_se": 4.0,
        },
    }
    (gain,) = foresee.predicted_gains(rows("n", "new items", 0.25, figures))
    assert gain["forecast_noise"] == pytest.approx(2 * np.hypot(0.75 * 2.0, 0.25 * 4.0), abs=0.005)


def test_seeds_are_averaged_and_their_standard_errors_combined():
    runs = []
    for seed, (base, test) in enumerate([(40.0, 44.0), (42.0, 44.0)]):
        for r in rows(
            "c", "catalogue items", None, {"none": {"random": base, "test": 40.0}, "gandalf": {"random": base + 1, "test": test}}
        ):
            runs.append({**r, "seed": seed})
    (gain,) = foresee.predicted_gains(runs)
    assert gain["predicted_gain"] == 1.0 and gain["test_gain"] == 4.0
    assert gain["test_noise"] == pytest.approx(2 * np.sqrt(2.0) / 2, abs=0.005)  # two SEs of the mean of two seeds (rounded)


class Fixed:
    """A model whose top label is given for each row."""

    def __init__(self, top: list[int], n_labels: int):
        self.top, self.n_labels = top, n_labels

    def predict(self, texts, k=5):
        return sp.csr_matrix((np.ones(len(self.top)), (np.arange(len(self.top)), self.top)), shape=(len(self.top), self.n_labels))


def test_an_unfiltered_own_label_counts_as_a_miss_not_as_a_hit():
    # row 0's own label 0 is also in its truth (and in the filter file); row 1 has no own label
    Y = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1]], dtype=np.float32))
    split = Split(["a", "b"], ["a", "b"], Y, np.array([[0, 0]]))
    hits, kept = foresee.top1_hits(Fixed([0, 2], 3), split, filter_predictions=False)
    assert hits.tolist() == [0.0, 1.0] and kept.tolist() == [0, 1]
    hits, _ = foresee.top1_hits(Fixed([0, 2], 3), split)  # filtered: row 0 has no prediction left
    assert hits.tolist() == [0.0, 1.0]
    hits, _ = foresee.top1_hits(Fixed([1, 2], 3), split, filter_predictions=False)
    assert hits.tolist() == [1.0, 1.0]


def test_a_random_share_gives_its_hits_and_its_own_labels_unfiltered():
    # uids "a" and "c" are labels too (their own label, kept in the predictions, is a wrong
    # namesake); "b" is not. Filtered, row 0's top label 0 leaves and row 2's 2 is right.
    Y = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1], [0, 0, 1]], dtype=np.float32))
    split = Split(["a", "b", "c"], ["a", "b", "c"], Y, np.array([[0, 0]]))
    hits, namesake = foresee.random_parts(Fixed([0, 2, 2], 3), split, {"a", "c"})
    assert hits.tolist() == [0.0, 1.0, 1.0]
    assert namesake.tolist() == [0.0, 1.0]  # rows 0 and 2 unfiltered: the namesake 0 misses, 2 hits
