"""What a word is, for every part of the library that splits texts (TF-IDF features, word
sequences, synonym replacement)."""

import math
import re

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


def tfidf_row(text: str, vocabulary: dict[str, int], idf, ngram_max: int) -> tuple[list[int], list[float]]:
    """One text's TF-IDF row as scikit-learn's vectorizer computes it (lowercased words and their
    n-grams up to ``ngram_max``, sublinear tf times idf, l2 norm): feature ids ascending and their
    values. Written out here for the paths that must not pay the vectorizer: a handful of queries,
    and the numpy-only model reader."""
    counts: dict[int, int] = {}
    for gram in word_ngrams(text, ngram_max):
        j = vocabulary.get(gram)
        if j is not None:
            counts[j] = counts.get(j, 0) + 1
    ids = sorted(counts)
    values = [(1.0 + math.log(counts[j])) * float(idf[j]) for j in ids]
    norm = math.sqrt(sum(v * v for v in values))
    return ids, [v / norm for v in values] if norm > 0 else values
