"""CMake's reference documentation (Debian ``cmake-data``, the ``Help`` tree that ``cmake --help-*``
reads): a documented command, variable, property, module, policy, generator or environment
variable -> the documented items its page refers to.

Point and label text: the item's name, a colon and the first sentence of its page, with the
markup's roles reduced to the text they show (``add_library: Add a library to the project using
the specified source files.``). Labels: the items its page names by a cross-reference role of the
same kinds (``:variable:`CMAKE_BUILD_TYPE```, ``:command:`project```, ...) where that item has a
page; references to manuals, sections and generator expressions are not items. A module's page is
the reStructuredText comment at the head of its ``Modules/*.cmake`` file. Group: the item's kind
(``command``, ``variable``, ``prop_tgt``, ...).
"""

from __future__ import annotations

import re
from pathlib import Path

from . import DatasetCard, Item, write_related_items
from .debian_archive import DEFAULT_MIRROR, DebianPackage, fetch, regular_files

PACKAGE = DebianPackage(
    "cmake-data",
    "3.25.1-1",
    "pool/main/c/cmake/cmake-data_3.25.1-1_all.deb",
    "8371f9694da94fd551a3ea653e2e25d99747471ca0b48cc029bf5c792ea590a3",
    2026484,
)
HELP = "usr/share/cmake-3.25/Help/"
MODULES = "usr/share/cmake-3.25/Modules/"
# the Help directories whose pages are items; each is also the role that refers to its items
KINDS = (
    "command",
    "variable",
    "envvar",
    "policy",
    "generator",
    "module",
    "cpack_gen",
    "prop_tgt",
    "prop_sf",
    "prop_gbl",
    "prop_dir",
    "prop_test",
    "prop_cache",
    "prop_inst",
)
MAX_WORDS = 30
CARD = DatasetCard(
    name="cmake-help",
    domain="software reference documentation",
    summary="CMake's documented items and the items their pages refer to",
    text=f"the item's name, a colon and the first sentence of its page (at most {MAX_WORDS} words)",
    labels="the documented items (commands, variables, properties, modules, policies, generators, "
    "environment variables) its page refers to by a cross-reference",
    license="BSD-3-Clause (CMake; the Debian package's copyright file)",
    sources=(PACKAGE,),
    group="kind (command, variable, prop_tgt, module, ...)",
)

ROLE = re.compile(r":([a-z_]+):`([^`]+)`")
MODULE_DOC = re.compile(r"#\[(=*)\[\.rst:\n(.*?)#?\]\1\]", re.S)


def _role(content: str) -> tuple[str, str]:
    """(the text a role shows, the item it names): ``shown <target>`` shows ``shown`` and names
    ``target``, otherwise both are the content; a leading ``~`` or ``!`` is markup."""
    explicit = re.fullmatch(r"(.*?)\s+<(.+)>", content, re.S)
    shown, target = (explicit.group(1), explicit.group(2)) if explicit else (content, content)
    return shown.lstrip("~!").strip(), target.lstrip("~!").strip()


def _plain(text: str) -> str:
    text = ROLE.sub(lambda m: _role(m.group(2))[0], text)
    text = re.sub(r"``([^`]*)``", r"\1", text)
    text = re.sub(r"`([^`<]*?)\s*(<[^`]*>)?`_*", r"\1", text)  # links
    return " ".join(text.replace("\\", "").split())


def _first_sentence(paragraph: str) -> str:
    """Up to the first word ending in ``.`` that is not an abbreviation (``e.g.``), at most
    :data:`MAX_WORDS` words. Not :func:`.dictd.first_sentence`, whose four-word minimum suits
    dictionary senses but would cut these pages' "(e.g. ...)" phrases."""
    words = paragraph.split()
    for i, word in enumerate(words):
        if word.endswith(".") and not re.fullmatch(r"\W*(e\.g|i\.e|etc|vs|\w)\.", word):  # not an abbreviation
            words = words[: i + 1]
            break
    return " ".join(words[:MAX_WORDS])


def page_item(kind: str, page: str) -> Item | None:
    """The item of one page: its title (the line above the first underline), the first paragraph of
    ordinary text after it (directives such as ``.. versionadded::`` and their indented lines
    skipped) and the references of the whole page. None for a page without a title."""
    lines = page.replace("\r\n", "\n").split("\n")
    title_at = next(
        (i for i in range(len(lines) - 1) if lines[i].strip() and re.fullmatch(r"([-=^~*#])\1{2,}", lines[i + 1].strip())),
        None,
    )
    if title_at is None:
        return None
    title = lines[title_at].strip()
    paragraph: list[str] = []
    in_directive = False
    for line in lines[title_at + 2 :]:
        if not line.strip():
            if paragraph:
                break
            in_directive = False
            continue
        if line.startswith(".."):
            in_directive = True
            continue
        if in_directive and line[:1] in (" ", "\t"):
            continue
        in_directive = False
        if not paragraph and line[:1] in (" ", "\t"):
            continue  # a literal block or a quote before the first paragraph
        paragraph.append(line.strip())
    text = _plain(" ".join(paragraph))
    targets = tuple(dict.fromkeys(f"{r}:{_role(c)[1]}" for r, c in ROLE.findall(page) if r in KINDS))
    return Item(f"{kind}:{title}", f"{title}: {_first_sentence(text)}" if text else title, targets, kind)


def parse(files: dict[str, bytes]) -> list[Item]:
    """The items of the ``Help`` pages in ``files`` (paths as in the package), a module's page read
    from its ``.cmake`` file; references to items without a page are dropped; sorted by uid."""
    items: dict[str, Item] = {}
    for path in sorted(files):
        if not path.startswith(HELP) or not path.endswith(".rst"):
            continue
        kind = path[len(HELP) :].split("/")[0]
        if kind not in KINDS:
            continue
        page = files[path].decode("utf-8")
        included = re.match(r"\.\. cmake-module:: \.\./\.\./Modules/(.+\.cmake)", page)
        if included:
            found = MODULE_DOC.search(files.get(MODULES + included.group(1), b"").decode("utf-8"))
            if not found:
                continue
            page = found.group(2)
        item = page_item(kind, page)
        if item is not None and item.uid not in items:
            items[item.uid] = item
    return [
        Item(it.uid, it.text, tuple(t for t in it.targets if t in items and t != it.uid), it.group)
        for _, it in sorted(items.items())
    ]


def build(out_dir: str | Path, mirror: str = DEFAULT_MIRROR, log=None, force: bool = False) -> dict:
    deb = fetch(PACKAGE, mirror, log)
    files = regular_files(
        deb, lambda p: (p.startswith(HELP) and p.endswith(".rst")) or (p.startswith(MODULES) and p.endswith(".cmake"))
    )
    return write_related_items(parse(files), out_dir, CARD, force)
