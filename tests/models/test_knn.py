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
