"""What a word is, for every part of the library that splits texts (TF-IDF features, word
sequences, synonym replacement)."""

import re

TOKEN_PATTERN = r"(?u)\b\w+\b"
WORD = re.compile(TOKEN_PATTERN)


def words(text: str) -> list[str]:
    """The lowercased words of ``text``."""
    return WORD.findall(text.lower())
