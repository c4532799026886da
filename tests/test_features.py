"""TF-IDF features: the library's own word TF-IDF, for many texts and for a few, gives scikit-learn's
vectorizer's vocabulary, idf and rows."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize

from gandalf_xmc.data import load_dataset
from gandalf_xmc.features import FEW_TEXTS, TextFeaturizer, WordTfidf
from gandalf_xmc.text import TOKEN_PATTERN, char_ngrams

ODD = ["", "zzzz unknown words", "Foo FOO foo bar foo bar", "a b", "naïve café ünïcode", "x_y 3.14 don't"]


def reference(texts: list[str], min_df: int = 1, ngram_max: int = 2) -> TfidfVectorizer:
    return TfidfVectorizer(
        ngram_range=(1, ngram_max), sublinear_tf=True, token_pattern=TOKEN_PATTERN, min_df=min_df, dtype=np.float32
    ).fit(texts)


def assert_same_rows(got: sp.csr_matrix, want: sp.csr_matrix) -> None:
    want = sp.csr_matrix(want)
    want.sort_indices()
    assert got.shape == want.shape
    assert np.array_equal(got.indptr, want.indptr) and np.array_equal(got.indices, want.indices)
    np.testing.assert_allclose(got.data, want.data, rtol=1e-6, atol=1e-7)


@pytest.mark.parametrize("min_df,ngram_max", [(1, 2), (2, 2), (1, 1), (1, 3)])
def test_word_tfidf_equals_scikit_learn(min_df, ngram_max):
    texts = load_dataset("jargon").train.texts[:900] + ODD
    want = reference(texts, min_df, ngram_max)
    ours = WordTfidf(ngram_max, min_df)
    X = ours.fit_transform(texts)
    assert ours.vocabulary_ == want.vocabulary_
    np.testing.assert_allclose(ours.idf_, want.idf_, rtol=1e-6)
    assert_same_rows(sp.csr_matrix(X), want.transform(texts))
    queries = load_dataset("jargon").train.texts[900:1200] + ODD
    assert_same_rows(ours.transform(queries), want.transform(queries))


def test_word_tfidf_by_hand():
    # vocabulary a, "a a", "a b", b (alphabetical); idf = ln(3 / (1 + df)) + 1: a (df 2) 1, the others 1 + ln 1.5;
    # tf = 1 + ln(count)
    X = WordTfidf(2).fit_transform(["a a", "a b"]).toarray()
    idf = 1 + np.log(1.5)
    first = np.array([1 + np.log(2), idf, 0, 0])
    second = np.array([1, 0, idf, idf])
    np.testing.assert_allclose(X, [first / np.linalg.norm(first), second / np.linalg.norm(second)], rtol=1e-6)


def test_featurizer_rows_many_and_few_texts_equal_the_vectorizer(tmp_path):
    texts = load_dataset("jargon").train.texts
    feat = TextFeaturizer().fit(texts[:800])
    want = reference(texts[:800])
    queries = texts[800:1100] + ODD
    assert_same_rows(feat.transform(queries), want.transform(queries))
    for q in queries:  # one text at a time: the written-out path
        assert_same_rows(feat.transform([q]), want.transform([q]))
    assert_same_rows(feat.transform(queries[:FEW_TEXTS]), want.transform(queries[:FEW_TEXTS]))
    feat.save(tmp_path)
    assert_same_rows(TextFeaturizer.load(tmp_path).transform(queries), want.transform(queries))


def test_char_ngrams_are_scikit_learns_char_wb_analyzer():
    analyzer = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5)).build_analyzer()
    texts = load_dataset("jargon").train.texts[:300] + ODD + ["a", "ab  cd\tef\n", " I  ", "Straße ÉCOLE"]
    for text in texts:
        assert char_ngrams(text, 3, 5) == analyzer(text)
    for lo, hi in ((1, 1), (2, 2), (1, 3), (4, 6), (6, 8)):  # words shorter and longer than every n
        other = TfidfVectorizer(analyzer="char_wb", ngram_range=(lo, hi)).build_analyzer()
        for text in texts[:100] + ["a", "ab", "abcdef", "x yz  abcdefghij"]:
            assert char_ngrams(text, lo, hi) == other(text)
    # by hand: "ab" padded is " ab " (4 characters): its 3-grams, then itself once as the 4-gram
    assert char_ngrams("AB", 3, 5) == [" ab", "ab ", " ab "]
    assert char_ngrams("a", 2, 4) == [" a", "a ", " a "]


def test_featurizer_with_char_ngrams_few_and_many_texts_equal_the_vectorizers(tmp_path):
    texts = load_dataset("jargon").train.texts
    feat = TextFeaturizer(char_ngrams=(3, 5)).fit(texts[:800])
    words = reference(texts[:800])
    chars = TfidfVectorizer(analyzer="char_wb", ngram_range=(3, 5), sublinear_tf=True, min_df=2, dtype=np.float32)
    chars.fit(texts[:800])
    assert feat.char_vectorizer.vocabulary_ == chars.vocabulary_  # our CharTfidf, fitted without scikit-learn
    np.testing.assert_allclose(feat.char_vectorizer.idf_, chars.idf_, rtol=1e-6)
    queries = texts[800:1000] + ODD
    want = normalize(sp.hstack([words.transform(queries), chars.transform(queries)], format="csr"))
    assert_same_rows(feat.transform(queries), want)
    for i, q in enumerate(queries):  # one text at a time: the written-out path
        assert_same_rows(feat.transform([q]), want[i])
    feat.save(tmp_path)
    assert_same_rows(TextFeaturizer.load(tmp_path).transform(queries[:FEW_TEXTS]), want[:FEW_TEXTS])


def test_training_a_linear_model_does_not_import_scikit_learn():
    import subprocess
    import sys

    code = (
        "import sys\n"
        "from gandalf_xmc.models.linear import LinearConfig, XRLinear\n"
        "import scipy.sparse as sp\n"
        "texts = ['red apple', 'green apple', 'red wine', 'white wine'] * 5\n"
        "Y = sp.csr_matrix(([1.0] * 20, ([*range(20)], [0, 0, 1, 1] * 5)), shape=(20, 2))\n"
        "XRLinear(LinearConfig(branching=2, leaf_size=2, threads=1)).fit(texts, Y, ['apple', 'wine'], progress=False)\n"
        "print(sorted(m for m in sys.modules if m.startswith('sklearn')))\n"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
