"""GCIDE, the GNU Collaborative International Dictionary of English (Debian ``dict-gcide``): an entry
-> the entries it refers the reader to.

Point and label text: the headword, a colon and the first sentence of its first definition, at
most 20 words, without pronunciation, part of speech and etymology (``Twinleaf: See Jeffersonia.``).
Labels: the entries its body names after a reference phrase (``See {X}``, ``See under``, ``Same
as``, ``Cf.``, ``Opposite of``, ``Opposed to``), where such an entry exists; a braced word
elsewhere (an inflected form, a phrase defined in the entry) is no reference. An entry is the
body of one headword: the index's other headwords (inflections, phrases, homographs' bodies) lead to
the body, and homographs' references are merged. Group: the headword's first letter.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from . import DatasetCard, Item, write_related_items
from .debian_archive import DEFAULT_MIRROR, DebianPackage, fetch, regular_files
from .dictd import first_sentence, headword_key, index_entries

PACKAGE = DebianPackage(
    "dict-gcide",
    "0.48.5+nmu2",
    "pool/main/d/dict-gcide/dict-gcide_0.48.5+nmu2_all.deb",
    "7b0af5cfde3cbdef5e9d6e78f92ec335ced7c2790f37a40f49bebc6f7347ac0f",
    14800692,
)
MAX_WORDS = 20
CARD = DatasetCard(
    name="gcide",
    domain="dictionary (English)",
    summary="GCIDE entries and the entries they refer to",
    text=f"the headword, a colon and the first sentence of its first definition (at most {MAX_WORDS} words)",
    labels="the entries its body refers to (See, See under, Same as, Cf., Opposite of, Opposed to)",
    license="GPL-2+ (GCIDE; the Debian package's copyright file)",
    sources=(PACKAGE,),
    group="headword's first letter",
)

REFERENCE = re.compile(
    r"(?:\b[Ss]ee(?: under| also)?|\b[Ss]ame as|\b[Cc]f\.|\bOpposite of|\b[Oo]pposed to)\s+"
    r"((?:(?:1st |2d |3d |4th )?\{[^{}]+\}(?:,? (?:and|or) |, |; )?)+)"
)
BRACED = re.compile(r"\{([^{}]+)\}")
HEAD = re.compile(r"^(.+?) \\[^\\]*\\")  # "Cockle \Coc"kle\": a headword and its pronunciation
OTHER_HEADS = re.compile(r"^(?:,?\s*(?:or\s+)?[^\\,;.]{1,40} \\[^\\]*\\)+")
PRONUNCIATION = re.compile(r"^\([^()]{1,40}\),?\s*(?=[a-z]{1,6}\.|[^()]*[\"*`])|^\([^()]*[\"*`][^()]*\),?\s*")
PART_OF_SPEECH = re.compile(
    r"^(?:(?:n|v|a|adv|adj|prep|conj|interj|pron|p|pr|t|i|pl|sing|imp|vb|obs|fem|masc|dat|"
    r"superl|compar|prop|pers|poss|def|art|num)\.[,;]?\s*(?:&\s*)?)+"
)
PLURALS = re.compile(r"^(?:(?:E|L|Gr|F|It|Sp)\.\s+[^.;,()]+(?:\s*\([^()]*\))?[,.;]?\s*)+")  # "E. Herbariums, L. Herbaria."
WORDNET_SENSE = re.compile(r"^(?:n|v|adj|adv|a|s)\s+(?:\d+:\s*)?")  # entries from WordNet: "n 1: ..."
SENSE = re.compile(r"^(?:\d+\.\s*)?(?:\([A-Z][a-z]*\.\)\s*)*")  # "1. (Med.) "


def _definition(flat: str, head) -> str:
    """The first sentence of a body's first definition (``flat``: white space folded)."""
    rest = flat[head.end() :] if head else flat.split(" ", 1)[-1]
    rest = OTHER_HEADS.sub("", rest).lstrip(" ,")
    rest = PRONUNCIATION.sub("", rest)
    for _ in range(3):  # etymologies and sources: [ ... [ ... ] ... ]
        rest = re.sub(r"\[[^\[\]]*\]", " ", rest)
    rest = PLURALS.sub("", PART_OF_SPEECH.sub("", rest.lstrip(" ,")))
    rest = SENSE.sub("", WORDNET_SENSE.sub("", rest).strip())
    return first_sentence(rest, MAX_WORDS)


def parse(index: str, dictionary: bytes) -> list[Item]:
    """Items of GCIDE's dictd index and its (uncompressed) dictionary, in the index's order."""
    entries = index_entries(index)
    bodies: dict[tuple[int, int], str] = {}
    spans_of: dict[str, list[tuple[int, int]]] = {}
    for headword, offset, length in entries:
        span = (offset, length)
        if span not in bodies:  # a few bodies hold bytes that are not UTF-8 (always the same ones)
            bodies[span] = dictionary[offset : offset + length].decode("utf-8", "replace")
        spans_of.setdefault(headword_key(headword), []).append(span)
    main: dict[tuple[int, int], str] = {}
    for headword, offset, length in entries:  # a body's entry: its own headword, else its first index line's
        if (offset, length) not in main:
            head = HEAD.match(bodies[(offset, length)].split("\n", 1)[0])
            main[(offset, length)] = headword_key(head.group(1)) if head else headword_key(headword)
    texts: dict[str, str] = {}
    targets: dict[str, list[str]] = {}
    for span, body in bodies.items():
        key, flat = main[span], " ".join(body.split())
        refs = [
            main[target]
            for phrase in REFERENCE.finditer(flat)
            for term in BRACED.findall(phrase.group(1))
            for target in spans_of.get(headword_key(term), [])
        ]
        targets.setdefault(key, []).extend(refs)
        if key not in texts:
            head = HEAD.match(flat)
            name = re.sub(r"[\"*`]", "", head.group(1)) if head else key
            texts[key] = f"{name}: {_definition(flat, head)}"
    return [Item(key, texts[key], tuple(dict.fromkeys(t for t in targets[key] if t != key)), key[:1]) for key in texts]


def build(out_dir: str | Path, mirror: str = DEFAULT_MIRROR, log=None, force: bool = False) -> dict:
    deb = fetch(PACKAGE, mirror, log)
    files = regular_files(deb, lambda p: p.startswith("usr/share/dictd/gcide."))
    index = files["usr/share/dictd/gcide.index"].decode("utf-8")
    return write_related_items(parse(index, gzip.decompress(files["usr/share/dictd/gcide.dict.dz"])), out_dir, CARD, force)
