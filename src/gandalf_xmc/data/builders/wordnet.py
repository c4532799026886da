"""WordNet 3.0 (Debian ``wordnet-base``): a synset's words -> the synsets it is related to.

Point and label text: the synset's words (``dog, domestic dog, Canis familiaris``). Labels: the
synsets its semantic pointers lead to, hyponyms and domain members left out (they are the reverse
of hypernyms and domains, and would make every general synset a point with hundreds of labels):
hypernyms and instance hypernyms, holonyms and meronyms, similar-to, also-see, attributes,
entailments, causes, verb groups and domains. Group: the lexicographer file (``noun.animal``).
"""

from __future__ import annotations

import re
from pathlib import Path

from . import DatasetCard, Item, write_related_items
from .debian_archive import DEFAULT_MIRROR, DebianPackage, fetch, regular_files

PACKAGE = DebianPackage(
    "wordnet-base",
    "1:3.0-37",
    "pool/main/w/wordnet/wordnet-base_3.0-37_all.deb",
    "61060d960f9ada8fa120872312eccd3ecebfbab8c4579e4f5a74e1cf67620752",
    6467132,
)
POINTERS = {"@", "@i", "#m", "#s", "#p", "%m", "%s", "%p", "&", "^", "=", "*", ">", "$", ";c", ";r", ";u"}
LEXICOGRAPHER_FILES = (
    "adj.all adj.pert adv.all noun.Tops noun.act noun.animal noun.artifact noun.attribute noun.body noun.cognition "
    "noun.communication noun.event noun.feeling noun.food noun.group noun.location noun.motive noun.object "
    "noun.person noun.phenomenon noun.plant noun.possession noun.process noun.quantity noun.relation noun.shape "
    "noun.state noun.substance noun.time verb.body verb.change verb.cognition verb.communication verb.competition "
    "verb.consumption verb.contact verb.creation verb.emotion verb.motion verb.perception verb.possession "
    "verb.social verb.stative verb.weather adj.ppl"
).split()
POS_LETTER = {"n": "n", "v": "v", "a": "a", "s": "a", "r": "r"}  # satellites live in data.adj
CARD = DatasetCard(
    name="wordnet",
    domain="lexical semantics",
    summary="related synsets of WordNet 3.0",
    text="the synset's words, comma-separated, underscores as spaces",
    labels="the synsets its semantic pointers lead to (hypernyms, holonyms, meronyms, similar-to, also-see, "
    "attributes, entailments, causes, verb groups, domains; not hyponyms or domain members)",
    license="WordNet 3.0 license (BSD-like, Princeton University)",
    sources=(PACKAGE,),
)


def _word(token: str) -> str:
    return re.sub(r"\([a-z]+\)$", "", token).replace("_", " ")


def parse(data_files: dict[str, str]) -> list[Item]:
    """Items of the four ``data.*`` files (``pos -> text``)."""
    items = []
    for pos in ("noun", "verb", "adj", "adv"):
        for line in data_files[pos].splitlines():
            if not line or line.startswith("  "):  # the license header
                continue
            fields = line.split(" | ", 1)[0].split()
            offset, lex_file, letter = fields[0], int(fields[1]), POS_LETTER[fields[2]]
            n_words = int(fields[3], 16)
            words = [_word(fields[4 + 2 * i]) for i in range(n_words)]
            at = 4 + 2 * n_words
            targets = []
            for _ in range(int(fields[at])):
                symbol, target, target_pos = fields[at + 1], fields[at + 2], fields[at + 3]
                at += 4
                if symbol in POINTERS:
                    targets.append(f"{POS_LETTER[target_pos]}{target}")
            items.append(Item(f"{letter}{offset}", ", ".join(words), tuple(targets), LEXICOGRAPHER_FILES[lex_file]))
    return items


def build(out_dir: str | Path, mirror: str = DEFAULT_MIRROR, log=None, force: bool = False) -> dict:
    deb = fetch(PACKAGE, mirror, log)
    files = {
        Path(p).suffix[1:]: content.decode("latin-1")
        for p, content in regular_files(
            deb, lambda p: re.fullmatch(r"usr/share/wordnet/data\.(noun|verb|adj|adv)", p) is not None
        ).items()
    }
    return write_related_items(parse(files), out_dir, CARD, force)
