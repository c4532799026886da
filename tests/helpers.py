"""Helpers of the tests: small hand-made datasets in the field's formats, and running the CLI in
process (exit code, stdout, stderr)."""

from __future__ import annotations

import gzip
import json
import sys
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from gandalf_xmc import cli

# training labels for graphs computed by hand: 4 points x 4 labels; label 3 has no point
Y_HAND = sp.csr_matrix(np.array([[1, 1, 0, 0], [1, 1, 1, 0], [1, 0, 0, 0], [0, 0, 1, 0]], dtype=np.float32))

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


FRUIT = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "peach", "melon", "grape"]


def write_fruit_dataset(directory: Path) -> Path:
    """Ten fruit labels ("apple fruit", ...); 40 training points, four of each fruit with the next one
    ("small apple and pear" -> apple, pear); one test point of each ("fresh apple" -> apple); no filters."""
    train = [
        (f"{size} {w} and {FRUIT[(j + 1) % 10]}", [j, (j + 1) % 10])
        for j, w in enumerate(FRUIT)
        for size in ("small", "big", "ripe", "sweet")
    ]
    test = [(f"fresh {w}", [j]) for j, w in enumerate(FRUIT)]
    return write_tiny_dataset(directory, train=train, labels=[f"{w} fruit" for w in FRUIT], test=test, filters=None)


def run_cli(args: list[str], capsys) -> tuple[int, str, str]:
    old = sys.argv
    sys.argv = ["gandalf", *args]
    try:
        cli.main()
        code = 0
    except SystemExit as exc:
        code = int(exc.code or 0)
    finally:
        sys.argv = old
    out = capsys.readouterr()
    return code, out.out, out.err


def assert_clean_failure(code: int, err: str, *needles: str) -> None:
    assert code == 2, err
    assert "Traceback" not in err
    lines = [line for line in err.splitlines() if line.strip()]
    assert len(lines) == 1, err
    for needle in needles:
        assert needle in lines[0], (needle, lines[0])


def trn_rows(*rows: dict) -> list[dict]:
    return [{"uid": str(i), "title": f"point {i}", **r} for i, r in enumerate(rows)]


def snapshot(root: Path) -> dict:
    """Every file under ``root`` with its size and content hash: what a refused command must not change."""
    import hashlib

    return {
        str(p.relative_to(root)): (p.stat().st_size, hashlib.sha1(p.read_bytes()).hexdigest())
        for p in sorted(root.rglob("*"))
        if p.is_file()
    } | {str(p.relative_to(root)): "dir" for p in sorted(root.rglob("*")) if p.is_dir()}


def refused(capsys, root: Path, args: list[str], message: str) -> None:
    """Run ``args``; expect exit 2, the single line ``error: <message>`` and ``root`` unchanged."""
    before = snapshot(root)
    code, _, err = run_cli(args, capsys)
    lines = [line for line in err.splitlines() if line.strip() and not line.startswith("note:")]
    assert code == 2, err
    assert lines == [f"error: {message}"], err
    assert snapshot(root) == before


def copy_model(model_dir: Path, to: Path) -> Path:
    import shutil

    shutil.copytree(model_dir, to)
    return to
