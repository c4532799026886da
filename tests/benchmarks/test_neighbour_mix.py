"""The leave-one-dataset-out choice of benchmarks/neighbour_mix.py, on scores worked out by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

import pytest

pytest.importorskip("torch")  # the script imports the neural models (the [neural] extra)

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # neighbour_mix.py imports its neighbour suite.py
spec = importlib.util.spec_from_file_location("neighbour_mix", BENCHMARKS / "neighbour_mix.py")
neighbour_mix = importlib.util.module_from_spec(spec)
spec.loader.exec_module(neighbour_mix)

CELLS = ("share/2/0", "share/2/0.5", "share/2/1")


def row(dataset: str, split: str, seed: int, p1: tuple[float, float, float]) -> dict:
    return {
        "dataset": dataset,
        "split": split,
        "augment": "none",
        "seed": seed,
        "P@1": dict(zip(CELLS, p1, strict=True)),
        "PSP@5": dict(zip(CELLS, (x / 2 for x in p1), strict=True)),
    }


def test_each_dataset_left_out_gets_the_cell_of_best_mean_p1_on_the_others_seeds_averaged_first():
    rows = [
        row("a", "valid", 0, (10, 20, 30)),
        row("a", "valid", 1, (10, 20, 10)),  # a's seeds average to 10 / 20 / 20
        row("b", "valid", 0, (40, 30, 20)),
        row("b", "new-items", 0, (0, 10, 5)),  # b's two splits are two rows of the mean
        row("c", "valid", 0, (30, 30, 30)),
    ]
    loo = {(r["dataset"], r["split"]): r for r in neighbour_mix.leave_one_out(rows)}
    # a out: rows b/valid, b/new-items, c/valid -> means 70/3, 70/3, 55/3: a tie, the earlier cell (mix 0)
    assert loo["a", "valid"]["chosen_on_others"] == "share/2/0"
    assert loo["a", "valid"]["P@1_chosen"] == 10 and loo["a", "valid"]["PSP@5_chosen"] == 5
    assert loo["a", "valid"]["own_best"] == "share/2/0.5" and loo["a", "valid"]["P@1_own_best"] == 20  # a tie with mix 1
    # b out: rows a, c -> means 20, 25, 25: the tie to the smaller mix
    assert loo["b", "valid"]["chosen_on_others"] == loo["b", "new-items"]["chosen_on_others"] == "share/2/0.5"
    assert loo["b", "valid"]["P@1_chosen"] == 30 and loo["b", "new-items"]["P@1_chosen"] == 10
    assert loo["b", "new-items"]["P@1_classifiers"] == 0  # the mix 0 cell
    # c out: rows a, b/valid, b/new-items -> means 50/3, 60/3, 45/3
    assert loo["c", "valid"]["chosen_on_others"] == "share/2/0.5" and loo["c", "valid"]["P@1_chosen"] == 30


def test_a_single_dataset_has_nothing_to_choose_on():
    loo = neighbour_mix.leave_one_out([row("a", "valid", 0, (1, 2, 3))])
    assert loo[0]["chosen_on_others"] is None and loo[0]["P@1_chosen"] is None
    assert loo[0]["own_best"] == "share/2/1"


def test_the_models_default_epoch_count_comes_first_so_a_tie_keeps_it():
    assert neighbour_mix.epoch_counts(4, [1, 2, 3, 4]) == [4, 1, 2, 3]
    assert neighbour_mix.epoch_counts(1, [1, 4]) == [1, 4]
    assert neighbour_mix.epoch_counts(4, None) == [4]


def test_earlier_runs_join_the_choice_and_unlike_runs_are_refused():
    earlier = [{**row("a", "valid", 0, (10, 20, 30)), "model": "ngame"}, {**row("b", "valid", 0, (40, 30, 20)), "model": "ngame"}]
    now = [{**row("c", "new-items", 0, (30, 30, 30)), "model": "ngame"}]
    both = neighbour_mix.joined(now, earlier)
    assert [r["dataset"] for r in both] == ["a", "b", "c"]
    # c out: a and b -> means 25, 25, 25: a tie, the earlier cell; a out: b, c -> 35, 30, 25
    loo = {r["dataset"]: r for r in neighbour_mix.leave_one_out(both)}
    assert loo["c"]["chosen_on_others"] == "share/2/0" and loo["a"]["chosen_on_others"] == "share/2/0"
    with pytest.raises(ValueError, match="more than one run"):
        neighbour_mix.joined(earlier[:1], earlier)
    with pytest.raises(ValueError, match="model"):
        neighbour_mix.joined([{**now[0], "model": "dual-encoder"}], earlier)
    with pytest.raises(ValueError, match="precision"):
        neighbour_mix.joined([{**now[0], "encoder_precision": "bfloat16"}], earlier)
    unlike_cells = {**now[0], "P@1": {"share/4/0": 1.0}, "PSP@5": {"share/4/0": 1.0}}
    with pytest.raises(ValueError, match="cells"):
        neighbour_mix.joined([unlike_cells], earlier)


def test_runs_of_more_cells_join_on_the_cells_all_of_them_scored():
    # a run of four epoch counts beside a run of the default count: the default count's cells are shared
    four = {**row("a", "valid", 0, (10, 20, 30)), "model": "ngame"}
    four["P@1"] = {**{f"e1/{c}": v for c, v in four["P@1"].items()}, "e4/share/2/0": 99.0}
    four["PSP@5"] = {**{f"e1/{c}": v for c, v in four["PSP@5"].items()}, "e4/share/2/0": 99.0}
    one = {**row("a", "valid", 1, (30, 20, 10)), "model": "ngame", "encoder_precision": "bfloat16"}
    one["P@1"] = {f"e1/{c}": v for c, v in one["P@1"].items()}
    one["PSP@5"] = {f"e1/{c}": v for c, v in one["PSP@5"].items()}
    with pytest.raises(ValueError, match="precision"):  # the first run's precision was not recorded
        neighbour_mix.joined([one], [four])
    both = neighbour_mix.joined([one], [four], unrecorded_precision="bfloat16")
    assert [list(r["P@1"]) for r in both] == [["e1/share/2/0", "e1/share/2/0.5", "e1/share/2/1"]] * 2
    assert both[0]["PSP@5"] == {"e1/share/2/0": 5, "e1/share/2/0.5": 10, "e1/share/2/1": 15}
    assert "encoder_precision" not in four and "e4/share/2/0" in four["P@1"]  # the callers' rows are not changed
    # one dataset's two seeds averaged, cell by cell: 20, 20, 20 -> the tie keeps the classifiers alone
    assert neighbour_mix.leave_one_out(both)[0]["own_best"] == "e1/share/2/0"


def test_the_choice_can_be_kept_to_one_votes_cells():
    cells = ("share/2/0", "share/2/0.5", "mean/2/0", "mean/2/0.5")
    rows = []
    for dataset in ("a", "b"):
        p1 = dict(zip(cells, (10, 20, 5, 30), strict=True))
        rows.append({"dataset": dataset, "split": "valid", "augment": "none", "seed": 0, "P@1": p1, "PSP@5": p1})
    assert neighbour_mix.leave_one_out(rows)[0]["chosen_on_others"] == "mean/2/0.5"
    kept = neighbour_mix.leave_one_out(rows, vote="share")[0]
    assert kept["chosen_on_others"] == "share/2/0.5" and kept["own_best"] == "share/2/0.5" and kept["P@1_chosen"] == 20
    assert neighbour_mix.leave_one_out(rows, vote="mean")[0]["P@1_classifiers"] == 5  # the mean's own mix 0 cell


def test_each_rows_seeds_are_summed_up_cell_by_cell():
    rows = [row("a", "valid", 0, (10, 20, 30)), row("a", "valid", 1, (20, 20, 10)), row("b", "new-items", 0, (5, 6, 7))]
    a, b = neighbour_mix.over_seeds(rows, ["share/2/0", "share/2/1"])
    assert a["seeds"] == [0, 1] and b["seeds"] == [0]
    assert a["P@1_mean"] == {"share/2/0": 15, "share/2/1": 20}
    # sample sd: sqrt(((10-15)^2 + (20-15)^2) / 1) and sqrt((10^2 + 10^2) / 1)
    assert a["P@1_sd"]["share/2/0"] == pytest.approx(50**0.5) and a["P@1_sd"]["share/2/1"] == pytest.approx(200**0.5)
    assert a["PSP@5_mean"] == {"share/2/0": 7.5, "share/2/1": 10}
    assert b["P@1_sd"] == {"share/2/0": 0, "share/2/1": 0} and b["P@1_mean"]["share/2/1"] == 7


def test_a_cell_is_compared_with_another_row_by_row_seeds_averaged_first():
    rows = [row("a", "valid", 0, (10, 20, 30)), row("a", "valid", 1, (20, 20, 10)), row("b", "new-items", 0, (5, 6, 7))]
    seeds = neighbour_mix.over_seeds(rows, list(CELLS))
    out = neighbour_mix.compared(seeds, "share/2/1", "share/2/0")
    # row a: 20 - 15 = 5; row b: 7 - 5 = 2; mean 3.5; sd sqrt(((5-3.5)^2 + (2-3.5)^2) / 1) = sqrt(4.5), over sqrt(2)
    assert out["P@1_differences"] == [5, 2] and out["mean_difference"] == pytest.approx(3.5)
    assert out["standard_error"] == pytest.approx(4.5**0.5 / 2**0.5)
    assert out["P@1"] == {"share/2/1": (20 + 7) / 2, "share/2/0": (15 + 5) / 2}
    assert out["PSP@5"]["share/2/1"] == pytest.approx((10 + 3.5) / 2)
