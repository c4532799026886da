"""The final model is trained on every training point once validation has chosen (issue 36):
it equals a model trained without a validation split on the same recipe, for a fixed
augmentation, for auto's winner and under a protocol that leaves points out of its validation run."""

from __future__ import annotations

import json
import shutil

import pytest

from gandalf_xmc.augment import AugmentConfig, preset
from gandalf_xmc.data import load_dataset
from gandalf_xmc.models.registry import load_trained, model_config
from gandalf_xmc.workflow import auto
from gandalf_xmc.workflow.pipeline import fit_augmented, train_model
from gandalf_xmc.workflow.validation import carve_validation

from helpers import write_tiny_dataset

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "peach", "melon", "grape", "lemon", "mango"]


@pytest.fixture
def fruit(tmp_path):
    """48 points over 12 labels: every label carries 4 points, each with a co-label."""
    labels = [f"{w} fruit" for w in WORDS]
    sizes = ["small", "big", "ripe", "sweet"]
    train = [
        (f"{size} {w} and {WORDS[(j + 1) % len(WORDS)]}", [j, (j + 1) % len(WORDS)])
        for j, w in enumerate(WORDS)
        for size in sizes
    ]
    test = [(f"fresh {w}", [j]) for j, w in enumerate(WORDS)]
    return load_dataset(write_tiny_dataset(tmp_path / "fruit", train=train, labels=labels, test=test, filters=None))


def same_model(a, b, texts) -> None:
    pa, pb = a.predict(texts, k=5), b.predict(texts, k=5)
    assert (pa != pb).nnz == 0  # the same scores, bit for bit


def test_the_final_model_is_trained_on_every_point(fruit, tmp_path):
    recipe = preset("gandalf-tempered", 0)
    config = model_config("linear", seed=0)
    refitted = train_model(fruit, tmp_path / "refit", config, recipe, valid_fraction=0.25, progress=False)
    whole = train_model(fruit, tmp_path / "whole", config, recipe, valid_fraction=0.0, progress=False)
    same_model(refitted.model, whole.model, fruit.test.texts)
    same_model(load_trained(tmp_path / "refit"), whole.model, fruit.test.texts)
    info = json.loads((tmp_path / "refit" / "training.json").read_text())
    n_labels_with_text = fruit.n_labels  # gandalf-tempered adds one label point per label
    assert info["refit"] is True and info["n_train"] == 48 + n_labels_with_text == whole.info["n_train"]
    run = info["validation_run"]
    assert run["n_valid"] == 12 and run["n_train"] == 36 + n_labels_with_text
    assert set(run["metrics"]) >= {"P@1", "PSP@5"} and info["final_run"]["n_train"] == info["n_train"]
    assert whole.info["refit"] is False and whole.info["n_valid"] == 0


def test_no_refit_keeps_the_validated_model(fruit, tmp_path):
    config = model_config("linear", seed=0)
    kept = train_model(fruit, tmp_path / "m", config, AugmentConfig("none"), valid_fraction=0.25, progress=False, refit=False)
    rest, valid = carve_validation(fruit, 0.25, 0)
    validated, n_fit = fit_augmented(rest, None, None, config, AugmentConfig("none"), None, progress=False)
    same_model(kept.model, validated, fruit.test.texts)
    assert kept.info["refit"] is False and kept.info["n_train"] == n_fit == 36
    assert "P@1" in kept.validated.history[0] and kept.validated is kept.model.result


def test_autos_winner_is_retrained_on_every_point(fruit, tmp_path):
    config = model_config("linear", seed=0)
    trained = train_model(
        fruit,
        tmp_path / "m",
        config,
        AugmentConfig("auto"),
        valid_fraction=0.25,
        progress=False,
        auto_config=auto.AutoConfig(candidates=("none", "identity")),
    )
    chosen = auto.AUTO_CANDIDATES[trained.search["chosen"]]
    whole = train_model(fruit, tmp_path / "whole", config, chosen, valid_fraction=0.0, progress=False)
    same_model(trained.model, whole.model, fruit.test.texts)
    info = json.loads((tmp_path / "m" / "training.json").read_text())
    assert info["augment"]["augmentation"] == chosen.augmentation and info["n_train"] == whole.info["n_train"]
    # the line gandalf train prints and gandalf info come from the validation run
    trial = next(t for t in trained.search["trials"] if t["name"] == trained.search["chosen"])
    assert info["validation_run"]["metrics"]["P@1"] == pytest.approx(trial["valid"]["P@1"])


def test_a_protocol_never_costs_the_final_model_points(fruit, tmp_path):
    config = model_config("linear", seed=0)
    trained = train_model(
        fruit, tmp_path / "m", config, AugmentConfig("none"), valid_fraction=0.25, progress=False, valid_protocol="new-items"
    )
    run = trained.info["validation_run"]
    assert run["n_train"] + run["n_valid"] < 48  # near copies of validation points sat out the validation run
    assert trained.info["n_train"] == 48


def test_a_resumed_run_does_not_validate_again(fruit, tmp_path, monkeypatch):
    config = model_config("linear", seed=0)
    first = train_model(
        fruit, tmp_path / "m", config, AugmentConfig("none"), valid_fraction=0.25, progress=False, keep_checkpoints=True
    )  # as a run killed during its final training leaves them
    from gandalf_xmc.workflow import pipeline

    calls = []
    real = pipeline._validation_run
    monkeypatch.setattr(pipeline, "_validation_run", lambda *a, **k: calls.append(1) or real(*a, **k))
    again = train_model(
        fruit,
        tmp_path / "m",
        config,
        AugmentConfig("none"),
        valid_fraction=0.25,
        progress=False,
        resume=True,
        keep_checkpoints=True,
    )
    assert calls == [] and again.info["validation_run"] == first.info["validation_run"]
    same_model(again.model, first.model, fruit.test.texts)
    # another request validates afresh
    train_model(fruit, tmp_path / "m", config, AugmentConfig("identity"), valid_fraction=0.25, progress=False, resume=True)
    assert calls == [1]


@pytest.mark.neural
@pytest.mark.parametrize("final_started", [False, True])
def test_a_run_stopped_between_validation_and_the_final_models_first_checkpoint_resumes(fruit, tmp_path, final_started):
    config = model_config("astec", seed=0, epochs=2)
    first = train_model(
        fruit, tmp_path / "m", config, AugmentConfig("none"), valid_fraction=0.25, progress=False, keep_checkpoints=True
    )
    final = tmp_path / "m" / "checkpoints" / "final"
    shutil.rmtree(final)  # validation recorded, the final run not begun, or begun without a checkpoint yet
    if final_started:
        final.mkdir()
    again = train_model(fruit, tmp_path / "m", config, AugmentConfig("none"), valid_fraction=0.25, progress=False, resume=True)
    assert again.info["validation_run"] == first.info["validation_run"]
    same_model(again.model, first.model, fruit.test.texts)


@pytest.mark.neural
def test_a_neural_final_model_trains_for_the_validated_epoch_count(fruit, tmp_path):
    config = model_config("astec", seed=0, epochs=3)
    trained = train_model(fruit, tmp_path / "m", config, AugmentConfig("none"), valid_fraction=0.25, progress=False)
    best = trained.validated.best_epoch
    assert len(trained.validated.history) == 3 and "P@1" in trained.validated.history[best]
    assert len(trained.model.result.history) == best + 1 == trained.info["final_run"]["epochs"]
    train_model(
        fruit,
        tmp_path / "whole",
        model_config("astec", seed=0, epochs=best + 1),
        AugmentConfig("none"),
        valid_fraction=0.0,
        progress=False,
    )
    import torch

    mine, theirs = torch.load(tmp_path / "m" / "weights.pt"), torch.load(tmp_path / "whole" / "weights.pt")
    assert mine.keys() == theirs.keys()
    for name in mine:  # float sums over two threads may round in another order: equal to 1e-5, not to the bit
        torch.testing.assert_close(mine[name], theirs[name], rtol=1e-5, atol=1e-6)


def test_a_finished_run_removes_its_checkpoints_unless_asked_to_keep_them(fruit, tmp_path):
    config = model_config("linear", seed=0)
    train_model(
        fruit,
        tmp_path / "m",
        config,
        AugmentConfig("auto"),
        valid_fraction=0.25,
        progress=False,
        auto_config=auto.AutoConfig(candidates=("none", "identity")),
    )
    assert not (tmp_path / "m" / "checkpoints").exists() and (tmp_path / "m" / "auto.json").is_file()
    train_model(
        fruit,
        tmp_path / "k",
        config,
        AugmentConfig("auto"),
        valid_fraction=0.25,
        progress=False,
        auto_config=auto.AutoConfig(candidates=("none", "identity")),
        keep_checkpoints=True,
    )
    assert (tmp_path / "k" / "checkpoints" / "auto" / "trials.json").is_file()


def test_a_given_validation_split_validates_and_every_point_trains_once(fruit, tmp_path):
    """``valid_split`` (the new items a deployment meets): the saved model is the one trained on
    every training point, its recorded validation metrics are its scores on the split given, and
    nothing is trained again."""
    from gandalf_xmc.metrics import evaluate, inverse_propensity

    config, recipe = model_config("linear", seed=0), preset("gandalf-tempered", 0)
    given = train_model(fruit, tmp_path / "given", config, recipe, progress=False, valid_split=("val", fruit.test))
    whole = train_model(fruit, tmp_path / "whole", config, recipe, valid_fraction=0.0, progress=False)
    same_model(given.model, whole.model, fruit.test.texts)
    info = json.loads((tmp_path / "given" / "training.json").read_text())
    assert info["refit"] is False and "final_run" not in info and info["valid_source"] == "split val"
    assert info["n_train"] == whole.info["n_train"] == 48 + fruit.n_labels and info["n_valid"] == 12
    inv = inverse_propensity(fruit.original_train_Y(), *fruit.propensity_constants())
    scored = evaluate(whole.model.predict(fruit.test.texts, k=10), fruit.test.Y, inv, (1, 5), fruit.test.filter_pairs)
    for metric in ("P@1", "PSP@5"):
        assert info["validation_run"]["metrics"][metric] == pytest.approx(scored[metric])


def test_auto_chooses_on_a_given_validation_split(tmp_path):
    """auto's rule (the best PSP@5 among candidates within 0.2 P@1 of none), applied by hand to
    models trained on every point and scored on the split given, names auto's choice; the split
    (label names and pairs of fruits) is one where the candidates differ in P@1 and PSP@5."""
    from gandalf_xmc.metrics import evaluate, inverse_propensity

    labels = [f"{w} fruit" for w in WORDS]
    train = [
        (f"{size} {w} and {WORDS[(j + 1) % 12]}", [j, (j + 1) % 12])
        for j, w in enumerate(WORDS)
        for size in ("small", "big", "ripe", "sweet")
    ]
    given = [(f"{w} fruit", [(j + 1) % 12]) for j, w in enumerate(WORDS)]
    given += [(f"{w} and {WORDS[(j + 1) % 12]} fruit", [(j + 1) % 12]) for j, w in enumerate(WORDS)]
    written = write_tiny_dataset(tmp_path / "fruit", train=train, labels=labels, test=given, filters=None)
    data = load_dataset(written, derive_filters=False)  # as a new-items split: its namesakes are misses
    config, names = model_config("linear", seed=0), ("none", "gandalf", "identity", "gandalf-tempered")
    trained = train_model(
        data,
        tmp_path / "auto",
        config,
        AugmentConfig("auto"),
        progress=False,
        auto_config=auto.AutoConfig(candidates=names),
        valid_split=("val", data.test),
    )
    inv = inverse_propensity(data.original_train_Y(), *data.propensity_constants())
    scores = {}
    for name in names:
        model = train_model(data, tmp_path / name, config, auto.AUTO_CANDIDATES[name], valid_fraction=0.0, progress=False)
        scores[name] = evaluate(model.model.predict(data.test.texts, k=10), data.test.Y, inv, (1, 5))
    assert len({round(scores[n]["P@1"], 2) for n in names}) == 4  # the split tells the candidates apart
    allowed = [n for n in names if scores[n]["P@1"] >= scores["none"]["P@1"] - 0.2]
    assert trained.search["chosen"] == max(allowed, key=lambda n: (scores[n]["PSP@5"], scores[n]["P@1"])) != "none"
    for name in names[1:]:
        assert trained.search["p1_gain_over_none"][name]["gain"] == pytest.approx(
            scores[name]["P@1"] - scores["none"]["P@1"], abs=0.01
        )
    assert trained.info["refit"] is False and trained.info["n_valid"] == 24
