"""TF-IDF text features shared by the models, saved as plain files (no pickles)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize

from .text import TOKEN_PATTERN, tfidf_row

FEW_TEXTS = 16  # up to this many texts, transform without the vectorizer (see _transform_few)


class TextFeaturizer:
    """Word uni/bi-gram TF-IDF (sublinear tf), optionally beside character n-grams within word
    boundaries (``char_ngrams = (lo, hi)``), fitted on training and label texts. Each block is
    l2-normalised, then the row is (so word and character evidence weigh the same)."""

    def __init__(self, ngram_max: int = 2, min_df: int = 1, max_features: int | None = None,
                 char_ngrams: tuple[int, int] | None = None):
        self.ngram_max = ngram_max
        self.min_df = min_df
        self.max_features = max_features
        self.char_ngrams = tuple(char_ngrams) if char_ngrams else None
        self.vectorizer: TfidfVectorizer | None = None
        self.char_vectorizer: TfidfVectorizer | None = None

    def _new_vectorizer(self, vocabulary=None) -> TfidfVectorizer:
        return TfidfVectorizer(ngram_range=(1, self.ngram_max), sublinear_tf=True, token_pattern=TOKEN_PATTERN,
                               min_df=1 if vocabulary is not None else self.min_df, max_features=self.max_features,
                               vocabulary=vocabulary, dtype=np.float32)

    def _new_char_vectorizer(self, vocabulary=None) -> TfidfVectorizer:
        return TfidfVectorizer(analyzer="char_wb", ngram_range=self.char_ngrams, sublinear_tf=True,
                               min_df=1 if vocabulary is not None else max(self.min_df, 2),
                               max_features=self.max_features, vocabulary=vocabulary, dtype=np.float32)

    def fit(self, texts: list[str]) -> TextFeaturizer:
        self.vectorizer = self._new_vectorizer().fit(texts)
        if self.char_ngrams:
            self.char_vectorizer = self._new_char_vectorizer().fit(texts)
        return self

    def fit_transform(self, texts: list[str]) -> sp.csr_matrix:
        """Fit on ``texts`` and return their rows (one pass over the texts fewer than fit, then transform)."""
        self.vectorizer = self._new_vectorizer()
        X = self.vectorizer.fit_transform(texts).tocsr()
        if self.char_ngrams:
            self.char_vectorizer = self._new_char_vectorizer()
            X = sp.csr_matrix(normalize(sp.hstack([X, self.char_vectorizer.fit_transform(texts)], format="csr")),
                              dtype=np.float32)
        X.sort_indices()
        return X

    def _transform_few(self, texts: list[str]) -> sp.csr_matrix:
        """``transform`` for a handful of texts, written out: the vectorizer's own path costs ten
        times a single query's search. Same steps (lowercased words and their n-grams, sublinear
        tf times idf, l2 norm); tested against the vectorizer."""
        vocabulary, idf = self.vectorizer.vocabulary_, self.vectorizer.idf_
        indptr, indices, data = [0], [], []
        for text in texts:
            ids, values = tfidf_row(text, vocabulary, idf, self.ngram_max)
            indices.extend(ids)
            data.extend(values)
            indptr.append(len(indices))
        X = sp.csr_matrix((np.asarray(data, dtype=np.float32), np.asarray(indices, dtype=np.int32),
                           np.asarray(indptr, dtype=np.int32)), shape=(len(texts), len(vocabulary)))
        X.has_sorted_indices = True
        return X

    @property
    def n_features(self) -> int:
        assert self.vectorizer is not None
        n = len(self.vectorizer.vocabulary_)
        return n + (len(self.char_vectorizer.vocabulary_) if self.char_vectorizer is not None else 0)

    def transform(self, texts: list[str]) -> sp.csr_matrix:
        if self.vectorizer is None:
            raise RuntimeError("fit the featurizer first")
        if len(texts) <= FEW_TEXTS and self.char_vectorizer is None:
            return self._transform_few(texts)
        X = self.vectorizer.transform(texts).tocsr()
        if self.char_vectorizer is not None:
            X = normalize(sp.hstack([X, self.char_vectorizer.transform(texts)], format="csr"))
            X = sp.csr_matrix(X, dtype=np.float32)
        X.sort_indices()
        return X

    def save(self, directory: str | Path) -> None:
        assert self.vectorizer is not None
        d = Path(directory)
        spec = {"ngram_max": self.ngram_max, "min_df": self.min_df, "max_features": self.max_features,
                "vocabulary": _terms(self.vectorizer)}
        if self.char_vectorizer is not None:
            spec["char_ngrams"] = list(self.char_ngrams)
            spec["char_vocabulary"] = _terms(self.char_vectorizer)
            np.save(d / "features_char_idf.npy", self.char_vectorizer.idf_.astype(np.float64))
        (d / "features.json").write_text(json.dumps(spec))
        np.save(d / "features_idf.npy", self.vectorizer.idf_.astype(np.float64))

    @classmethod
    def load(cls, directory: str | Path) -> TextFeaturizer:
        d = Path(directory)
        spec = json.loads((d / "features.json").read_text())
        feat = cls(spec["ngram_max"], spec["min_df"], spec["max_features"], spec.get("char_ngrams"))
        feat.vectorizer = feat._new_vectorizer({term: i for i, term in enumerate(spec["vocabulary"])})
        feat.vectorizer.idf_ = np.load(d / "features_idf.npy")
        if feat.char_ngrams:
            feat.char_vectorizer = feat._new_char_vectorizer({t: i for i, t in enumerate(spec["char_vocabulary"])})
            feat.char_vectorizer.idf_ = np.load(d / "features_char_idf.npy")
        return feat


def _terms(vectorizer: TfidfVectorizer) -> list[str]:
    return [term for term, _ in sorted(vectorizer.vocabulary_.items(), key=lambda kv: kv[1])]
