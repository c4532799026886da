"""Dual-encoder family: offline MiniLM embeddings, label-text initialisation, cache, CLI."""

from __future__ import annotations

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the [neural] extra
import scipy.sparse as sp

from gandalf_xmc import sentence
from gandalf_xmc.models.network import XMCNetwork
from gandalf_xmc.models.neural_xmc import FAMILIES, ModelConfig, NeuralXMC

from helpers import run_cli


@pytest.fixture(autouse=True)
def private_cache(tmp_path, monkeypatch):
    monkeypatch.setenv("GANDALF_CACHE", str(tmp_path / "cache"))


def test_embeddings_are_normalised_cached_and_semantic(tmp_path, monkeypatch):
    monkeypatch.setattr(sentence, "CACHE_MIN_TEXTS", 2)
    texts = ["a red apple", "a green apple", "deep sea whale"]
    E = sentence.embed(texts)
    assert E.shape == (3, 384) and E.dtype == np.float32
    np.testing.assert_allclose(np.linalg.norm(E, axis=1), 1.0, rtol=1e-5)
    assert E[0] @ E[1] > E[0] @ E[2]  # apples are closer to each other than to a whale
    assert len(list((tmp_path / "cache" / "minilm").glob("*.npy"))) == 1
    np.testing.assert_array_equal(sentence.embed(texts), E)  # served from the cache
    sentence.embed(["one query"])
    assert len(list((tmp_path / "cache" / "minilm").glob("*.npy"))) == 1  # single queries are not cached


def test_direct_path_equals_sentence_transformers_encode(monkeypatch):
    texts = ["a red apple", "deep sea whale watching tours in the north atlantic", "x"]
    want = sentence._model().encode(texts, normalize_embeddings=True, convert_to_numpy=True)
    np.testing.assert_allclose(sentence._embed_direct(texts), want, atol=1e-5)  # padded batch
    np.testing.assert_allclose(sentence._embed_direct(texts[1:2]), want[1:2], atol=1e-5)  # single query
    monkeypatch.setattr(sentence, "DIRECT_MAX_TEXTS", 0)  # the encode() route gives the same
    np.testing.assert_allclose(sentence.embed(texts, cache=False), want, atol=1e-6)


def test_int8_encoder_is_close_to_float32_and_cached_apart(tmp_path, monkeypatch):
    monkeypatch.setattr(sentence, "CACHE_MIN_TEXTS", 2)
    texts = ["a red apple", "a green apple", "deep sea whale", "python library for parsing json"]
    E = sentence.embed(texts)
    Q = sentence.embed(texts, precision="int8")
    np.testing.assert_allclose(np.linalg.norm(Q, axis=1), 1.0, rtol=1e-5)
    cos = (E * Q).sum(1)
    assert cos.min() > 0.8 and not np.allclose(E, Q)  # quantised weights: close, not equal
    assert Q[0] @ Q[1] > Q[0] @ Q[2]
    assert len(list((tmp_path / "cache" / "minilm").glob("*.npy"))) == 2  # one cache file a precision
    np.testing.assert_array_equal(sentence.embed(texts, precision="int8"), Q)
    np.testing.assert_array_equal(sentence.embed(texts[2:0:-1], precision="int8"), Q[2:0:-1])  # batch-independent
    with pytest.raises(ValueError, match="precision"):
        sentence.embed(texts, precision="int4")


def test_bfloat16_encoder_matches_float32_and_auto_picks_it_only_where_native(tmp_path, monkeypatch):
    monkeypatch.setattr(sentence, "CACHE_MIN_TEXTS", 2)
    texts = ["a red apple", "a green apple", "deep sea whale", "python library for parsing json"]
    E = sentence.embed(texts)
    B = sentence.embed(texts, precision="bfloat16")
    assert B.dtype == np.float32 and not np.array_equal(E, B)  # bfloat16 weights: not the same numbers
    assert (E * B).sum(1).min() > 0.995  # measured 0.9999 a single query here
    np.testing.assert_allclose(sentence.embed(texts[1:2], precision="bfloat16"), B[1:2], atol=5e-3)
    assert len(list((tmp_path / "cache" / "minilm").glob("*.npy"))) == 2  # one cache file a precision
    monkeypatch.setattr(sentence, "native_bfloat16", lambda: True)
    assert sentence.resolve_precision("auto") == "bfloat16"
    monkeypatch.setattr(sentence, "native_bfloat16", lambda: False)
    assert sentence.resolve_precision("auto") == "float32"
    np.testing.assert_array_equal(sentence.embed(texts, precision="auto"), E)  # the float32 cache file
    assert sentence.resolve_precision("int8") == "int8"
    with pytest.raises(ValueError, match="auto, float32, bfloat16, int8"):
        sentence.resolve_precision("fp16")


def test_classifiers_start_at_the_label_text_prior():
    V = np.eye(4, 3, dtype=np.float32)
    net = XMCNetwork(torch.nn.Identity(), 3, n_labels=4, n_clusters=2, init_bias=0.0)
    net.init_from_label_vectors(V, np.array([0, 0, 1, 1]), scale=5.0)
    z = torch.tensor([[1.0, 0.0, 0.0]])
    scores = net.candidate_scores(z, torch.tensor([[0, 1, 2, 3]]))
    np.testing.assert_allclose(scores.detach().numpy(), [[5.0, 0.0, 0.0, 0.0]])
    assert float(net.correction_penalty(torch.tensor([0, 1])).detach()) == 0.0


def test_inference_tables_follow_parameter_updates():
    # at inference the priors are added to the tables once; an update of a correction must show
    V = np.eye(4, 3, dtype=np.float32)
    net = XMCNetwork(torch.nn.Identity(), 3, n_labels=4, n_clusters=2, init_bias=0.0)
    net.init_from_label_vectors(V, np.array([0, 0, 1, 1]), scale=5.0)
    net.eval()
    z, cand = torch.tensor([[1.0, 0.0, 0.0]]), torch.tensor([[0, 1, 2, 3]])
    with torch.no_grad():
        before = net.candidate_scores(z, cand).numpy().copy()
        net.labels.weight[0, 0] += 2.0  # in place, as an optimiser step
        net.meta.weight[1, 0] += 3.0
        after = net.candidate_scores(z, cand).numpy()
        meta = net.meta_scores(z).numpy()
    np.testing.assert_allclose(before, [[5.0, 0.0, 0.0, 0.0]])
    np.testing.assert_allclose(after, [[7.0, 0.0, 0.0, 0.0]])
    # cluster 0 = labels 0, 1: centroid direction (1, 1, 0)/sqrt 2; cluster 1 = labels 2, 3
    np.testing.assert_allclose(meta, [[5.0 / np.sqrt(2), 3.0]], rtol=1e-6)
    net.train()
    np.testing.assert_allclose(net.candidate_scores(z, cand).detach().numpy(), after)  # training path agrees


def test_dual_encoder_zero_shot_prefers_the_matching_label():
    labels = ["red apple", "blue whale", "green pepper", "steel hammer"]
    Y = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 1, 0, 0]], dtype=np.float32))
    config = ModelConfig(
        family="dual-encoder",
        max_cluster_size=2,
        neighbour_mix=0.0,  # the classifiers alone: the training points' vote knows only labels seen
        train=FAMILIES["dual-encoder"].train_config(epochs=1, lr=1e-6),
    )
    model = NeuralXMC(config).fit(["fresh red apples", "whale watching trip"], Y, labels, progress=False)
    P = model.predict(["a hammer made of steel", "green peppers"], k=1)
    assert P.indices.tolist() == [3, 2]  # labels never seen in training, found through their text


# labels whose texts point the classifiers' prior the wrong way: the apples carry the hammer's label
CROSSED_LABELS = ["red apple", "blue whale", "green pepper", "steel hammer"]
CROSSED_TEXTS = ["fresh red apples", "a basket of red apples", "whale watching trip", "whales in the ocean"]
CROSSED_Y = sp.csr_matrix(np.array([[0, 0, 0, 1], [0, 0, 0, 1], [0, 0, 1, 0], [0, 0, 1, 0]], dtype=np.float32))


def crossed_validation():
    from gandalf_xmc.engine.records import Validation

    Y = sp.csr_matrix(np.array([[0, 0, 0, 1], [0, 0, 1, 0]], dtype=np.float32))
    return Validation(["red apples for sale", "watching whales"], Y, np.ones(4, dtype=np.float32))


def crossed_config(**settings) -> ModelConfig:
    # a learning rate too small to move the classifiers off the label texts' prior in one epoch
    train = FAMILIES["dual-encoder"].train_config(epochs=1, lr=1e-6)
    return ModelConfig(family="dual-encoder", max_cluster_size=2, train=train, **settings)


def test_validation_chooses_the_mix_of_classifiers_and_the_points_vote_and_the_refit_keeps_it(tmp_path):
    from gandalf_xmc.models.neural_xmc import refit_config

    config = crossed_config()
    model = NeuralXMC(config).fit(CROSSED_TEXTS, CROSSED_Y, CROSSED_LABELS, valid=crossed_validation(), progress=False)
    tried = model.result.history[model.result.best_epoch]["neighbour_mixes_tried"]
    assert tried["0.0"] == 0.0  # the classifiers alone follow the texts: apples -> "red apple", whales -> "blue whale"
    assert tried["1.0"] == 100.0  # the vote alone follows the neighbours' labels
    smallest = min(float(m) for m, p1 in tried.items() if p1 == 100.0)
    assert model.neighbour_mix == smallest > 0 and model.result.best_score == 100.0
    assert refit_config(config, model.result).neighbour_mix == smallest  # the final model keeps it
    assert config.neighbour_mix is None  # the caller's settings are not changed
    queries = ["red apples for sale", "watching whales"]
    P = model.predict(queries, k=2)
    assert P.toarray().argmax(1).tolist() == [3, 2]
    model.save(tmp_path / "m")
    assert (tmp_path / "m" / "neighbour_points.npy").exists()
    loaded = NeuralXMC.load(tmp_path / "m")
    assert loaded.neighbour_mix == smallest
    np.testing.assert_allclose(loaded.predict(queries, k=2).toarray(), P.toarray(), atol=1e-6)


def test_without_validation_the_mix_is_the_suites_and_a_mix_of_0_keeps_no_index(tmp_path):
    import json

    from gandalf_xmc.models.neural_xmc import UNVALIDATED_NEIGHBOUR_MIX

    model = NeuralXMC(crossed_config()).fit(CROSSED_TEXTS, CROSSED_Y, CROSSED_LABELS, progress=False)
    assert model.neighbour_mix == UNVALIDATED_NEIGHBOUR_MIX and model.neighbours is not None
    alone = NeuralXMC(crossed_config(neighbour_mix=0.0)).fit(CROSSED_TEXTS, CROSSED_Y, CROSSED_LABELS, progress=False)
    assert alone.neighbours is None
    alone.save(tmp_path / "m")
    assert not (tmp_path / "m" / "neighbour_points.npy").exists()
    spec = json.loads((tmp_path / "m" / "model.json").read_text())
    assert spec["neighbour_mix"] == 0.0
    del spec["neighbour_mix"]  # as a model saved before the vote existed
    (tmp_path / "m" / "model.json").write_text(json.dumps(spec))
    queries = ["red apples for sale", "watching whales"]
    np.testing.assert_array_equal(
        NeuralXMC.load(tmp_path / "m").predict(queries, k=2).toarray(), alone.predict(queries, k=2).toarray()
    )


def test_a_mix_out_of_range_or_for_a_family_without_a_sentence_encoder_is_refused():
    from gandalf_xmc.errors import ConfigError

    with pytest.raises(ConfigError, match="in \\[0, 1\\]"):
        ModelConfig(family="dual-encoder", neighbour_mix=1.5)
    with pytest.raises(ConfigError, match="in \\[0, 1\\]"):
        ModelConfig(family="dual-encoder", neighbour_mixes=(0.0, -0.1))
    with pytest.raises(ConfigError, match="not astec"):
        ModelConfig(family="astec", neighbour_mix=0.5)


def test_train_and_predict_dual_encoder_from_the_cli(tiny_dir, tmp_path, capsys):
    code, out, err = run_cli(
        # the classifiers alone (mix 0): the label asked for has no training point, so only its text's prior finds it
        ["train", "--model", "dual-encoder", "--data", str(tiny_dir), "--epochs", "1", "--set", "neighbour_mix=0"]
        + ["--out", str(tmp_path / "m")],
        capsys,
    )
    assert code == 0, err
    from gandalf_xmc.models import load_trained

    # the default (auto) is fixed when the model is built, so that queries use the training encoder
    saved = load_trained(tmp_path / "m").config.encoder_precision
    assert saved == ("bfloat16" if sentence.native_bfloat16() else "float32")
    code, out, err = run_cli(["predict", str(tmp_path / "m"), "--text", "blue whale", "-k", "1"], capsys)
    assert code == 0, err
    assert "L3" in out and "blue whale" in out


def test_int8_dual_encoder_from_the_cli_travels_with_the_model(tiny_dir, tmp_path, capsys):
    code, out, err = run_cli(
        [
            "train",
            "--model",
            "dual-encoder",
            "--data",
            str(tiny_dir),
            "--epochs",
            "1",
            "--encoder-precision",
            "int8",
            "--set",
            "neighbour_mix=0",
            "--out",
            str(tmp_path / "m"),
        ],
        capsys,
    )
    assert code == 0, err
    from gandalf_xmc.models import load_trained

    assert load_trained(tmp_path / "m").config.encoder_precision == "int8"  # queries use the same encoder
    code, out, err = run_cli(["predict", str(tmp_path / "m"), "--text", "blue whale", "-k", "1"], capsys)
    assert code == 0, err
    assert "L3" in out and "blue whale" in out
    code, out, err = run_cli(
        ["train", "--model", "linear", "--data", str(tiny_dir), "--encoder-precision", "int8", "--out", str(tmp_path / "l")],
        capsys,
    )
    assert code == 2 and "(dual-encoder, ngame) only" in out + err


def test_loading_the_encoder_shows_no_bar_and_leaves_the_setting_as_it_was(capfd, monkeypatch):
    from transformers.utils import logging as hf_logging

    monkeypatch.setattr(sentence, "_MODELS", {})  # load afresh
    assert hf_logging.is_progress_bar_enabled()
    sentence._model("float32")
    assert "Loading weights" not in capfd.readouterr().err
    assert hf_logging.is_progress_bar_enabled()


def test_training_and_label_texts_are_embedded_once_each(monkeypatch):
    import gandalf_xmc.models.neural_xmc as neural_xmc

    texts = ["a red apple", "deep sea whale", "a red apple", "a claw hammer"]  # one repeated point
    label_texts = ["a claw hammer", "fruit", "deep sea whale"]  # two labels whose text is a point's
    Y = sp.csr_matrix(np.array([[0, 1, 0], [0, 0, 1], [0, 1, 0], [1, 0, 0]], dtype=np.float32))
    embedded, handed = [], {}
    real_embed, real_fit = sentence.embed, neural_xmc.fit

    def recording_embed(texts_, *args, **kwargs):
        embedded.append(list(texts_))
        return real_embed(texts_, *args, **kwargs)

    def recording_fit(network, X, *args, **kwargs):
        handed["X"] = X
        return real_fit(network, X, *args, **kwargs)

    real_init = XMCNetwork.init_from_label_vectors

    def recording_init(network, Z, *args, **kwargs):
        handed["Z"] = Z
        return real_init(network, Z, *args, **kwargs)

    monkeypatch.setattr(sentence, "embed", recording_embed)
    monkeypatch.setattr(neural_xmc, "fit", recording_fit)
    monkeypatch.setattr(XMCNetwork, "init_from_label_vectors", recording_init)
    config = ModelConfig(
        family="dual-encoder", encoder_precision="float32", train=FAMILIES["dual-encoder"].train_config(epochs=1, device="cpu")
    )
    model = NeuralXMC(config).fit(texts, Y, label_texts, progress=False)
    # the label texts as the one list every model of the label set embeds (the cache's key), then
    # the one distinct training text that is no label's: each distinct text once
    assert embedded == [label_texts, ["a red apple"]]
    # the points' and the labels' vectors, each as embedding its own list gives
    np.testing.assert_allclose(handed["X"], real_embed(texts, cache=False), atol=1e-5)
    np.testing.assert_allclose(handed["Z"], real_embed(label_texts, cache=False), atol=1e-5)
    assert model.predict(["a hammer"], k=1).shape == (1, 3)
