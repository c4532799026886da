"""TF-IDF features: the written-out path for a few texts gives scikit-learn's vectorizer's rows."""

from __future__ import annotations

import numpy as np

from gandalf_xmc.data import load_dataset
from gandalf_xmc.features import FEW_TEXTS, TextFeaturizer


def test_few_texts_equal_the_vectorizer():
    texts = load_dataset("jargon").train.texts
    feat = TextFeaturizer().fit(texts[:800])
    queries = texts[800:1100] + ["", "zzzz unknown words", "Foo FOO foo bar", "a b", "naïve café ünïcode"]
    want = feat.vectorizer.transform(queries).tocsr()
    want.sort_indices()
    for i, q in enumerate(queries):
        got = feat.transform([q])
        assert np.array_equal(got.indices, want[i].indices), q
        np.testing.assert_allclose(got.data, want[i].data, rtol=1e-6, atol=1e-7)
    batch = feat.transform(queries[:FEW_TEXTS])  # several texts at once take the same path
    assert np.array_equal(batch.indptr, want[:FEW_TEXTS].indptr)
    np.testing.assert_allclose(batch.toarray(), want[:FEW_TEXTS].toarray(), rtol=1e-6, atol=1e-7)
