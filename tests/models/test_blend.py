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

from helpers import write_tiny_dataset

WORDS = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "peach", "melon", "grape"]


@pytest.fixture
def fruit(tmp_path):
    train = [
        (f"{size} {w} and {WORDS[(j + 1) % 10]}", [j, (j + 1) % 10])
        for j, w in enumerate(WORDS)
        for size in ("small", "big", "ripe", "sweet")
    ]
    test = [(f"fresh {w}", [j]) for j, w in enumerate(WORDS)]
    return load_dataset(
        write_tiny_dataset(tmp_path / "d", train=train, labels=[f"{w} fruit" for w in WORDS], test=test, filters=None)
    )


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
    with_points = LinearKnnBlend(model_config("linear-knn", seed=0)).fit(recipe, label_texts=fruit.label_texts, progress=False)
    assert with_points.knn_weight == UNVALIDATED_WEIGHT[True] == 0.35
