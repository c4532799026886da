"""The command line end to end on small data."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gandalf_xmc.data import load_dataset, write_sparse_text
from gandalf_xmc.metrics import evaluate, inverse_propensity

from test_bad_input import run_cli


def test_stats_json(tiny_dir, capsys):
    code, out, _ = run_cli(["stats", str(tiny_dir), "--json"], capsys)
    assert code == 0
    st = json.loads(out)
    # 4 points, 4 labels, 7 positives; words 3 + 6 + 3 + 3
    assert st["N"] == 4 and st["L"] == 4
    assert st["APpL"] == pytest.approx(7 / 4) and st["ALpP"] == pytest.approx(7 / 4)
    assert st["AWpP"] == pytest.approx(15 / 4)
    assert st["labels_0_pct"] == pytest.approx(25.0) and st["labels_le5_pct"] == pytest.approx(100.0)


def test_evaluate_json_matches_library(tiny_dir, tmp_path, capsys):
    ds = load_dataset(tiny_dir)
    pred = np.array([[0.9, 0.1, 0, 0], [0, 0.2, 0.8, 0], [0.3, 0, 0, 0.6]], dtype=np.float32)
    import scipy.sparse as sp

    P = sp.csr_matrix(pred)
    write_sparse_text(tmp_path / "pred.txt", P)
    code, out, err = run_cli(["evaluate", str(tmp_path / "pred.txt"), "--data", str(tiny_dir), "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    keys = {f"{m}@{k}" for m in ("P", "nDCG", "PSP", "PSnDCG", "R", "C") for k in (1, 3, 5)}
    assert set(got) == keys
    w = inverse_propensity(ds.train.Y, 0.55, 1.5)
    want = evaluate(P, ds.test.Y, w, (1, 3, 5), ds.test.filter_pairs)
    for key in keys:
        assert got[key] == pytest.approx(want[key])
    # test row 2's only label (3) is a filter pair: 2 points remain; both top-1 are correct
    assert got["P@1"] == pytest.approx(100.0)
    code, out, _ = run_cli(["evaluate", str(tmp_path / "pred.txt"), "--data", str(tiny_dir), "-k", "1,2", "--bins"], capsys)
    assert code == 0 and "@2" in out and "bin" in out


def test_augment_command(tiny_dir, tmp_path, capsys):
    out = tmp_path / "aug"
    code, stdout, err = run_cli(["augment", str(tiny_dir), "--out", str(out), "--delta", "0.4", "--graph", "glas"], capsys)
    assert code == 0, err
    meta = json.loads((out / "augment.json").read_text())
    assert meta["config"]["graph"]["kind"] == "glas" and meta["config"]["graph"]["delta"] == 0.4
    assert {"aug.json.gz", "aug_X_Y.txt", "trn.json.gz", "lbl.json.gz", "tst.json.gz"} <= {p.name for p in out.iterdir()}


@pytest.mark.parametrize("model", ["linear", "knn"])
def test_demo_runs_on_a_small_dataset(tiny_dir, tmp_path, capsys, model):
    code, out, err = run_cli(["demo", str(tiny_dir), "--out", str(tmp_path / "demo"), "--model", model], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "demo" / "results.json").read_text())
    assert len(res["results"]) == 4 and res["model"] == model
    # 4 training points; gandalf (read back from the written files), identity and tempered add the 4 label points
    assert {k: v["n_train"] for k, v in res["results"].items()} == {"none": 4, "gandalf": 8, "identity": 8,
                                                                    "tempered": 8}
    for row in res["results"].values():
        assert 0 <= row["P@1"] <= 100
    assert (tmp_path / "demo" / "pred_none.txt").exists()
    # the prediction files are valid input for `gandalf evaluate`
    code, out, err = run_cli(["evaluate", str(tmp_path / "demo" / "pred_gandalf.txt"), "--data", str(tiny_dir), "--json"], capsys)
    assert code == 0, err


@pytest.mark.parametrize("model,augment,own_files", [
    ("linear", "gandalf", {"features.json", "weights_indptr.npy", "shortlist_points.npz"}),
    ("linear", "labelmix", {"features.json"}),
    ("astec", "labelmix", {"features.json", "clusters.npy"}),
    ("inceptionxml", "identity", {"words.json", "clusters.npy"}),
])
def test_train_predict_evaluate(tiny_dir, tmp_path, capsys, model, augment, own_files):
    model_dir = tmp_path / "model"
    code, out, err = run_cli(["train", "--model", model, "--data", str(tiny_dir), "--augment", augment, "--epochs", "2",
                              "--valid-fraction", "0.25", "--out", str(model_dir)], capsys)
    assert code == 0, err
    assert {"model.json", "weights.pt", "labels.json.gz", "training.json"} | own_files <= {
        p.name for p in model_dir.iterdir()}
    info = json.loads((model_dir / "training.json").read_text())
    assert info["augment"]["training_set"] == augment and info["n_valid"] == 1
    code, out, err = run_cli(["predict", str(model_dir), "--text", "red apple", "-k", "2"], capsys)
    assert code == 0, err
    assert out.count("L") >= 2  # two label uids printed
    pred = tmp_path / "pred.txt"
    code, out, err = run_cli(["predict", str(model_dir), "--data", str(tiny_dir), "--out", str(pred)], capsys)
    assert code == 0, err
    code, out, err = run_cli(["evaluate", str(pred), "--data", str(tiny_dir), "--json"], capsys)
    assert code == 0, err


def test_predict_new_points_without_targets(tiny_dir, tmp_path, capsys):
    from conftest import write_json_lines

    model_dir = tmp_path / "model"
    assert run_cli(["train", "--data", str(tiny_dir), "--epochs", "1", "--out", str(model_dir)], capsys)[0] == 0
    new = tmp_path / "new"
    new.mkdir()
    write_json_lines(new / "tst.json.gz", [{"uid": "q1", "title": "green apple pie"}, {"uid": "q2", "title": "whale"}])
    code, out, err = run_cli(["predict", str(model_dir), "--data", str(new), "--out", str(tmp_path / "p.txt"), "-k", "3"], capsys)
    assert code == 0, err
    lines = (tmp_path / "p.txt").read_text().splitlines()
    assert lines[0] == "2 4" and len(lines) == 3


def test_predict_rejects_a_non_model_directory(tmp_path, capsys):
    code, _, err = run_cli(["predict", str(tmp_path), "--text", "x"], capsys)
    assert code == 2 and "not a model directory" in err and "Traceback" not in err


def test_validation_is_carved_from_original_points_and_extra_points_stay(tiny_dir, tmp_path, capsys):
    from gandalf_xmc.train.pipeline import carve_validation

    assert run_cli(["augment", str(tiny_dir), "--out", str(tmp_path / "aug")], capsys)[0] == 0
    ds = load_dataset(tmp_path / "aug", splits=("trn",))
    assert ds.n_original_train == 4 and len(ds.train) == 8
    rest, valid = carve_validation(ds, 0.25, seed=0)
    assert len(valid) == 1 and not valid.uids[0].startswith("label:")
    assert len(rest.train) == 7 and rest.n_original_train == 3
    assert [u.startswith("label:") for u in rest.train.uids] == [False] * 3 + [True] * 4
    assert valid.uids[0] not in rest.train.uids
