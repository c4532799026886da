"""InceptionXML-LF (models/inception_lf.py): its label bags, its classifiers and its two phases,
against hand computation."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

pytestmark = pytest.mark.neural
torch = pytest.importorskip("torch")

from gandalf_xmc.engine.records import TrainConfig, TrainResult  # noqa: E402
from gandalf_xmc.models.inception import InceptionEncoder  # noqa: E402
from gandalf_xmc.models.inception_lf import LabelFeatureNetwork, graph_text_bags, label_text_bags, padded_size  # noqa: E402
from gandalf_xmc.models.neural_xmc import ModelConfig, NeuralXMC, first_phase_best, refit_config  # noqa: E402

TEXTS = ["alpha beta", "gamma delta", "alpha gamma", "epsilon zeta", "beta zeta"]
LABELS = ["alpha", "gamma", "zeta", "omega"]
Y = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]], dtype=np.float32))


def lf_config(**train) -> ModelConfig:
    base = dict(epochs=2, batch_size=2, lr=0.05, dense_lr=0.01, train_clusters=2, predict_clusters=4, seed=0, device="cpu")
    base.update(train)
    return ModelConfig(family="inceptionxml-lf", dropout=0.0, max_cluster_size=1, cluster_dim=3, train=TrainConfig(**base))


def test_label_text_bags_are_tfidf_rows_by_hand():
    ids = np.array([[2, 3, 2, 0], [4, 0, 0, 0], [0, 0, 0, 0]])
    idf = np.array([1.0, 1.0, 2.0, 3.0, 0.5])
    bags = label_text_bags(ids, idf).toarray()
    # label 0: word 2 twice (2 x 2.0 = 4), word 3 once (3.0): (4, 3) / 5
    np.testing.assert_allclose(bags[0], [0, 0, 0.8, 0.6, 0], rtol=1e-6)
    np.testing.assert_allclose(bags[1], [0, 0, 0, 0, 1.0])
    assert not bags[2].any()  # no known word: an empty row


def test_graph_text_bags_weight_the_label_texts_by_the_cooccurrence_graph():
    # labels 0 and 1 co-occur in one of label 0's two points: P[1 | 0] = 0.5, P[0 | 1] = 1
    Yo = sp.csr_matrix(np.array([[1, 1, 0], [1, 0, 0], [0, 0, 1]], dtype=np.float32))
    text = sp.csr_matrix(np.array([[1.0, 0, 0, 0], [0, 1.0, 0, 0], [0, 0, 0.6, 0.8]], dtype=np.float32))
    bags = graph_text_bags(text, Yo).toarray()
    # row 0: (1 * z0 + 0.5 * z1) / 1.5, then l2-normalised; row 1: (z1 + z0) / 2; row 2: z2 alone
    np.testing.assert_allclose(bags[0], np.array([1, 0.5, 0, 0]) / np.sqrt(1.25), rtol=1e-6)
    np.testing.assert_allclose(bags[1], np.array([1, 1, 0, 0]) / np.sqrt(2), rtol=1e-6)
    np.testing.assert_allclose(bags[2], [0, 0, 0.6, 0.8], rtol=1e-6)
    # label points' rows are not the graph's business: soft targets are binarised, as given
    np.testing.assert_allclose(graph_text_bags(text, Yo * 0.3).toarray(), bags, rtol=1e-6)
    # a row keeps its heaviest words
    np.testing.assert_allclose(graph_text_bags(text, Yo, keep=1).toarray()[0], [1, 0, 0, 0])


def small_network(n_labels=3, dim=384):
    torch.manual_seed(0)
    encoder = InceptionEncoder(6, dim, 0.0)
    network = LabelFeatureNetwork(encoder, dim, n_labels, 2)
    text = sp.csr_matrix(np.array([[0, 0, 0.6, 0.8, 0, 0], [0, 0, 0, 0, 1.0, 0], [0, 0, 0, 0, 0, 0]], dtype=np.float32))
    graph = sp.csr_matrix(np.array([[0, 0, 0.6, 0.8, 0, 0], [0, 0, 0.8, 0, 0.6, 0], [0, 0, 0, 0, 0, 1.0]], dtype=np.float32))
    network.set_label_bags(text, graph)
    return network, text.toarray(), graph.toarray()


def by_hand(network, text, graph, free: bool) -> np.ndarray:
    E = network.encoder.embed.weight.detach().numpy().astype(np.float64)
    dim = E.shape[1]

    def phi(encoder, z):
        # spectral_norm's weight as the module holds it (W / sigma), applied by hand
        W = encoder.residual.weight.detach().numpy().astype(np.float64)
        b = encoder.residual.bias.detach().numpy().astype(np.float64)
        gelu = torch.nn.functional.gelu(torch.from_numpy(z)).numpy()
        return encoder.alpha.item() * (gelu @ W.T + b) + encoder.beta.item() * z

    components = [phi(network.text_encoder, text @ E / np.sqrt(dim)), phi(network.graph_encoder, graph @ E / np.sqrt(dim))]
    if free:
        components.append(network.labels.weight.detach().numpy().astype(np.float64))
    stacked = np.stack(components, axis=1)
    a = network.attention.weight.detach().numpy().astype(np.float64).ravel()
    scores = stacked @ a
    weights = np.exp(scores - scores.max(1, keepdims=True))
    weights /= weights.sum(1, keepdims=True)
    return (weights[..., None] * stacked).sum(1)


def test_label_classifiers_are_the_attention_sum_of_text_graph_and_free_vectors():
    network, text, graph = small_network()
    network.eval()
    ids = torch.arange(3)
    with torch.no_grad():
        first = network._combined(ids).numpy()
    np.testing.assert_allclose(first, by_hand(network, text, graph, free=False), rtol=1e-4, atol=1e-5)
    # the first phase ignores the free vectors
    with torch.no_grad():
        network.labels.weight.normal_()
        np.testing.assert_array_equal(network._combined(ids).numpy(), first)
    # the second phase: a fresh meta-classifier, the free vectors start at the given vectors and join
    vectors = np.random.default_rng(0).normal(size=(3, 384)).astype(np.float32)
    network.start_second_phase(vectors, 5)
    assert network.meta.num_embeddings == 5 and network.all_clusters.tolist() == [0, 1, 2, 3, 4]
    np.testing.assert_array_equal(network.labels.weight.detach().numpy(), vectors)
    with torch.no_grad():
        second = network._combined(ids).numpy()
    np.testing.assert_allclose(second, by_hand(network, text, graph, free=True), rtol=1e-4, atol=1e-5)
    # inference reads a table of every label, equal to the training path
    with torch.no_grad():
        np.testing.assert_allclose(network._label_weights(torch.tensor([2, 0])).numpy(), second[[2, 0]], rtol=1e-6)


def test_label_side_gradients_reach_the_shared_word_embeddings():
    network, _, _ = small_network()
    network.train()
    network._combined(torch.tensor([1])).sum().backward()
    grad = network.encoder.embed.weight.grad.coalesce()
    # label 1's text is word 4, its graph text words 2 and 4: exactly those rows get a gradient
    assert sorted(grad.indices()[0].unique().tolist()) == [2, 4]
    assert network.labels.weight.grad is None  # no free vectors in the first phase


def test_label_text_vectors_are_the_scaled_bags_of_word_embeddings():
    network, text, _ = small_network()
    E = network.encoder.embed.weight.detach().numpy()
    np.testing.assert_allclose(network.label_text_vectors(), text @ E / np.sqrt(384), rtol=1e-5, atol=1e-6)


def test_two_phases_fit_save_load_and_the_second_phase_keeps_the_first_phases_records(tmp_path):
    model = NeuralXMC(lf_config(epochs=2)).fit(TEXTS, Y, LABELS, progress=False)
    assert model.config.dim == 384  # fixed: the classifiers live in the word embeddings' space
    assert bool(model.network.free_weights)
    phase = model.result.encoder_history
    assert [r["epoch"] for r in phase] == [0, 1] and all(r["phase"] == 1 for r in phase) and phase[-1]["kept"]
    assert len(model.result.history) == 2
    # the seconds are both phases' (each epoch's record holds its own), not the second's alone
    epochs = sum(r["seconds"] for r in phase + model.result.history)
    assert model.result.seconds >= epochs > sum(r["seconds"] for r in model.result.history)
    # the free vectors trained on from where the second phase started them; the clusters are the second phase's
    assert model.network.labels.weight.abs().sum() > 0
    assert model.assign.shape == (4,)
    model.save(tmp_path / "m")
    again = NeuralXMC.load(tmp_path / "m")
    queries = ["alpha zeta", "gamma", "unknown words"]
    assert (model.predict(queries, k=3) != again.predict(queries, k=3)).nnz == 0


def test_a_run_killed_in_its_second_phase_resumes_to_the_same_weights(tmp_path):
    whole = NeuralXMC(lf_config(epochs=2)).fit(TEXTS, Y, LABELS, progress=False)
    config = lf_config(epochs=1)
    from dataclasses import replace

    NeuralXMC(replace(config, first_phase_epochs=2)).fit(TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", progress=False)
    resumed = NeuralXMC(lf_config(epochs=2)).fit(TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", resume=True, progress=False)
    for (name, a), (_, b) in zip(whole.network.state_dict().items(), resumed.network.state_dict().items()):
        assert torch.equal(a, b), name


def test_the_final_model_trains_the_first_phase_epochs_validation_kept():
    history = [{"phase": 1, "epoch": e, "kept": e == 3} for e in range(6)]
    result = TrainResult(best_epoch=1, best_score=0.5, encoder_history=history)
    assert first_phase_best(history) == 3
    assert refit_config(lf_config(epochs=6), result).first_phase_epochs == 4
    # without a kept record (no validation), the last epoch
    assert first_phase_best([{"phase": 1, "epoch": e} for e in range(3)]) == 2


def test_a_training_batchs_labels_are_padded_to_few_sizes_without_changing_their_classifiers():
    assert [padded_size(n) for n in (0, 1, 2, 3, 1000, 1024, 1025, 1152, 1153)] == [1, 1, 2, 4, 1024, 1024, 1152, 1152, 1296]
    sizes = {padded_size(n) for n in range(1, 50_001)}
    assert len(sizes) < 50 and all(padded_size(n) >= n for n in (1, 999, 1025, 49_999))
    network, _, _ = small_network()
    seen = []
    combined = network._combined
    network._combined = lambda ids: seen.append(ids.numel()) or combined(ids)
    network.train()
    ids = torch.tensor([2, 0, 1])
    trained = network._label_weights(ids)
    assert seen == [4] and trained.shape == (3, 384)
    del network._combined
    torch.testing.assert_close(trained, network._combined(ids), rtol=1e-5, atol=1e-6)
