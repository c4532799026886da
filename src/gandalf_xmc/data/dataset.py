"""The dataset object: texts, float-valued CSR label matrices, label texts and filter pairs."""

from __future__ import annotations

from dataclasses import dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from ..errors import DataFormatError
from ..jsonio import read_json_file, shown
from ..text import words
from .atomic import atomic_directory
from .formats import read_filter_pairs, read_lf_json, read_sparse_text, read_text_lines, write_filter_pairs, write_lf_json
from .presets import propensity_constants, propensity_problem
from .suite import resolve

EMBEDDED_NAME = "debian-bookworm"
AUGMENT_METADATA = "augment.json"
TEST_SPLITS = ("random", "new-items")  # what a dataset.json may say its test split holds
DATASET_CARD = "dataset.json"  # name, domain and propensity constants that travel with a dataset
SPLIT_FILTER_FILES = {"trn": "filter_labels_train.txt", "tst": "filter_labels_test.txt"}


def embedded_dataset_path() -> Path:
    """Directory of the default dataset shipped inside the package (debian-bookworm)."""
    return resolve(None)


@dataclass
class Split:
    """One split: ``texts[i]`` is point i, ``Y[i]`` its (possibly soft) targets, float32 CSR."""

    uids: list[str]
    texts: list[str]
    Y: sp.csr_matrix
    filter_pairs: np.ndarray = field(default_factory=lambda: np.zeros((0, 2), dtype=np.int64))
    groups: list[str] | None = None  # a group key a point (its source, section, ...), when the file has one

    def __len__(self) -> int:
        return len(self.texts)


@dataclass
class XMCDataset:
    """A short-text XMC dataset with label features.

    Attributes:
        name: dataset name (selects propensity constants and presets).
        label_uids, label_texts: label i's id and text (its "label feature").
        splits: ``"trn"``/``"tst"`` (or others) -> :class:`Split`.
        n_original_train: number of leading training points that are original; the rest are
            augmentation points. Propensities and frequency bins use only the original ones.
        path: where it was read from (None if built in memory).
        propensity: A and B of the inverse propensity model when the dataset names them (its
            ``dataset.json``); otherwise they come from the name's preset.
        domain: what the data is about, when the dataset says.
        test_split: what its test split holds, as its ``dataset.json`` says: ``random`` (points of
            the training release) or ``new-items`` (items a later release adds).
        groups_are_families: whether a point's group names the items built together (a source
            package's), as its ``dataset.json`` says (else the suite, by the dataset's name).
    """

    name: str
    label_uids: list[str]
    label_texts: list[str]
    splits: dict[str, Split]
    n_original_train: int | None = None
    path: Path | None = None
    propensity: tuple[float, float] | None = None
    domain: str | None = None
    notes: list[str] = field(default_factory=list)  # what loading decided on its own (e.g. derived filter pairs)
    test_split: str = "random"
    groups_are_families: bool = False

    @property
    def n_labels(self) -> int:
        return len(self.label_texts)

    @property
    def train(self) -> Split:
        return self.split("trn")

    @property
    def test(self) -> Split:
        return self.split("tst")

    def split(self, name: str) -> Split:
        try:
            return self.splits[name]
        except KeyError:
            where = self.path if self.path is not None else self.name
            raise DataFormatError(where, None, f"dataset has no '{name}' split") from None

    @property
    def n_original(self) -> int:
        """How many leading training points are original (all of them unless ``augment.json`` says)."""
        return self.n_original_train if self.n_original_train is not None else len(self.train)

    def original_train(self) -> Split:
        """The original training points (a directory written by ``gandalf augment`` holds its label
        points after them)."""
        n = self.n_original
        if n == len(self.train):
            return self.train
        return Split(self.train.uids[:n], self.train.texts[:n], self.original_train_Y(), self.train.filter_pairs)

    def original_train_Y(self) -> sp.csr_matrix:
        """Training labels of the original points only (never the augmented ones)."""
        return self.train.Y[: self.n_original]

    def label_frequencies(self) -> np.ndarray:
        """Training positives of each label, from the original training points."""
        Y = self.original_train_Y()
        return np.bincount(Y.indices[Y.data > 0], minlength=self.n_labels).astype(np.int64)

    def propensity_constants(self, a: float | None = None, b: float | None = None) -> tuple[float, float]:
        """A and B of the inverse propensity model for this dataset (overrides win, then the
        dataset's own card, then the preset of its name)."""
        if self.propensity is not None:
            a = self.propensity[0] if a is None else a
            b = self.propensity[1] if b is None else b
        return propensity_constants(self.name, a, b)


def find_split_file(directory: Path, stem: str) -> Path | None:
    """``{stem}.json.gz`` or ``{stem}.json`` in ``directory``, if present."""
    for suffix in (".json.gz", ".json"):
        candidate = directory / f"{stem}{suffix}"
        if candidate.exists():
            return candidate
    return None


def _read_split_text_layout(directory: Path, split: str, n_labels: int) -> Split:
    texts_path = directory / f"{split}_X.txt"
    y_path = directory / f"{split}_X_Y.txt"
    texts = read_text_lines(texts_path)
    if not texts:
        raise DataFormatError(texts_path, None, "file is empty (no points)")
    Y = read_sparse_text(y_path, expect_shape=(None, n_labels), relevance=True)
    if Y.shape[0] != len(texts):  # either file may be at fault: the message names both
        raise DataFormatError(
            texts_path,
            None,
            f"{len(texts):,} texts (lines) but {y_path.name} has {Y.shape[0]:,} rows: the two files need one line for each point",
        )
    return Split([str(i) for i in range(len(texts))], texts, Y)


def load_dataset(
    path: str | Path | None = None, splits: tuple[str, ...] = ("trn", "tst"), name: str | None = None, derive_filters: bool = True
) -> XMCDataset:
    """Load a dataset directory or a suite dataset by name (the default dataset if ``path`` is None).

    Two layouts are understood:

    * LF raw: ``lbl.json[.gz]`` and ``{split}.json[.gz]`` (``uid``, ``title``, ``target_ind``,
      optional ``target_rel``);
    * text: ``lbl_X.txt`` (or ``Y.txt``) with one label text a line, and for each split
      ``{split}_X.txt`` (texts) plus ``{split}_X_Y.txt`` (sparse matrix text).

    ``filter_labels_train.txt`` / ``filter_labels_test.txt`` are read when present. When a split
    has none and ``derive_filters`` is set, the points that are themselves a label (same uid, or
    the same text, see :func:`self_label_pairs`) give its filter pairs, and ``notes`` says so. An
    ``augment.json`` written by ``gandalf augment`` marks how many training points are original.
    A ``dataset.json`` gives the dataset's name, domain and propensity constants.
    """
    directory = resolve(path)
    if not directory.exists():
        from .suite import suggest

        raise DataFormatError(directory, None, "dataset directory not found" + suggest(str(directory)))
    if not directory.is_dir():
        raise DataFormatError(directory, None, "is not a directory")
    card = _read_card(directory / DATASET_CARD)
    meta = _read_augment_metadata(directory / AUGMENT_METADATA)
    label_uids, label_texts, layout = _read_labels(directory)
    n_labels = len(label_texts)
    loaded = {split: _read_split(directory, split, n_labels, layout) for split in splits}
    n_original = meta.get("n_original_train")
    if n_original is not None and "trn" in loaded and n_original > len(loaded["trn"]):
        raise DataFormatError(
            directory / AUGMENT_METADATA,
            None,
            f"n_original_train is {n_original} but the training split has {len(loaded['trn'])} points",
        )
    notes = []
    for split, data in loaded.items():
        if layout == "json":
            n_dup = len(data.uids) - len(set(data.uids))
            if n_dup:
                notes.append(f"{split}: {n_dup:,} points share a uid with an earlier point (kept: points are rows, not ids)")
        n_points = n_original if split == "trn" and n_original is not None else len(data)
        note = _set_filter_pairs(
            directory, split, data, n_points, label_uids if layout == "json" else None, label_texts, derive_filters
        )
        notes += [note] if note else []
    dataset_name = name or meta.get("source_name") or card.get("name") or directory.resolve().name
    propensity = card.get("propensity") or meta.get("propensity")
    ab = (float(propensity["A"]), float(propensity["B"])) if propensity else None
    test_split = card.get("test_split", "random")
    if test_split not in TEST_SPLITS:
        allowed = ", ".join(TEST_SPLITS)
        raise DataFormatError(directory / DATASET_CARD, None, f"test_split must be one of {allowed}, got {test_split!r}")
    families = card.get("groups_are_families")
    if families is None:  # a copy built before dataset.json said so: the suite knows it by name
        from .suite import groups_are_families

        families = groups_are_families(dataset_name)
    if not isinstance(families, bool):
        raise DataFormatError(directory / DATASET_CARD, None, f"groups_are_families must be true or false, got {families!r}")
    return XMCDataset(
        dataset_name, label_uids, label_texts, loaded, n_original, directory, ab, card.get("domain"), notes, test_split, families
    )


def _read_labels(directory: Path) -> tuple[list[str], list[str], str]:
    """The labels' uids and texts, and the layout they say the dataset has (``json`` or ``text``)."""
    lbl_path = find_split_file(directory, "lbl")
    if lbl_path is not None:
        labels = read_lf_json(lbl_path, require_targets=False, unique_uids=True)
        return labels.uids, labels.texts, "json"
    txt = next((p for p in (directory / "lbl_X.txt", directory / "Y.txt") if p.exists()), None)
    if txt is None:
        raise DataFormatError(
            directory / "lbl.json.gz", None, "missing label file (expected lbl.json.gz, lbl.json, lbl_X.txt or Y.txt)"
        )
    label_texts = read_text_lines(txt)
    if not label_texts:
        raise DataFormatError(txt, None, "file is empty (no labels)")
    return [str(i) for i in range(len(label_texts))], label_texts, "text"


def _read_split(directory: Path, split: str, n_labels: int, layout: str) -> Split:
    if layout == "text":
        return _read_split_text_layout(directory, split, n_labels)
    split_path = find_split_file(directory, split)
    if split_path is None:
        raise DataFormatError(directory / f"{split}.json.gz", None, f"missing '{split}' split file")
    rec = read_lf_json(split_path, n_labels, require_targets=True)
    assert rec.Y is not None
    return Split(rec.uids, rec.texts, rec.Y, groups=rec.groups)


def _set_filter_pairs(
    directory: Path,
    split: str,
    data: Split,
    n_points: int,
    label_uids: list[str] | None,
    label_texts: list[str],
    derive: bool,
) -> str | None:
    """Sets ``data.filter_pairs`` from the split's filter file, else (``derive``) from its first
    ``n_points`` points that are themselves a label; returns a note when pairs were derived."""
    filter_file = directory / SPLIT_FILTER_FILES.get(split, f"filter_labels_{split}.txt")
    if filter_file.exists():
        data.filter_pairs = read_filter_pairs(filter_file, len(data), len(label_texts))
        return None
    if not derive:
        return None
    uids = data.uids[:n_points] if label_uids is not None else None
    data.filter_pairs = self_label_pairs(uids, data.texts[:n_points], label_uids, label_texts)
    if not data.filter_pairs.size:
        return None
    return (
        f"{split}: no {filter_file.name}; {len(data.filter_pairs):,} points are themselves a label "
        f"(same uid or text): those pairs are filtered as the file would (--no-derive-filters: keep them)"
    )


def _normalised(text: str) -> str:
    return " ".join(words(text))


def self_label_pairs(
    uids: list[str] | None, texts: list[str], label_uids: list[str] | None, label_texts: list[str]
) -> np.ndarray:
    """``(row, label)`` pairs where point ``row`` is itself label ``label``: the same uid (when
    both sides have real ids) or the same text once lowercased and cut into words. A text shared
    by several labels names none of them, so it gives no pair."""
    pairs = []
    if uids is not None and label_uids is not None:
        by_uid = {u: j for j, u in enumerate(label_uids)}
        pairs += [(i, by_uid[u]) for i, u in enumerate(uids) if u in by_uid]
    by_text: dict[str, int] = {}
    for j, t in enumerate(label_texts):
        key = _normalised(t)
        if key:
            by_text[key] = -1 if key in by_text else j
    pairs += [(i, j) for i, t in enumerate(texts) if (j := by_text.get(_normalised(t), -1)) >= 0]
    return np.unique(np.array(pairs, dtype=np.int64).reshape(-1, 2), axis=0)


def _read_augment_metadata(path: Path) -> dict:
    """``augment.json`` (empty when absent), checked: ``n_original_train`` is a positive integer."""
    if not path.exists():
        return {}
    meta = read_json_file(path)
    if not isinstance(meta, dict):
        raise DataFormatError(path, None, "expected a JSON object")
    n = meta.get("n_original_train")
    if n is not None and (not isinstance(n, int) or isinstance(n, bool) or n < 1):
        raise DataFormatError(path, None, f"n_original_train must be a positive integer, got {shown(n)}")
    return meta


def _read_card(path: Path) -> dict:
    """A dataset's ``dataset.json`` (empty when absent); a bad one is a :class:`DataFormatError`."""
    if not path.exists():
        return {}
    card = read_json_file(path)
    if not isinstance(card, dict):
        raise DataFormatError(path, None, "expected a JSON object")
    prop = card.get("propensity")
    if prop is not None:
        if not isinstance(prop, dict):
            raise DataFormatError(path, None, '\'propensity\' must be {"A": number > 0, "B": number >= 0}')
        problem = propensity_problem(prop.get("A"), prop.get("B"))
        if problem:
            raise DataFormatError(path, None, f"'propensity': {problem}")
    return card


def sample_dataset(ds: XMCDataset, n_train: int, n_test: int, seed: int = 0) -> XMCDataset:
    """A small dataset drawn from ``ds`` (for quick runs): ``n_train`` original training points
    and ``n_test`` test points drawn at random (seeded), and only the labels that those training
    points carry, renumbered in their original order. Test points keep the labels that survive;
    those left without any are dropped. Filter pairs follow their rows and labels.
    """
    rng = np.random.default_rng(seed)
    n_orig = ds.n_original
    train_rows = np.sort(rng.choice(n_orig, size=min(n_train, n_orig), replace=False))
    Y = ds.original_train_Y()[train_rows]
    labels = np.unique(Y.indices[Y.data > 0])
    new_label = np.full(ds.n_labels, -1, dtype=np.int64)
    new_label[labels] = np.arange(labels.size)
    splits = {"trn": _sample_split(ds.train, train_rows, labels, new_label)}
    if "tst" in ds.splits:
        kept = np.flatnonzero(np.diff(ds.test.Y[:, labels].tocsr().indptr) > 0)
        test_rows = np.sort(rng.choice(kept, size=min(n_test, kept.size), replace=False))
        splits["tst"] = _sample_split(ds.test, test_rows, labels, new_label)
    return XMCDataset(ds.name, [ds.label_uids[j] for j in labels], [ds.label_texts[j] for j in labels], splits)


def _sample_split(split: Split, rows: np.ndarray, labels: np.ndarray, new_label: np.ndarray) -> Split:
    new_row = np.full(len(split), -1, dtype=np.int64)
    new_row[rows] = np.arange(rows.size)
    fp = split.filter_pairs.reshape(-1, 2)
    fp = fp[(new_row[fp[:, 0]] >= 0) & (new_label[fp[:, 1]] >= 0)]
    return Split(
        [split.uids[i] for i in rows],
        [split.texts[i] for i in rows],
        sp.csr_matrix(split.Y[rows][:, labels], dtype=np.float32),
        np.stack([new_row[fp[:, 0]], new_label[fp[:, 1]]], axis=1).astype(np.int64),
    )


def write_dataset(ds: XMCDataset, directory: str | Path, force: bool = False) -> Path:
    """Write ``ds`` as an LF raw dataset directory (``lbl.json.gz``, ``{split}.json.gz``,
    ``filter_labels_*.txt``), atomically; :func:`load_dataset` reads it back. ``directory`` must
    be new or empty unless ``force``."""
    with atomic_directory(directory, force) as staging:
        write_lf_json(staging / "lbl.json.gz", ds.label_uids, ds.label_texts, None)
        for name, split in ds.splits.items():
            write_lf_json(staging / f"{name}.json.gz", split.uids, split.texts, split.Y)
            write_filter_pairs(staging / SPLIT_FILTER_FILES.get(name, f"filter_labels_{name}.txt"), split.filter_pairs)
    return Path(directory)
