"""TF-IDF kNN: exact scores on a case where the similarities are known."""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from gandalf_xmc.models import KNNConfig, TfidfKNN


def test_soft_targets_are_weighted_by_similarity():
    Y = sp.csr_matrix(np.array([[1, 0, 0], [0, 1, 0.5]], dtype=np.float32))
    model = TfidfKNN(KNNConfig(n_neighbours=5, power=2.0)).fit(["alpha beta", "gamma delta"], Y)
    P = model.predict(["alpha beta", "gamma delta", "unseen words"], k=3).toarray()
    # identical text -> cosine 1 with its twin, 0 with the other point
    np.testing.assert_allclose(P, [[1, 0, 0], [0, 1, 0.5], [0, 0, 0]], rtol=1e-6)


def test_top_k_and_neighbour_cap():
    texts = ["a b", "a c", "a d", "e f"]
    Y = sp.identity(4, format="csr", dtype=np.float32)
    P = TfidfKNN(KNNConfig(n_neighbours=2, power=1.0)).fit(texts, Y).predict(["a"], k=4)
    # the query matches 3 points equally; only 2 neighbours (lowest ids on ties) are used
    assert P.nnz == 2 and set(P.indices) == {0, 1}
    P1 = TfidfKNN(KNNConfig(n_neighbours=3)).fit(texts, Y).predict(["a"], k=1)
    assert P1.nnz == 1


def test_precomputed_rows_give_the_neighbours_of_their_cosine():
    """Dense rows of any scale: neighbours by cosine. By hand: the query (1, 0) has cosine 1 with
    point 0 and 0.6 with point 1 ((3, 4) / 5), none with point 2; power 1."""
    X = np.array([[2.0, 0.0], [3.0, 4.0], [0.0, -1.0]])
    Y = sp.csr_matrix(np.array([[1, 0], [0, 1], [0, 1]], dtype=np.float32))
    model = TfidfKNN(KNNConfig(n_neighbours=2, power=1.0)).fit(X, Y)
    np.testing.assert_allclose(model.predict(np.array([[5.0, 0.0]]), k=2).toarray(), [[1.0, 0.6]], rtol=1e-6)
    np.testing.assert_allclose(model.vote(sp.csr_matrix([[5.0, 0.0]]), k=2).toarray(), [[1 / 1.6, 0.6 / 1.6]], rtol=1e-6)


def test_a_model_of_its_own_tfidf_rows_equals_the_model_of_texts(tmp_path):
    """The rows the text model computes, given by hand, rank the same labels with the same scores
    (to float32 rounding: the rows are normalised once more), also after save and load; texts are
    then refused with one line."""
    import pytest

    from gandalf_xmc.errors import ConfigError
    from gandalf_xmc.features import TextFeaturizer
    from gandalf_xmc.models.registry import load_trained

    texts = ["red apple", "green apple pie", "blue whale song", "apple juice", "whale watching"]
    Y = sp.csr_matrix(np.array([[1, 0, 0], [1, 1, 0], [0, 0, 1], [1, 0, 0], [0, 0, 1]], dtype=np.float32))
    queries = ["apple", "whale song", "green pie"]
    featurizer = TextFeaturizer(KNNConfig().ngram_max).fit(texts)
    by_text = TfidfKNN().fit(texts, Y).predict(queries, k=3)
    by_rows = TfidfKNN().fit(featurizer.transform(texts), Y)
    got = by_rows.predict(featurizer.transform(queries), k=3)
    assert got.indices.tolist() == by_text.indices.tolist()
    np.testing.assert_allclose(got.data, by_text.data, rtol=1e-6)
    by_rows.save(tmp_path / "m")
    again = load_trained(tmp_path / "m")
    assert (again.predict(featurizer.transform(queries), k=3) != got).nnz == 0
    with pytest.raises(ConfigError, match="precomputed features"):
        again.predict(["apple"])
