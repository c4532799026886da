"""The documented API of scientific Python libraries (Debian's ``python3-scipy``, ``-pandas``,
``-sklearn``, ``-networkx``, ``-statsmodels`` and ``-sympy``): a function, class or method -> the
items its docstring's *See Also* section names.

Point and label text: the item's dotted name without its private parts (``scipy.linalg._basic.solve``
reads ``scipy.linalg.solve``), a colon and the docstring's first paragraph, at most 30 words.
Items are the functions, classes and methods with a docstring whose names do not start with an
underscore, read from the sources with :mod:`ast` (nothing is imported or run). A name in See Also
is looked up as the documentation tools do, nearest first: in the item (a class's methods), in its
class, in its module, then across its library by full or public name, then as the unique item of
the library whose name ends with it; a name that stays ambiguous or unknown (another library, a C
function) is dropped.
Group: the library.
"""

from __future__ import annotations

import ast
import re
from pathlib import Path

from . import DatasetCard, Item, write_related_items
from .debian_archive import DEFAULT_MIRROR, DebianPackage, fetch, regular_files

PACKAGES = (
    DebianPackage(
        "python3-scipy",
        "1.10.1-2",
        "pool/main/s/scipy/python3-scipy_1.10.1-2_amd64.deb",
        "75175eb18aa9ef6424c69050a751335fe686c24b65bc1773d0769a74a21c869d",
        15210448,
    ),
    DebianPackage(
        "python3-pandas",
        "1.5.3+dfsg-2",
        "pool/main/p/pandas/python3-pandas_1.5.3+dfsg-2_all.deb",
        "4c530b36c107dcfdcbf2a2bef4008a4667b1833084259c0c40ef7d26b7fec0a5",
        2885400,
    ),
    DebianPackage(
        "python3-sklearn",
        "1.2.1+dfsg-1",
        "pool/main/s/scikit-learn/python3-sklearn_1.2.1+dfsg-1_all.deb",
        "ca0c6be401d14871c7e93cfdd8d1f561595dc65e6e2ad2501d568aee7f7efc58",
        2102964,
    ),
    DebianPackage(
        "python3-networkx",
        "2.8.8-1",
        "pool/main/n/networkx/python3-networkx_2.8.8-1_all.deb",
        "69888603d1b54696f5c3d02d05527628d2d18661d845109a62fe24aff241aa7b",
        1424824,
    ),
    DebianPackage(
        "python3-statsmodels",
        "0.13.5+dfsg-7",
        "pool/main/s/statsmodels/python3-statsmodels_0.13.5+dfsg-7_all.deb",
        "77474ba544c8e18e7932635ef9ab65abc1b8720fb471465d2a6ddd5ea81f08ad",
        4514764,
    ),
    DebianPackage(
        "python3-sympy",
        "1.11.1-1",
        "pool/main/s/sympy/python3-sympy_1.11.1-1_all.deb",
        "b437232be31819aafd267ddf2132c16293ef75e02fd58b4ad31eee3ef1d5b49e",
        4358432,
    ),
)
SITE = "usr/lib/python3/dist-packages/"
MAX_WORDS = 30
CARD = DatasetCard(
    name="python-api",
    domain="software API reference",
    summary="functions, classes and methods of scientific Python libraries and the items their See Also names",
    text=f"the item's public dotted name, a colon and its docstring's first paragraph (at most {MAX_WORDS} words)",
    labels="the items of the same library that its docstring's See Also section names",
    license="BSD-3-Clause (SciPy, pandas, scikit-learn, NetworkX, statsmodels, SymPy; each package's copyright file)",
    sources=PACKAGES,
    group="library (scipy, pandas, sklearn, networkx, statsmodels, sympy)",
)

SECTION = re.compile(r"^(\S[^\n]*)\n[-=]{3,}[ \t]*$", re.M)  # a numpydoc or reStructuredText heading
ROLE = re.compile(r":[\w:]+:`~?([^`<]*?)\s*(?:<([^`]*)>)?`")
NAME = re.compile(r"[A-Za-z_]\w*(?:\.[A-Za-z_]\w*)*")


def module_name(path: str) -> str | None:
    """``scipy.linalg._basic`` for ``.../dist-packages/scipy/linalg/_basic.py``; None for tests."""
    if not path.startswith(SITE) or not path.endswith(".py") or "/tests/" in path or path.endswith("conftest.py"):
        return None
    name = path[len(SITE) : -3].replace("/", ".")
    return name[: -len(".__init__")] if name.endswith(".__init__") else name


def public_name(uid: str) -> str:
    return ".".join(part for part in uid.split(".") if not part.startswith("_"))


def docstrings(module: str, source: bytes) -> list[tuple[str, str]]:
    """(dotted name, docstring) of the module's public functions and classes and their methods,
    in source order; a file Python cannot parse gives none."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return []
    found: list[tuple[str, str]] = []

    def walk(node: ast.AST, prefix: str) -> None:
        for child in ast.iter_child_nodes(node):
            if isinstance(child, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and not child.name.startswith("_"):
                name = f"{prefix}.{child.name}"
                doc = ast.get_docstring(child)
                if doc:
                    found.append((name, doc))
                if isinstance(child, ast.ClassDef):
                    walk(child, name)

    walk(tree, module)
    return found


def summary(doc: str) -> str:
    words = doc.strip().split("\n\n")[0].split()
    return " ".join(words[:MAX_WORDS])


def see_also(doc: str) -> list[str]:
    """The names a docstring's See Also section lists: per entry line (a line no deeper than the
    first entry's), the text before `` : ``, split at commas, roles and backticks removed."""
    headings = list(SECTION.finditer(doc))
    for i, heading in enumerate(headings):
        if heading.group(1).strip().lower() != "see also":
            continue
        body = doc[heading.end() : headings[i + 1].start() if i + 1 < len(headings) else len(doc)]
        lines = [line for line in body.split("\n") if line.strip()]
        if not lines:
            return []
        indent = len(lines[0]) - len(lines[0].lstrip())
        names: list[str] = []
        for line in lines:
            if len(line) - len(line.lstrip()) > indent:
                continue  # a description's next line
            head = line.split(" : ")[0] if " : " in line else line
            head = ROLE.sub(lambda m: m.group(2) or m.group(1), head)
            for token in head.split(","):
                token = token.strip().strip("`~*").removesuffix("()").rstrip(".:")
                if NAME.fullmatch(token):
                    names.append(token)
        return names
    return []


def resolve(name: str, uid: str, module: str, items, by_suffix: dict[str, set[str]]) -> str | None:
    """The item ``name`` (listed in ``uid``'s See Also, ``uid`` defined in ``module``) means, nearest
    first: in the item itself (a class's methods), in its class, in its module, by full or public
    name, as a unique suffix. ``items``: every item's uid (a set or a dict's keys)."""
    library = uid.split(".")[0]
    for scope in (uid, uid.rsplit(".", 1)[0], module):
        if f"{scope}.{name}" in items and f"{scope}.{name}" != uid:
            return f"{scope}.{name}"
    for key in (name, f"{library}.{name}"):
        found = by_suffix.get("=" + key, set()) - {uid}
        if len(found) == 1:
            return next(iter(found))
    found = {u for u in by_suffix.get(name, set()) if u.split(".")[0] == library} - {uid}
    return next(iter(found)) if len(found) == 1 else None


def parse(files: dict[str, bytes]) -> list[Item]:
    """The items of the Python sources in ``files`` (package paths), with their See Also targets
    resolved (:func:`resolve`); sorted by dotted name."""
    found: dict[str, tuple[str, str]] = {}  # uid -> (module, docstring); the first definition wins
    for path in sorted(files):
        module = module_name(path)
        if module is None:
            continue
        for uid, doc in docstrings(module, files[path]):
            found.setdefault(uid, (module, doc))
    by_suffix: dict[str, set[str]] = {}  # "=name": items of that full or public name; "a.b": items ending so
    for uid in found:
        for full in {uid, public_name(uid)}:
            by_suffix.setdefault("=" + full, set()).add(uid)
            parts = full.split(".")
            for i in range(1, len(parts)):
                by_suffix.setdefault(".".join(parts[i:]), set()).add(uid)
    out = []
    for uid, (module, doc) in sorted(found.items()):
        targets = (resolve(name, uid, module, found, by_suffix) for name in see_also(doc))
        kept = tuple(dict.fromkeys(t for t in targets if t is not None))
        out.append(Item(uid, f"{public_name(uid)}: {summary(doc)}", kept, uid.split(".")[0]))
    return out


def build(out_dir: str | Path, mirror: str = DEFAULT_MIRROR, log=None, force: bool = False) -> dict:
    files: dict[str, bytes] = {}
    for package in PACKAGES:
        files.update(regular_files(fetch(package, mirror, log), lambda p: module_name(p) is not None))
    return write_related_items(parse(files), out_dir, CARD, force)
