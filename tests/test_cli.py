"""The command line end to end on small data."""

from __future__ import annotations

import json
from pathlib import Path

import numpy as np
import pytest

from gandalf_xmc.data import load_dataset, write_sparse_text
from gandalf_xmc.metrics import evaluate, inverse_propensity

from helpers import run_cli


def test_stats_json(tiny_dir, capsys):
    code, out, _ = run_cli(["stats", "--data", str(tiny_dir), "--json"], capsys)
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
    assert set(got) == keys | {"propensity", "n_points"}
    assert got["propensity"] == {"A": 0.55, "B": 1.5} and got["n_points"] == 2
    w = inverse_propensity(ds.train.Y, 0.55, 1.5)
    want = evaluate(P, ds.test.Y, w, (1, 3, 5), ds.test.filter_pairs)
    for key in keys:
        assert got[key] == pytest.approx(want[key])
    # test row 2's only label (3) is a filter pair: 2 points remain; both top-1 are correct
    assert got["P@1"] == pytest.approx(100.0)
    code, out, _ = run_cli(
        ["evaluate", str(tmp_path / "pred.txt"), "--data", str(tiny_dir), "-k", "1", "-k", "2", "--bins"], capsys
    )
    assert code == 0 and "@2" in out and "bin" in out


def test_augment_command(tiny_dir, tmp_path, capsys):
    out = tmp_path / "aug"
    code, stdout, err = run_cli(
        ["augment", "--data", str(tiny_dir), "--out", str(out), "--delta", "0.4", "--graph", "glas"], capsys
    )
    assert code == 0, err
    meta = json.loads((out / "augment.json").read_text())
    assert meta["config"]["graph"]["kind"] == "glas" and meta["config"]["graph"]["delta"] == 0.4
    assert {"aug.json.gz", "aug_X_Y.txt", "trn.json.gz", "lbl.json.gz", "tst.json.gz"} <= {p.name for p in out.iterdir()}


@pytest.mark.parametrize("model", ["linear", "knn"])
def test_demo_runs_on_a_small_dataset(tiny_dir, tmp_path, capsys, model):
    code, out, err = run_cli(["demo", "--data", str(tiny_dir), "--out", str(tmp_path / "demo"), "--model", model], capsys)
    assert code == 0, err
    res = json.loads((tmp_path / "demo" / "results.json").read_text())
    assert res["model"] == model
    # 4 training points; gandalf (read back from the written files), identity, tempered and (for a model
    # whose solver weighs positives) firm add the 4 label points
    expected = {"none": 4, "gandalf": 8, "identity": 8, "tempered": 8, **({"firm": 8} if model == "linear" else {})}
    assert {k: v["n_train"] for k, v in res["results"].items()} == expected
    # each row's scores are what `gandalf evaluate` computes from the prediction file the demo wrote
    for name, row in res["results"].items():
        code, out, err = run_cli(
            ["evaluate", str(tmp_path / "demo" / f"pred_{name}.txt"), "--data", str(tiny_dir), "--json"], capsys
        )
        assert code == 0, err
        got = json.loads(out)
        assert all(got[m] == pytest.approx(row[m], abs=1e-4) for m in ("P@1", "P@3", "P@5", "PSP@1", "PSP@5", "C@5"))


@pytest.mark.parametrize(
    "model,augment,own_files",
    [
        ("linear", "gandalf", {"features.json", "tree_order.npy", "weights_level0"}),
        ("linear", "labelmix", {"features.json"}),
        pytest.param("astec", "labelmix", {"features.json", "clusters.npy", "weights.pt"}, marks=pytest.mark.neural),
        pytest.param("inceptionxml", "identity", {"words.json", "clusters.npy", "weights.pt"}, marks=pytest.mark.neural),
        ("knn", "identity", {"features.json", "knn_points.npz"}),
    ],
)
def test_train_predict_evaluate(tiny_dir, tmp_path, capsys, model, augment, own_files):
    model_dir = tmp_path / "model"
    epochs = ["--epochs", "2"] if model in ("astec", "inceptionxml") else []
    code, out, err = run_cli(
        [
            "train",
            "--model",
            model,
            "--data",
            str(tiny_dir),
            "--augment",
            augment,
            *epochs,
            "--valid-fraction",
            "0.25",
            "--out",
            str(model_dir),
        ],
        capsys,
    )
    assert code == 0, err
    assert {"model.json", "labels.json.gz", "training.json"} | own_files <= {p.name for p in model_dir.iterdir()}
    info = json.loads((model_dir / "training.json").read_text())
    assert info["augment"]["augmentation"] == augment and info["n_valid"] == 1
    from gandalf_xmc.models.registry import load_trained

    loaded = load_trained(model_dir)
    code, out, err = run_cli(["predict", str(model_dir), "--text", "red apple", "-k", "2", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out)["labels"] == loaded.predict_labels(["red apple"], 2)[0]
    assert {r["id"] for r in json.loads(out)["labels"]} <= {"L0", "L1", "L2", "L3"}
    pred = tmp_path / "pred.txt"
    code, out, err = run_cli(["predict", str(model_dir), "--data", str(tiny_dir), "--out", str(pred)], capsys)
    assert code == 0, err
    code, out, err = run_cli(["evaluate", str(pred), "--data", str(tiny_dir), "--json"], capsys)
    assert code == 0, err
    ds = load_dataset(tiny_dir)
    want = evaluate(
        loaded.predict(ds.test.texts, k=100), ds.test.Y, inverse_propensity(ds.train.Y), (1, 3, 5), ds.test.filter_pairs
    )
    got = json.loads(out)
    assert all(got[m] == pytest.approx(want[m], abs=1e-4) for m in ("P@1", "P@5", "PSP@5", "nDCG@3"))


def test_predict_new_points_without_targets(tiny_dir, tmp_path, capsys):
    from helpers import write_json_lines

    model_dir = tmp_path / "model"
    assert run_cli(["train", "--data", str(tiny_dir), "--out", str(model_dir)], capsys)[0] == 0
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


def test_validation_is_carved_from_original_points_and_label_points_stay(tiny_dir, tmp_path, capsys):
    from gandalf_xmc.workflow.pipeline import carve_validation

    assert run_cli(["augment", "--data", str(tiny_dir), "--out", str(tmp_path / "aug")], capsys)[0] == 0
    ds = load_dataset(tmp_path / "aug", splits=("trn",))
    assert ds.n_original_train == 4 and len(ds.train) == 8
    rest, valid = carve_validation(ds, 0.25, seed=0)
    assert len(valid) == 1 and not valid.uids[0].startswith("label:")
    assert len(rest.train) == 7 and rest.n_original_train == 3
    assert [u.startswith("label:") for u in rest.train.uids] == [False] * 3 + [True] * 4
    assert valid.uids[0] not in rest.train.uids


def test_console_script_keeps_exit_codes_and_output(tiny_dir, tmp_path):
    """The console entry (`cli.run`, which changes how the interpreter collects garbage and exits)
    still prints the result line, writes the model and exits 0, and a bad input still exits 2 with
    one line."""
    import subprocess
    import sys

    base = [sys.executable, "-m", "gandalf_xmc.cli"]
    ok = subprocess.run(
        base + ["train", "--data", str(tiny_dir), "--out", str(tmp_path / "m"), "--valid-fraction", "0", "--no-progress"],
        capture_output=True,
        text=True,
    )
    assert ok.returncode == 0, ok.stderr
    assert ok.stdout.startswith("trained linear on") and (tmp_path / "m" / "model.json").is_file()
    bad = subprocess.run(
        base + ["train", "--data", str(tmp_path / "missing"), "--out", str(tmp_path / "n")], capture_output=True, text=True
    )
    assert bad.returncode == 2
    assert len(bad.stderr.strip().splitlines()) == 1 and bad.stderr.startswith("error:"), bad.stderr
    assert not (tmp_path / "n").exists()


def test_usage_errors_are_one_line_naming_the_command():
    """A misspelt option, a missing argument and an unknown command: one line on stderr naming the
    command and its help, exit 2; a bare `gandalf` still shows the help and exits 0."""
    import subprocess
    import sys

    base = [str(Path(sys.executable).with_name("gandalf"))]  # the console script, named as users call it
    cases = {
        ("train", "--modle", "x"): ("error: gandalf train: ", "--modle", "(see 'gandalf train --help')"),
        ("predict",): ("error: gandalf predict: ", "'model_dir'", "(see 'gandalf predict --help')"),
        ("trian",): ("error: gandalf: ", "'trian'", "(see 'gandalf --help')"),
    }
    for args, (start, names, end) in cases.items():
        got = subprocess.run(base + list(args), capture_output=True, text=True)
        assert got.returncode == 2 and got.stdout == "", (args, got)
        line = got.stderr.strip()
        assert "\n" not in line and line.startswith(start) and names.lower() in line.lower() and line.endswith(end), line
    bare = subprocess.run(base, capture_output=True, text=True)
    assert bare.returncode == 0 and "train" in bare.stdout and bare.stdout.startswith("Usage: gandalf"), bare


def test_tables_are_plain_tab_separated_lines_off_a_terminal(capsys):
    """Under pytest stdout is no terminal: every table is TSV, nothing cut to a width."""
    from gandalf_xmc.data.suite import SUITE, suite_path

    code, out, err = run_cli(["datasets"], capsys)
    assert code == 0, err
    lines = [line.split("\t") for line in out.splitlines()]
    assert lines[0][0] == "name" and lines[0][-1] == "where"
    assert [row[0].removesuffix(" (not built)") for row in lines[1:]] == [d.name for d in SUITE]
    assert [row[-1] for row in lines[1:]] == [str(suite_path(d.name)) for d in SUITE]
    assert err.startswith("# Datasets")


def test_a_misspelt_suite_name_is_suggested(capsys):
    code, _, err = run_cli(["stats", "--data", "jargn"], capsys)
    assert code == 2 and err == "error: jargn: dataset directory not found; did you mean the suite dataset jargon?\n"


def test_augment_offers_only_what_it_writes(tmp_path, capsys):
    from gandalf_xmc.augment.catalog import AUGMENTATIONS

    code, _, err = run_cli(["augment", "--data", "jargon", "--out", str(tmp_path / "o"), "--augment", "labelmix"], capsys)
    written = [row.name for row in AUGMENTATIONS.values() if row.writes_files]
    assert code == 2 and "labelmix" not in written and f"is not one of {', '.join(repr(n) for n in written)}" in err
    assert not (tmp_path / "o").exists()


def test_list_options_take_commas_and_repeats_alike(tiny_dir, tmp_path, capsys):
    model_dir = tmp_path / "model"
    assert run_cli(["train", "--data", str(tiny_dir), "--out", str(model_dir), "--no-progress"], capsys)[0] == 0
    pred = tmp_path / "pred.txt"
    assert run_cli(["predict", str(model_dir), "--data", str(tiny_dir), "--out", str(pred), "--no-progress"], capsys)[0] == 0
    answers = []
    for ks in (["-k", "1,3,5"], ["-k", "1", "-k", "3", "-k", "5"], ["-k", "5,1", "-k", "3"], []):
        code, out, err = run_cli(["evaluate", str(pred), "--data", str(tiny_dir), "--json", *ks], capsys)
        assert code == 0, err
        answers.append(json.loads(out))
    assert answers[0] == answers[1] == answers[2] == answers[3] and "P@3" in answers[0]
    for bad in ("1,,3", "0", "x"):
        code, _, err = run_cli(["evaluate", str(pred), "--data", str(tiny_dir), "-k", bad], capsys)
        assert code == 2 and err.startswith("error: -k: ") and len(err.strip().splitlines()) == 1
    code, _, err = run_cli(["reproduce", "--out", str(tmp_path / "r"), "--models", "linear,nonesuch"], capsys)
    assert code == 2 and "--models: unknown model 'nonesuch'" in err


def test_the_demo_writes_a_directory_a_dataset_and_says_how_to_rerun(tiny_dir, tmp_path, capsys, monkeypatch):
    monkeypatch.chdir(tmp_path)
    code, _, err = run_cli(["demo", "--data", str(tiny_dir), "--model", "knn", "--no-progress"], capsys)
    assert code == 0, err
    assert (tmp_path / "gandalf-demo" / "tiny-knn" / "results.json").is_file()
    code, _, err = run_cli(["demo", "--data", str(tiny_dir), "--model", "knn", "--no-progress"], capsys)
    assert code == 2 and err.strip() == (
        "error: gandalf-demo/tiny-knn holds an earlier demo of this dataset and model: "
        "add --force to run it again there, or give another --out"
    )
    code, _, err = run_cli(["demo", "--data", str(tiny_dir), "--model", "knn", "--no-progress", "--force"], capsys)
    assert code == 0, err


def test_evaluate_scores_several_files_side_by_side_with_intervals(tiny_dir, tmp_path, capsys):
    for name, augment in (("plain", "none"), ("points", "identity")):
        assert (
            run_cli(
                ["train", "--data", str(tiny_dir), "--augment", augment, "--out", str(tmp_path / name), "--no-progress"], capsys
            )[0]
            == 0
        )
        assert (
            run_cli(
                [
                    "predict",
                    str(tmp_path / name),
                    "--data",
                    str(tiny_dir),
                    "--out",
                    str(tmp_path / f"{name}.txt"),
                    "--no-progress",
                ],
                capsys,
            )[0]
            == 0
        )
    files = [str(tmp_path / "plain.txt"), str(tmp_path / "points.txt")]
    alone = []
    for f in files:
        code, out, err = run_cli(["evaluate", f, "--data", str(tiny_dir), "--json"], capsys)
        assert code == 0, err
        alone.append(json.loads(out))
    code, out, err = run_cli(["evaluate", *files, "--data", str(tiny_dir), "--json", "--bootstrap", "50"], capsys)
    assert code == 0, err
    both = json.loads(out)
    assert list(both["files"]) == ["plain.txt", "points.txt"]
    for name, single in zip(both["files"], alone):
        scores = {m: v for m, v in both["files"][name].items() if m != "intervals"}
        assert scores == {m: v for m, v in single.items() if "@" in m}
    assert set(both["files"]["points.txt"]["intervals"]) >= {"P@1", "PSP@5", "P@1 - first"}
    code, out, err = run_cli(["evaluate", *files, "--data", str(tiny_dir), "--bins"], capsys)
    assert code == 0, err
    assert "plain.txt\tpoints.txt" in out and "they add up to P@5" in out
    # --plot: the panels get each file's metrics and bins adding up to P@5 and PSP@5; a PNG is written
    from gandalf_xmc.experiments import report

    try:
        import matplotlib  # noqa: F401
    except ImportError:  # the core package alone: one line naming the extra
        code, _, err = run_cli(["evaluate", *files, "--data", str(tiny_dir), "--plot", str(tmp_path / "f.png")], capsys)
        assert code == 2 and "gandalf-xmc[plots]" in err and not (tmp_path / "f.png").exists()
        return

    drawn = {}
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(
            report,
            "comparison_figure",
            lambda path, names, scores, ks, bins: drawn.update(path=path, names=names, scores=scores, ks=ks, bins=bins),
        )
        code, _, err = run_cli(["evaluate", *files, "--data", str(tiny_dir), "--plot", str(tmp_path / "f.png")], capsys)
    assert code == 0, err
    assert drawn["names"] == ["plain.txt", "points.txt"] and drawn["ks"] == (1, 3, 5) and sum(drawn["bins"]) == 4
    for name, sc in zip(drawn["names"], drawn["scores"]):
        assert sc["P@5"] == pytest.approx(both["files"][name]["P@5"])
        assert sum(sc["bins_P"]) == pytest.approx(sc["P@5"]) and sum(sc["bins_PSP"]) == pytest.approx(sc["PSP@5"])
    code, _, err = run_cli(["evaluate", *files, "--data", str(tiny_dir), "--plot", str(tmp_path / "f.png")], capsys)
    assert code == 0, err
    assert (tmp_path / "f.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    code, _, err = run_cli(["evaluate", *files, "--data", str(tiny_dir), "--plot", str(tmp_path / "f.png")], capsys)
    assert code == 2 and "--force" in err
    code, _, err = run_cli(["evaluate", *files, "--data", str(tiny_dir), "--plot", files[0], "--force"], capsys)
    assert code == 2 and (tmp_path / "plain.txt").read_text().strip()  # an input is never the figure


def test_analyze_reads_the_recipe_from_a_model_or_augment_directory(tiny_dir, tmp_path, capsys):
    """`analyze --recipe DIR` describes the graph the directory's label points came from, as the
    same options given by hand do; refused with one line where there is none to describe."""

    def analyze(*args):
        code, out, err = run_cli(["analyze", *args, "--json"], capsys)
        assert code == 0, err
        return json.loads(out)

    by_hand = analyze("--data", str(tiny_dir), "--augment", "gandalf-tempered")
    code, _, err = run_cli(
        ["augment", "--data", str(tiny_dir), "--out", str(tmp_path / "aug"), "--augment", "gandalf-tempered"], capsys
    )
    assert code == 0, err
    assert analyze("--recipe", str(tmp_path / "aug")) == by_hand  # its data too, from augment.json
    trained = ["train", "--valid-fraction", "0", "--no-progress"]
    code, _, err = run_cli([*trained, "--data", str(tmp_path / "aug"), "--out", str(tmp_path / "on-files")], capsys)
    assert code == 0, err
    assert analyze("--recipe", str(tmp_path / "on-files")) == by_hand  # trained as given on those files
    code, _, err = run_cli(
        [*trained, "--data", str(tiny_dir), "--augment", "gandalf", "--delta", "0.3", "--out", str(tmp_path / "m")], capsys
    )
    assert code == 0, err
    got = analyze("--recipe", str(tmp_path / "m"))
    assert got["graph"]["delta"] == 0.3 and got == analyze("--data", str(tiny_dir), "--delta", "0.3")
    code, _, err = run_cli([*trained, "--data", str(tiny_dir), "--out", str(tmp_path / "plain")], capsys)
    assert code == 0, err
    for args, problem in (
        (["--recipe", str(tmp_path / "plain")], "no label points"),
        (["--recipe", str(tmp_path / "m"), "--augment", "gandalf"], "not both"),
        (["--recipe", str(tmp_path)], "neither a model directory"),
    ):
        code, _, err = run_cli(["analyze", *args], capsys)
        assert code == 2 and problem in err and len(err.strip().splitlines()) == 1, err


def test_train_validates_on_a_split_given(tiny_dir, tmp_path, capsys):
    out = tmp_path / "m"
    code, stdout, err = run_cli(
        ["train", "--data", str(tiny_dir), "--valid-split", "tst", "--out", str(out), "--no-progress"], capsys
    )
    assert code == 0, err
    info = json.loads((out / "training.json").read_text())
    ds = load_dataset(tiny_dir)
    assert info["valid_source"] == "split tst" and info["n_valid"] == len(ds.test) and info["n_train"] == len(ds.train)
    assert info["refit"] is False and "then the final model" not in stdout + err
    code, stdout, err = run_cli(["info", str(out)], capsys)
    assert code == 0 and f"{len(ds.test)} points of its split tst" in stdout
    for split, problem in (("val", "missing 'val' split file"), ("trn", "other than the training split")):
        code, stdout, err = run_cli(
            ["train", "--data", str(tiny_dir), "--valid-split", split, "--out", str(tmp_path / split), "--no-progress"], capsys
        )
        assert code == 2 and problem in err and not (tmp_path / split).exists()
