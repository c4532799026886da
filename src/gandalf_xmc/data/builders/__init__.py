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
    propensity_why: str = ("A = 0.55, B = 1.5, the constants Jain et al. (KDD'16) give for datasets other than "
                           "Amazon and Wikipedia (fitting them needs click data, which this source does not have)")
    sources: tuple[DebianPackage, ...] = field(default_factory=tuple)


def _normalise(text: str) -> str:
    return " ".join(text.split())


def _lines(rows: Iterable[dict]) -> Iterable[bytes]:
    yield b"".join(orjson.dumps(r) + b"\n" for r in rows)


def write_related_items(items: list[Item], out_dir: str | Path, card: DatasetCard, force: bool = False) -> dict:
    """Write ``items`` as an LF dataset directory (``trn/tst/lbl.json.gz``, filter files,
    ``dataset.json``, ``stats.json``, ``README.md``); returns the figures written to ``stats.json``."""
    by_uid: dict[str, Item] = {}
    for item in items:
        if item.uid in by_uid:
            raise ValueError(f"duplicate item uid {item.uid!r}")
        by_uid[item.uid] = Item(item.uid, _normalise(item.text), item.targets, item.group)
    has_text = {u for u, it in by_uid.items() if it.text}
    targets = {u: sorted({t for t in it.targets if t in has_text and t != u}) for u, it in by_uid.items() if it.text}
    label_uids = sorted({t for ts in targets.values() for t in ts})
    label_id = {u: i for i, u in enumerate(label_uids)}
    points = sorted(u for u, ts in targets.items() if ts)
    rng = np.random.default_rng(SPLIT_SEED)
    perm = rng.permutation(len(points))
    n_test = int(round(TEST_SHARE * len(points)))
    splits = {"tst": np.sort(perm[:n_test]), "trn": np.sort(perm[n_test:])}
    filter_names = {"trn": "filter_labels_train.txt", "tst": "filter_labels_test.txt"}
    with atomic_directory(out_dir, force) as staging:
        write_lines(staging / "lbl.json.gz", _lines({"uid": u, "title": by_uid[u].text} for u in label_uids))
        for split, rows in splits.items():
            uids = [points[i] for i in rows.tolist()]
            write_lines(staging / f"{split}.json.gz", _lines(
                {"uid": u, "title": by_uid[u].text, "target_ind": [label_id[t] for t in targets[u]],
                 "group": by_uid[u].group} for u in uids))
            pairs = "".join(f"{r} {label_id[u]}\n" for r, u in enumerate(uids) if u in label_id)
            (staging / filter_names[split]).write_text(pairs)
        meta = {"name": card.name, "domain": card.domain, "summary": card.summary,
                "propensity": {"A": card.propensity_a, "B": card.propensity_b, "why": card.propensity_why},
                "text": card.text, "labels": card.labels, "license": card.license,
                "split": f"{int(100 * (1 - TEST_SHARE))}/{int(100 * TEST_SHARE)} at random over points, seed {SPLIT_SEED}",
                "sources": [asdict(p) for p in card.sources],
                "rebuild": f"gandalf datasets build {card.name} --out DIR"}
        (staging / "dataset.json").write_text(json.dumps(meta, indent=1) + "\n")
        from ..dataset import load_dataset
        from ..stats import dataset_stats

        stats = dataset_stats(load_dataset(staging, name=card.name))
        stats = {k: (round(v, 4) if isinstance(v, float) else v) for k, v in stats.items()}
        stats["points_that_are_labels"] = sum(1 for u in points if u in label_id)
        (staging / "stats.json").write_text(json.dumps(stats, indent=1) + "\n")
        (staging / "README.md").write_text(_readme(card, meta, stats))
    return stats


def _readme(card: DatasetCard, meta: dict, stats: dict) -> str:
    rows = [("train / test points", f"{stats['N']:,} / {stats.get('N_test', 0):,}"), ("labels", f"{stats['L']:,}"),
            ("avg labels per train point", f"{stats['ALpP']:.2f}"), ("avg train points per label", f"{stats['APpL']:.2f}"),
            ("labels with <= 5 train positives", f"{stats['labels_le5_pct']:.1f}%"),
            ("labels with 0 train positives", f"{stats['labels_0_pct']:.1f}%"),
            ("avg words per text", f"{stats['AWpP']:.2f}"),
            ("points that are also labels", f"{stats['points_that_are_labels']:,}")]
    sources = "\n".join(f"- `{p.name}` {p.version} (`{p.pool}`, SHA-256 `{p.sha256}`)" for p in card.sources)
    table = "\n".join(f"| {a} | {b} |" for a, b in rows)
    return f"""# {card.name}: {card.summary}

Domain: {card.domain}. License: {card.license}.

- point text: {card.text}
- labels: {card.labels}; label feature: the label item's own text (`lbl.json.gz`, line i = label i)
- split: {meta['split']}; `group` in `trn/tst.json.gz` is the item's {card.domain} group (for group splits)
- filter files: `row label` pairs where the point is itself that label; removed before scoring
- propensity: {card.propensity_why}

| figure | value |
| --- | --- |
{table}

Built from these Debian packages (bookworm):
{sources}

Rebuild it byte for byte: `{meta['rebuild']}`.
"""
