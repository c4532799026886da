"""New Gene Ontology terms: train on the terms of GO.db 3.12 (Debian bullseye's
``r-bioc-go.db``), test on the terms that GO.db 3.16 (bookworm's) adds, each labelled with those
of its parents that 3.12 already has as labels. Texts and relations as in
:mod:`.gene_ontology`."""

from __future__ import annotations

from pathlib import Path

from . import DatasetCard, write_new_items
from .debian_archive import DEFAULT_MIRROR, DebianPackage, fetch
from .gene_ontology import PACKAGE as NEW_PACKAGE
from .gene_ontology import read_terms

OLD_PACKAGE = DebianPackage(
    "r-bioc-go.db",
    "3.12.1-1",
    "pool/main/r/r-bioc-go.db/r-bioc-go.db_3.12.1-1_all.deb",
    "becd91daa644ab5ed202d9f4e8ae5b41911135fdd25f19faaf81cf9ba0d81c61",
    12867280,
)
CARD = DatasetCard(
    name="gene-ontology-new-terms",
    domain="biology (ontology terms), new items",
    summary="Gene Ontology terms new in a later release, labelled with their parents of the earlier one",
    text="the GO term's name",
    labels="its direct parents (is a, part of, regulates, positively / negatively "
    "regulates) that the earlier release has as labels",
    license="CC BY 4.0 (Gene Ontology Consortium)",
    sources=(OLD_PACKAGE, NEW_PACKAGE),
    sources_heading="Built from these Debian packages (bullseye's GO.db 3.12 to train, bookworm's 3.16 to test):",
    group="GO namespace (BP, MF or CC)",
)


def build(out_dir: str | Path, mirror: str = DEFAULT_MIRROR, log=None, force: bool = False) -> dict:
    old = read_terms(fetch(OLD_PACKAGE, mirror, log))
    new = read_terms(fetch(NEW_PACKAGE, mirror, log))
    return write_new_items(old, new, out_dir, CARD, force)
