"""New Debian packages: train on Debian 11 (bullseye) ``main`` amd64, a package's one-line
description -> the packages it names in Depends, Pre-Depends, Recommends and Suggests (every
alternative) that exist in the same index, labels with more than 500 training points dropped (libc6
and the like), as ``debian-bookworm`` is built; test on the packages that Debian 12 (bookworm)
adds, each labelled with those of its relations that are bullseye labels. The label space is
bullseye's: a new package's relations to other new packages are not in it, as they are not for a
deployed model meeting a new item. Group: the package's source package (its family: the binaries
built from one source arrive in a release together), for validation that holds families out; the
new packages' validation split (``val``) takes whole source families, so that no family is both
validated on and tested.
"""

from __future__ import annotations

import lzma
import re
from pathlib import Path

from . import DatasetCard, Item, write_new_items
from .debian_archive import DEFAULT_MIRROR, DebianPackage, fetch

OLD_INDEX = DebianPackage(
    "Packages (bullseye main amd64)",
    "11.11",
    "dists/bullseye/main/binary-amd64/Packages.xz",
    "1c3405444297ead864711c18e64bce4810db63b48340a2f9d81182d9f235ad71",
    8065948,
)
NEW_INDEX = DebianPackage(
    "Packages (bookworm main amd64)",
    "12.15",
    "dists/bookworm/main/binary-amd64/Packages.xz",
    "9e0b5aabb2465b3d2e7a7fe27f9913846277833f7a2826e7767acccff5b588c5",
    8790396,
)
RELATIONS = ("Depends", "Pre-Depends", "Recommends", "Suggests")
MAX_LABEL_POINTS = 500
CARD = DatasetCard(
    name="debian-new-packages",
    domain="software packages, new items",
    summary="Debian packages new in bookworm, labelled with their relations among bullseye's packages",
    text="the package's one-line description",
    labels="the packages it depends on, pre-depends on, recommends or suggests (every alternative) that are "
    f"bullseye labels (labels with more than {MAX_LABEL_POINTS} training points dropped)",
    license="the package descriptions' (Debian main: DFSG-free)",
    sources=(OLD_INDEX, NEW_INDEX),
    sources_heading="Built from these Debian package indexes (bullseye's to train, bookworm's to test):",
    group="source package (the family it is built with)",
)


def parse(index: str) -> list[Item]:
    """Items of a Debian ``Packages`` index: name, one-line description, related packages (version
    constraints and architecture qualifiers dropped), source package (the name itself when the
    stanza names none); the first stanza of a name wins."""
    items, seen = [], set()
    for stanza in index.split("\n\n"):
        fields: dict[str, str] = {}
        for line in stanza.split("\n"):
            if line[:1] in (" ", "\t") or ":" not in line:
                continue  # a long description's continuation lines
            key, _, value = line.partition(":")
            fields[key] = value.strip()
        name = fields.get("Package")
        if not name or name in seen:
            continue
        seen.add(name)
        related = [
            alternative.split()[0].split(":")[0]
            for relation in RELATIONS
            for alternative in re.split(r"[,|]", fields.get(relation, ""))
            if alternative.strip()
        ]
        source = fields.get("Source", name).split()[0]  # "Source: foo (1.2-3)" names a source of another version
        items.append(Item(name, fields.get("Description", ""), tuple(dict.fromkeys(related)), source))
    return items


def read_index(path: Path) -> list[Item]:
    return parse(lzma.decompress(path.read_bytes()).decode("utf-8"))


def build(out_dir: str | Path, mirror: str = DEFAULT_MIRROR, log=None, force: bool = False) -> dict:
    old = read_index(fetch(OLD_INDEX, mirror, log))
    new = read_index(fetch(NEW_INDEX, mirror, log))
    return write_new_items(old, new, out_dir, CARD, force, max_label_points=MAX_LABEL_POINTS, family_by_group=True)
