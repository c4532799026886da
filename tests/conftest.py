"""Small hand-made datasets written in the field's formats."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import pytest

# 4 labels; label 3 has no training positives.
LABELS = ["red apple", "green apple", "apple pie", "blue whale"]
TRAIN = [  # (title, target_ind)
    ("fresh red apple", [0, 1]),
    ("apple pie recipe with green apple", [0, 1, 2]),
    ("red apple juice", [0]),
    ("homemade apple pie", [2]),
]
TEST = [
    ("red apple slices", [0, 1]),
    ("green apple pie", [1, 2]),
    ("whale watching", [3]),
]


def write_json_lines(path: Path, rows: list[dict], gz: bool = True) -> Path:
    text = "".join(json.dumps(r) + "\n" for r in rows)
    if gz:
        with gzip.open(path, "wt", encoding="utf-8") as fh:
            fh.write(text)
    else:
        path.write_text(text)
    return path


def write_tiny_dataset(directory: Path, *, train=TRAIN, test=TEST, labels=LABELS, filters: str | None = "2 3\n") -> Path:
    directory.mkdir(parents=True, exist_ok=True)
    write_json_lines(directory / "lbl.json.gz", [{"uid": f"L{i}", "title": t} for i, t in enumerate(labels)])
    write_json_lines(directory / "trn.json.gz", [{"uid": f"T{i}", "title": t, "target_ind": y} for i, (t, y) in enumerate(train)])
    write_json_lines(directory / "tst.json.gz", [{"uid": f"S{i}", "title": t, "target_ind": y} for i, (t, y) in enumerate(test)])
    if filters is not None:
        (directory / "filter_labels_test.txt").write_text(filters)
    return directory


@pytest.fixture
def tiny_dir(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "tiny")
