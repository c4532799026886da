"""The Extreme Classification Repository's LF datasets as a user unpacks them: the raw JSON layout
(with 'content' and 'target_rel') and the text layout, each with its standard propensity constants."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gandalf_xmc.data import load_dataset
from gandalf_xmc.metrics import inverse_propensity

from helpers import run_cli, write_json_lines


def raw_layout(d):
    d.mkdir(parents=True)
    write_json_lines(
        d / "lbl.json.gz",
        [{"uid": f"B0{i}", "title": t, "content": ""} for i, t in enumerate(["usb cable", "phone case", "screen guard"])],
    )
    write_json_lines(
        d / "trn.json.gz",
        [
            {
                "uid": "A1",
                "title": "usb c cable 2m",
                "content": "a long description",
                "target_ind": [0, 2],
                "target_rel": [1.0, 1.0],
            },
            {"uid": "A2", "title": "slim phone case", "content": "", "target_ind": [1], "target_rel": [1.0]},
        ],
    )
    write_json_lines(
        d / "tst.json.gz",
        [{"uid": "A3", "title": "phone case blue", "content": "", "target_ind": [1, 2], "target_rel": [1.0, 1.0]}],
    )
    (d / "filter_labels_test.txt").write_text("0 2\n")
    (d / "filter_labels_train.txt").write_text("")
    return d


def text_layout(d):
    d.mkdir(parents=True)
    (d / "Y.txt").write_text("Alan Turing\nTuring machine\nEnigma machine\n")
    (d / "trn_X.txt").write_text("Computability\nBletchley Park\n")
    (d / "trn_X_Y.txt").write_text("2 3\n0:1 1:1\n2:1\n")
    (d / "tst_X.txt").write_text("Colossus computer\n")
    (d / "tst_X_Y.txt").write_text("1 3\n0:1 2:1\n")
    (d / "filter_labels_test.txt").write_text("")
    return d


@pytest.mark.parametrize(
    "name,layout,ab",
    [
        ("LF-AmazonTitles-131K", raw_layout, (0.6, 2.6)),
        ("LF-AmazonTitles-1.3M", raw_layout, (0.6, 2.6)),
        ("LF-WikiSeeAlsoTitles-320K", text_layout, (0.55, 1.5)),
        ("LF-WikiTitles-500K", text_layout, (0.5, 0.4)),
    ],
)
def test_repository_layouts_load_with_their_constants(tmp_path, name, layout, ab):
    d = layout(tmp_path / name)
    ds = load_dataset(d)
    assert ds.name == name and ds.propensity_constants() == ab
    assert len(ds.train) == 2 and len(ds.test) == 1 and ds.n_labels == 3
    if layout is raw_layout:
        assert ds.train.uids == ["A1", "A2"] and ds.label_uids == ["B00", "B01", "B02"]
        assert ds.test.filter_pairs.tolist() == [[0, 2]]
        assert ds.train.texts[0] == "usb c cable 2m"  # the title, not the content
    else:
        assert ds.label_texts[2] == "Enigma machine" and ds.train.Y.toarray().tolist() == [[1, 1, 0], [0, 0, 1]]


def test_evaluate_uses_and_prints_the_datasets_constants(tmp_path, capsys):
    d = raw_layout(tmp_path / "LF-AmazonTitles-131K")
    (tmp_path / "p.txt").write_text("1 3\n1:0.9 2:0.5\n")
    code, out, err = run_cli(["evaluate", str(tmp_path / "p.txt"), "--data", str(d), "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["propensity"] == {"A": 0.6, "B": 2.6}
    # label 2 is filtered for this point, so only label 1 counts, and it is ranked first
    assert got["PSP@1"] == pytest.approx(100.0) and got["P@3"] == pytest.approx(100.0 / 3)
    ds = load_dataset(d)
    w = inverse_propensity(ds.train.Y, 0.6, 2.6)
    # by hand: N = 2, label 1 seen once: w = 1 + (ln 2 - 1)(3.6^0.6)(1 + 2.6)^-0.6 = ln 2
    assert w[1] == pytest.approx(np.log(2))
    code, out, _ = run_cli(["evaluate", str(tmp_path / "p.txt"), "--data", str(d)], capsys)
    assert "propensity A = 0.6, B = 2.6" in out
