"""What a word and a character n-gram are, for every part of the library that splits texts (TF-IDF
features, word sequences, synonym replacement), and a text's TF-IDF row written out."""

import functools
import math
import re

import numpy as np

TOKEN_PATTERN = r"(?u)\b\w+\b"
WORD = re.compile(TOKEN_PATTERN)


def words(text: str) -> list[str]:
    """The lowercased words of ``text``."""
    return WORD.findall(text.lower())


def word_ngrams(text: str, ngram_max: int) -> list[str]:
    """The lowercased words of ``text`` and then their n-grams up to ``ngram_max`` (space-joined), as
    scikit-learn's word analyzer lists them."""
    grams = words(text)
    tokens = grams[:]
    for n in range(2, min(ngram_max, len(tokens)) + 1):
        grams += map(" ".join, zip(*(tokens[i:] for i in range(n))))
    return grams


def char_ngrams(text: str, shortest: int, longest: int) -> list[str]:
    """The lowercased character n-grams of ``text`` within word boundaries, as scikit-learn's
    ``char_wb`` analyzer lists them: each white-space-separated word padded with a space on both
    sides, its n-grams for n = ``shortest`` .. ``longest``; a padded word no longer than n is one
    gram, and the longer n then add nothing."""
    grams = []
    for word in text.lower().split():
        padded = f" {word} "
        size = len(padded)
        if size <= shortest:
            grams.append(padded)
            continue
        # one comprehension for every n shorter than the padded word: faster than a loop of them
        grams += [padded[i : i + n] for n in range(shortest, min(longest, size - 1) + 1) for i in range(size - n + 1)]
        if longest >= size:
            grams.append(padded)
    return grams


def tfidf_row(text: str, vocabulary: dict[str, int], idf, ngram_max: int) -> tuple[np.ndarray, np.ndarray]:
    """One text's TF-IDF row as scikit-learn's vectorizer computes it (lowercased words and their
    n-grams up to ``ngram_max``, sublinear tf times idf, l2 norm): feature ids ascending and their
    values. Written out here for the paths that must not pay the vectorizer: a handful of queries,
    and the numpy-only model reader."""
    return grams_row(word_ngrams(text, ngram_max), vocabulary, idf)


def grams_row(grams: list[str], vocabulary: dict[str, int], idf) -> tuple[np.ndarray, np.ndarray]:
    """The TF-IDF row of a text's ``grams`` (sublinear tf times ``idf``, a numpy array, l2 norm): ids
    ascending, values."""
    return ids_row([j for j in map(vocabulary.get, grams) if j is not None], idf)


def ids_row(ids: list[int], idf) -> tuple[np.ndarray, np.ndarray]:
    """The TF-IDF row of a text whose known grams have the feature ``ids`` (a repeat for each
    occurrence): sublinear tf times ``idf`` (a numpy array), l2 norm; ids ascending (int64) and
    values (float64). In numpy, a few passes instead of a Python loop a feature, with that loop's
    floats: logs by ``math.log``, squares summed one after the other."""
    ordered = np.sort(np.asarray(ids, dtype=np.int64))
    if not ordered.size:
        return ordered, np.zeros(0)
    first = np.empty(ordered.size, dtype=np.bool_)
    first[0] = True
    np.not_equal(ordered[1:], ordered[:-1], out=first[1:])
    starts = np.flatnonzero(first)
    counts = np.diff(np.append(starts, ordered.size))
    values = np.asarray(idf[ordered[starts]], dtype=np.float64)
    repeated = np.flatnonzero(counts > 1)
    if repeated.size:
        values[repeated] *= [1.0 + math.log(c) for c in counts[repeated].tolist()]
    return ordered[starts], _normalised(values)


def _normalised(values: np.ndarray) -> np.ndarray:
    """``values`` over their l2 norm (unchanged if it is 0), the squares summed in order."""
    norm = math.sqrt(np.cumsum(values * values)[-1]) if values.size else 0.0
    return values / norm if norm > 0 else values


class CharGramIds:
    """A text's character n-gram ids in ``vocabulary`` (each occurrence, as :func:`char_ngrams`
    lists the grams), found word by word with each word's ids remembered (the ``cache`` most recent
    words): a query's words mostly repeat earlier queries', and cutting and looking up its hundreds
    of n-grams is most of the cost of featurising it."""

    def __init__(self, ngram_range: tuple[int, int], vocabulary: dict[str, int], cache: int = 1 << 15):
        self.ngram_range = (int(ngram_range[0]), int(ngram_range[1]))
        self.vocabulary = vocabulary
        self._of_word = functools.lru_cache(maxsize=cache)(self._ids_of_word)

    def _ids_of_word(self, word: str) -> tuple[int, ...]:
        return tuple(j for j in map(self.vocabulary.get, char_ngrams(word, *self.ngram_range)) if j is not None)

    def __call__(self, text: str) -> list[int]:
        ids: list[int] = []
        for word in text.lower().split():  # char_ngrams's words
            ids += self._of_word(word)
        return ids


def joint_row(
    word_row: tuple[np.ndarray, np.ndarray], char_row: tuple[np.ndarray, np.ndarray], n_words: int
) -> tuple[np.ndarray, np.ndarray]:
    """A words block and a character block side by side (character ids after the ``n_words`` word
    features), the whole row l2-normalised again: each block has norm 1 or 0, so both weigh alike."""
    return np.concatenate([word_row[0], char_row[0] + n_words]), _normalised(np.concatenate([word_row[1], char_row[1]]))


def feature_row(text: str, vocabulary: dict[str, int], idf, ngram_max: int, chars=None) -> tuple[np.ndarray, np.ndarray]:
    """A text's row of a model's TF-IDF features: its words' row and, where ``chars`` =
    ``(CharGramIds of the char vocabulary, char idf)`` is given, the character block beside it
    (:func:`joint_row`)."""
    row = tfidf_row(text, vocabulary, idf, ngram_max)
    if chars is None:
        return row
    char_ids, char_idf = chars
    return joint_row(row, ids_row(char_ids(text), char_idf), len(vocabulary))
