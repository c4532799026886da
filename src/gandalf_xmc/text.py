"""What a word and a character n-gram are, for every part of the library that splits texts (TF-IDF
features, word sequences, synonym replacement), and a text's TF-IDF row written out."""

import math
import operator
import re
from collections import Counter

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


def tfidf_row(text: str, vocabulary: dict[str, int], idf, ngram_max: int) -> tuple[list[int], list[float]]:
    """One text's TF-IDF row as scikit-learn's vectorizer computes it (lowercased words and their
    n-grams up to ``ngram_max``, sublinear tf times idf, l2 norm): feature ids ascending and their
    values. Written out here for the paths that must not pay the vectorizer: a handful of queries,
    and the numpy-only model reader."""
    return grams_row(word_ngrams(text, ngram_max), vocabulary, idf)


def grams_row(grams: list[str], vocabulary: dict[str, int], idf) -> tuple[list[int], list[float]]:
    """The TF-IDF row of a text's ``grams`` (sublinear tf times ``idf``, a numpy array, l2 norm): ids
    ascending, values."""
    # counted and weighed in bulk (C loops, one indexing of idf): half the time of a loop a gram
    counts = Counter([j for j in map(vocabulary.get, grams) if j is not None])
    ids = sorted(counts)
    weights = idf[ids].tolist() if ids else []
    values = [w if counts[j] == 1 else (1.0 + math.log(counts[j])) * w for j, w in zip(ids, weights)]
    norm = math.sqrt(sum(map(operator.mul, values, values)))
    return ids, [v / norm for v in values] if norm > 0 else values


def joint_row(
    word_row: tuple[list[int], list[float]], char_row: tuple[list[int], list[float]], n_words: int
) -> tuple[list[int], list[float]]:
    """A words block and a character block side by side (character ids after the ``n_words`` word
    features), the whole row l2-normalised again: each block has norm 1 or 0, so both weigh alike."""
    ids = word_row[0] + [n_words + j for j in char_row[0]]
    values = word_row[1] + char_row[1]
    norm = math.sqrt(sum(v * v for v in values))
    return ids, [v / norm for v in values] if norm > 0 else values


def feature_row(text: str, vocabulary: dict[str, int], idf, ngram_max: int, chars=None) -> tuple[list[int], list[float]]:
    """A text's row of a model's TF-IDF features: its words' row and, where ``chars`` =
    ``((shortest, longest), char vocabulary, char idf)`` is given, the character block beside it
    (:func:`joint_row`)."""
    row = tfidf_row(text, vocabulary, idf, ngram_max)
    if chars is None:
        return row
    ngram_range, char_vocabulary, char_idf = chars
    return joint_row(row, grams_row(char_ngrams(text, *ngram_range), char_vocabulary, char_idf), len(vocabulary))
