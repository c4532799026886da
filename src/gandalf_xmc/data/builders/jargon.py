"""The Jargon File 4.4.7 (Debian ``dict-jargon``): an entry -> the entries it cross-references.

Point and label text: the headword and the first sentence of its definition, at most 20 words
(``hard boot: See boot.``). Labels: the entries its text marks as cross-references (``{boot}``)
that exist in the file. Group: the headword's first letter.
"""

from __future__ import annotations

import gzip
import re
from pathlib import Path

from . import DatasetCard, Item, write_related_items
from .debian_archive import DEFAULT_MIRROR, DebianPackage, fetch, regular_files
from .dictd import first_sentence, headword_key, index_entries

PACKAGE = DebianPackage(
    "dict-jargon",
    "4.4.7-3.1",
    "pool/main/d/dict-jargon/dict-jargon_4.4.7-3.1_all.deb",
    "405f8168d7994ed2cb71407bb95493daec2e9aa66fc0461dafa74a9d6728a8c1",
    621608,
)
MAX_WORDS = 20
CARD = DatasetCard(
    name="jargon",
    domain="dictionary (hacker slang)",
    summary="Jargon File entries and their cross-references",
    text=f"the headword, a colon and the first sentence of its definition (at most {MAX_WORDS} words)",
    labels="the entries its definition cross-references",
    license="public domain (The Jargon File)",
    sources=(PACKAGE,),
)


def parse(index: str, dictionary: bytes) -> list[Item]:
    """Items of a dictd index and its (uncompressed) dictionary."""
    entries = [
        (headword, dictionary[offset : offset + length].decode("utf-8")) for headword, offset, length in index_entries(index)
    ]
    known = {headword_key(h) for h, _ in entries}
    items, seen = [], set()
    for headword, body in entries:
        key = headword_key(headword)
        if key in seen:
            continue
        seen.add(key)
        lines = body.split("\n")[1:]  # the first line repeats the headword
        # skip the part-of-speech / pronunciation lines that precede the definition's first paragraph
        paragraphs = [p for p in "\n".join(lines).split("\n\n") if p.strip()]
        definition = " ".join(paragraphs[1:] if len(paragraphs) > 1 else paragraphs)
        refs = [headword_key(r) for r in re.findall(r"\{([^{}]+)\}", " ".join(body.split()))]
        targets = tuple(r for r in dict.fromkeys(refs) if r in known and r != key)
        items.append(Item(key, f"{headword}: {first_sentence(definition, MAX_WORDS)}", targets, key[:1]))
    return items


def build(out_dir: str | Path, mirror: str = DEFAULT_MIRROR, log=None, force: bool = False) -> dict:
    deb = fetch(PACKAGE, mirror, log)
    files = regular_files(deb, lambda p: p.startswith("usr/share/dictd/jargon."))
    index = files["usr/share/dictd/jargon.index"].decode("utf-8")
    return write_related_items(parse(index, gzip.decompress(files["usr/share/dictd/jargon.dict.dz"])), out_dir, CARD, force)
