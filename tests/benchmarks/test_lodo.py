"""The leave-one-dataset-out choice of benchmarks/lodo.py, on scores whose answer is worked out by hand."""

from __future__ import annotations

import importlib.util
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))  # lodo.py imports its neighbour suite.py
spec = importlib.util.spec_from_file_location("lodo", BENCHMARKS / "lodo.py")
lodo = importlib.util.module_from_spec(spec)
spec.loader.exec_module(lodo)


def test_each_left_out_dataset_gets_the_value_best_on_the_others_ties_to_the_default():
    scores = {"1": {"a": 10, "b": 20, "c": 30}, "2": {"a": 12, "b": 18, "c": 31}, "3": {"a": 11, "b": 19, "c": 25}}
    picks = lodo.leave_one_out(scores, "1")
    # a out: means over b, c are 25 / 24.5 / 22 -> 1; b out: over a, c 20 / 21.5 / 18 -> 2;
    # c out: over a, b 15 / 15 / 15, a tie -> the default 1
    assert [(p["left_out"], p["chosen"]) for p in picks] == [("a", "1"), ("b", "2"), ("c", "1")]
    assert [p["P@1"] - p["default_P@1"] for p in picks] == [0, -2, 0]
    assert lodo.most_often(picks, "1") == ("1", 2)
    assert lodo.most_often([{"chosen": "2"}, {"chosen": "3"}], "1") == ("2", 1)  # a tie without the default


def test_a_value_that_is_an_object_sets_its_settings_together():
    assert lodo.settings_of("default", None) == {}
    assert lodo.settings_of("solver.loss", "logistic") == {"solver.loss": "logistic"}
    assert lodo.settings_of("char_ngrams", [3, 5]) == {"char_ngrams": (3, 5)}
    both = {"solver.loss": "logistic", "solver.C": 10.0}
    assert lodo.settings_of("solver.loss", both) == both


def test_an_augmentation_setting_changes_the_recipe_and_not_the_model():
    from gandalf_xmc.augment import preset

    assert lodo.default_of("augment.label_point_positive_cost", "gandalf-tempered") == 1.0
    assert lodo.default_of("augment.label_point_weight", "gandalf-tempered") == 0.5  # the preset's own
    assert lodo.default_of("solver.positive_cost", "gandalf-tempered") == 2.0
    assert lodo.settings_of("augment.label_point_positive_cost", 4.0) == {}
    recipe = lodo.recipe_of("augment.label_point_positive_cost", 4.0, "gandalf-tempered")
    assert recipe.label_point_positive_cost == 4.0
    assert recipe.graph == preset("gandalf-tempered").graph and recipe.label_point_weight == 0.5
    assert lodo.recipe_of("solver.C", 2.0, "gandalf-tempered") is None


def test_new_items_columns_only_for_sets_with_labelled_new_items(tmp_path, monkeypatch):
    for name, has_val in (("a", True), ("b", False)):
        (tmp_path / name).mkdir()
        if has_val:
            (tmp_path / name / "val.json.gz").write_bytes(b"")
    monkeypatch.setattr(lodo, "suite_path", lambda name: tmp_path / name)
    assert lodo.columns(["a", "b"], False) == [("a", "valid"), ("b", "valid")]
    assert lodo.columns(["a", "b"], True) == [("a", "valid"), ("b", "valid"), ("a", "new-items")]
    assert lodo.column_name("a", "new-items") == "a (new items)" and lodo.column_name("a", "valid") == "a"
