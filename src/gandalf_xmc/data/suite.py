"""The dev suite: real LF datasets from different domains, named so that every command can take
a name instead of a directory. Small ones ship inside the package; large ones are built on first
use (``gandalf datasets build NAME``) from pinned Debian package versions into the cache.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from importlib import resources
from pathlib import Path

from ..errors import GandalfError
from ..paths import cache_root


@dataclass(frozen=True)
class SuiteDataset:
    """A dataset of the suite: its name, domain, whether the package ships it, and the module of
    :mod:`gandalf_xmc.data.builders` that builds it (None: it predates the builders)."""

    name: str
    domain: str
    shipped: bool
    builder: str | None = None
    test_split: str = "random"  # "new-items": trains on an older release, tests on what a newer one adds
    group_is_family: bool = False  # the group key names the items built together (a source package)

    @property
    def split_files(self) -> tuple[str, ...]:
        """The split files a built copy has (new-items sets also validate on new items: ``val``)."""
        return ("trn.json.gz", "tst.json.gz", "val.json.gz") if self.test_split == "new-items" else ("trn.json.gz",)


SUITE: tuple[SuiteDataset, ...] = (
    SuiteDataset("debian-bookworm", "software packages", shipped=True),
    SuiteDataset("gene-ontology", "biology (ontology terms)", shipped=True, builder="gene_ontology"),
    SuiteDataset("manpages", "software documentation", shipped=True, builder="manpages"),
    SuiteDataset("jargon", "dictionary (hacker slang)", shipped=True, builder="jargon"),
    SuiteDataset("wordnet", "lexical semantics", shipped=False, builder="wordnet"),
    SuiteDataset("gcide", "dictionary (English)", shipped=False, builder="gcide"),
    SuiteDataset("cmake-help", "software reference documentation", shipped=False, builder="cmake_help"),
    SuiteDataset("python-api", "software API reference", shipped=False, builder="python_api"),
    SuiteDataset(
        "debian-new-packages",
        "software packages",
        shipped=False,
        builder="debian_new",
        test_split="new-items",
        group_is_family=True,
    ),
    SuiteDataset(
        "gene-ontology-new-terms", "biology (ontology terms)", shipped=False, builder="gene_ontology_new", test_split="new-items"
    ),
)
BY_NAME = {d.name: d for d in SUITE}
NEW_ITEMS_SPLIT = "val"  # a new-items set's labelled new items; its texts sample the deployment's queries


def groups_are_families(name: str) -> bool:
    """Whether the suite dataset ``name``'s group key names the items built together (False for a
    name outside the suite)."""
    return name in BY_NAME and BY_NAME[name].group_is_family


DEFAULT_DATASET = "debian-bookworm"


def shipped_root() -> Path:
    return Path(str(resources.files("gandalf_xmc") / "data" / "embedded"))


def built_root() -> Path:
    """Where built datasets go: ``$GANDALF_CACHE/datasets`` or ``~/.cache/gandalf-xmc/datasets``."""
    return cache_root() / "datasets"


def suggest(spec: str) -> str:
    """``"; did you mean NAME?"`` for a dataset spec that is a suite name misspelt (else ``""``),
    and the list of names for anything else that is not a path."""
    import difflib

    close = difflib.get_close_matches(spec, list(BY_NAME), n=1, cutoff=0.6)
    if close:
        return f"; did you mean the suite dataset {close[0]}?"
    if "/" not in spec:
        return f" (suite datasets: {', '.join(BY_NAME)})"
    return ""


def suite_path(name: str) -> Path:
    """The directory of suite dataset ``name`` (which may not be built yet)."""
    entry = BY_NAME[name]
    return (shipped_root() if entry.shipped else built_root()) / name


def is_available(name: str) -> bool:
    """Built, with every split file its builder writes (an older build lacking one is built again)."""
    return all((suite_path(name) / f).is_file() for f in BY_NAME[name].split_files)


def build(name: str, out_dir: str | Path | None = None, mirror: str | None = None, log=None, force: bool = False) -> Path:
    """Build suite dataset ``name`` into ``out_dir`` (default: its place in the suite, which a
    rebuild replaces; another ``out_dir`` must be new or empty unless ``force``)."""
    entry = BY_NAME.get(name)
    if entry is None or entry.builder is None:
        buildable = ", ".join(d.name for d in SUITE if d.builder)
        raise GandalfError(f"no builder for {name!r}; buildable datasets: {buildable}")
    module = importlib.import_module(f"gandalf_xmc.data.builders.{entry.builder}")
    target = Path(out_dir) if out_dir is not None else suite_path(name)
    kwargs = {"mirror": mirror} if mirror else {}
    module.build(target, log=log, force=force or out_dir is None, **kwargs)
    return target


def resolve(spec: str | Path | None) -> Path:
    """A dataset directory from a directory or a suite name (None: the default dataset). An
    existing directory wins over a suite name; a suite dataset that is not built yet is an error
    saying how to build it."""
    if spec is None:
        return suite_path(DEFAULT_DATASET)
    path = Path(spec)
    if path.exists() or str(spec) not in BY_NAME:
        return path
    if not is_available(str(spec)):
        raise GandalfError(f"dataset {spec} is not built yet: run 'gandalf datasets build {spec}'")
    return suite_path(str(spec))
