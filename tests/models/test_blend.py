"""The linear-knn blend: the tree's scores plus the neighbours' vote, by a weight chosen on
validation (0 included), kept when the final model is trained on every point."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.data import load_dataset
from gandalf_xmc.engine.records import Validation
from gandalf_xmc.metrics import evaluate, inverse_propensity
from gandalf_xmc.models.blend import BlendConfig, LinearKnnBlend, refit_config
from gandalf_xmc.models.knn import TfidfKNN
from gandalf_xmc.models.linear import XRLinear
from gandalf_xmc.models.registry import model_config
from gandalf_xmc.workflow.fitting import fit_model

from helpers import write_fruit_dataset


@pytest.fixture
def fruit(tmp_path):
    return load_dataset(write_fruit_dataset(tmp_path / "d"))


def test_the_vote_is_the_share_of_neighbour_weight_by_hand():
    knn = TfidfKNN(model_config("knn", seed=0)).fit(
        ["red apple", "red apple pie", "blue whale"], sp.csr_matrix(np.array([[1, 0], [0.5, 1], [0, 1]], np.float32))
    )
    raw, share = knn.predict(["red apple"], k=2).toarray()[0], knn.vote(["red apple"], k=2).toarray()[0]
    Q = knn.featurizer.transform(["red apple"])
    sims = np.asarray((Q @ knn.XT).todense()).ravel() ** 2  # power 2; the whale shares no word
    np.testing.assert_allclose(raw, sims @ np.array([[1, 0], [0.5, 1], [0, 1]]), rtol=1e-5)
    np.testing.assert_allclose(share, raw / sims.sum(), rtol=1e-5)
    assert share.max() <= 1.0


def test_the_blend_is_the_tree_plus_the_weighted_vote(fruit):
    config = BlendConfig(**{**model_config("linear-knn", seed=0).__dict__, "knn_weight": 0.75})
    blend = LinearKnnBlend(config).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
    tree = XRLinear(config.linear).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
    knn = TfidfKNN(config.knn).fit(fruit.train.texts, fruit.train.Y)
    texts = fruit.test.texts
    by_hand = tree.predict(texts, k=10).toarray() + 0.75 * knn.vote(texts, k=10).toarray()
    got = blend.predict(texts, k=3).toarray()
    for row in range(len(texts)):
        top = np.flatnonzero(got[row])
        assert top.size == 3
        np.testing.assert_allclose(got[row, top], by_hand[row, top], rtol=1e-5)
        assert got[row, top].min() >= np.sort(by_hand[row])[-3] - 1e-6  # the three best of the sum


def test_validation_chooses_the_weight_of_best_p1_and_zero_is_among_them(fruit, tmp_path):
    valid = fruit.test  # stands for a validation split here; nothing else is scored on it
    inv = inverse_propensity(fruit.train.Y)
    v = Validation(valid.texts, valid.Y, inv, valid.filter_pairs)
    blend = LinearKnnBlend(model_config("linear-knn", seed=0)).fit(
        fruit.train.texts, fruit.train.Y, fruit.label_texts, valid=v, progress=False
    )
    tried = blend.result.history[0]["weights_tried"]
    assert "0.0" in tried and set(map(float, tried)) == set(blend.config.weights)
    best = max(tried.values())
    assert tried[str(blend.knn_weight)] == best
    assert blend.knn_weight == min(float(w) for w, p in tried.items() if p == best)  # the smaller on a tie
    p1 = evaluate(blend.predict(valid.texts, k=10), valid.Y, inv, (1,), valid.filter_pairs)["P@1"]
    assert p1 == pytest.approx(best) and p1 >= tried["0.0"]
    # the final model on every point keeps the weight
    assert refit_config(blend.config, blend.result).knn_weight == blend.knn_weight
    blend.save(tmp_path / "m")
    again = LinearKnnBlend.load(tmp_path / "m")
    assert again.knn_weight == blend.knn_weight
    assert (again.predict(valid.texts, k=5) != blend.predict(valid.texts, k=5)).nnz == 0


def test_without_validation_the_weight_is_the_left_out_choice(fruit):
    from gandalf_xmc.augment import preset, training_set
    from gandalf_xmc.models.blend import UNVALIDATED_WEIGHT

    plain = LinearKnnBlend(model_config("linear-knn", seed=0)).fit(
        fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False
    )
    assert plain.knn_weight == UNVALIDATED_WEIGHT[False] == 0.1
    recipe = training_set(fruit, preset("gandalf-tempered", 0))
    with_points = fit_model(LinearKnnBlend(model_config("linear-knn", seed=0)), recipe, fruit.label_texts, progress=False)
    assert with_points.knn_weight == UNVALIDATED_WEIGHT[True] == 0.35


# ---- the label texts' similarity (a sentence encoder; here a stand-in that needs no torch) ----


def fake_embed(texts, precision="float32", **_):
    """Unit-length hashed bags of words: texts sharing words have a positive cosine."""
    out = np.zeros((len(texts), 64), dtype=np.float32)
    for i, text in enumerate(texts):
        for word in text.split():
            out[i, sum(map(ord, word)) % 64] += 1.0
    norms = np.linalg.norm(out, axis=1, keepdims=True)
    return out / np.where(norms > 0, norms, 1.0)


@pytest.fixture
def encoder(monkeypatch):
    from gandalf_xmc import sentence
    from gandalf_xmc.models import blend

    monkeypatch.setattr(sentence, "embed", fake_embed)
    # "auto" asks torch whether the CPU has bfloat16; the stand-in needs no torch (the core package's tests)
    monkeypatch.setattr(sentence, "resolve_precision", lambda p, device="cpu": "float32" if p == "auto" else p)
    monkeypatch.setattr(blend, "text_similarity_available", lambda: None)
    return blend


def test_text_scores_are_each_rows_top_cosines_clipped_at_zero():
    from gandalf_xmc.models.blend import text_scores

    Q = np.array([[1, 0, 0], [0, 0.6, 0.8]], dtype=np.float32)
    Z = np.array([[1, 0, 0], [0, 1, 0], [0.6, 0.8, 0], [0, 0, -1]], dtype=np.float32)
    got = text_scores(Q, Z, 2).toarray()
    want = np.array([[1.0, 0, 0.6, 0], [0, 0.6, 0.48, 0]], dtype=np.float32)  # row 2: -0.8 clipped, not kept
    np.testing.assert_allclose(got, want, atol=1e-6)


def test_validation_chooses_both_weights_jointly_and_the_model_keeps_them(fruit, tmp_path, encoder):
    valid = fruit.test  # stands for a validation split here; nothing else is scored on it
    inv = inverse_propensity(fruit.train.Y)
    v = Validation(valid.texts, valid.Y, inv, valid.filter_pairs)
    blend = LinearKnnBlend(model_config("linear-knn", seed=0)).fit(
        fruit.train.texts, fruit.train.Y, fruit.label_texts, valid=v, progress=False
    )
    record = blend.result.history[0]
    # the whole grid by hand, from the parts and the stand-in encoder
    tree, vote = blend.parts(list(valid.texts))
    vectors = fake_embed(fruit.label_texts)
    text = encoder.text_scores(fake_embed(list(valid.texts)), vectors, blend.config.candidates)
    grid = {
        (t, w): evaluate(blend.combine(tree, vote, w, 10, text, t), valid.Y, inv, (1,), valid.filter_pairs)["P@1"]
        for t in blend.config.text_weights
        for w in blend.config.weights
    }
    best = max(grid.values())
    chosen = min((t, w) for (t, w), p in grid.items() if p == best)  # ties: the smaller text weight, then vote weight
    assert (blend.text_weight, blend.knn_weight) == chosen
    assert record["P@1"] == pytest.approx(best) and best >= grid[0.0, 0.0]
    assert record["text_weights_tried"] == {str(t): grid[t, blend.knn_weight] for t in blend.config.text_weights}
    p1 = evaluate(blend.predict(valid.texts, k=10), valid.Y, inv, (1,), valid.filter_pairs)["P@1"]
    assert p1 == pytest.approx(best)
    refit = refit_config(blend.config, blend.result)
    assert (refit.text_weight, refit.knn_weight, refit.text_precision) == (blend.text_weight, blend.knn_weight, "float32")


def test_a_fixed_text_weight_is_saved_with_the_label_vectors(fruit, tmp_path, encoder, monkeypatch):
    config = BlendConfig(**{**model_config("linear-knn", seed=0).__dict__, "knn_weight": 0.2, "text_weight": 0.5})
    blend = LinearKnnBlend(config).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
    assert blend.text_weight == 0.5
    texts = fruit.test.texts
    tree, vote = blend.parts(texts, 3)
    text = encoder.text_scores(fake_embed(texts), fake_embed(fruit.label_texts), 100)
    by_hand = tree.toarray() + 0.2 * vote.toarray() + 0.5 * text.toarray()
    got = blend.predict(texts, k=3).toarray()
    for row in range(len(texts)):
        top = np.flatnonzero(got[row])
        np.testing.assert_allclose(got[row, top], by_hand[row, top], rtol=1e-5)
        assert got[row, top].min() >= np.sort(by_hand[row])[-3] - 1e-6
    blend.save(tmp_path / "m")
    assert (tmp_path / "m" / "label_vectors.npy").exists()
    again = LinearKnnBlend.load(tmp_path / "m")
    assert again.text_weight == 0.5
    from gandalf_xmc import sentence

    calls = []
    monkeypatch.setattr(sentence, "embed", lambda texts, **kw: calls.append(list(texts)) or fake_embed(texts))
    again.page_in()  # a server loads the encoder before its first request
    again.hold_in_memory()
    assert calls == [["warm-up"], ["warm-up"]]
    assert (again.predict(texts, k=3) != blend.predict(texts, k=3)).nnz == 0
    # where the sentence encoder is not installed, such a model says what it needs
    encoder.text_similarity_available = lambda: "the neural extra is not installed (torch)"
    from gandalf_xmc.errors import ConfigError

    with pytest.raises(ConfigError, match=r"blends the label texts' similarity \(weight 0.5\).*\[neural\]"):
        LinearKnnBlend.load(tmp_path / "m")


def test_without_the_encoder_or_with_too_many_labels_the_text_part_is_not_tried(fruit, tmp_path, monkeypatch):
    from gandalf_xmc.models import blend as blend_module

    valid = fruit.test
    v = Validation(valid.texts, valid.Y, inverse_propensity(fruit.train.Y), valid.filter_pairs)
    monkeypatch.setattr(blend_module, "text_similarity_available", lambda: "the neural extra is not installed (torch)")
    blend = LinearKnnBlend(model_config("linear-knn", seed=0)).fit(
        fruit.train.texts, fruit.train.Y, fruit.label_texts, valid=v, progress=False
    )
    record = blend.result.history[0]
    assert record["text_similarity"] == "not tried: the neural extra is not installed (torch)"
    assert blend.text_weight == 0.0 and "text_weight" not in record
    blend.save(tmp_path / "m")
    assert not (tmp_path / "m" / "label_vectors.npy").exists()
    assert LinearKnnBlend.load(tmp_path / "m").text_weight == 0.0  # loads and predicts without the encoder
    monkeypatch.setattr(blend_module, "text_similarity_available", lambda: None)
    few = BlendConfig(**{**model_config("linear-knn", seed=0).__dict__, "text_max_labels": 5})
    small = LinearKnnBlend(few).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, valid=v, progress=False)
    assert small.result.history[0]["text_similarity"] == "not tried: 10 labels, more than text_max_labels (5)"


def test_a_query_is_featurised_once_for_its_answer_and_its_known_flag(fruit, monkeypatch):
    """rank_labels' single pass (the tree's features of a query used for its scores and for
    whether the model knows a word of it) gives predict's scores and known_queries' flags."""
    blend = LinearKnnBlend(model_config("linear-knn", seed=0)).fit(
        fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False
    )
    queries = ["fresh apple", "", "zzzz qqqq", "ripe fig and kiwi"]
    for model in (blend, blend.tree):
        scores, known = model.scores_and_known(queries, 3)
        assert (scores != model.predict(queries, k=3)).nnz == 0
        assert known == model.known_queries(queries) == [True, False, False, True]
        calls = []
        real = model.featurizer.transform
        with monkeypatch.context() as patch:  # the blend's featurizer is its tree's
            patch.setattr(
                model.featurizer, "transform", lambda texts, calls=calls, real=real: calls.append(len(texts)) or real(texts)
            )
            answers = model.predict_labels(queries, k=2)
        assert calls == [4] and [len(a) for a in answers] == [2, 0, 0, 2]


def test_one_query_is_answered_without_matrices_with_the_batch_paths_bytes(fruit, monkeypatch):
    """A single text (a server's request) goes a path without scipy matrices: its features are
    never a matrix, and its scores are the bytes of its row in a batch of two (the batch path,
    same features), for the blend with and without the vote, its tree and its knn (scores and
    vote), and so are the known flags."""
    queries = ["fresh apple", "", "zzzz qqqq", "ripe fig and kiwi", "kiwi kiwi kiwi lime", "big"]
    for weight in (0.75, 0.0):
        config = BlendConfig(**{**model_config("linear-knn", seed=0).__dict__, "knn_weight": weight})
        blend = LinearKnnBlend(config).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
        answers = [blend.predict, blend.tree.predict, blend.knn.predict, blend.knn.vote]
        for k in (1, 3, 10):
            for i, text in enumerate(queries):
                pair = [text, queries[i - 1]]
                batch = [answer(pair, k=k)[0] for answer in answers]
                with monkeypatch.context() as patch:
                    for featurizer in (blend.tree.featurizer, blend.knn.featurizer):
                        patch.setattr(featurizer, "transform", lambda texts: pytest.fail("a single query became a matrix"))
                    one = [answer([text], k=k) for answer in answers]
                    for model in (blend, blend.tree):
                        scores, known = model.scores_and_known([text], k)
                        assert (scores != model.predict([text], k=k)).nnz == 0
                        assert known == [i in (0, 3, 4, 5)]
                for a, b in zip(one, batch):
                    assert a.shape == b.shape and a.has_sorted_indices
                    assert np.array_equal(a.indices, b.indices) and np.array_equal(a.data, b.data)
                    assert a.data.dtype == np.float32


def test_the_weight_grid_is_every_setting_fit_tries_each_answering_as_a_blend_of_those_weights(fruit, encoder, monkeypatch):
    from dataclasses import replace

    config = model_config("linear-knn", seed=0)
    blend = LinearKnnBlend(config).fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
    before = (blend.knn_weight, blend.text_weight, blend.label_vectors)
    texts = list(fruit.test.texts)
    settings, predictions = blend.weight_grid(texts, 3)
    assert [(s["text_weight"], s["knn_weight"]) for s in settings] == [
        (t, w) for t in sorted(config.text_weights) for w in sorted(config.weights)
    ]
    assert settings[0] == {"knn_weight": 0.0, "text_weight": 0.0}  # the tree alone first
    assert (blend.knn_weight, blend.text_weight, blend.label_vectors) == before  # the model is left as it was
    for i in (0, 3, len(settings) // 2 + 1, len(settings) - 1):
        fixed = LinearKnnBlend(replace(config, **settings[i])).fit(
            fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False
        )
        expected = fixed.predict(texts, k=3)
        assert predictions[i].shape == expected.shape
        np.testing.assert_allclose(predictions[i].toarray(), expected.toarray(), rtol=1e-6)
    # a fixed weight is not tried again; without the encoder, no text weight above 0 is
    settings, _ = (
        LinearKnnBlend(replace(config, knn_weight=0.5))
        .fit(fruit.train.texts, fruit.train.Y, fruit.label_texts, progress=False)
        .weight_grid(texts, 3)
    )
    assert {s["knn_weight"] for s in settings} == {0.5}
    monkeypatch.setattr(encoder, "text_similarity_available", lambda: "not installed")
    settings, _ = blend.weight_grid(texts, 3)
    assert {s["text_weight"] for s in settings} == {0.0} and len(settings) == len(set(config.weights))
