"""Model settings changed by name (``--set``) and the range checks of every settings class."""

from __future__ import annotations

import json

import pytest

from gandalf_xmc.engine.linear_solver import SolverConfig
from gandalf_xmc.engine.records import TrainConfig
from gandalf_xmc.errors import ConfigError
from gandalf_xmc.models.knn import KNNConfig
from gandalf_xmc.models.linear import LinearConfig
from gandalf_xmc.settings import apply_settings, parse_settings

from helpers import assert_clean_failure, run_cli


def test_values_are_json_or_else_strings():
    assert parse_settings(["solver.C=2", "char_ngrams=[3, 5]", "threads=null", "x=abc", "flag=true", "y=a=b"]) == {
        "solver.C": 2,
        "char_ngrams": (3, 5),
        "threads": None,
        "x": "abc",
        "flag": True,
        "y": "a=b",
    }
    for bad in ("beam", "=3", " =3"):
        with pytest.raises(ConfigError, match="NAME=VALUE"):
            parse_settings([bad])


def test_nested_settings_apply_to_a_copy():
    base = LinearConfig()
    got = apply_settings(base, {"solver.max_iter": 10, "solver.C": 2, "beam": 20, "char_ngrams": (3, 5)})
    assert got.solver == SolverConfig(C=2.0, max_iter=10) and got.beam == 20 and got.char_ngrams == (3, 5)
    assert isinstance(got.solver.C, float)  # an int given where a float is wanted
    assert base == LinearConfig()  # the caller's settings are not changed
    assert apply_settings(base, {}) == base
    # null where the setting's type allows it ("X | None"), and only there
    words_alone = apply_settings(base, {"char_ngrams": None, "char_ngrams_max_texts": None})
    assert words_alone.char_ngrams is None and words_alone.char_ngrams_max_texts is None


@pytest.mark.parametrize(
    "settings, message",
    [
        (
            {"solver.max_iterations": 5},
            "--set solver.max_iterations=5: no setting 'max_iterations' here; the settings "
            "are C, eps, max_iter, threshold, min_parent_target, positive_cost",
        ),
        ({"beam": 1.5}, "--set beam=1.5: expected a whole number, got 1.5"),
        ({"beam": True}, "expected a whole number, got true"),
        ({"solver.C": "high"}, 'expected a number, got "high"'),
        ({"solver": 3}, "solver is a group of settings: set one of solver.C, solver.eps"),
        ({"beam.width": 3}, "beam is a single setting, not a group"),
        ({"solver.max_iter": 0}, "--set solver.max_iter=0: max_iter must be a number > 0, got 0"),
        ({"solver.C": float("nan")}, "C must be a number > 0, got nan"),
        ({"solver.min_parent_target": 1.5}, "min_parent_target must be a number in [0, 1], got 1.5"),
        ({"solver.threshold": -0.1}, "threshold must be a number >= 0"),
        ({"branching": 12}, "branching must be a power of two"),
        ({"branching": 1}, "branching must be a power of two"),
        ({"leaf_size": 0}, "leaf_size must be a number > 0"),
        ({"threads": 0}, "threads must be a whole number of at least 1"),
        ({"threads": "two"}, "threads must be a whole number of at least 1"),
        ({"threads": 1.5}, "threads must be a whole number of at least 1"),
        ({"char_ngrams": 5}, "--set char_ngrams=5: expected a list such as [3, 5]"),
        ({"char_ngrams": "3-5"}, "expected a list such as [3, 5]"),
        ({"char_ngrams_max_texts": -1}, "char_ngrams_max_texts must be a whole number >= 0 or null"),
        ({"seed": None}, "--set seed=null: expected a whole number"),
        ({"char_ngrams": (5, 3)}, "char_ngrams must be null or [shortest, longest]"),
        ({"char_ngrams": (3,)}, "char_ngrams must be null or [shortest, longest]"),
    ],
)
def test_bad_settings_name_the_setting_and_the_problem(settings, message):
    with pytest.raises(ConfigError) as info:
        apply_settings(LinearConfig(), settings)
    assert message in str(info.value)


def test_every_settings_class_checks_its_ranges():
    for make, message in [
        (lambda: TrainConfig(epochs=0), "epochs must be a number > 0"),
        (lambda: TrainConfig(lr=-1.0), "lr must be a number > 0"),
        (lambda: TrainConfig(select_metric="P@3"), "select_metric must be one of P@1, P@5"),
        (lambda: KNNConfig(n_neighbours=0), "n_neighbours must be a number > 0"),
        (lambda: SolverConfig(eps=0.0), "eps must be a number > 0"),
    ]:
        with pytest.raises(ConfigError) as info:
            make()
        assert message in str(info.value)
    LinearConfig(threads=None, char_ngrams=None, branching=2, bias=0.0)  # edges that are allowed


def test_train_writes_the_settings_given(tiny_dir, tmp_path, capsys):
    out = tmp_path / "model"
    code, _, err = run_cli(
        ["train", "--data", str(tiny_dir), "--out", str(out), "--set", "solver.max_iter=3", "--set", "beam=4"], capsys
    )
    assert code == 0, err
    spec = json.loads((out / "model.json").read_text())["model"]
    assert spec["beam"] == 4 and spec["solver"]["max_iter"] == 3 and spec["solver"]["C"] == 1.0


def test_train_rejects_a_bad_setting_before_anything_is_written(tiny_dir, tmp_path, capsys):
    out = tmp_path / "model"
    code, _, err = run_cli(["train", "--data", str(tiny_dir), "--out", str(out), "--set", "solver.max_iter=0"], capsys)
    assert_clean_failure(code, err, "--set solver.max_iter=0", "max_iter must be a number > 0")
    assert not out.exists()
    code, _, err = run_cli(["train", "--model", "knn", "--data", str(tiny_dir), "--out", str(out), "--set", "beam=3"], capsys)
    assert_clean_failure(code, err, "no setting 'beam' here", "n_neighbours")
    assert not out.exists()


def test_neural_settings_check_their_ranges():
    pytest.importorskip("torch")
    from gandalf_xmc.models.neural_xmc import ModelConfig

    for changes, message in [
        ({"family": "knn"}, "family must be one of astec"),
        ({"dropout": 1.0}, "dropout must be a number in [0, 1)"),
        ({"encoder_precision": "fp8"}, "encoder_precision must be one of auto"),
        ({"train.patience": 0}, "patience must be a number > 0"),
    ]:
        with pytest.raises(ConfigError) as info:
            apply_settings(ModelConfig(), changes)
        assert message in str(info.value)
    assert apply_settings(ModelConfig(), {"train.lr": 1}).train.lr == 1.0
