"""TF-IDF text features shared by the models, saved as plain files (no pickles)."""

from __future__ import annotations

import contextlib
import json
from array import array
from collections import defaultdict
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from .errors import ConfigError
from .sparse_ops import row_normalised
from .text import TOKEN_PATTERN, CharGramIds, char_ngrams, feature_row, word_ngrams

FEW_TEXTS = 16  # up to this many texts, transform without the vectorizer (see _transform_few)


def numbering() -> defaultdict:
    """An empty term -> id dict that gives a term it has not seen the next id (its size)."""
    ids: defaultdict = defaultdict()
    ids.default_factory = ids.__len__  # called before the new term is stored: ids 0, 1, 2, ...
    return ids


class WordTfidf:
    """Word n-gram TF-IDF exactly as scikit-learn's ``TfidfVectorizer(ngram_range=(1, ngram_max),
    sublinear_tf=True, min_df=min_df, dtype=float32)`` computes it (alphabetical vocabulary, smooth
    idf, l2 rows; the same bytes), with the same ``vocabulary_`` and ``idf_``. Written out because
    importing scikit-learn (scipy.stats with it) takes longer than training the linear model on a
    small dataset; ``max_features`` still uses scikit-learn."""

    def __init__(
        self, ngram_max: int = 2, min_df: int = 1, vocabulary: dict[str, int] | None = None, idf: np.ndarray | None = None
    ):
        self.ngram_max = ngram_max
        self.min_df = min_df
        self.vocabulary_ = vocabulary
        self.idf_ = idf

    def _counts(self, texts: list[str], vocabulary: dict[str, int], grow: bool) -> sp.csr_matrix:
        """Term counts (float32 CSR), each row's ids ascending. ``grow``: ``vocabulary`` is a
        :func:`numbering` that gives new terms the next id as they are first seen. Every occurrence is
        listed, then scipy adds up the repeats (a Counter a text cost more: decisions, "Start-up")."""
        indptr, indices = array("q", [0]), array("i")  # 4-8 bytes an entry, not a Python int's 36
        for text in texts:
            grams = self._grams(text)
            if grow:
                indices.extend(map(vocabulary.__getitem__, grams))
            else:
                indices.extend([j for j in map(vocabulary.get, grams) if j is not None])
            indptr.append(len(indices))
        X = sp.csr_matrix(
            (
                np.ones(len(indices), dtype=np.float32),
                np.frombuffer(indices, dtype=np.int32).copy(),
                np.frombuffer(indptr, dtype=np.int64).copy(),
            ),
            shape=(len(texts), len(vocabulary)),
        )
        X.sum_duplicates()  # sorts each row's ids and adds up the repeats
        return X

    def _grams(self, text: str) -> list[str]:
        return word_ngrams(text, self.ngram_max)

    def _weigh(self, X: sp.csr_matrix) -> sp.csr_matrix:
        np.log(X.data, out=X.data)
        X.data += np.float32(1.0)
        X.data *= self.idf_[X.indices]
        return row_normalised(X)

    def fit_transform(self, texts: list[str]) -> sp.csr_matrix:
        vocabulary = numbering()
        X = self._counts(texts, vocabulary, grow=True)
        if not vocabulary:
            raise ConfigError("the training and label texts hold no words (letters or digits): nothing to learn from")
        keep = np.ones(len(vocabulary), dtype=bool)
        if self.min_df > 1:
            keep = np.bincount(X.indices, minlength=X.shape[1]) >= self.min_df
            if not keep.any():
                raise ConfigError(
                    f"no word n-gram occurs in {self.min_df} texts or more (training and label texts "
                    f"together): too few texts for min_df {self.min_df}"
                )
            X = X[:, np.flatnonzero(keep)]
        # ids in order of first sight -> alphabetical ids (the rows keep their stored order, as scikit-learn's)
        seen = list(vocabulary)  # a numbering: ids in order of insertion
        terms = [t for t, k in zip(seen, keep.tolist()) if k]
        order = sorted(range(len(terms)), key=terms.__getitem__)
        new_id = np.empty(len(terms), dtype=np.int32)
        new_id[order] = np.arange(len(terms), dtype=np.int32)
        X.indices = new_id[X.indices]
        X.has_sorted_indices = False
        self.vocabulary_ = {terms[i]: int(new_id[i]) for i in range(len(terms))}
        df = np.bincount(X.indices, minlength=len(terms)).astype(np.float32) + np.float32(1.0)
        idf = np.full_like(df, X.shape[0] + 1, dtype=np.float32)
        idf /= df
        np.log(idf, out=idf)
        idf += np.float32(1.0)
        self.idf_ = idf
        X = self._weigh(X)  # normalised in scikit-learn's stored order, then sorted (the same sums)
        X.sort_indices()
        return X

    def fit(self, texts: list[str]) -> WordTfidf:
        self.fit_transform(texts)
        return self

    def transform(self, texts: list[str]) -> sp.csr_matrix:
        return self._weigh(self._counts(texts, self.vocabulary_, grow=False))


class CharTfidf(WordTfidf):
    """Character n-gram TF-IDF within word boundaries, as scikit-learn's ``TfidfVectorizer(analyzer=
    "char_wb", ngram_range=(shortest, longest), sublinear_tf=True, min_df=min_df, dtype=float32)``
    computes it (the same vocabulary, idf and rows)."""

    def __init__(
        self,
        ngram_range: tuple[int, int],
        min_df: int = 1,
        vocabulary: dict[str, int] | None = None,
        idf: np.ndarray | None = None,
    ):
        super().__init__(1, min_df, vocabulary, idf)
        self.ngram_range = (int(ngram_range[0]), int(ngram_range[1]))

    def _grams(self, text: str) -> list[str]:
        return char_ngrams(text, *self.ngram_range)


class TextFeaturizer:
    """Word uni/bi-gram TF-IDF (sublinear tf), optionally beside character n-grams within word
    boundaries (``char_ngrams = (lo, hi)``), fitted on training and label texts. Each block is
    l2-normalised, then the row is (so word and character evidence weigh the same)."""

    def __init__(
        self, ngram_max: int = 2, min_df: int = 1, max_features: int | None = None, char_ngrams: tuple[int, int] | None = None
    ):
        self.ngram_max = ngram_max
        self.min_df = min_df
        self.max_features = max_features
        self.char_ngrams = tuple(char_ngrams) if char_ngrams else None
        self.vectorizer: Any = None  # a WordTfidf, or scikit-learn's TfidfVectorizer with max_features
        self.char_vectorizer: Any = None
        self._char_ids: CharGramIds | None = None  # a single query's character n-gram ids, by word

    def _new_vectorizer(self, vocabulary=None):
        if self.max_features is None or vocabulary is not None:
            return WordTfidf(self.ngram_max, self.min_df if vocabulary is None else 1, vocabulary)
        from sklearn.feature_extraction.text import TfidfVectorizer

        return TfidfVectorizer(
            ngram_range=(1, self.ngram_max),
            sublinear_tf=True,
            token_pattern=TOKEN_PATTERN,
            min_df=self.min_df,
            max_features=self.max_features,
            dtype=np.float32,
        )

    def _new_char_vectorizer(self, vocabulary=None):
        min_df = 1 if vocabulary is not None else max(self.min_df, 2)
        if self.max_features is None or vocabulary is not None:
            return CharTfidf(self.char_ngrams, min_df, vocabulary)
        from sklearn.feature_extraction.text import TfidfVectorizer

        return TfidfVectorizer(
            analyzer="char_wb",
            ngram_range=self.char_ngrams,
            sublinear_tf=True,
            min_df=1 if vocabulary is not None else max(self.min_df, 2),
            max_features=self.max_features,
            vocabulary=vocabulary,
            dtype=np.float32,
        )

    def fit(self, texts: list[str]) -> TextFeaturizer:
        with _words_needed():
            self.vectorizer = self._new_vectorizer().fit(texts)
            if self.char_ngrams:
                self.char_vectorizer = self._new_char_vectorizer().fit(texts)
        return self

    def fit_transform(self, texts: list[str]) -> sp.csr_matrix:
        """Fit on ``texts`` and return their rows (one pass over the texts fewer than fit, then transform)."""
        self.vectorizer = self._new_vectorizer()
        with _words_needed():
            X = self.vectorizer.fit_transform(texts).tocsr()
            if self.char_ngrams:
                self.char_vectorizer = self._new_char_vectorizer()
                X = self._joined(X, self.char_vectorizer.fit_transform(texts))
        X.sort_indices()
        return X

    def _transform_few(self, texts: list[str]) -> sp.csr_matrix:
        """``transform`` for a handful of texts, written out: the vectorizer's own path costs ten
        times a single query's search. Same steps (lowercased words and their n-grams, sublinear
        tf times idf, l2 norm; the character block likewise, then the row); tested against the
        vectorizer."""
        rows = [self._row_arrays(text) for text in texts]
        indptr = np.zeros(len(texts) + 1, dtype=np.int32)
        np.cumsum([ids.size for ids, _ in rows], out=indptr[1:])
        indices = np.concatenate([ids for ids, _ in rows]).astype(np.int32) if rows else np.zeros(0, np.int32)
        data = np.concatenate([values for _, values in rows]).astype(np.float32) if rows else np.zeros(0, np.float32)
        X = sp.csr_matrix((data, indices, indptr), shape=(len(texts), self.n_features))
        X.has_sorted_indices = True
        return X

    def _row_arrays(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        char_block, chars = self.char_vectorizer, None
        if char_block is not None:
            if self._char_ids is None or self._char_ids.vocabulary is not char_block.vocabulary_:  # fitted or loaded since
                self._char_ids = CharGramIds((self.char_ngrams[0], self.char_ngrams[1]), char_block.vocabulary_)
            chars = (self._char_ids, char_block.idf_)
        return feature_row(text, self.vectorizer.vocabulary_, self.vectorizer.idf_, self.ngram_max, chars)

    def row(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """One text's row of :meth:`transform` as its feature ids (int32, ascending) and values
        (float32), without a matrix: a single query's path."""
        if self.vectorizer is None:
            raise RuntimeError("fit the featurizer first")
        ids, values = self._row_arrays(text)
        return ids.astype(np.int32), values.astype(np.float32)

    def word_terms(self) -> list[str]:
        """The word n-gram features' terms in id order (the character block's ids follow them)."""
        if self.vectorizer is None:
            raise RuntimeError("fit the featurizer first")
        return _terms(self.vectorizer)

    @property
    def n_features(self) -> int:
        assert self.vectorizer is not None
        n = len(self.vectorizer.vocabulary_)
        return n + (len(self.char_vectorizer.vocabulary_) if self.char_vectorizer is not None else 0)

    def transform(self, texts: list[str]) -> sp.csr_matrix:
        if self.vectorizer is None:
            raise RuntimeError("fit the featurizer first")
        if is_feature_matrix(texts):
            raise ConfigError("this model reads texts: it was trained on texts, not on precomputed feature rows")
        if len(texts) <= FEW_TEXTS:
            return self._transform_few(texts)
        X = self.vectorizer.transform(texts).tocsr()
        if self.char_vectorizer is not None:
            X = self._joined(X, self.char_vectorizer.transform(texts))
        X.sort_indices()
        return X

    @staticmethod
    def _joined(words: sp.csr_matrix, chars: sp.csr_matrix) -> sp.csr_matrix:
        """The word and character blocks side by side, each row l2-normalised again (float32)."""
        return row_normalised(sp.hstack([words, chars], format="csr"))

    def save(self, directory: str | Path) -> None:
        assert self.vectorizer is not None
        d = Path(directory)
        spec = {
            "ngram_max": self.ngram_max,
            "min_df": self.min_df,
            "max_features": self.max_features,
            "vocabulary": _terms(self.vectorizer),
        }
        if self.char_vectorizer is not None:
            spec["char_ngrams"] = list(self.char_ngrams)
            spec["char_vocabulary"] = _terms(self.char_vectorizer)
            np.save(d / "features_char_idf.npy", self.char_vectorizer.idf_.astype(np.float64))
        (d / "features.json").write_text(json.dumps(spec))
        np.save(d / "features_idf.npy", self.vectorizer.idf_.astype(np.float64))

    @classmethod
    def load(cls, directory: str | Path, spec: dict | None = None, idf: np.ndarray | None = None) -> TextFeaturizer:
        """The featurizer saved in ``directory``; ``spec`` and ``idf``: its ``features.json`` and
        word idf when the caller has read them already."""
        from .engine.level_store import load_array
        from .jsonio import read_json_file

        d = Path(directory)
        spec = read_json_file(d / "features.json") if spec is None else spec
        feat = cls(spec["ngram_max"], spec["min_df"], spec["max_features"], spec.get("char_ngrams"))
        feat.vectorizer = feat._new_vectorizer({term: i for i, term in enumerate(spec["vocabulary"])})
        feat.vectorizer.idf_ = load_array(d / "features_idf.npy") if idf is None else idf
        if feat.char_ngrams:
            feat.char_vectorizer = feat._new_char_vectorizer({t: i for i, t in enumerate(spec["char_vocabulary"])})
            feat.char_vectorizer.idf_ = load_array(d / "features_char_idf.npy")
        return feat


def is_feature_matrix(inputs) -> bool:
    """Whether a model's inputs are feature rows the caller computed (a scipy sparse matrix or a
    2-D numpy array: anything two-dimensional), not texts (the same test as ``models.base``'s,
    which must not import this module)."""
    return getattr(inputs, "ndim", None) == 2


class PrecomputedFeatures:
    """What reads the input of a model trained on feature rows the caller computed (sparse TF-IDF
    of their own, dense sentence embeddings), as PECOS's ``XLinearModel.train(X, Y)`` and
    napkinXC's ``fit(X, Y)`` take them: rows pass through as float32 CSR, checked for width and
    finiteness. Saved as ``features.json`` ``{"precomputed": true, "n_features": D}``."""

    precomputed = True

    def __init__(self, n_features: int):
        self.n_features = int(n_features)

    def transform(self, rows) -> sp.csr_matrix:
        if not is_feature_matrix(rows):
            raise ConfigError(
                f"this model was trained on precomputed features: give it feature rows (a scipy sparse "
                f"matrix or a 2-D numpy array of {self.n_features:,} columns), not texts"
            )
        X = sp.csr_matrix(rows, dtype=np.float32)
        if X.shape[1] != self.n_features:
            raise ConfigError(f"feature rows of {X.shape[1]:,} columns for a model trained on {self.n_features:,}")
        if not np.isfinite(X.data).all():
            raise ConfigError("feature rows must be finite numbers (found NaN or infinity)")
        X.eliminate_zeros()
        X.sort_indices()
        return X

    def save(self, directory: str | Path) -> None:
        (Path(directory) / "features.json").write_text(json.dumps({"precomputed": True, "n_features": self.n_features}))

    @classmethod
    def load(cls, directory: str | Path, spec: dict | None = None) -> PrecomputedFeatures:
        from .jsonio import read_json_file

        spec = read_json_file(Path(directory) / "features.json") if spec is None else spec
        return cls(spec["n_features"])


def load_featurizer(
    directory: str | Path, spec: dict | None = None, idf: np.ndarray | None = None
) -> TextFeaturizer | PrecomputedFeatures:
    """The part that reads a saved model's input, by its ``features.json``: texts or precomputed rows."""
    from .jsonio import read_json_file

    spec = read_json_file(Path(directory) / "features.json") if spec is None else spec
    if isinstance(spec, dict) and spec.get("precomputed"):
        return PrecomputedFeatures.load(directory, spec)
    return TextFeaturizer.load(directory, spec, idf)


def _terms(vectorizer) -> list[str]:
    return [term for term, _ in sorted(vectorizer.vocabulary_.items(), key=lambda kv: kv[1])]


@contextlib.contextmanager
def _words_needed():
    """scikit-learn's "empty vocabulary" ValueError as the one line the command line prints."""
    try:
        yield
    except ValueError as exc:
        if "empty vocabulary" not in str(exc):
            raise
        raise ConfigError("the training and label texts hold no words (letters or digits): nothing to learn from") from None
