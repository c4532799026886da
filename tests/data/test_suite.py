"""The dev suite: builders parse their sources as read by hand, write byte-identical datasets,
and every command takes a suite name; missing filter files are derived from self-labels."""

from __future__ import annotations

import gzip
import json
import shutil
import sqlite3

import numpy as np
import pytest

from gandalf_xmc.data import load_dataset
from gandalf_xmc.data.builders import DatasetCard, Item, gcide, gene_ontology, jargon, manpages, wordnet, write_related_items
from gandalf_xmc.data.suite import SUITE, is_available, resolve, suite_path
from gandalf_xmc.errors import GandalfError

from helpers import run_cli

CARD = DatasetCard(name="toy", domain="toys", summary="s", text="t", labels="l", license="none")


def toy_items():
    # a -> b, c; b -> c; c -> a; d -> x (unknown: dropped, so d is no point); e -> e (self: dropped)
    return [
        Item("a", "apple  pie", ("b", "c")),
        Item("b", "banana", ("c",)),
        Item("c", "cherry", ("a",)),
        Item("d", "date", ("x",)),
        Item("e", "elder", ("e",)),
        Item("f", "fig", ("a", "a"), "g1"),
    ]


def read_lines(path):
    return [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]


def test_related_items_labels_split_and_filter_pairs(tmp_path):
    stats = write_related_items(toy_items(), tmp_path / "toy", CARD)
    labels = read_lines(tmp_path / "toy" / "lbl.json.gz")
    assert [r["uid"] for r in labels] == ["a", "b", "c"]  # the pointed-at items, sorted
    assert labels[0]["title"] == "apple pie"  # whitespace normalised
    points = read_lines(tmp_path / "toy" / "trn.json.gz") + read_lines(tmp_path / "toy" / "tst.json.gz")
    assert sorted(r["uid"] for r in points) == ["a", "b", "c", "f"]
    want = {"a": [1, 2], "b": [2], "c": [0], "f": [0]}
    assert {r["uid"]: r["target_ind"] for r in points} == want
    assert stats["N"] + stats["N_test"] == 4 and stats["L"] == 3
    # 30% of 4 points is 1 test point; the filter files pair each point that is a label with it
    ds = load_dataset(tmp_path / "toy")
    assert len(ds.test) == 1 and len(ds.train) == 3
    for split in (ds.train, ds.test):
        got = {(split.uids[r], ds.label_uids[lab]) for r, lab in split.filter_pairs.tolist()}
        assert got == {(u, u) for u in split.uids if u in ("a", "b", "c")}
    assert ds.name == "toy" and ds.domain == "toys" and ds.propensity == (0.55, 1.5)


def test_related_items_are_byte_identical(tmp_path):
    write_related_items(toy_items(), tmp_path / "one", CARD)
    write_related_items(toy_items(), tmp_path / "two", CARD)
    for f in (tmp_path / "one").iterdir():
        assert f.read_bytes() == (tmp_path / "two" / f.name).read_bytes(), f.name


def test_wordnet_parse_by_hand():
    noun = (
        "  1 This software and database is being provided\n"
        "02084071 05 n 03 dog 0 domestic_dog 0 Canis_familiaris 0 003 @ 02083346 n 0000 ~ 01322604 n 0000 "
        "#m 02083863 n 0000 | a member of the genus Canis\n"
    )
    adj = "00001740 00 a 01 able 0 002 ! 00002098 a 0101 & 00002312 s 0000 | (usually followed by `to')\n"
    items = wordnet.parse({"noun": noun, "verb": "", "adj": adj, "adv": ""})
    dog = next(i for i in items if i.uid == "n02084071")
    assert dog.text == "dog, domestic dog, Canis familiaris" and dog.group == "noun.animal"
    assert dog.targets == ("n02083346", "n02083863")  # hypernym and member holonym; the hyponym is left out
    able = next(i for i in items if i.uid == "a00001740")
    assert able.targets == ("a00002312",)  # similar-to a satellite (s -> a); the antonym is lexical, left out


def test_gene_ontology_parse_by_hand():
    db = sqlite3.connect(":memory:")
    db.execute("CREATE TABLE go_term (_id INTEGER, go_id TEXT, term TEXT, ontology TEXT)")
    db.executemany(
        "INSERT INTO go_term VALUES (?,?,?,?)",
        [
            (1, "all", "all", "universal"),
            (2, "GO:1", "binding", "MF"),
            (3, "GO:2", "protein binding", "MF"),
            (4, "GO:3", "cell", "CC"),
        ],
    )
    for t in ("go_bp_parents", "go_mf_parents", "go_cc_parents"):
        db.execute(f"CREATE TABLE {t} (_id INTEGER, _parent_id INTEGER, relationship_type TEXT)")
    db.execute("INSERT INTO go_mf_parents VALUES (3, 2, 'isa')")
    items = {i.uid: i for i in gene_ontology.parse(db)}
    assert set(items) == {"GO:1", "GO:2", "GO:3"}
    assert items["GO:2"].targets == ("GO:1",) and items["GO:2"].group == "MF" and items["GO:3"].targets == ()


def test_manpages_parse_by_hand():
    ls = b".TH LS 1\n.SH NAME\nls \\- list directory contents\n.SH SEE ALSO\n\\fBdir\\fR\\|(1), \\fBstat\\fP(2), nothere(3)\n"
    stat = b'.TH STAT 2\n.SH "NAME"\nstat, fstat \\- get file status\n.SH SEE ALSO\n.BR fstat (2)\n'
    mdoc = b".Sh NAME\n.Nm strlcpy\n.Nd size-bounded string copying\n.Sh SEE ALSO\n.Xr stat 2 ,\n"
    packages = {
        "p": [
            ("usr/share/man/man1/ls.1.gz", gzip.compress(ls)),
            ("usr/share/man/man1/dir.1.gz", "ls.1.gz"),  # a symbolic link: dir(1) is ls(1)
            ("usr/share/man/man2/stat.2.gz", gzip.compress(stat)),
            ("usr/share/man/man2/fstat.2.gz", gzip.compress(b".so man2/stat.2\n")),
            ("usr/share/man/man3/strlcpy.3bsd.gz", gzip.compress(mdoc)),
            ("usr/share/man/de/man1/ls.1.gz", gzip.compress(ls)),
        ]
    }  # a translation: not read
    items = {i.uid: i for i in manpages.parse(packages)}
    assert set(items) == {"ls(1)", "stat(2)", "strlcpy(3bsd)"}
    assert items["ls(1)"].text == "ls - list directory contents"
    assert items["ls(1)"].targets == ("ls(1)", "stat(2)")  # dir(1) leads to ls(1) itself (dropped later)
    assert items["stat(2)"].targets == ("stat(2)",) and items["stat(2)"].text == "stat, fstat - get file status"
    assert items["strlcpy(3bsd)"].text == "strlcpy - size-bounded string copying"
    assert items["strlcpy(3bsd)"].targets == ("stat(2)",)


def test_jargon_parse_by_hand():
    body = [
        b"hard boot\n n.\n\n    See {boot}.\n\n",
        b"boot\n v.\n\n    1. To load and initialize. See {hard boot}\n    and {nonexistent}.\n\n",
    ]
    dictionary = b"".join(body)

    def b64(n):
        chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        return chars[n] if n < 64 else chars[n // 64] + chars[n % 64]

    index = f"hard boot\t{b64(0)}\t{b64(len(body[0]))}\nboot\t{b64(len(body[0]))}\t{b64(len(body[1]))}\n"
    items = {i.uid: i for i in jargon.parse(index, dictionary)}
    assert items["hard boot"].targets == ("boot",) and items["hard boot"].text == "hard boot: See boot."
    assert items["boot"].targets == ("hard boot",)
    assert items["boot"].text == "boot: 1. To load and initialize."


def test_gcide_parse_by_hand():
    """Three bodies: a reference after "See", "Same as" and "cf." becomes a target where the entry
    exists ({Fold} does not); a braced inflection in the etymology is none; an inflection's index
    line leads to its entry's body, which is one item; pronunciation, part of speech and
    etymology leave the text."""
    bodies = [
        'Cockle \\Coc"kle\\, v. t. [imp. & p. p. {Cockled}.] [Of uncertain origin.]\n'
        "   To cause to contract into wrinkles. See {Wrinkle}.\n   [1913 Webster]\n\n",
        'Wrinkle \\Wrin"kle\\, n. [AS. wrincle.]\n   A small ridge or prominence. Same as {Crease}, {Fold};\n'
        "   cf. {Cockle}.\n\n",
        "Crease \\Crease\\, n.\n   A line or mark made by folding.\n\n",
    ]
    raw = [b.encode("utf-8") for b in bodies]
    starts = [0, len(raw[0]), len(raw[0]) + len(raw[1])]

    def b64(n):
        chars = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/"
        return chars[n // 64] + chars[n % 64] if n >= 64 else chars[n]

    lines = [("Cockle", 0), ("Cockled", 0), ("Crease", 2), ("Wrinkle", 1)]
    index = "".join(f"{h}\t{b64(starts[i])}\t{b64(len(raw[i]))}\n" for h, i in lines)
    items = {i.uid: i for i in gcide.parse(index, b"".join(raw))}
    assert sorted(items) == ["cockle", "crease", "wrinkle"]
    assert items["cockle"].text == "Cockle: To cause to contract into wrinkles." and items["cockle"].targets == ("wrinkle",)
    assert items["wrinkle"].text == "Wrinkle: A small ridge or prominence."
    assert items["wrinkle"].targets == ("crease", "cockle")
    assert items["crease"].targets == () and items["crease"].group == "c"


def test_suite_names_resolve_and_shipped_datasets_load():
    for entry in SUITE:
        if entry.shipped:
            assert is_available(entry.name)
            ds = load_dataset(entry.name, splits=("trn",))
            stats = json.loads((suite_path(entry.name) / "stats.json").read_text())
            assert len(ds.train) == stats["N"] and ds.n_labels == stats["L"] and ds.name == entry.name
    with pytest.raises(GandalfError, match="gandalf datasets build"):
        import os

        old = os.environ.get("GANDALF_CACHE")
        os.environ["GANDALF_CACHE"] = "/nonexistent-gandalf-cache"
        try:
            resolve("wordnet")
        finally:
            os.environ.pop("GANDALF_CACHE") if old is None else os.environ.__setitem__("GANDALF_CACHE", old)


def test_datasets_command_json(capsys):
    code, out, err = run_cli(["datasets", "--json"], capsys)
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)}
    assert set(rows) == {e.name for e in SUITE}
    assert rows["jargon"]["N"] == 1346 and rows["jargon"]["domain"] == "dictionary (hacker slang)"
    assert rows["gene-ontology"]["available"] and rows["gene-ontology"]["path"].endswith("gene-ontology")


def test_stats_takes_a_suite_name(capsys):
    code, out, err = run_cli(["stats", "--data", "manpages", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["N"] == 2293


@pytest.mark.parametrize("name", ["jargon", "debian-bookworm"])
def test_missing_filter_files_are_derived_from_self_labels(tmp_path, name):
    copy = tmp_path / name
    shutil.copytree(suite_path(name), copy)
    for f in copy.glob("filter_labels_*.txt"):
        f.unlink()
    shipped, derived = load_dataset(name), load_dataset(copy)
    assert len(derived.notes) == 2 and "points are themselves a label" in derived.notes[0]
    for split in ("trn", "tst"):
        want = set(map(tuple, shipped.split(split).filter_pairs.tolist()))
        got = set(map(tuple, derived.split(split).filter_pairs.tolist()))
        assert want <= got  # every pair of the file is found; a same-text label may add one
        assert len(got - want) <= 0.02 * len(want)
    plain = load_dataset(copy, derive_filters=False)
    assert plain.notes == [] and plain.test.filter_pairs.size == 0


def test_self_label_pairs_by_text_only_when_the_text_names_one_label():
    from gandalf_xmc.data.dataset import self_label_pairs

    pairs = self_label_pairs(None, ["Red  Apple!", "pie", "twin"], None, ["red apple", "twin", "twin", "x"])
    assert pairs.tolist() == [[0, 0]]  # "twin" names two labels: no pair
    assert np.asarray(pairs).dtype == np.int64


# ---------------------------------------------------------------------------------------------- new items

OLD = [
    Item("A", "alpha tool", ("B", "C")),
    Item("B", "beta library", ("C",)),
    Item("C", "gamma data", ()),
    Item("D", "delta tool", ("B", "Z")),
    Item("Q", "", ("B",)),
]  # Z is no item; Q has no text
NEW = [
    Item("A", "alpha tool, renamed", ("B",)),
    Item("E", "epsilon tool", ("B", "X")),
    Item("F", "phi", ("X",)),
    Item("G", "gamma tool", ("C", "A")),
    Item("H", "", ("B",)),
]


def test_new_items_by_hand(tmp_path):
    """Labels: the old items old points point at (B by A and D, C by A and B); old points: A, B, D
    (C points at nothing, Q has no text). New items: E and G (A is old, F points at no old label,
    H has no text), with E -> B (X is new) and G -> C (A is no label). The first 8 bytes of
    SHA-256("G") read as a fraction of 2**64 are 0.200 (below 0.3: validation), of "E" 0.664 (test)."""
    from gandalf_xmc.data.builders import write_new_items

    card = DatasetCard("toy-new", "toys", "toy", "text", "targets", "none")
    stats = write_new_items(OLD, NEW, tmp_path / "d", card)
    ds = load_dataset(tmp_path / "d")
    assert ds.label_uids == ["B", "C"] and ds.label_texts == ["beta library", "gamma data"]
    assert ds.train.uids == ["A", "B", "D"] and ds.train.texts == ["alpha tool", "beta library", "delta tool"]
    assert ds.train.Y.toarray().tolist() == [[1, 1], [0, 1], [1, 0]]
    assert ds.test.uids == ["E"] and ds.test.texts == ["epsilon tool"] and ds.test.Y.toarray().tolist() == [[1, 0]]
    valid = load_dataset(tmp_path / "d", splits=("trn", "val")).split("val")
    assert valid.uids == ["G"] and valid.texts == ["gamma tool"] and valid.Y.toarray().tolist() == [[0, 1]]
    assert ds.train.filter_pairs.tolist() == [[1, 0]]  # B is itself label B
    for name in ("test", "val"):  # written empty: nothing derived
        assert (tmp_path / "d" / f"filter_labels_{name}.txt").read_text() == ""
    assert len(ds.test.filter_pairs) == 0 and len(valid.filter_pairs) == 0
    assert stats["N_test"] == 1 and stats["N_valid"] == 1
    meta = json.loads((tmp_path / "d" / "dataset.json").read_text())
    assert meta["test_split"] == "new-items" and "groups_are_families" not in meta
    assert ds.test_split == "new-items" and not ds.groups_are_families

    # a label with more training points than allowed is dropped (B: A and D), and a point left without labels goes (D)
    old = [Item("A", "a", ("B", "C")), Item("B", "b", ()), Item("C", "c", ()), Item("D", "d", ("B",))]
    write_new_items(old, [Item("E", "e", ("B", "C"))], tmp_path / "e", card, max_label_points=1)
    ds = load_dataset(tmp_path / "e")
    assert ds.label_uids == ["C"] and ds.train.uids == ["A"] and ds.test.uids == ["E"]
    assert ds.test.Y.toarray().tolist() == [[1]]


def test_new_items_validation_takes_whole_families(tmp_path):
    """600 new items in 200 families of 3: a family is validated or tested whole, about 30% of the
    families validate, and the draw of a family does not depend on the others."""
    from gandalf_xmc.data.builders import write_new_items

    card = DatasetCard("toy-new", "toys", "toy", "text", "targets", "none")
    new = [Item(f"n{f}-{m}", f"new {f} {m}", ("B",), f"family{f}") for f in range(200) for m in range(3)]
    write_new_items(OLD, new, tmp_path / "d", card, family_by_group=True)
    ds = load_dataset(tmp_path / "d", splits=("trn", "tst", "val"))
    assert ds.groups_are_families  # dataset.json says so, for whoever validates a family at a time
    family = {u: u.split("-")[0] for u in ds.test.uids + ds.split("val").uids}
    tested, validated = {family[u] for u in ds.test.uids}, {family[u] for u in ds.split("val").uids}
    assert not tested & validated and len(tested | validated) == 200
    assert 40 <= len(validated) <= 80 and len(ds.split("val")) == 3 * len(validated)
    write_new_items(OLD, new[:300], tmp_path / "half", card, family_by_group=True)  # the first 100 families
    half = load_dataset(tmp_path / "half", splits=("trn", "val")).split("val")
    assert set(half.uids) == {u for u in ds.split("val").uids if int(family[u][1:]) < 100}


def test_new_items_are_byte_identical(tmp_path):
    from gandalf_xmc.data.builders import write_new_items

    card = DatasetCard("toy-new", "toys", "toy", "text", "targets", "none")
    write_new_items(OLD, NEW, tmp_path / "one", card)
    write_new_items(OLD, NEW, tmp_path / "two", card)
    for f in (tmp_path / "one").iterdir():
        assert f.read_bytes() == (tmp_path / "two" / f.name).read_bytes(), f.name


def test_debian_packages_index_parse_by_hand():
    from gandalf_xmc.data.builders import debian_new

    index = (
        "Package: a\nVersion: 1\nDepends: libc6 (>= 2.14), b | c:any\nRecommends: d\n"
        "Description: the a tool\n a long description line: Depends: zzz\n .\n more\nSection: utils\n\n"
        "Package: b\nSource: bsrc (1.0-1)\nPre-Depends: e\nSuggests: f (<< 3) | g\nDescription: b library\nSection: libs\n\n"
        "Package: a\nVersion: 2\nDepends: x\nDescription: a again\n\n"
        "Package: h\nDescription: no relations\n"
    )
    items = {it.uid: it for it in debian_new.parse(index)}
    assert list(items) == ["a", "b", "h"]
    assert items["a"] == Item("a", "the a tool", ("libc6", "b", "c", "d"), "a")  # no Source: its own family
    assert items["b"] == Item("b", "b library", ("e", "f", "g"), "bsrc")
    assert items["h"].targets == ()


def test_new_items_datasets_are_in_the_suite(capsys):
    code, out, err = run_cli(["datasets", "--json"], capsys)
    assert code == 0, err
    rows = {r["name"]: r for r in json.loads(out)}
    assert {n for n, r in rows.items() if r["test_split"] == "new-items"} == {"debian-new-packages", "gene-ontology-new-terms"}
    assert rows["jargon"]["test_split"] == "random"


def test_an_older_build_without_its_validation_split_is_not_available():
    """A new-items set built before it had a validation split is built again, not used without one."""
    path = suite_path("gene-ontology-new-terms")
    path.mkdir(parents=True)
    try:
        for name in ("trn.json.gz", "tst.json.gz"):
            (path / name).write_bytes(b"")
        assert not is_available("gene-ontology-new-terms")
        (path / "val.json.gz").write_bytes(b"")
        assert is_available("gene-ontology-new-terms")
    finally:
        shutil.rmtree(path)


def test_cmake_help_parse_by_hand():
    """Titles are the line above the first underline; the first sentence skips directives and
    reduces roles to what they show; references name items of the same kinds that have a page
    (a manual, an undocumented variable and the page itself are no label); a module's page is its
    .cmake file's comment."""
    from gandalf_xmc.data.builders import cmake_help

    help_, modules = cmake_help.HELP, cmake_help.MODULES
    files = {
        help_ + "variable/CMAKE_BUILD_TYPE.rst": b"CMAKE_BUILD_TYPE\n----------------\n\n.. versionadded:: 3.1\n  Older.\n\n"
        b"Specifies the build type (e.g. :generator:`Ninja`) for :command:`the project <project>`.  More text.\n\n"
        b"See :variable:`CMAKE_CONFIGURATION_TYPES`, :variable:`CMAKE_NOPE`, :manual:`cmake(1)` and "
        b":variable:`CMAKE_BUILD_TYPE`.\n",
        help_ + "variable/CMAKE_CONFIGURATION_TYPES.rst": b"CMAKE_CONFIGURATION_TYPES\n=========================\n\n"
        b"Specifies the available build types.\n\nUses ``;`` lists and :variable:`CMAKE_BUILD_TYPE`.\n",
        help_ + "command/project.rst": b"project\n-------\n\nSet the name of the project.\n\n:module:`FindZLIB` and "
        b":prop_tgt:`~IMPORTED`\n",
        help_ + "generator/Ninja.rst": b"Ninja\n-----\n\nGenerates ``build.ninja`` files.\n",
        help_ + "module/FindZLIB.rst": b".. cmake-module:: ../../Modules/FindZLIB.cmake\n",
        modules
        + "FindZLIB.cmake": b"# licence\n#[=======================================================================[.rst:\n"
        b"FindZLIB\n--------\n\nFind the native ZLIB includes and library.\n\nSee :command:`project`.\n"
        b"#]=======================================================================]\nfind_path(ZLIB)\n",
        help_ + "manual/cmake.1.rst": b"cmake(1)\n********\n\nThe manual. :command:`project`\n",
    }
    items = {i.uid: i for i in cmake_help.parse(files)}
    assert sorted(items) == [
        "command:project",
        "generator:Ninja",
        "module:FindZLIB",
        "variable:CMAKE_BUILD_TYPE",
        "variable:CMAKE_CONFIGURATION_TYPES",
    ]
    build_type = items["variable:CMAKE_BUILD_TYPE"]
    assert build_type.text == "CMAKE_BUILD_TYPE: Specifies the build type (e.g. Ninja) for the project."
    assert build_type.targets == ("generator:Ninja", "command:project", "variable:CMAKE_CONFIGURATION_TYPES")
    assert build_type.group == "variable"
    assert items["variable:CMAKE_CONFIGURATION_TYPES"].targets == ("variable:CMAKE_BUILD_TYPE",)
    assert items["command:project"].targets == ("module:FindZLIB",)  # IMPORTED has no page
    assert items["module:FindZLIB"].text == "FindZLIB: Find the native ZLIB includes and library."
    assert items["module:FindZLIB"].targets == ("command:project",)
    assert items["generator:Ninja"].text == "Ninja: Generates build.ninja files." and items["generator:Ninja"].targets == ()


def test_python_api_parse_by_hand():
    """Items: public functions, classes and methods with a docstring; See Also names resolve in the
    item's class first, then its module, then by full or public name, then as a unique suffix of
    the same library; unknown, ambiguous and other libraries' names are dropped."""
    from gandalf_xmc.data.builders import python_api

    site = python_api.SITE
    files = {
        site + "lib/linalg/_basic.py": b'''
def solve(a, b):
    """Solve a linear system.

    More words.

    See Also
    --------
    solve_banded : banded systems,
        continued here: not_a_name
    lib.linalg.inv, :func:`~lib.stats.mean`
    other.thing : another library
    Solver.run

    Notes
    -----
    not_listed : after the section
    """

def solve_banded(a, b):
    """Solve a banded system."""

def _private():
    """Hidden."""

class Solver:
    """A solver.

    See Also
    ========
    run, solve
    """
    def run(self):
        """Run it.

        See Also
        --------
        mean : the class has none, the module has none: the library's unique one
        """
''',
        site + "lib/linalg/__init__.py": b'def inv(a):\n    """Invert a matrix."""\n',
        site + "lib/stats.py": b'def mean(x):\n    """The mean."""\n\ndef run():\n    """Another run."""\n',
        site + "lib/tests/test_x.py": b'def test_solve():\n    """A test."""\n',
        site + "other/thing.py": b'def thing():\n    """Elsewhere.\n\n    See Also\n    --------\n    mean\n    """\n',
    }
    items = {i.uid: i for i in python_api.parse(files)}
    assert sorted(items) == [
        "lib.linalg._basic.Solver",
        "lib.linalg._basic.Solver.run",
        "lib.linalg._basic.solve",
        "lib.linalg._basic.solve_banded",
        "lib.linalg.inv",
        "lib.stats.mean",
        "lib.stats.run",
        "other.thing.thing",
    ]
    solve = items["lib.linalg._basic.solve"]
    assert solve.text == "lib.linalg.solve: Solve a linear system." and solve.group == "lib"
    assert solve.targets == ("lib.linalg._basic.solve_banded", "lib.linalg.inv", "lib.stats.mean", "lib.linalg._basic.Solver.run")
    # "run" in the class is its own method, though lib.stats.run exists; "solve" is the module's
    assert items["lib.linalg._basic.Solver"].targets == ("lib.linalg._basic.Solver.run", "lib.linalg._basic.solve")
    assert items["lib.linalg._basic.Solver.run"].targets == ("lib.stats.mean",)
    assert items["other.thing.thing"].targets == ()  # only its own library's items
