"""Bad input: one clear error line naming file, line and problem; exit 2; no traceback; no output."""

from __future__ import annotations

import gzip
import json

import pytest

from helpers import assert_clean_failure, run_cli, trn_rows, write_json_lines, write_tiny_dataset

BAD_TRAIN = {
    "malformed_json": (
        '{"uid": "0", "title": "a", "target_ind": [0]}\n{"uid": "1", "title": "b", "target_ind": [1\n',
        "trn.json.gz:2",
        "malformed JSON",
    ),
    "label_too_large": (trn_rows({"target_ind": [0]}, {"target_ind": [1, 4]}), "trn.json.gz:2", "label id 4 is out of range"),
    "label_negative": (trn_rows({"target_ind": [0]}, {"target_ind": [-1]}), "trn.json.gz:2", "label id -1 is negative"),
    "rel_length": (
        trn_rows({"target_ind": [0, 1], "target_rel": [1.0]}),
        "trn.json.gz:1",
        "'target_rel' has 1 values but 'target_ind' has 2",
    ),
    "rel_nan": (trn_rows({"target_ind": [0]}, {"target_ind": [1], "target_rel": [float("nan")]}), "trn.json.gz:2", "not finite"),
    "rel_negative": (trn_rows({"target_ind": [0], "target_rel": [-0.5]}), "trn.json.gz:1", "outside [0, 1]"),
    "rel_above_one": (trn_rows({"target_ind": [0]}, {"target_ind": [2], "target_rel": [1.5]}), "trn.json.gz:2", "outside [0, 1]"),
    "not_integer": (trn_rows({"target_ind": [0.5]}), "trn.json.gz:1", "not an integer"),
    "missing_title": ([{"uid": "0", "target_ind": [0]}], "trn.json.gz:1", "'title'"),
}


@pytest.mark.parametrize("case", sorted(BAD_TRAIN))
def test_augment_rejects_bad_training_file(tmp_path, capsys, case):
    content, where, problem = BAD_TRAIN[case]
    d = write_tiny_dataset(tmp_path / "ds")
    trn = d / "trn.json.gz"
    if isinstance(content, str):
        with gzip.open(trn, "wt") as fh:
            fh.write(content)
    else:
        with gzip.open(trn, "wt") as fh:
            fh.write("".join(json.dumps(r) + "\n" for r in content))
    out = tmp_path / "out"
    code, _, err = run_cli(["augment", "--data", str(d), "--out", str(out)], capsys)
    assert_clean_failure(code, err, where, problem)
    assert not out.exists()
    assert sorted(p.name for p in tmp_path.iterdir()) == ["ds"]  # no staging leftovers


def test_truncated_gzip(tmp_path, capsys):
    d = write_tiny_dataset(tmp_path / "ds")
    rows = trn_rows(*({"target_ind": [i % 4]} for i in range(2000)))
    write_json_lines(d / "trn.json.gz", rows)
    data = (d / "trn.json.gz").read_bytes()
    (d / "trn.json.gz").write_bytes(data[: len(data) // 2])
    code, _, err = run_cli(["augment", "--data", str(d), "--out", str(tmp_path / "out")], capsys)
    assert_clean_failure(code, err, "trn.json.gz:", "truncated gzip")
    assert not (tmp_path / "out").exists()


def test_missing_label_file(tmp_path, capsys):
    d = write_tiny_dataset(tmp_path / "ds")
    (d / "lbl.json.gz").unlink()
    code, _, err = run_cli(["augment", "--data", str(d), "--out", str(tmp_path / "out")], capsys)
    assert_clean_failure(code, err, "lbl.json.gz", "missing label file")


def test_empty_split(tmp_path, capsys):
    d = write_tiny_dataset(tmp_path / "ds")
    with gzip.open(d / "trn.json.gz", "wt") as fh:
        fh.write("")
    code, _, err = run_cli(["augment", "--data", str(d), "--out", str(tmp_path / "out")], capsys)
    assert_clean_failure(code, err, "trn.json.gz", "empty")


def test_unreadable_paths(tmp_path, capsys):
    code, _, err = run_cli(["stats", "--data", str(tmp_path / "nope")], capsys)
    assert_clean_failure(code, err, "nope", "not found")
    d = write_tiny_dataset(tmp_path / "ds")
    (d / "trn.json.gz").unlink()
    (d / "trn.json.gz").mkdir()
    code, _, err = run_cli(["stats", "--data", str(d)], capsys)
    assert_clean_failure(code, err, "trn.json.gz", "directory")


def test_prediction_header_disagrees_with_rows(tmp_path, capsys):
    d = write_tiny_dataset(tmp_path / "ds")
    pred = tmp_path / "pred.txt"
    pred.write_text("3 4\n0:1\n1:1\n")  # header says 3 rows, file has 2
    code, _, err = run_cli(["evaluate", str(pred), "--data", str(d)], capsys)
    assert_clean_failure(code, err, "pred.txt", "header says 3 rows but the file has 2")
    pred.write_text("2 4\n0:1\n1:1\n")  # the test split has 3 points
    code, _, err = run_cli(["evaluate", str(pred), "--data", str(d)], capsys)
    assert_clean_failure(code, err, "pred.txt:1", "header says 2 rows but 3 were expected")
    pred.write_text("3 4\n0:1\n1:x\n2:1\n")
    code, _, err = run_cli(["evaluate", str(pred), "--data", str(d)], capsys)
    assert_clean_failure(code, err, "pred.txt:3", "not a number")
    pred.write_text("3 4\n0:1\n7:1\n2:1\n")
    code, _, err = run_cli(["evaluate", str(pred), "--data", str(d)], capsys)
    assert_clean_failure(code, err, "pred.txt:3", "out of range")


def test_filter_file_out_of_range(tmp_path, capsys):
    d = write_tiny_dataset(tmp_path / "ds", filters="0 1\n9 0\n")
    code, _, err = run_cli(["stats", "--data", str(d)], capsys)
    assert_clean_failure(code, err, "filter_labels_test.txt:2", "row 9 is out of range")


def test_bad_option_value_is_reported_without_traceback(tmp_path, capsys):
    d = write_tiny_dataset(tmp_path / "ds")
    code, _, err = run_cli(["augment", "--data", str(d), "--out", str(tmp_path / "o"), "--graph", "bogus"], capsys)
    assert code == 2 and "Traceback" not in err and "bogus" in err
    assert not (tmp_path / "o").exists()
