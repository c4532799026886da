"""benchmarks/auto_rules.py: each rule's pick from auto's trials and the leave-one-out of the
rules, on rows whose answers are worked out by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # suite.py, whose rows carry auto's trials
spec = importlib.util.spec_from_file_location("auto_rules", BENCHMARKS / "auto_rules.py")
auto_rules = importlib.util.module_from_spec(spec)
spec.loader.exec_module(auto_rules)


def rows_of(dataset: str, trials: dict, scored: dict) -> list[dict]:
    """An auto row carrying ``trials`` and one row a candidate with its scored P@1 and PSP@5."""
    auto = {"dataset": dataset, "model": "linear", "seed": 0, "augment": "auto", "auto_trials": trials}
    return [auto] + [
        {"dataset": dataset, "model": "linear", "seed": 0, "augment": name, "P@1": p1, "PSP@5": psp}
        for name, (p1, psp) in scored.items()
    ]


# "slight": -0.1 P@1 on validation, the best PSP@5, a wide interval; "sure": +0.5 whose 90%
# interval [0.1, 0.9] is narrow; "worse": -0.5, outside the tolerance of 0.2
TRIALS = {
    "none": {"P@1": 20.0, "PSP@5": 10.0, "n_valid": 1000},
    "slight": {"P@1": 19.9, "PSP@5": 30.0, "gain": -0.1, "interval": [-1.1, 0.9]},
    "sure": {"P@1": 20.5, "PSP@5": 20.0, "gain": 0.5, "interval": [0.1, 0.9]},
    "worse": {"P@1": 19.5, "PSP@5": 40.0, "gain": -0.5, "interval": [-0.9, -0.1]},
}
SCORED = {"none": (30.0, 10.0), "slight": (29.0, 15.0), "sure": (31.0, 12.0), "worse": (28.0, 20.0)}


def test_each_rule_picks_by_hand():
    (record,) = auto_rules.replay(rows_of("a", TRIALS, SCORED))
    picks = {rule: record[rule]["chosen"] for rule in auto_rules.RULES}
    # within the tolerance: slight (-0.1) and sure are admissible, slight has the better PSP@5;
    # the 90% interval: slight's lower end -1.1 < -0.2, sure's 0.1 >= -0.2; the 50% interval:
    # slight's half-width 1.0 * 0.41 = 0.41 -> -0.51 < -0.2, out; a nonnegative gain: sure;
    # the best P@1: sure
    assert picks == {
        "within-tolerance": "slight",
        "interval-90": "sure",
        "interval-50": "sure",
        "gain-nonnegative": "sure",
        "best-p1": "sure",
    }
    assert record["within-tolerance"]["P@1 gain"] == pytest.approx(-1.0)
    assert record["within-tolerance"]["PSP@5 ratio"] == pytest.approx(1.5)
    assert record["gain-nonnegative"]["P@1 gain"] == pytest.approx(1.0)
    assert record["n_valid"] == 1000


def test_a_candidate_without_its_own_row_is_left_out_of_the_replay():
    scored = {k: v for k, v in SCORED.items() if k != "sure"}
    (record,) = auto_rules.replay(rows_of("a", TRIALS, scored))
    # without sure, the 90% interval admits none alone; nonnegative gains too
    assert record["interval-90"]["chosen"] == "none"
    assert record["gain-nonnegative"]["chosen"] == "none"
    assert auto_rules.replay(rows_of("a", TRIALS, {"sure": (31.0, 12.0)})) == []  # no none row: nothing to compare


def test_rank_then_leave_one_dataset_out():
    # on b every rule picks the same ("big" wins P@1 and PSP@5 on validation, by far)
    big = {
        "none": {"P@1": 20.0, "PSP@5": 10.0},
        "big": {"P@1": 30.0, "PSP@5": 30.0, "gain": 10.0, "interval": [8.0, 12.0]},
    }
    rows = rows_of("a", TRIALS, SCORED) + rows_of("b", big, {"none": (20.0, 10.0), "big": (25.0, 20.0)})
    records = auto_rules.replay(rows)
    # within-tolerance loses P@1 on a (-1.0): one pick below none's; the others none
    assert auto_rules.rank(records, "within-tolerance")[0] == 1
    # its PSP@5 ratios 12 / 10 and 20 / 10, its P@1 gains +1 and +5: the means negated
    assert auto_rules.rank(records, "gain-nonnegative") == (0, pytest.approx(-1.6), pytest.approx(-3.0))
    loo = {r["left_out"]: r for r in auto_rules.left_out(records)}
    # a left out: on b alone every rule ties, so the first rule (within-tolerance) stands, and loses on a
    assert loo["a"]["rule"] == "within-tolerance"
    assert loo["a"]["P@1 gain"] == pytest.approx(-1.0)
    # b left out: on a, within-tolerance is below none; the other four tie at (0, -1.2, -1.0) -> the first of them
    assert loo["b"]["rule"] == "interval-90"
    assert loo["b"]["P@1 gain"] == pytest.approx(5.0)
    assert loo["b"]["PSP@5 change"] == pytest.approx(100.0)


def test_a_suite_row_carries_each_trial_with_its_gain():
    import suite

    search = {
        "trials": [
            {"name": "none", "valid": {"P@1": 20.0, "PSP@5": 10.0}, "p1_hits": {"n": 8, "bits": "ff"}},
            {"name": "a", "valid": {"P@1": 21.0, "PSP@5": 12.0}, "p1_hits": {"n": 8, "bits": "ff"}},
            {"name": "b", "valid": {"P@1": 19.0, "PSP@5": 11.0}},  # budget cut its hits: no gain
        ],
        "p1_gain_over_none": {"a": {"gain": 1.0, "interval": [0.5, 1.5], "level": 0.9}},
    }
    assert suite.search_trials(search) == {
        "none": {"P@1": 20.0, "PSP@5": 10.0, "n_valid": 8},
        "a": {"P@1": 21.0, "PSP@5": 12.0, "gain": 1.0, "interval": [0.5, 1.5], "n_valid": 8},
        "b": {"P@1": 19.0, "PSP@5": 11.0},
    }
    assert suite.search_trials(None) is None
    # validated on two shares: the pooled figures of the candidates kept (b was ruled out on the first)
    search["trials"] += [{**t, "fold": 1, "valid": {"P@1": 0.0, "PSP@5": 0.0}} for t in search["trials"][:2]]
    search.update(folds=2, pooled={"none": {"P@1": 19.0, "PSP@5": 9.0}, "a": {"P@1": 20.0, "PSP@5": 13.0}}, pooled_points=16)
    assert suite.search_trials(search) == {
        "none": {"P@1": 19.0, "PSP@5": 9.0, "n_valid": 16, "folds": 2},
        "a": {"P@1": 20.0, "PSP@5": 13.0, "gain": 1.0, "interval": [0.5, 1.5], "n_valid": 16, "folds": 2},
    }
