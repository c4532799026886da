"""TF-IDF text features shared by the models, saved as plain files (no pickles)."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer

from ..text import TOKEN_PATTERN


class TextFeaturizer:
    """Word uni/bi-gram TF-IDF (sublinear tf, l2-normalised rows), fitted on training and label texts."""

    def __init__(self, ngram_max: int = 2, min_df: int = 1, max_features: int | None = None):
        self.ngram_max = ngram_max
        self.min_df = min_df
        self.max_features = max_features
        self.vectorizer: TfidfVectorizer | None = None

    def _new_vectorizer(self, vocabulary=None) -> TfidfVectorizer:
        return TfidfVectorizer(ngram_range=(1, self.ngram_max), sublinear_tf=True, token_pattern=TOKEN_PATTERN,
                               min_df=1 if vocabulary is not None else self.min_df, max_features=self.max_features,
                               vocabulary=vocabulary, dtype=np.float32)

    def fit(self, texts: list[str]) -> TextFeaturizer:
        self.vectorizer = self._new_vectorizer().fit(texts)
        return self

    @property
    def n_features(self) -> int:
        assert self.vectorizer is not None
        return len(self.vectorizer.vocabulary_)

    def transform(self, texts: list[str]) -> sp.csr_matrix:
        if self.vectorizer is None:
            raise RuntimeError("fit the featurizer first")
        X = self.vectorizer.transform(texts).tocsr()
        X.sort_indices()
        return X

    def save(self, directory: str | Path) -> None:
        assert self.vectorizer is not None
        d = Path(directory)
        vocab = sorted(self.vectorizer.vocabulary_.items(), key=lambda kv: kv[1])
        (d / "features.json").write_text(json.dumps({"ngram_max": self.ngram_max, "min_df": self.min_df,
                                                     "max_features": self.max_features,
                                                     "vocabulary": [term for term, _ in vocab]}))
        np.save(d / "features_idf.npy", self.vectorizer.idf_.astype(np.float64))

    @classmethod
    def load(cls, directory: str | Path) -> TextFeaturizer:
        d = Path(directory)
        spec = json.loads((d / "features.json").read_text())
        feat = cls(spec["ngram_max"], spec["min_df"], spec["max_features"])
        feat.vectorizer = feat._new_vectorizer({term: i for i, term in enumerate(spec["vocabulary"])})
        feat.vectorizer.idf_ = np.load(d / "features_idf.npy")
        return feat
