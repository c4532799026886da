"""linear-ngame: linear-knn's blend mixed with ngame's scores by a mix chosen on validation (0
and 1 included), the parts trained on the points each is meant for, the choices kept by the final model."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
import scipy.sparse as sp

torch = pytest.importorskip("torch")  # the [neural] extra

from gandalf_xmc.augment import preset, training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.engine.records import Validation
from gandalf_xmc.errors import ConfigError
from gandalf_xmc.metrics import inverse_propensity
from gandalf_xmc.models.blend import LinearKnnBlend
from gandalf_xmc.models.contrastive import ContrastiveConfig
from gandalf_xmc.models.hybrid import UNVALIDATED_MIX, HybridConfig, LinearNgameHybrid, new_items_config, refit_config
from gandalf_xmc.models.neural_xmc import FAMILIES, ModelConfig, NeuralXMC
from gandalf_xmc.models.registry import load_trained, model_config
from gandalf_xmc.workflow.fitting import fit_model

from helpers import FRUIT, write_fruit_dataset


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GANDALF_CACHE", str(tmp_path / "cache"))


@pytest.fixture
def fruit(tmp_path):
    return load_dataset(write_fruit_dataset(tmp_path / "d"))


def _config(tune: int = 1, **own) -> HybridConfig:
    """The defaults with a small ngame on the CPU in float32 (``tune`` epochs of fine-tuning, one of
    classifiers)."""
    ngame = ModelConfig(
        family="ngame",
        max_cluster_size=2,
        encoder_precision="float32",
        train=FAMILIES["ngame"].train_config(epochs=1, device="cpu"),
        contrastive=ContrastiveConfig(epochs=tune, batch_size=4, lr=1e-4),
    )
    return replace(model_config("linear-ngame", seed=0), ngame=ngame, **own)


def _p1(scores: np.ndarray, Y) -> float:
    """P@1 by hand: the share of rows whose highest-scoring label (the lower id on a tie) is relevant."""
    dense = Y.toarray()
    return float(np.mean([dense[i, int(np.argmax(row))] > 0 for i, row in enumerate(scores)])) * 100


def test_the_mix_is_the_best_validation_p1_of_the_two_parts_mixed_by_hand(fruit, tmp_path):
    # "a or b", its target a or b drawn at random (seeded): the two parts often rank a different one first
    pairs = [(a, b) for a in range(10) for b in range(10) if a != b]
    texts = [f"{FRUIT[a]} or {FRUIT[b]}" for a, b in pairs]
    target = [pair[i] for pair, i in zip(pairs, np.random.default_rng(0).integers(0, 2, len(pairs)))]
    Y = sp.csr_matrix((np.ones(len(texts)), (np.arange(len(texts)), target)), shape=(len(texts), 10))
    v = Validation(texts, Y, inverse_propensity(fruit.train.Y))
    config = _config(tune=0, mixes=(0.1, 0.3, 0.5, 0.7, 0.9, 1.0))  # no 0: ngame is kept, whatever wins
    model = LinearNgameHybrid(config).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, valid=v, progress=False)
    blend = model.blend.predict(texts, k=10).toarray()
    ngame = model.ngame.predict(texts, k=10).toarray()
    by_mix = {m: _p1((1 - m) * blend + m * ngame, Y) for m in config.mixes}
    assert len(set(by_mix.values())) > 1
    best = max(by_mix.values())
    assert model.ngame_mix == min(m for m, p in by_mix.items() if p == best)  # the smaller on a tie
    tried = model.result.history[0]["mixes_tried"]
    assert {float(m): p for m, p in tried.items()} == pytest.approx(by_mix)
    got = model.predict(texts, k=3).toarray()  # the three best of the mix, with its values
    want = (1 - model.ngame_mix) * blend + model.ngame_mix * ngame
    for row in range(len(texts)):
        top = np.flatnonzero(got[row])
        np.testing.assert_allclose(got[row, top], want[row, top], rtol=1e-5)
        assert got[row, top].min() >= np.sort(want[row])[-3] - 1e-6
    model.save(tmp_path / "m")
    loaded = load_trained(tmp_path / "m")
    assert type(loaded) is LinearNgameHybrid and loaded.ngame_mix == model.ngame_mix
    np.testing.assert_allclose(loaded.predict(texts, k=5).toarray(), model.predict(texts, k=5).toarray(), rtol=1e-6)


def test_a_fixed_mix_mixes_the_blend_and_ngame_and_zero_trains_no_ngame(fruit, monkeypatch):
    model = LinearNgameHybrid(_config(tune=0, ngame_mix=0.5)).fit(
        fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False
    )
    texts = fruit.test.texts
    want = 0.5 * model.blend.predict(texts, k=10).toarray() + 0.5 * model.ngame.predict(texts, k=10).toarray()
    got = model.predict(texts, k=2).toarray()
    for row in range(len(texts)):
        top = np.flatnonzero(got[row])
        np.testing.assert_allclose(got[row, top], want[row, top], rtol=1e-5)
    assert model.known_queries(["zzz qqq"]) == [True]  # the encoder ranks a text of unknown words
    unvalidated = LinearNgameHybrid(_config(tune=0)).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
    assert unvalidated.ngame_mix == UNVALIDATED_MIX == 0.8  # the mix each dev dataset left out chose

    def refuse(*args, **kwargs):
        raise AssertionError("ngame trained with a mix fixed at 0")

    monkeypatch.setattr(NeuralXMC, "fit", refuse)
    plain = LinearNgameHybrid(_config(ngame_mix=0.0)).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
    alone = LinearKnnBlend(_config().blend).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
    np.testing.assert_array_equal(plain.predict(texts, k=3).toarray(), alone.predict(texts, k=3).toarray())
    assert plain.known_queries(["zzz qqq"]) == [False]  # the blend's vocabulary decides


def test_ngame_trains_on_the_original_points_and_the_blend_on_every_point(fruit, monkeypatch):
    seen = {}
    fit_blend, fit_ngame = LinearKnnBlend.fit, NeuralXMC.fit

    def spy(name, fit):
        def wrapped(self, inputs, Y, *args, **kwargs):
            seen[name] = (list(inputs), Y.shape[0], kwargs.get("label_points"), kwargs.get("positive_weight"))
            return fit(self, inputs, Y, *args, **kwargs)

        return wrapped

    monkeypatch.setattr(LinearKnnBlend, "fit", spy("blend", fit_blend))
    monkeypatch.setattr(NeuralXMC, "fit", spy("ngame", fit_ngame))
    recipe = training_set(fruit, preset("gandalf-tempered-firm", 0))
    n_points = int((~recipe.label_points.mask).sum())
    assert 0 < n_points < len(recipe.texts)
    fit_model(LinearNgameHybrid(_config(tune=0, ngame_mix=0.5)), recipe, fruit.label_texts, progress=False)
    assert seen["blend"][1] == len(recipe.texts) and seen["blend"][2] is not None and seen["blend"][3] is not None
    texts, rows, points, positives = seen["ngame"]
    assert rows == n_points and texts == fruit.train.texts and points is None and positives is None
    # with ngame_label_points, ngame takes them too
    seen.clear()
    fit_model(
        LinearNgameHybrid(_config(tune=0, ngame_mix=0.5, ngame_label_points=True)), recipe, fruit.label_texts, progress=False
    )
    assert seen["ngame"][1] == len(recipe.texts) and seen["ngame"][2] is not None


def test_the_final_model_keeps_the_mix_and_each_parts_choices(fruit):
    valid = fruit.test
    v = Validation(valid.texts, valid.Y, inverse_propensity(fruit.train.Y), valid.filter_pairs)
    config = _config(mixes=(0.5, 1.0))  # no 0: ngame counts, so its own choices are fixed too
    model = LinearNgameHybrid(config).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, valid=v, progress=False)
    final = refit_config(config, model.result)
    assert final.ngame_mix == model.ngame_mix in (0.5, 1.0)
    assert final.blend.knn_weight == model.blend.knn_weight
    assert final.ngame.neighbour_mix == model.ngame.neighbour_mix
    assert final.ngame.train.epochs == model.ngame.result.best_epoch + 1
    assert final.ngame.contrastive.epochs in (0, 1)  # 0 where the packaged encoder won
    assert config.ngame_mix is None  # the caller's settings are not changed


def test_new_items_train_no_ngame_part_unless_the_caller_fixed_a_mix(fruit, tmp_path, monkeypatch):
    from gandalf_xmc.augment import AugmentConfig
    from gandalf_xmc.workflow.forecast import NewItems
    from gandalf_xmc.workflow.pipeline import train_model

    config = _config(tune=0)
    for_new = new_items_config(config)
    assert for_new.mixes == (0.0,) and for_new.blend.text_weights == (0.0,)  # the blend as for new items too
    assert config.mixes != (0.0,)  # the caller's settings are not changed
    fixed = new_items_config(_config(tune=0, ngame_mix=0.5))
    assert fixed.ngame_mix == 0.5 and fixed.mixes == config.mixes

    def refuse(*args, **kwargs):
        raise AssertionError("ngame trained for new items")

    monkeypatch.setattr(NeuralXMC, "fit", refuse)
    trained = train_model(
        fruit, tmp_path / "m", config, AugmentConfig("none"), valid_fraction=0.25, progress=False, new_items=NewItems(None)
    )
    assert trained.model.ngame is None and trained.model.ngame_mix == 0.0
    alone = LinearNgameHybrid(for_new).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
    assert alone.ngame is None and alone.ngame_mix == 0.0  # one mix to try and no validation: that mix, not 0.8


def test_bad_settings_are_refused_in_one_line():
    with pytest.raises(ConfigError, match="mixes"):
        HybridConfig(mixes=(0.5, 1.5))
    with pytest.raises(ConfigError, match="ngame_mix"):
        HybridConfig(ngame_mix=True)
    with pytest.raises(ConfigError, match="ngame"):
        HybridConfig(ngame=ModelConfig(family="dual-encoder"))


def test_the_label_texts_are_encoded_once_for_both_parts_and_a_retrained_model(fruit, monkeypatch):
    from gandalf_xmc import sentence

    monkeypatch.setattr(sentence, "CACHE_MIN_TEXTS", 1)  # the fruit's short lists cached as a real set's are
    monkeypatch.setattr(sentence, "DIRECT_MAX_TEXTS", 10**6)  # every list through the one recorded path
    encoded: list[list[str]] = []
    real_direct = sentence._embed_direct

    def recording_direct(texts, *args, **kwargs):  # the encoder itself: what the cache did not serve
        encoded.append(list(texts))
        return real_direct(texts, *args, **kwargs)

    monkeypatch.setattr(sentence, "_embed_direct", recording_direct)
    valid = fruit.test
    v = Validation(valid.texts, valid.Y, inverse_propensity(fruit.train.Y), valid.filter_pairs)
    config = _config(tune=0, mixes=(0.5,))
    # the blend embeds the label texts too, at ngame's precision (as both do at their default, auto; a
    # precision of its own would be another list to the cache, on a CPU where auto is bfloat16)
    config = replace(config, blend=replace(config.blend, text_weights=(0.5,), text_precision="float32"))
    model = LinearNgameHybrid(config).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, valid=v, progress=False)
    assert model.blend.label_vectors is not None and model.ngame is not None
    assert encoded.count(list(fruit.label_texts)) == 1  # as one list, the blend's (the cache's key)
    assert all(sum(batch.count(t) for batch in encoded) == 1 for t in fruit.label_texts)  # and in no other list
    others = [t for t in dict.fromkeys(fruit.train.texts) if t not in set(fruit.label_texts)]
    assert encoded.count(others) == 1  # the training texts that are no label's, once
    encoded.clear()
    LinearNgameHybrid(refit_config(config, model.result)).fit(
        fruit.train.texts + valid.texts, sp.vstack([fruit.train.Y, valid.Y]), fruit.label_texts, progress=False
    )
    assert encoded  # the retrained model's new training list was encoded,
    assert not any(t in batch for batch in encoded for t in fruit.label_texts)  # its label texts came from the cache
