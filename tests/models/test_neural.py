"""The training loop: soft targets, determinism, checkpoints/resume, shortlists, save/load."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the [neural] extra
import scipy.sparse as sp

from gandalf_xmc.engine.clusters import balanced_clusters, cluster_members, shortlist_recall
from gandalf_xmc.engine.records import TrainConfig, Validation
from gandalf_xmc.models.neural_xmc import ModelConfig, NeuralXMC

TEXTS = ["alpha beta", "gamma delta", "alpha gamma", "epsilon zeta", "beta zeta"]
LABELS = ["alpha", "gamma", "zeta", "omega"]
Y = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 1, 0, 0], [1, 1, 0, 0], [0, 0, 1, 0], [0, 0, 1, 0]], dtype=np.float32))


def small_config(**train):
    # on the CPU, whose results these tests pin to the bit, also where a GPU is seen
    base = dict(epochs=3, batch_size=2, lr=0.05, dense_lr=0.01, train_clusters=2, predict_clusters=4, seed=0, device="cpu")
    base.update(train)
    return ModelConfig(dim=16, dropout=0.0, max_cluster_size=1, cluster_dim=3, train=TrainConfig(**base))


def test_soft_target_is_learned_not_rounded():
    # one point, label 0 with target 0.35: BCE is minimised at sigmoid(score) = 0.35
    Ysoft = sp.csr_matrix(np.array([[0.35, 0, 0, 0]], dtype=np.float32))
    model = NeuralXMC(small_config(epochs=300, batch_size=1, lr=0.05))
    model.fit(["alpha beta"], Ysoft, LABELS, progress=False)
    p = model.predict(["alpha beta"], k=4).toarray()[0]
    assert p[0] == pytest.approx(0.35, abs=0.03)


def test_a_positive_factor_moves_the_soft_target_optimum():
    # m t log(1 + e^-z) + (1 - t) log(1 + e^z) is least at sigmoid(z) = m t / (m t + 1 - t):
    # 4 x 0.35 / (4 x 0.35 + 0.65) = 0.6829 for a firm point (m = 4) of target 0.35
    Ysoft = sp.csr_matrix(np.array([[0.35, 0, 0, 0]], dtype=np.float32))
    model = NeuralXMC(small_config(epochs=300, batch_size=1, lr=0.05))
    model.fit(["alpha beta"], Ysoft, LABELS, progress=False, positive_weight=np.array([4.0]))
    assert model.predict(["alpha beta"], k=4).toarray()[0][0] == pytest.approx(1.4 / 2.05, abs=0.03)


def test_the_firm_loss_by_hand():
    import math

    from gandalf_xmc.models.neural_training import _soft_bce

    z, t, w, m = [0.5, -1.0, 2.0], [1.0, 0.3, 0.0], [2.0, 1.0, 0.5], [4.0, 1.0, 3.0]

    def entry(z, t, w, m):  # -w (m t log sigmoid(z) + (1 - t) log(1 - sigmoid(z)))
        s = 1.0 / (1.0 + math.exp(-z))
        return -w * (m * t * math.log(s) + (1.0 - t) * math.log(1.0 - s))

    expected = sum(map(entry, z, t, w, m)) / 3
    got = _soft_bce(*(torch.tensor(v) for v in (z, t, w, m)))
    assert got.item() == pytest.approx(expected, rel=1e-6)
    ones = _soft_bce(torch.tensor(z), torch.tensor(t), torch.tensor(w), torch.ones(3))  # m = 1: torch's own loss
    plain = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(t), weight=torch.tensor(w))
    assert ones.item() == pytest.approx(plain.item(), rel=1e-6)


def test_soft_targets_as_floors_by_hand():
    import math

    from gandalf_xmc.models.neural_training import _soft_bce

    # entries: a soft target below its floor, one above it, a positive and a negative of a floor
    # row (costed as ever), and a soft target of a row without floors (cross-entropy both ways)
    z = [-2.0, 0.5, 0.3, 1.0, 1.5]
    t = [0.3, 0.3, 1.0, 0.0, 0.3]
    w = [2.0, 1.0, 1.0, 0.5, 1.0]
    m = [3.0, 3.0, 2.0, 1.0, 1.0]
    floor = [True, True, True, True, False]

    def bce(z, t, m=1.0):  # -(m t log sigmoid(z) + (1 - t) log(1 - sigmoid(z)))
        s = 1.0 / (1.0 + math.exp(-z))
        return -(m * t * math.log(s) + (1.0 - t) * math.log(1.0 - s))

    entropy = -(0.3 * math.log(0.3) + 0.7 * math.log(0.7))
    expected = [
        2.0 * 3.0 * (bce(-2.0, 0.3) - entropy),  # sigmoid(-2) = 0.12 < 0.3: below its floor
        0.0,  # sigmoid(0.5) = 0.62 >= 0.3: the floor is met
        bce(0.3, 1.0, 2.0),
        0.5 * bce(1.0, 0.0),
        bce(1.5, 0.3),  # no floor: 0.82 is pulled down towards 0.3
    ]
    got = _soft_bce(*(torch.tensor(v) for v in (z, t, w, m)), torch.tensor(floor))
    assert got.item() == pytest.approx(sum(expected) / 5, rel=1e-6)
    # continuous at the floor, and the gradient below it is the cross-entropy's: w m (sigmoid(z) - t)
    at = torch.tensor([math.log(0.3 / 0.7)], requires_grad=True)
    assert _soft_bce(at, torch.tensor([0.3]), None, None, torch.tensor([True])).item() == pytest.approx(0.0, abs=1e-6)
    below = torch.tensor([-2.0], requires_grad=True)
    _soft_bce(below, torch.tensor([0.3]), torch.tensor([2.0]), torch.tensor([3.0]), torch.tensor([True])).backward()
    assert below.grad.item() == pytest.approx(6.0 * (1.0 / (1.0 + math.exp(2.0)) - 0.3), rel=1e-5)
    # no floors anywhere: the plain loss
    none = _soft_bce(torch.tensor(z), torch.tensor(t), torch.tensor(w), None, torch.zeros(5, dtype=torch.bool))
    plain = torch.nn.functional.binary_cross_entropy_with_logits(torch.tensor(z), torch.tensor(t), weight=torch.tensor(w))
    assert none.item() == pytest.approx(plain.item(), rel=1e-6)


def test_positive_weights_reach_the_objective_and_bad_ones_are_refused(monkeypatch):
    from gandalf_xmc.errors import ConfigError
    from gandalf_xmc.models import neural_xmc

    seen = []
    real = neural_xmc.fit

    def spy(*args, **kwargs):
        seen.append(kwargs.get("positive_weight"))
        return real(*args, **kwargs)

    monkeypatch.setattr(neural_xmc, "fit", spy)
    NeuralXMC(small_config(epochs=1)).fit(TEXTS, Y, LABELS, progress=False, positive_weight=np.array([1, 1, 1, 8, 8.0]))
    NeuralXMC(small_config(epochs=1)).fit(TEXTS, Y, LABELS, progress=False)
    assert seen[0].tolist() == [1, 1, 1, 8, 8] and seen[1] is None
    for bad in (np.array([1.0] * 4 + [0.0]), np.array([1.0] * 4 + [np.nan]), np.ones(4)):
        with pytest.raises(ConfigError, match="positive_weight must be 5 finite numbers > 0"):
            NeuralXMC(small_config(epochs=1)).fit(TEXTS, Y, LABELS, progress=False, positive_weight=bad)


def test_same_seed_same_model_and_resume_matches(tmp_path):
    a = NeuralXMC(small_config(epochs=4)).fit(TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "a", progress=False)
    b = NeuralXMC(small_config(epochs=4)).fit(TEXTS, Y, LABELS, progress=False)
    for (name, x), (_, y) in zip(a.network.state_dict().items(), b.network.state_dict().items()):
        assert torch.equal(x, y), name
    # stop after 2 epochs, then resume to 4: same weights as the uninterrupted run
    NeuralXMC(small_config(epochs=2)).fit(TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", progress=False)
    c = NeuralXMC(small_config(epochs=4)).fit(TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", resume=True, progress=False)
    assert c.result.history[-1]["epoch"] == 3 and len(c.result.history) == 4
    for (name, x), (_, y) in zip(a.network.state_dict().items(), c.network.state_dict().items()):
        assert torch.equal(x, y), name


def test_early_stopping_keeps_the_best_epoch():
    inv = np.ones(4)
    model = NeuralXMC(small_config(epochs=30, patience=2)).fit(TEXTS, Y, LABELS, valid=Validation(TEXTS, Y, inv), progress=False)
    hist = model.result.history
    assert len(hist) < 30  # stopped early
    assert model.result.best_score == max(h["P@1"] for h in hist)
    assert all(h["epoch"] <= model.result.best_epoch + 2 for h in hist)


def test_save_load_predicts_the_same(tmp_path):
    model = NeuralXMC(small_config()).fit(TEXTS, Y, LABELS, progress=False)
    model.save(tmp_path / "m")
    again = NeuralXMC.load(tmp_path / "m")
    a = model.predict(["alpha zeta", "unknown"], k=3)
    b = again.predict(["alpha zeta", "unknown"], k=3)
    assert (a != b).nnz == 0


def test_balanced_clusters_and_members():
    rng = np.random.default_rng(0)
    V = rng.normal(size=(103, 5)).astype(np.float32)
    assign = balanced_clusters(V, max_cluster_size=8, seed=0)
    sizes = np.bincount(assign)
    assert sizes.max() <= 8 and sizes.min() >= 4  # halving keeps clusters balanced
    table, sz = cluster_members(assign)
    for c in range(table.shape[0]):
        members = table[c][table[c] >= 0]
        assert sorted(members.tolist()) == np.flatnonzero(assign == c).tolist()
        assert sz[c] == members.size


def test_shortlist_recall_by_hand():
    truth = sp.csr_matrix(np.array([[1, 1, 0], [0, 0, 1]], dtype=np.float32))
    cand = sp.csr_matrix(np.array([[1, 0, 1], [0, 0, 1]], dtype=np.float32))
    assert shortlist_recall(cand, truth) == pytest.approx(100 * 2 / 3)


def test_history_records_shortlist_recall():
    from gandalf_xmc.models.neural_training import candidate_sets

    inv = np.ones(4)
    # 4 clusters of one label each, 2 searched per query: a point's shortlist is its 2 best clusters
    config = small_config(epochs=2, predict_clusters=2)
    model = NeuralXMC(config).fit(TEXTS, Y, LABELS, valid=Validation(TEXTS, Y, inv), progress=False)
    want = shortlist_recall(candidate_sets(model.network, model.features(TEXTS), model.members, 2), Y)
    assert model.result.history[model.result.best_epoch]["shortlist_recall"] == pytest.approx(want)
    C = candidate_sets(model.network, model.features(TEXTS), model.members, 2)
    assert (np.diff(C.indptr) == 2).all()  # two one-label clusters each
    truth = Y.toarray() > 0
    assert want == pytest.approx(100.0 * (C.toarray().astype(bool) & truth).sum() / truth.sum())


def test_labelmix_batches_are_seeded_per_epoch_so_resume_replays_them(tmp_path):
    from gandalf_xmc.augment import LabelMix

    graph = sp.csr_matrix(np.eye(4, dtype=np.float32))

    def mixer():
        return LabelMix(graph, LABELS, np.ones(4), prob=0.5, seed=0)

    a = NeuralXMC(small_config(epochs=4)).fit(TEXTS, Y, LABELS, progress=False, batch_transform=mixer())
    NeuralXMC(small_config(epochs=2)).fit(
        TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", progress=False, batch_transform=mixer()
    )
    c = NeuralXMC(small_config(epochs=4)).fit(
        TEXTS, Y, LABELS, checkpoint_dir=tmp_path / "c", resume=True, progress=False, batch_transform=mixer()
    )
    plain = NeuralXMC(small_config(epochs=4)).fit(TEXTS, Y, LABELS, progress=False)
    for (name, x), (_, y) in zip(a.network.state_dict().items(), c.network.state_dict().items()):
        assert torch.equal(x, y), name
    # the transform did change the batches: the embeddings differ from plain training
    assert not torch.equal(a.network.encoder.embed.weight, plain.network.encoder.embed.weight)


def test_inceptionxml_fits_saves_and_loads(tmp_path):
    config = ModelConfig(
        family="inceptionxml",
        dim=16,
        dropout=0.0,
        max_cluster_size=1,
        cluster_dim=3,
        train=TrainConfig(epochs=2, batch_size=2, train_clusters=2, predict_clusters=4, seed=0, device="cpu"),
    )
    model = NeuralXMC(config).fit(TEXTS, Y, LABELS, progress=False)
    model.save(tmp_path / "m")
    again = NeuralXMC.load(tmp_path / "m")
    queries = ["alpha zeta", "unknown"]
    assert (model.predict(queries, k=3) != again.predict(queries, k=3)).nnz == 0
    ids = model.tokens.transform(["alpha beta"])
    assert ids.shape == (1, 16) and (ids[0, :2] > 0).all() and (ids[0, 2:] == 0).all()


def test_word_vocabulary_by_hand_and_its_minilm_vectors(tmp_path):
    from gandalf_xmc.models.inception import WordVocabulary, pretrained_token_embeddings

    vocab = WordVocabulary(seq_len=4).fit(["Beta alpha", "alpha gamma", "alpha, beta!"])
    assert vocab.words == ["alpha", "beta", "gamma"]  # by count (3, 2, 1)
    np.testing.assert_array_equal(
        vocab.transform(["ALPHA delta gamma", "", "a b c d e"]), [[2, 1, 4, 0], [0, 0, 0, 0], [1, 1, 1, 1]]
    )
    vocab.save(tmp_path)
    assert WordVocabulary.load(tmp_path).transform(["beta"]).tolist() == [[3, 0, 0, 0]]
    # a word's starting vector is the mean of its MiniLM word pieces' input embeddings
    from tokenizers import Tokenizer

    from gandalf_xmc.models.inception import TOKENIZER_FILE, _minilm_dir

    V = vocab.pretrained_vectors()
    table = pretrained_token_embeddings()
    tok = Tokenizer.from_file(str(_minilm_dir() / TOKENIZER_FILE))
    tok.no_padding()  # the file pads every text to a fixed length
    pieces = tok.encode("gamma", add_special_tokens=False).ids
    np.testing.assert_allclose(V[4], table[pieces].mean(axis=0), rtol=1e-6)
    assert not V[0].any()  # padding
    np.testing.assert_allclose(V[1], V[2:].mean(axis=0), rtol=1e-5)


def test_labelmix_on_dense_inputs_re_encodes_only_mixed_rows():
    from gandalf_xmc.augment import LabelMix

    calls = []
    config = ModelConfig(
        family="inceptionxml",
        dim=16,
        dropout=0.0,
        max_cluster_size=1,
        cluster_dim=3,
        train=TrainConfig(epochs=1, batch_size=5, train_clusters=2, predict_clusters=4, seed=0, device="cpu"),
    )
    model = NeuralXMC(config)
    featurize = model.features

    def counting(texts, progress=False):
        calls.append(list(texts))
        return featurize(texts, progress)

    model.features = counting
    mixer = LabelMix(sp.csr_matrix(np.eye(4, dtype=np.float32)), LABELS, np.ones(4), prob=0.5, seed=0)
    model.fit(TEXTS, Y, LABELS, progress=False, batch_transform=mixer)
    batch_calls = calls[2:]  # after the training and label texts
    assert batch_calls and all(0 < len(c) < len(TEXTS) for c in batch_calls)
    assert all(any(label in t for label in LABELS) and t not in TEXTS for c in batch_calls for t in c)


def test_feature_mix_adds_its_points_once_and_needs_vector_inputs():
    from gandalf_xmc.augment import FeatureMix
    from gandalf_xmc.errors import ConfigError

    model = NeuralXMC(small_config(epochs=2)).fit(
        TEXTS, Y, LABELS, progress=False, feature_mix=FeatureMix("mixup", share=0.6, seed=0)
    )
    # 5 points + round(0.6 * 5) = 3 mixed points in every epoch
    assert [h["examples"] for h in model.result.history] == [8, 8]
    words = ModelConfig(
        family="inceptionxml",
        dim=16,
        dropout=0.0,
        max_cluster_size=1,
        cluster_dim=3,
        train=TrainConfig(epochs=1, batch_size=2, seed=0, device="cpu"),
    )
    with pytest.raises(ConfigError, match="word ids"):
        NeuralXMC(words).fit(TEXTS, Y, LABELS, progress=False, feature_mix=FeatureMix("mixup", seed=0))


def test_label_points_without_negatives_score_their_targets_only(monkeypatch):
    # two clusters {0, 1} and {2, 3}; train_clusters 2 puts all four labels on every shortlist.
    # Row 0 (original, label 0) gets its positive and three negatives; row 1 (an extra point with
    # soft targets 1.0 on label 2 and 0.4 on label 3) gets its two targets and nothing else.
    from gandalf_xmc.engine.records import LabelPoints
    from gandalf_xmc.models.network import XMCNetwork
    from gandalf_xmc.models.neural_training import NetworkObjective

    net = XMCNetwork(torch.nn.Identity(), 3, n_labels=4, n_clusters=2)
    X = np.eye(2, 3, dtype=np.float32)
    Y = sp.csr_matrix(np.array([[1, 0, 0, 0], [0, 0, 1, 0.4]], dtype=np.float32))
    members = np.array([[0, 1], [2, 3]])
    assign = np.array([0, 0, 1, 1])
    seen = {}

    def pair_scores(z, rows, ids):
        seen["pairs"] = sorted(zip(rows.tolist(), ids.tolist()))
        return torch.zeros(len(rows), requires_grad=True)

    monkeypatch.setattr(net, "pair_scores", pair_scores)
    config = TrainConfig(train_clusters=2)
    points = LabelPoints(np.array([False, True]), negatives=False)
    assert not points.extended(1).negatives and points.extended(1).mask.tolist() == [False, True, False]
    NetworkObjective(net, X, Y, assign, members, None, config, targets_only=points.mask).loss(np.array([0, 1]))
    assert seen["pairs"] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 2), (1, 3)]
    NetworkObjective(net, X, Y, assign, members, None, config).loss(np.array([0, 1]))
    assert seen["pairs"] == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0), (1, 1), (1, 2), (1, 3)]


def test_pair_scores_backward_is_the_same_twice_with_several_threads():
    # thousands of pairs share rows and labels: advanced indexing's backward summed them in a
    # thread-dependent order (two trainings with one seed differed); index_select's does not
    from gandalf_xmc.models.network import XMCNetwork

    threads = torch.get_num_threads()
    torch.set_num_threads(2)
    try:
        torch.manual_seed(0)
        net = XMCNetwork(torch.nn.Identity(), 64, 3000, 10)
        z0 = torch.randn(256, 64)
        rows, labels = torch.randint(0, 256, (40_000,)), torch.randint(0, 3000, (40_000,))
        weights = torch.randn(40_000)
        grads = []
        for _ in range(3):
            net.zero_grad()
            z = z0.clone().requires_grad_()
            (net.pair_scores(z, rows, labels) * weights).sum().backward()
            grads.append((z.grad.clone(), net.labels.weight.grad.coalesce().values().clone()))
        for zg, wg in grads[1:]:
            assert torch.equal(zg, grads[0][0]) and torch.equal(wg, grads[0][1])
        # and the same numbers as the lookups written out
        z = z0.clone()
        want = (z[rows] * net.labels.weight[labels]).sum(1) + net.label_bias.weight[labels, 0]
        torch.testing.assert_close(net.pair_scores(z, rows, labels), want)
    finally:
        torch.set_num_threads(threads)


def test_the_cpus_pair_scores_and_label_bags_have_autograds_gradients():
    # the hand-written backward passes, against torch's finite differences (float64), and the pair
    # scores' gradients against autograd's own through the lookups written out (float32)
    from gandalf_xmc.models.inception_lf import WeightedBags
    from gandalf_xmc.models.network import PAIR_CHUNK, PairDots, grouped_sum

    gen = torch.Generator().manual_seed(0)
    z = torch.randn(7, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    W = torch.randn(11, 5, dtype=torch.float64, generator=gen, requires_grad=True)
    n = 2 * PAIR_CHUNK + 3  # several chunks and a short last one
    rows, cols = torch.randint(0, 7, (n,), generator=gen), torch.randint(0, 11, (n,), generator=gen)
    assert torch.autograd.gradcheck(lambda a, b: PairDots.apply(a, b, rows, cols), (z, W))
    lengths = torch.tensor([3, 0, 5, 1, 0, 7])  # empty bags too
    offsets = torch.cumsum(lengths, 0) - lengths
    words = torch.randint(0, 11, (int(lengths.sum()),), generator=gen)
    weights = torch.rand(words.numel(), dtype=torch.float64, generator=gen)
    assert torch.autograd.gradcheck(lambda v: WeightedBags.apply(v, words, offsets, weights), (W,))
    # grouped_sum by hand: group 0 gets 2 x source[1], group 2 gets source[0] - source[1], group 1 nothing
    source = torch.tensor([[1.0, 2.0], [3.0, 5.0]])
    got = grouped_sum(source, torch.tensor([1, 0, 1]), torch.tensor([0, 2, 2]), torch.tensor([2.0, 1.0, -1.0]), 3)
    assert got.tolist() == [[6.0, 10.0], [0.0, 0.0], [-2.0, -3.0]]
    z32, W32 = z.detach().float().requires_grad_(), W.detach().float().requires_grad_()
    g = torch.randn(n, generator=gen)
    (PairDots.apply(z32, W32, rows, cols) * g).sum().backward()
    z_ref, W_ref = z.detach().float().requires_grad_(), W.detach().float().requires_grad_()
    ((z_ref[rows] * W_ref[cols]).sum(1) * g).sum().backward()
    torch.testing.assert_close(z32.grad, z_ref.grad)
    torch.testing.assert_close(W32.grad, W_ref.grad)


def test_mixed_points_stand_for_original_points_with_weight_and_factor_one():
    from gandalf_xmc.augment.conventional import FeatureMix, append_mixed
    from gandalf_xmc.engine.records import LabelPoints

    X = sp.csr_matrix(np.eye(5, 4, dtype=np.float32))
    mix = FeatureMix("mixup", share=0.4, seed=0)  # 0.4 x 5 = 2 mixed points
    weights, positives = np.array([1, 1, 1, 0.5, 0.5]), np.array([1, 1, 1, 8, 8.0])
    X2, Y2, w, points, p = append_mixed(mix, X, Y, None, weights, LabelPoints(np.array([0, 0, 0, 1, 1], bool)), positives)
    assert X2.shape[0] == Y2.shape[0] == 7
    assert w.tolist() == [1, 1, 1, 0.5, 0.5, 1, 1] and p.tolist() == [1, 1, 1, 8, 8, 1, 1]
    assert points.mask.tolist() == [False] * 3 + [True] * 2 + [False] * 2
    assert append_mixed(mix, X, Y, None, None, None)[2:] == (None, None, None)


def test_astec_starts_its_word_and_pair_embeddings_from_minilm_pieces():
    from tokenizers import Tokenizer

    from gandalf_xmc.errors import ConfigError
    from gandalf_xmc.models.astec import INIT_STD, BagOfEmbeddings
    from gandalf_xmc.models.inception import TOKENIZER_FILE, _minilm_dir, pretrained_token_embeddings, term_vectors

    tok = Tokenizer.from_file(str(_minilm_dir() / TOKENIZER_FILE))
    tok.no_padding()
    table = pretrained_token_embeddings()
    pieces = tok.encode("alpha", add_special_tokens=False).ids + tok.encode("gamma", add_special_tokens=False).ids
    V = term_vectors(["alpha gamma", "alpha", ""])
    np.testing.assert_allclose(V[0], table[pieces].mean(axis=0), rtol=1e-6)  # a word pair: all its words' pieces
    assert not V[2].any()  # no pieces

    # the vectors keep their geometry up to one factor that gives them the random start's spread;
    # rows past them keep the random start
    vectors = np.random.default_rng(0).normal(size=(5, 4)).astype(np.float32)
    bag = BagOfEmbeddings(7, dim=8)
    rest = bag.embed.weight[5:].detach().clone()
    bag.init_pretrained(vectors, seed=3)
    E = bag.embed.weight.detach().numpy()
    gram, started = vectors @ vectors.T, E[:5] @ E[:5].T  # 4 -> 8 dimensions: an orthonormal map, then zeros
    np.testing.assert_allclose(started, (started[0, 0] / gram[0, 0]) * gram, rtol=1e-4, atol=1e-6)
    assert E[:5].std(ddof=1) == pytest.approx(INIT_STD, rel=1e-4)
    torch.testing.assert_close(bag.embed.weight[5:].detach(), rest)
    narrow, again = BagOfEmbeddings(5, dim=2), BagOfEmbeddings(5, dim=2)
    narrow.init_pretrained(vectors, seed=3)
    again.init_pretrained(vectors, seed=3)
    assert narrow.embed.weight.std().item() == pytest.approx(INIT_STD, rel=1e-4)
    torch.testing.assert_close(narrow.embed.weight, again.embed.weight, rtol=0, atol=0)  # same seed, same bytes

    # the featurizer's terms are in id order, so each term's vector lands on its own feature
    config = replace(small_config(), pretrained_words=True)
    model = NeuralXMC(config).fit(TEXTS, Y, LABELS, progress=False)
    terms = model.featurizer.word_terms()
    assert "alpha gamma" in terms
    for j, term in enumerate(terms):
        assert model.featurizer.transform([term])[0, j] > 0
    with pytest.raises(ConfigError, match="pretrained_words"):
        ModelConfig(family="inceptionxml", pretrained_words=True)
