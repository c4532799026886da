"""NGAME's first stage: mined batches, the in-batch loss by hand, fine-tuning, resume, the ngame family."""

from __future__ import annotations

import json

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the [neural] extra
import scipy.sparse as sp

from gandalf_xmc import sentence
from gandalf_xmc.errors import ConfigError
from gandalf_xmc.models.contrastive import CHECKPOINT, ContrastiveConfig, TunedEncoder, batch_loss, fine_tune, mined_batches
from gandalf_xmc.models.neural_xmc import FAMILIES, ModelConfig, NeuralXMC


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GANDALF_CACHE", str(tmp_path / "cache"))


class TableEncoder(torch.nn.Module):
    """Texts -> fixed vectors (a stand-in for the encoder, so that the loss can be computed by hand)."""

    def __init__(self, table: dict[str, list[float]]):
        super().__init__()
        self.table = table

    def forward(self, texts):
        return torch.tensor([self.table[t] for t in texts], dtype=torch.float32)


def test_mined_batches_cover_every_row_once_and_group_similar_rows():
    rng = np.random.default_rng(0)
    a = rng.normal([5.0, 0.0], 0.1, size=(8, 2))
    b = rng.normal([-5.0, 0.0], 0.1, size=(8, 2))
    vectors = np.vstack([a, b]).astype(np.float32)
    batches = mined_batches(vectors, 8, np.random.default_rng(1))
    assert sorted(np.concatenate(batches).tolist()) == list(range(16))
    assert all(1 <= g.size <= 8 for g in batches)
    # the two far-apart groups are never mixed: each batch's negatives are its own group's
    assert all(set(g.tolist()) <= set(range(8)) or set(g.tolist()) <= set(range(8, 16)) for g in batches)
    again = mined_batches(vectors, 8, np.random.default_rng(1))
    assert [g.tolist() for g in again] == [g.tolist() for g in batches]


def test_batch_loss_is_the_masked_in_batch_softmax_computed_by_hand():
    # three points; point 0 owns labels 0 and 1, point 1 owns label 1, point 2 owns label 2
    texts = ["p0", "p1", "p2"]
    label_texts = ["l0", "l1", "l2"]
    vec = {"p0": [1.0, 0.0], "p1": [0.6, 0.8], "p2": [0.0, 1.0], "l0": [0.8, 0.6], "l1": [0.0, 1.0], "l2": [1.0, 0.0]}
    Y = sp.csr_matrix(np.array([[1, 1, 0], [0, 1, 0], [0, 0, 1]], dtype=np.float32))
    rows = np.array([0, 1, 2])
    rng = np.random.default_rng(3)
    draws = np.random.default_rng(3).random(3)
    drawn0 = [0, 1][int(draws[0] * 2)]  # what batch_loss draws for point 0 (the others own one label)
    loss = float(batch_loss(TableEncoder(vec), texts, label_texts, Y, rows, rng, temperature=0.5))
    labels = sorted({drawn0, 1, 2})
    want = 0.0
    for i, own_drawn in enumerate([drawn0, 1, 2]):
        logits = []
        for j in labels:
            if j != own_drawn and Y[i, j] > 0:
                continue  # a false negative: the point's own label, masked out
            logits.append((np.dot(vec[texts[i]], vec[label_texts[j]]) / 0.5, j == own_drawn))
        z = np.array([x for x, _ in logits])
        pos = [x for x, is_pos in logits if is_pos][0]
        want += -(pos - np.log(np.exp(z).sum()))
    assert loss == pytest.approx(want / 3, rel=1e-6)


def test_the_encoder_before_tuning_embeds_as_the_sentence_model():
    texts = ["a red apple", "deep sea whale watching tours in the north atlantic", "x"]
    encoder = TunedEncoder(max_length=256)
    np.testing.assert_allclose(encoder.embed(texts), sentence.embed(texts, cache=False), atol=1e-5)


def _pairs():
    texts = [
        "fresh red apples",
        "crisp green apples",
        "whale watching trip",
        "a blue whale",
        "steel claw hammer",
        "hammer a nail",
    ]
    label_texts = ["apple", "whale", "hammer"]
    Y = sp.csr_matrix(np.array([[1, 0, 0], [1, 0, 0], [0, 1, 0], [0, 1, 0], [0, 0, 1], [0, 0, 1]], dtype=np.float32))
    return texts, Y, label_texts


def test_fine_tuning_draws_points_towards_their_label_texts_and_resumes_to_the_same_weights(tmp_path):
    texts, Y, label_texts = _pairs()
    config = ContrastiveConfig(epochs=2, batch_size=3, lr=1e-4, warmup=0.0)

    def margin(encoder):  # own label's cosine minus the best other label's, averaged over the points
        S = encoder.embed(texts) @ encoder.embed(label_texts).T
        own = S[np.arange(len(texts)), Y.indices]
        other = np.where(Y.toarray() > 0, -np.inf, S).max(1)
        return float((own - other).mean())

    unbroken = TunedEncoder(32)
    before = margin(unbroken)
    history = fine_tune(unbroken, texts, Y, label_texts, config, seed=0, progress=False)
    assert [h["epoch"] for h in history] == [0, 1] and all(np.isfinite(h["loss"]) for h in history)
    assert margin(unbroken) > before + 0.05

    broken = TunedEncoder(32)
    one = ContrastiveConfig(epochs=1, batch_size=3, lr=1e-4, warmup=0.0)
    fine_tune(broken, texts, Y, label_texts, one, seed=0, checkpoint_dir=tmp_path, progress=False)
    assert (tmp_path / CHECKPOINT).exists()
    resumed = TunedEncoder(32)
    history = fine_tune(resumed, texts, Y, label_texts, config, seed=0, checkpoint_dir=tmp_path, resume=True, progress=False)
    assert [h["epoch"] for h in history] == [0, 1]
    for (name, a), (_, b) in zip(unbroken.state_dict().items(), resumed.state_dict().items()):
        assert torch.equal(a, b), name


def test_an_epoch_fine_tunes_on_its_seeded_sample_of_points(monkeypatch):
    import gandalf_xmc.models.contrastive as contrastive

    texts, Y, label_texts = _pairs()
    embedded: list[set[int]] = []  # the points each epoch embeds to mine its batches
    trained: set[int] = set()  # the points any batch trained on
    real_loss, real_embed = contrastive.batch_loss, TunedEncoder.embed

    def recording_loss(encoder, texts_, label_texts_, Y_, rows, rng, temperature):
        trained.update(rows.tolist())
        return real_loss(encoder, texts_, label_texts_, Y_, rows, rng, temperature)

    def recording_embed(self, texts_, *args, **kwargs):
        embedded.append({texts.index(t) for t in texts_})
        return real_embed(self, texts_, *args, **kwargs)

    monkeypatch.setattr(contrastive, "batch_loss", recording_loss)
    monkeypatch.setattr(TunedEncoder, "embed", recording_embed)
    config = ContrastiveConfig(epochs=2, batch_size=2, lr=1e-4, pairs_per_epoch=4)
    history = fine_tune(TunedEncoder(32), texts, Y, label_texts, config, seed=3, progress=False)
    assert [h["pairs"] for h in history] == [4, 4]
    # the sample an epoch draws, computed apart: seeded by the seed and the epoch
    want = [set(np.random.default_rng([3, epoch, 11]).choice(np.arange(6), 4, replace=False).tolist()) for epoch in (0, 1)]
    assert embedded == want and trained <= want[0] | want[1]
    embedded.clear()
    every = ContrastiveConfig(epochs=1, batch_size=2, pairs_per_epoch=0)
    assert fine_tune(TunedEncoder(32), texts, Y, label_texts, every, progress=False)[0]["pairs"] == 6
    assert embedded == [set(range(6))]
    assert contrastive.epoch_sample_size(config, 3) == 3  # fewer points than the sample: every one


@pytest.mark.parametrize("precision", ["float32", "bfloat16"])
def test_a_cpu_fine_tunes_at_the_encoders_precision(monkeypatch, precision):
    import gandalf_xmc.models.contrastive as contrastive

    texts, Y, label_texts = _pairs()
    seen, real_loss = [], contrastive.batch_loss

    def recording_loss(*args):
        seen.append(torch.get_autocast_dtype("cpu") if torch.is_autocast_enabled("cpu") else torch.float32)
        return real_loss(*args)

    monkeypatch.setattr(contrastive, "batch_loss", recording_loss)
    history = fine_tune(
        TunedEncoder(32), texts, Y, label_texts, ContrastiveConfig(epochs=1, batch_size=3), progress=False, precision=precision
    )
    assert seen and set(seen) == {getattr(torch, precision)} and np.isfinite(history[0]["loss"])


def test_fine_tuning_refuses_what_it_cannot_learn_from():
    texts, Y, label_texts = _pairs()
    with pytest.raises(ConfigError, match="two training points"):
        fine_tune(TunedEncoder(32), texts[:1], Y[:1], label_texts, ContrastiveConfig(epochs=1), progress=False)
    with pytest.raises(ConfigError, match="batch_size"):
        ContrastiveConfig(batch_size=1)
    with pytest.raises(ConfigError, match="int8"):
        ModelConfig(family="ngame", encoder_precision="int8")


def _cpu_ngame(classifier_epochs: int) -> ModelConfig:
    """ngame on the CPU in float32: one epoch of fine-tuning on the toy pairs, then its classifiers."""
    return ModelConfig(
        family="ngame",
        max_cluster_size=2,
        encoder_precision="float32",
        train=FAMILIES["ngame"].train_config(epochs=classifier_epochs, device="cpu"),
        contrastive=ContrastiveConfig(epochs=1, batch_size=3, lr=1e-4),
    )


def test_ngame_saves_its_tuned_encoder_and_predicts_alike_after_loading(tmp_path):
    texts, Y, label_texts = _pairs()
    config = _cpu_ngame(classifier_epochs=1)
    model = NeuralXMC(config).fit(texts, Y, label_texts, progress=False)
    assert len(model.result.encoder_history) == 1
    tuned = model.features(["a hammer"])
    assert not np.allclose(tuned, sentence.embed(["a hammer"], cache=False), atol=1e-3)  # the tuned encoder, not the packaged one
    model.save(tmp_path / "m")
    loaded = NeuralXMC.load(tmp_path / "m")
    assert loaded.config.contrastive == config.contrastive
    queries = ["a hammer for nails", "apples from the orchard"]
    np.testing.assert_allclose(loaded.predict(queries, k=2).toarray(), model.predict(queries, k=2).toarray(), rtol=1e-6)
    # a model saved before the sample's setting was renamed loads with it under its new name
    spec_file = tmp_path / "m" / "model.json"
    spec = json.loads(spec_file.read_text())
    spec["model"]["contrastive"]["cpu_pairs_per_epoch"] = spec["model"]["contrastive"].pop("pairs_per_epoch") + 1
    spec_file.write_text(json.dumps(spec))
    assert NeuralXMC.load(tmp_path / "m").config.contrastive.pairs_per_epoch == config.contrastive.pairs_per_epoch + 1


def test_ngame_stopped_after_fine_tuning_resumes_into_its_classifier_stage(tmp_path):
    texts, Y, label_texts = _pairs()
    config = _cpu_ngame(classifier_epochs=2)
    NeuralXMC(config).fit(texts, Y, label_texts, checkpoint_dir=tmp_path, progress=False)
    for name in ("last.pt", "best.pt"):  # as a stop between the two stages leaves the directory
        (tmp_path / name).unlink()
    assert (tmp_path / CHECKPOINT).exists()
    resumed = NeuralXMC(config).fit(texts, Y, label_texts, checkpoint_dir=tmp_path, resume=True, progress=False)
    assert [h["epoch"] for h in resumed.result.history] == [0, 1]  # the classifiers trained, not "nothing to resume"
    assert [h["epoch"] for h in resumed.result.encoder_history] == [0]  # the fine-tuning was not done again


@pytest.mark.gpu
def test_ngame_fine_tunes_on_a_gpu_in_bfloat16_and_loads_on_the_cpu(tmp_path):
    texts, Y, label_texts = _pairs()
    config = ModelConfig(
        family="ngame",
        max_cluster_size=2,
        train=FAMILIES["ngame"].train_config(epochs=1, device="cuda"),
        contrastive=ContrastiveConfig(epochs=2, batch_size=3, lr=1e-4),
    )
    model = NeuralXMC(config).fit(texts, Y, label_texts, progress=False)
    assert model.tuned is not None and model.tuned.device.type == "cuda"
    assert model.config.encoder_precision == "bfloat16" and model.result.device.startswith("cuda")
    assert all(np.isfinite(h["loss"]) for h in model.result.encoder_history)
    model.save(tmp_path / "m")
    loaded = NeuralXMC.load(tmp_path / "m")
    assert loaded.tuned is not None and loaded.tuned.device.type == "cpu"
    queries = ["a hammer for nails", "apples from the orchard"]
    on_gpu, on_cpu = model.predict(queries, k=1), loaded.predict(queries, k=1)
    assert on_gpu.indices.tolist() == on_cpu.indices.tolist()  # bfloat16 on the GPU, on the CPU too (the saved precision)


def test_the_final_model_fine_tunes_for_the_epochs_validation_kept():
    from gandalf_xmc.engine.records import TrainConfig, TrainResult
    from gandalf_xmc.models.contrastive import chosen_epochs
    from gandalf_xmc.models.neural_xmc import refit_config

    epochs = [{"epoch": 0, "loss": 3.0}, {"epoch": 1, "loss": 2.5}]
    config = ModelConfig(family="ngame", contrastive=ContrastiveConfig(epochs=2))
    for classifiers, kept in (
        (None, 2),
        ({"stage": "classifiers", "tuned": 40.0, "packaged": 30.0, "kept": True}, 2),
        ({"stage": "classifiers", "tuned": 30.0, "packaged": 40.0, "kept": False}, 0),
    ):
        history = epochs + ([classifiers] if classifiers else [])
        assert chosen_epochs(history) == kept
        result = TrainResult(best_epoch=0, best_score=0.0, encoder_history=history)
        assert refit_config(config, result).contrastive.epochs == kept
    assert chosen_epochs([{"epoch": -1, "P@1": 27.0, "kept": False}, *epochs]) == 2  # an earlier version's packaged record
    result = TrainResult(best_epoch=0, best_score=0.0, encoder_history=epochs)
    assert refit_config(ModelConfig(family="astec", train=TrainConfig()), result) == ModelConfig(family="astec")
    texts, Y, label_texts = _pairs()
    assert fine_tune(TunedEncoder(32), texts, Y, label_texts, ContrastiveConfig(epochs=0), progress=False) == []


def _ngame_config(epochs: int) -> ModelConfig:
    return ModelConfig(
        family="ngame",
        max_cluster_size=2,
        encoder_precision="float32",
        train=FAMILIES["ngame"].train_config(epochs=2, device="cpu"),
        contrastive=ContrastiveConfig(epochs=epochs, batch_size=3, lr=1e-4),
    )


def test_ngame_trains_its_classifiers_one_epoch_by_default_and_the_epochs_asked_for_otherwise():
    from dataclasses import replace

    from gandalf_xmc.models.registry import model_config

    texts, Y, label_texts = _pairs()
    small = dict(max_cluster_size=2, encoder_precision="float32", contrastive=ContrastiveConfig(epochs=1, batch_size=3, lr=1e-4))
    for asked, trained in ((None, 1), (3, 3)):
        config = replace(model_config("ngame", seed=0, epochs=asked, device="cpu"), **small)
        model = NeuralXMC(config).fit(texts, Y, label_texts, progress=False)
        assert model.tuned is not None and len(model.result.history) == trained
    assert model_config("dual-encoder").train.epochs == 2  # the frozen encoder's classifiers keep theirs


def test_ngame_without_fine_tuning_is_the_dual_encoder_to_the_bit():
    from dataclasses import replace

    texts, Y, label_texts = _pairs()
    ngame = NeuralXMC(_ngame_config(0)).fit(texts, Y, label_texts, progress=False)
    dual = NeuralXMC(replace(_ngame_config(0), family="dual-encoder")).fit(texts, Y, label_texts, progress=False)
    assert ngame.tuned is None
    queries = ["a hammer for nails", "apples from the orchard", "whales"]
    np.testing.assert_array_equal(ngame.predict(queries, k=3).toarray(), dual.predict(queries, k=3).toarray())


def test_without_validation_a_tuned_encoder_mixes_in_its_own_share_of_the_vote(tmp_path):
    from gandalf_xmc.models.neighbours import mixed
    from gandalf_xmc.models.neural_xmc import UNVALIDATED_NEIGHBOUR_MIX, UNVALIDATED_TUNED_NEIGHBOUR_MIX

    assert UNVALIDATED_TUNED_NEIGHBOUR_MIX != UNVALIDATED_NEIGHBOUR_MIX  # else this test could not tell them apart
    texts, Y, label_texts = _pairs()
    packaged = NeuralXMC(_ngame_config(0)).fit(texts, Y, label_texts, progress=False)
    assert packaged.tuned is None and packaged.neighbour_mix == UNVALIDATED_NEIGHBOUR_MIX  # the dual-encoder's
    tuned = NeuralXMC(_ngame_config(1)).fit(texts, Y, label_texts, progress=False)
    assert tuned.tuned is not None and tuned.neighbour_mix == UNVALIDATED_TUNED_NEIGHBOUR_MIX
    queries = ["a hammer for nails", "apples from the orchard", "whales"]
    classifier, vote = tuned.parts(queries, 3)
    expected = mixed(classifier, vote, UNVALIDATED_TUNED_NEIGHBOUR_MIX, 3).toarray()
    np.testing.assert_allclose(tuned.predict(queries, k=3).toarray(), expected, atol=1e-6)
    tuned.save(tmp_path / "m")
    loaded = NeuralXMC.load(tmp_path / "m")
    assert loaded.neighbour_mix == UNVALIDATED_TUNED_NEIGHBOUR_MIX
    np.testing.assert_allclose(loaded.predict(queries, k=3).toarray(), expected, atol=1e-6)


def test_ngame_keeps_the_packaged_encoder_where_its_classifiers_validate_better(monkeypatch, tmp_path):
    from dataclasses import replace

    from gandalf_xmc.engine.records import Validation
    from gandalf_xmc.models.contrastive import chosen_epochs
    from gandalf_xmc.models.neural_xmc import refit_config

    texts, Y, label_texts = _pairs()
    valid = Validation(
        ["claw hammer", "red apple", "whale song"],
        sp.csr_matrix(np.array([[0, 0, 1], [1, 0, 0], [0, 1, 0]], dtype=np.float32)),
        np.ones(3),
    )
    noise = np.random.default_rng(0)

    def useless(self, texts, *args, **kwargs):  # the tuned encoder's vectors say nothing, so its classifiers lose
        vectors = noise.normal(size=(len(texts), sentence.EMBEDDING_DIM)).astype(np.float32)
        return vectors / np.linalg.norm(vectors, axis=1, keepdims=True)

    monkeypatch.setattr(TunedEncoder, "embed", useless)
    model = NeuralXMC(_ngame_config(1)).fit(texts, Y, label_texts, valid=valid, progress=False)
    last = model.result.encoder_history[-1]
    assert last["stage"] == "classifiers" and last["packaged"] > last["tuned"] and last["kept"] is False
    assert model.tuned is None and chosen_epochs(model.result.encoder_history) == 0
    assert refit_config(model.config, model.result).contrastive.epochs == 0
    dual = NeuralXMC(replace(_ngame_config(0), family="dual-encoder")).fit(texts, Y, label_texts, valid=valid, progress=False)
    queries = ["a hammer for nails", "apples from the orchard"]
    np.testing.assert_array_equal(model.predict(queries, k=3).toarray(), dual.predict(queries, k=3).toarray())
    model.save(tmp_path / "m")
    assert not (tmp_path / "m" / "encoder.pt").exists()
    np.testing.assert_array_equal(
        NeuralXMC.load(tmp_path / "m").predict(queries, k=3).toarray(), dual.predict(queries, k=3).toarray()
    )
