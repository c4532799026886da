"""The training points' vote in an encoder's space and its mix with the classifiers' scores,
against figures worked out by hand."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.errors import DataFormatError
from gandalf_xmc.models.neighbours import EmbeddingNeighbours, mixed

POINTS = np.array([[1.0, 0.0], [0.0, 1.0], [0.6, 0.8]], dtype=np.float32)
# point 0 carries label 0; point 1 label 1; point 2 label 2 and label 0 at a soft 0.5
TARGETS = sp.csr_matrix(np.array([[1, 0, 0], [0, 1, 0], [0.5, 0, 1]], dtype=np.float32))


def test_the_vote_is_the_share_of_the_nearest_points_weight_that_carries_each_label():
    index = EmbeddingNeighbours(POINTS, TARGETS, n_neighbours=2, power=2.0)
    vote = index.vote(np.array([[0.8, 0.6]], dtype=np.float32), k=3).toarray()[0]
    # cosines 0.8 (point 0), 0.6 (point 1), 0.96 (point 2): the two nearest are points 2 and 0
    w2, w0 = 0.96**2, 0.8**2
    np.testing.assert_allclose(vote, [(0.5 * w2 + w0) / (w2 + w0), 0.0, w2 / (w2 + w0)], rtol=1e-5)


def test_a_power_given_to_vote_replaces_the_configured_one():
    index = EmbeddingNeighbours(POINTS, TARGETS, n_neighbours=2, power=2.0)
    vote = index.vote(np.array([[0.8, 0.6]], dtype=np.float32), k=3, power=1.0).toarray()[0]
    np.testing.assert_allclose(vote, [(0.5 * 0.96 + 0.8) / 1.76, 0.0, 0.96 / 1.76], rtol=1e-5)


def test_only_the_top_k_labels_are_kept_and_points_facing_away_do_not_vote():
    index = EmbeddingNeighbours(POINTS, TARGETS, n_neighbours=3, power=1.0)
    vote = index.vote(np.array([[0.8, 0.6], [-1.0, 0.0]], dtype=np.float32), k=1)
    # all three points: label 0 (0.8 + 0.5 * 0.96) / 2.36 = 0.542 beats label 2 (0.407) and label 1 (0.254)
    assert vote[0].indices.tolist() == [0]
    np.testing.assert_allclose(vote[0].data, [(0.8 + 0.48) / 2.36], rtol=1e-5)
    assert vote[1].nnz == 0  # every cosine <= 0: no neighbour weighs anything


def test_the_mix_is_a_convex_sum_and_its_ends_are_each_part_alone():
    classifier = sp.csr_matrix(np.array([[0.9, 0.2, 0.0]], dtype=np.float32))
    vote = sp.csr_matrix(np.array([[0.0, 1.0, 0.5]], dtype=np.float32))
    both = mixed(classifier, vote, 0.3, 2)
    assert both.indices.tolist() == [0, 1]
    np.testing.assert_allclose(both.toarray()[0], [0.7 * 0.9, 0.7 * 0.2 + 0.3, 0.0], rtol=1e-6)  # label 2 (0.15) cut
    np.testing.assert_allclose(mixed(classifier, vote, 0.0, 3).toarray(), classifier.toarray())
    np.testing.assert_allclose(mixed(classifier, vote, 1.0, 3).toarray(), vote.toarray())


def test_the_index_saved_loads_the_same_and_a_wrong_width_is_refused(tmp_path):
    index = EmbeddingNeighbours(POINTS, TARGETS, n_neighbours=2, power=2.0)
    index.save(tmp_path)
    loaded = EmbeddingNeighbours.load(tmp_path, n_labels=3, dim=2, n_neighbours=2, power=2.0)
    q = np.array([[0.8, 0.6]], dtype=np.float32)
    np.testing.assert_array_equal(loaded.vote(q, 3).toarray(), index.vote(q, 3).toarray())
    with pytest.raises(DataFormatError, match="neighbour_points.npy"):
        EmbeddingNeighbours.load(tmp_path, n_labels=3, dim=384, n_neighbours=2, power=2.0)
    with pytest.raises(DataFormatError, match="neighbour_targets.npz"):
        EmbeddingNeighbours.load(tmp_path, n_labels=4, dim=2, n_neighbours=2, power=2.0)


def test_the_mean_vote_divides_by_the_number_of_neighbours_so_far_points_weigh_little():
    index = EmbeddingNeighbours(POINTS, TARGETS, n_neighbours=2, power=2.0, share=False)
    vote = index.vote(np.array([[0.8, 0.6]], dtype=np.float32), k=3).toarray()[0]
    np.testing.assert_allclose(vote, [(0.5 * 0.96**2 + 0.8**2) / 2, 0.0, 0.96**2 / 2], rtol=1e-5)
    # a query at 60 degrees from point 0 and 30 from point 2: cosines 0.5 and about 0.9196
    far = np.array([[0.5, np.sqrt(0.75)]], dtype=np.float32)
    c0, c1, c2 = 0.5, np.sqrt(0.75), 0.3 + 0.8 * np.sqrt(0.75)
    assert c1 > c0 and c2 > c1  # the two nearest are points 2 and 1
    np.testing.assert_allclose(index.vote(far, k=3).toarray()[0], [0.5 * c2**2 / 2, c1**2 / 2, c2**2 / 2], rtol=1e-5)
