"""Reading a dictd dictionary (an ``.index`` of ``headword TAB offset TAB length`` lines, offsets and
lengths in dictd's base 64, over the uncompressed ``.dict``): what the dictionary builders share."""

from __future__ import annotations

_BASE64 = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"


def number(text: str) -> int:
    """A dictd base-64 number (``"Bm"`` is 1 * 64 + 38)."""
    value = 0
    for ch in text:
        value = value * 64 + _BASE64.index(ch)
    return value


def index_entries(index: str) -> list[tuple[str, int, int]]:
    """``(headword, offset, length)`` of each index line, in the index's order, without the
    dictionary's own ``00-database`` entries."""
    out = []
    for line in index.splitlines():
        headword, offset, length = line.split("\t")[:3]
        if not headword.startswith("00-database"):
            out.append((headword, number(offset), number(length)))
    return out


def headword_key(headword: str) -> str:
    """A headword as an item id: lower case, white space folded."""
    return " ".join(headword.lower().split())


def first_sentence(definition: str, max_words: int) -> str:
    """The definition's first sentence, braces dropped, at most ``max_words`` words (a sentence
    ends at a word ending in ``.``, ``?`` or ``!`` once it has four words; "1." numbers a sense)."""
    words = definition.replace("{", "").replace("}", "").split()
    out = []
    for word in words[:max_words]:
        out.append(word)
        if word.endswith((".", "?", "!")) and len(out) > 3 and not word[:-1].isdigit():
            break
    return " ".join(out)
