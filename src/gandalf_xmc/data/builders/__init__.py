"""Builders of the dev suite's datasets: each turns named Debian package versions into an LF
dataset directory, byte for byte the same on every run (see :mod:`..suite` for the list).

Every dataset here is a set of *related items*: an item has a short text and points at other
items (a synset at its hypernyms, a manual page at its SEE ALSO pages, ...). The items that are
pointed at become the labels, with their own text as label feature, and the items that point at
something become the data points, split 70/30 at random (seed 0). An item that is both a point
and a label is its own label's text, so each such (point, own label) pair is written to the
split's filter file, as the Extreme Classification Repository does.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import orjson

from ..atomic import atomic_directory
from ..formats import write_lines
from .debian_archive import DebianPackage

TEST_SHARE = 0.3
SPLIT_SEED = 0
NEW_ITEMS_VALID_SHARE = 0.3  # of a new-items set's new items (whole families): validation, not test


@dataclass(frozen=True)
class Item:
    """A related item: its id, its short text, the ids it points at and a group key (the item's
    source file, section or category, for splits that keep a group together)."""

    uid: str
    text: str
    targets: tuple[str, ...]
    group: str = ""


@dataclass(frozen=True)
class DatasetCard:
    """What a built dataset says about itself (written to ``dataset.json`` and its README)."""

    name: str
    domain: str
    summary: str
    text: str  # how a point's text is made
    labels: str  # how its labels are chosen
    license: str
    propensity_a: float = 0.55
    propensity_b: float = 1.5
    propensity_why: str = (
        "A = 0.55, B = 1.5, the constants Jain et al. (KDD'16) give for datasets other than "
        "Amazon and Wikipedia (fitting them needs click data, which this source does not have)"
    )
    sources: tuple[DebianPackage, ...] = field(default_factory=tuple)
    sources_heading: str = "Built from these Debian packages (bookworm):"
    group: str = ""  # what an item's group is, for the README (default: "<domain> group")

    def __post_init__(self) -> None:
        if not self.group:
            object.__setattr__(self, "group", f"{self.domain} group")


def _normalise(text: str) -> str:
    return " ".join(text.split())


def _lines(rows: Iterable[dict]) -> Iterable[bytes]:
    yield b"".join(orjson.dumps(r) + b"\n" for r in rows)


def _texts(items: list[Item]) -> dict[str, Item]:
    """Items by uid, their texts' white space folded; a repeated uid is an error."""
    by_uid: dict[str, Item] = {}
    for item in items:
        if item.uid in by_uid:
            raise ValueError(f"duplicate item uid {item.uid!r}")
        by_uid[item.uid] = Item(item.uid, _normalise(item.text), item.targets, item.group)
    return by_uid


def write_related_items(items: list[Item], out_dir: str | Path, card: DatasetCard, force: bool = False) -> dict:
    """Write ``items`` as an LF dataset directory (``trn/tst/lbl.json.gz``, filter files,
    ``dataset.json``, ``stats.json``, ``README.md``); returns the figures written to ``stats.json``."""
    by_uid = _texts(items)
    has_text = {u for u, it in by_uid.items() if it.text}
    targets = {u: sorted({t for t in it.targets if t in has_text and t != u}) for u, it in by_uid.items() if it.text}
    label_uids = sorted({t for ts in targets.values() for t in ts})
    points = sorted(u for u, ts in targets.items() if ts)
    rng = np.random.default_rng(SPLIT_SEED)
    perm = rng.permutation(len(points))
    n_test = int(round(TEST_SHARE * len(points)))
    splits = {
        "tst": [points[i] for i in np.sort(perm[:n_test]).tolist()],
        "trn": [points[i] for i in np.sort(perm[n_test:]).tolist()],
    }
    split = f"{int(100 * (1 - TEST_SHARE))}/{int(100 * TEST_SHARE)} at random over points, seed {SPLIT_SEED}"
    return _write(
        out_dir,
        card,
        force,
        splits,
        {u: by_uid[u].text for u in label_uids},
        {u: (by_uid[u].text, targets[u], by_uid[u].group) for u in points},
        split,
        "random",
    )


def write_new_items(
    old: list[Item],
    new: list[Item],
    out_dir: str | Path,
    card: DatasetCard,
    force: bool = False,
    max_label_points: int | None = None,
    family_by_group: bool = False,
) -> dict:
    """A *new items* dataset: train on every item of the older release ``old`` that points at
    something, in its label space (the old items pointed at, with their old texts; labels with more
    than ``max_label_points`` training points dropped, as trivial head labels); the items of the
    newer release ``new`` that the old one does not have, with their new texts and those of their
    targets that are old labels, are the ``val`` and ``tst`` splits: a share
    :data:`NEW_ITEMS_VALID_SHARE` of their families (an item's group with ``family_by_group``, else
    the item alone), drawn by a hash of the family's name, validates (what a deployment can label
    of the new items it meets), the rest tests. Their filter files are written empty: a new item is
    no label of the old space, and a label that only shares its text (an older build, a sibling) is
    a wrong answer, as it is in a deployment. Returns the figures of ``stats.json``."""
    old_by_uid, new_by_uid = _texts(old), _texts(new)
    has_text = {u for u, it in old_by_uid.items() if it.text}
    targets = {u: sorted({t for t in it.targets if t in has_text and t != u}) for u, it in old_by_uid.items() if it.text}
    if max_label_points is not None:
        counts: dict[str, int] = {}
        for ts in targets.values():
            for t in ts:
                counts[t] = counts.get(t, 0) + 1
        targets = {u: [t for t in ts if counts[t] <= max_label_points] for u, ts in targets.items()}
    label_uids = sorted({t for ts in targets.values() for t in ts})
    labels = set(label_uids)
    train = sorted(u for u, ts in targets.items() if ts)
    new_targets = {
        u: sorted({t for t in it.targets if t in labels}) for u, it in new_by_uid.items() if u not in old_by_uid and it.text
    }
    new_items = sorted(u for u, ts in new_targets.items() if ts)
    in_valid = {u: _drawn(new_by_uid[u].group if family_by_group else u, NEW_ITEMS_VALID_SHARE) for u in new_items}
    points = {u: (old_by_uid[u].text, targets[u], old_by_uid[u].group) for u in train}
    points.update({u: (new_by_uid[u].text, new_targets[u], new_by_uid[u].group) for u in new_items})
    family = "group (family)" if family_by_group else "item"
    split = (
        "new items: trains on every item of the older release; the items that are new in the newer one "
        f"validate (val, {int(100 * NEW_ITEMS_VALID_SHARE)}% of them by {family}, drawn by a SHA-256 of its name) "
        "or test (tst, the rest); none of them is a label, so their filter files are empty"
    )
    return _write(
        out_dir,
        card,
        force,
        {"tst": [u for u in new_items if not in_valid[u]], "val": [u for u in new_items if in_valid[u]], "trn": train},
        {u: old_by_uid[u].text for u in label_uids},
        points,
        split,
        "new-items",
        filter_held_out=False,
        groups_are_families=family_by_group,
    )


def _drawn(family: str, share: float) -> bool:
    """Whether ``family`` falls in a share ``share`` of names: a hash, so the draw does not depend
    on which other families exist (a later rebuild with more items keeps every earlier draw)."""
    digest = hashlib.sha256(family.encode("utf-8")).digest()
    return int.from_bytes(digest[:8], "big") < share * 2**64


def _write(
    out_dir,
    card: DatasetCard,
    force: bool,
    splits: dict[str, list[str]],
    labels: dict[str, str],
    points: dict[str, tuple[str, list[str], str]],
    split: str,
    test_split: str,
    filter_held_out: bool = True,
    groups_are_families: bool = False,
) -> dict:
    """The dataset directory: ``splits`` (point uids of ``trn``, ``tst`` and perhaps ``val``),
    ``labels`` (uid -> text, in label-id order), ``points`` (uid -> text, target uids, group).
    ``filter_held_out`` False: the filter files of every split but ``trn`` are empty (new items);
    ``groups_are_families``: ``dataset.json`` says that a group names the items built together."""
    label_id = {u: i for i, u in enumerate(labels)}
    filter_names = {"trn": "filter_labels_train.txt", "tst": "filter_labels_test.txt", "val": "filter_labels_val.txt"}
    with atomic_directory(out_dir, force) as staging:
        write_lines(staging / "lbl.json.gz", _lines({"uid": u, "title": t} for u, t in labels.items()))
        for name, uids in splits.items():
            write_lines(
                staging / f"{name}.json.gz",
                _lines(
                    {"uid": u, "title": points[u][0], "target_ind": [label_id[t] for t in points[u][1]], "group": points[u][2]}
                    for u in uids
                ),
            )
            keep = filter_held_out or name == "trn"
            pairs = "".join(f"{r} {label_id[u]}\n" for r, u in enumerate(uids) if u in label_id) if keep else ""
            (staging / filter_names[name]).write_text(pairs)
        meta = {
            "name": card.name,
            "domain": card.domain,
            "summary": card.summary,
            "propensity": {"A": card.propensity_a, "B": card.propensity_b, "why": card.propensity_why},
            "text": card.text,
            "labels": card.labels,
            "license": card.license,
            "split": split,
            **({"test_split": test_split} if test_split != "random" else {}),  # random: as the suite was built
            **({"groups_are_families": True} if groups_are_families else {}),
            # the pins' sizes (what a download stops at) are left out: the suite's files predate them
            "sources": [{k: v for k, v in asdict(p).items() if k != "size"} for p in card.sources],
            "rebuild": f"gandalf datasets build {card.name} --out DIR",
        }
        (staging / "dataset.json").write_text(json.dumps(meta, indent=1) + "\n")
        from ..dataset import load_dataset
        from ..stats import dataset_stats

        stats = dataset_stats(load_dataset(staging, name=card.name))
        stats = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in stats.items()}
        if "val" in splits:
            stats["N_valid"] = len(splits["val"])
        stats["points_that_are_labels"] = sum(1 for uids in splits.values() for u in uids if u in label_id)
        (staging / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
        (staging / "README.md").write_text(_readme(card, meta, stats))
    return stats


def _readme(card: DatasetCard, meta: dict, stats: dict) -> str:
    rows = [
        (
            ("train / validation / test points", f"{stats['N']:,} / {stats['N_valid']:,} / {stats.get('N_test', 0):,}")
            if "N_valid" in stats
            else ("train / test points", f"{stats['N']:,} / {stats.get('N_test', 0):,}")
        ),
        ("labels", f"{stats['L']:,}"),
        ("avg labels per train point", f"{stats['ALpP']:.2f}"),
        ("avg train points per label", f"{stats['APpL']:.2f}"),
        ("labels with <= 5 train positives", f"{stats['labels_le5_pct']:.1f}%"),
        ("labels with 0 train positives", f"{stats['labels_0_pct']:.1f}%"),
        ("avg words per text", f"{stats['AWpP']:.2f}"),
        ("points that are also labels", f"{stats['points_that_are_labels']:,}"),
    ]
    sources = "\n".join(f"- `{p.name}` {p.version} (`{p.pool}`, SHA-256 `{p.sha256}`)" for p in card.sources)
    table = "\n".join(f"| {a} | {b} |" for a, b in rows)
    return f"""# {card.name}: {card.summary}

Domain: {card.domain}. License: {card.license}.

- point text: {card.text}
- labels: {card.labels}; label feature: the label item's own text (`lbl.json.gz`, line i = label i)
- split: {meta["split"]}; `group` in the split files is the item's {card.group} (for group splits)
- filter files: `row label` pairs where the point is itself that label; removed before scoring
- propensity: {card.propensity_why}

| figure | value |
| --- | --- |
{table}

{card.sources_heading}
{sources}

Rebuild it byte for byte: `{meta["rebuild"]}`.
"""
