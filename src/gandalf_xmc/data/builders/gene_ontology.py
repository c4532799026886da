"""The Gene Ontology (Debian ``r-bioc-go.db``, GO release of its SQLite file): a GO term's name ->
its parent terms.

Point and label text: the term's name (``positive regulation of lipid transport``). Labels: its
direct parents in the ontology, over every relation the file keeps (is a, part of, regulates,
positively and negatively regulates). Group: the term's namespace (BP, MF or CC).
"""

from __future__ import annotations

import sqlite3
import tempfile
from pathlib import Path

from . import DatasetCard, Item, write_related_items
from .debian_archive import DEFAULT_MIRROR, DebianPackage, fetch, regular_files

PACKAGE = DebianPackage(
    "r-bioc-go.db",
    "3.16.0-1",
    "pool/main/r/r-bioc-go.db/r-bioc-go.db_3.16.0-1_all.deb",
    "6cf9c43b97212811ecb7ad0d7cde12e76f984ab7494a59c02455239a9dd3243d",
    12359372,
)
DATABASE = "usr/lib/R/site-library/GO.db/extdata/GO.sqlite"
CARD = DatasetCard(
    name="gene-ontology",
    domain="biology (ontology terms)",
    summary="Gene Ontology terms and their parents",
    text="the GO term's name",
    labels="its direct parents (is a, part of, regulates, positively / negatively regulates)",
    license="CC BY 4.0 (Gene Ontology Consortium)",
    sources=(PACKAGE,),
)


def parse(connection: sqlite3.Connection) -> list[Item]:
    """Items of the GO.db SQLite file: every term, pointing at its parents."""
    terms = {row[0]: row[1:] for row in connection.execute("SELECT _id, go_id, term, ontology FROM go_term")}
    parents: dict[int, list[str]] = {}
    for table in ("go_bp_parents", "go_mf_parents", "go_cc_parents"):
        for child, parent in connection.execute(f"SELECT _id, _parent_id FROM {table}"):  # noqa: S608 - fixed names
            parents.setdefault(child, []).append(terms[parent][0])
    return [
        Item(go_id, name, tuple(parents.get(key, ())), namespace)
        for key, (go_id, name, namespace) in terms.items()
        if go_id != "all"
    ]


def read_terms(deb: Path) -> list[Item]:
    """The items of a ``r-bioc-go.db`` package's SQLite file."""
    with tempfile.TemporaryDirectory() as tmp:
        db = Path(tmp) / "GO.sqlite"
        for content in regular_files(deb, lambda p: p == DATABASE).values():
            db.write_bytes(content)
        connection = sqlite3.connect(f"file:{db}?mode=ro", uri=True)
        try:
            return parse(connection)
        finally:
            connection.close()


def build(out_dir: str | Path, mirror: str = DEFAULT_MIRROR, log=None, force: bool = False) -> dict:
    return write_related_items(read_terms(fetch(PACKAGE, mirror, log)), out_dir, CARD, force)
