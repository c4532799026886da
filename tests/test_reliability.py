"""Bad input, clobbering, damaged model directories, concurrency and signals, through the CLI:
each case gives one exact error line and exit 2, and writes or changes nothing."""

from __future__ import annotations

import fcntl
import gzip
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import numpy as np
import pytest

from helpers import copy_model, refused, run_cli, snapshot, write_json_lines, write_tiny_dataset

# ---------------------------------------------------------------------------------------------- outputs


def test_out_that_holds_files_is_refused_without_force(work, capsys):
    tmp, data = work
    out = tmp / "out"
    out.mkdir()
    (out / "trn.json.gz").write_text("mine")
    (out / "trn_X_Y.txt").mkdir()
    (out / "trn_X_Y.txt" / "k").write_text("keep")
    refused(
        capsys,
        tmp,
        ["augment", "--data", str(data), "--out", str(out)],
        f"{out}: exists and is not empty; pass --force to replace it",
    )


def test_force_replaces_the_whole_directory(work, capsys):
    tmp, data = work
    out = tmp / "out"
    out.mkdir()
    (out / "notes.txt").write_text("old")
    code, _, err = run_cli(["augment", "--data", str(data), "--out", str(out), "--force"], capsys)
    assert code == 0, err
    assert not (out / "notes.txt").exists() and (out / "trn.json.gz").exists()
    assert [p.name for p in tmp.iterdir() if p.name.startswith(".")] == []  # no staging left


def test_out_equal_to_the_input_is_refused_even_with_force(work, capsys):
    tmp, data = work
    refused(
        capsys,
        tmp,
        ["augment", "--data", str(data), "--out", str(data), "--force"],
        f"{data}: is the input {data} (or inside it): choose another --out",
    )
    refused(
        capsys,
        tmp,
        ["augment", "--data", str(data), "--out", str(data / "sub")],
        f"{data / 'sub'}: is the input {data} (or inside it): choose another --out",
    )


def test_out_that_is_a_file(work, capsys):
    tmp, data = work
    (tmp / "f").write_text("x")
    refused(capsys, tmp, ["augment", "--data", str(data), "--out", str(tmp / "f")], f"{tmp / 'f'}: exists and is not a directory")
    refused(capsys, tmp, ["train", "--data", str(data), "--out", str(tmp / "f")], f"{tmp / 'f'}: exists and is not a directory")


def test_prediction_out_that_is_a_directory(work, model_dir, capsys):
    tmp, data = work
    (tmp / "d").mkdir()
    refused(
        capsys,
        tmp,
        ["predict", str(model_dir), "--data", str(data), "--out", str(tmp / "d")],
        f"{tmp / 'd'}: is a directory; give a file name",
    )


def test_a_second_writer_is_kept_out(work, capsys):
    tmp, data = work
    import hashlib

    from gandalf_xmc.paths import cache_root

    lock = cache_root() / "locks" / (hashlib.sha1(str((tmp / "out").resolve()).encode()).hexdigest() + ".lock")
    lock.parent.mkdir(parents=True, exist_ok=True)
    with open(lock, "a+") as fh:
        fcntl.flock(fh, fcntl.LOCK_EX)
        refused(
            capsys,
            tmp,
            ["augment", "--data", str(data), "--out", str(tmp / "out")],
            f"{tmp / 'out'}: another gandalf command is writing it; wait for it to finish",
        )


@pytest.mark.skipif(os.geteuid() == 0, reason="root writes anywhere")
def test_unwritable_out(work, capsys):
    tmp, data = work
    ro = tmp / "ro"
    ro.mkdir()
    ro.chmod(0o555)
    try:
        code, _, err = run_cli(["augment", "--data", str(data), "--out", str(ro / "out")], capsys)
        assert code == 2 and err.startswith(f"error: {ro / 'out'}: cannot write here")
    finally:
        ro.chmod(0o755)


# ---------------------------------------------------------------------------------------------- options


@pytest.mark.parametrize(
    "args,message",
    [
        (["-A", "-5", "-B", "-1"], "propensity constants must be finite numbers with A > 0 and B >= 0, got A = -5.0, B = -1.0"),
        (["-A", "nan"], "propensity constants must be finite numbers with A > 0 and B >= 0, got A = nan, B = 1.5"),
        (["-A", "inf"], "propensity constants must be finite numbers with A > 0 and B >= 0, got A = inf, B = 1.5"),
        (["-B", "inf"], "propensity constants must be finite numbers with A > 0 and B >= 0, got A = 0.55, B = inf"),
        (["-A", "1e308", "-B", "3"], "propensity constants A = 1e+308, B = 3 overflow the weights ((B + 1)^A is past 1e304)"),
        # label 3 has no training positive: (0 + B)^-A with B = 0 is infinite
        (
            ["-B", "0"],
            "propensity constants A = 0.55, B = 0 give infinite weights (B = 0 and a label without training positives)",
        ),
    ],
)
def test_bad_propensity_constants(work, capsys, args, message):
    tmp, data = work
    pred = tmp / "p.txt"
    pred.write_text("3 4\n0:1\n1:1\n2:1\n")
    refused(capsys, tmp, ["evaluate", str(pred), "--data", str(data), *args], message)


def test_a_huge_k_costs_nothing(work, capsys):
    tmp, data = work
    pred = tmp / "p.txt"
    pred.write_text("3 4\n0:1\n1:1\n2:1\n")
    code, out, err = run_cli(["evaluate", str(pred), "--data", str(data), "-k", "100000000", "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["P@100000000"] == pytest.approx(100 * 2 / 2 / 1e8)  # 2 points, each with 1 hit


def test_negative_seed_and_unknown_choice(work, capsys):
    tmp, data = work
    for args, needle in ((["--seed", "-1"], "'--seed'"), (["--graph", "bogus"], "'bogus' is not one of")):
        before = snapshot(tmp)
        code, _, err = run_cli(["augment", "--data", str(data), "--out", str(tmp / "o"), *args], capsys)
        assert code == 2 and needle in err and "Traceback" not in err and snapshot(tmp) == before


def test_infinite_extra_weight(work, capsys):
    tmp, data = work
    refused(
        capsys,
        tmp,
        ["train", "--data", str(data), "--augment", "identity", "--extra-weight", "inf", "--out", str(tmp / "m")],
        "--label-point-weight must be a finite number, got inf",
    )


def test_a_label_point_positive_cost_that_is_not_a_positive_number(work, capsys):
    tmp, data = work
    for bad, shown in (("0", "0.0"), ("-2", "-2.0"), ("inf", "inf"), ("nan", "nan")):
        refused(
            capsys,
            tmp,
            ["train", "--data", str(data), "--augment", "identity", "--label-point-positive-cost", bad, "--out", str(tmp / "m")],
            f"label-point positive cost must be a finite number > 0, got {shown}",
        )
    refused(  # knn has no solver to weigh positives in
        capsys,
        tmp,
        ["train", "--data", str(data), "--model", "knn", "--augment", "identity", "--label-point-positive-cost", "4"]
        + ["--out", str(tmp / "m")],
        "a label-point positive cost (--label-point-positive-cost, gandalf-tempered-firm) applies to the models trained with a loss, not to knn",
    )


def test_a_tiny_labels_fraction_is_not_silently_empty(work, capsys):
    tmp, data = work
    refused(
        capsys,
        tmp,
        ["augment", "--data", str(data), "--out", str(tmp / "o"), "--labels-fraction", "1e-9"],
        "no label becomes a point (labels fraction 1e-09 of 4 labels rounds to 0): raise --labels-fraction",
    )


def test_bow_refuses_soft_targets(work, capsys):
    tmp, data = work
    refused(
        capsys,
        tmp,
        ["augment", "--data", str(data), "--out", str(tmp / "o"), "--format", "bow"],
        "the BoW format holds binary labels, and these label points have soft targets (they would be rounded to "
        "1): use --format npz or lf, or --augment identity",
    )


# ---------------------------------------------------------------------------------------------- data files


@pytest.mark.parametrize(
    "token,problem",
    [
        ("99999999999999999999:0.5", "index '99999999999999999999' is out of range"),
        ("5²:0.5", "index '5²' is not an integer"),
        ("1:0.5 1:0.6", "label 1 appears twice in this row"),
        ("1:inf", "relevance value inf is not finite"),
    ],
)
def test_bad_prediction_tokens(work, capsys, token, problem):
    tmp, data = work
    pred = tmp / "p.txt"
    pred.write_text(f"3 4\n0:1\n{token}\n2:1\n")
    refused(capsys, tmp, ["evaluate", str(pred), "--data", str(data)], f"{pred}:3: {problem}")


def test_bad_prediction_npz(work, capsys):
    import scipy.sparse as sp

    tmp, data = work
    sp.save_npz(tmp / "p.npz", sp.csr_matrix(np.ones((2, 4), dtype=np.float32)))
    refused(
        capsys,
        tmp,
        ["evaluate", str(tmp / "p.npz"), "--data", str(data)],
        f"{tmp / 'p.npz'}: matrix is 2 x 4 but 3 x 4 (points x labels) was expected",
    )
    (tmp / "q.npz").write_bytes(b"not a zip")
    code, _, err = run_cli(["evaluate", str(tmp / "q.npz"), "--data", str(data)], capsys)
    assert code == 2 and err.startswith(f"error: {tmp / 'q.npz'}: not a scipy sparse .npz matrix")


@pytest.mark.parametrize(
    "meta,message",
    [
        ({"n_original_train": -3}, "n_original_train must be a positive integer, got -3"),
        ({"n_original_train": "x"}, 'n_original_train must be a positive integer, got "x"'),
        ({"n_original_train": [1]}, "n_original_train must be a positive integer, got [1]"),
        ({"n_original_train": True}, "n_original_train must be a positive integer, got true"),
        ({"n_original_train": 99}, "n_original_train is 99 but the training split has 4 points"),
    ],
)
def test_augment_json_is_checked(work, capsys, meta, message):
    tmp, data = work
    (data / "augment.json").write_text(json.dumps(meta))
    refused(capsys, tmp, ["stats", "--data", str(data)], f"{data / 'augment.json'}: {message}")


@pytest.mark.parametrize(
    "rows,message",
    [
        ([{"uid": "0", "title": "a", "target_ind": [True]}], "trn.json.gz:1: label id true is not an integer"),
        ([{"uid": "0", "title": "a", "target_ind": [0, 10**23]}], "trn.json.gz:1: label id 1e+23 is out of range"),
        ([{"uid": None, "title": "a", "target_ind": [0]}], "trn.json.gz:1: 'uid' must be a string or a number, got null"),
        (
            [{"uid": {"a": 1}, "title": "a", "target_ind": [0]}],
            "trn.json.gz:1: 'uid' must be a string or a number, got {\"a\": 1}",
        ),
    ],
)
def test_silently_accepted_values_are_refused(work, capsys, rows, message):
    tmp, data = work
    write_json_lines(data / "trn.json.gz", rows)
    refused(capsys, tmp, ["stats", "--data", str(data)], f"{data / message}")


def test_duplicate_label_uids(work, capsys):
    tmp, data = work
    write_json_lines(
        data / "lbl.json.gz",
        [{"uid": "L0", "title": "a"}, {"uid": "L1", "title": "b"}, {"uid": "L1", "title": "c"}, {"uid": "L3", "title": "d"}],
    )
    refused(capsys, tmp, ["stats", "--data", str(data)], f"{data / 'lbl.json.gz'}:3: uid 'L1' appears again (first on line 2)")


def test_bad_utf8_is_reported_on_its_own_line(work, capsys):
    tmp, data = work
    rows = [json.dumps({"uid": str(i), "title": f"point {i}", "target_ind": [i % 4]}).encode() for i in range(4000)]
    rows[3000] = rows[3000].replace(b"point", b"p\xffoint")
    with gzip.open(data / "trn.json.gz", "wb") as fh:
        fh.write(b"\n".join(rows) + b"\n")
    refused(capsys, tmp, ["stats", "--data", str(data)], f"{data / 'trn.json.gz'}:3001: not valid UTF-8 text")


def test_a_byte_order_mark_is_not_part_of_the_first_label(tmp_path, capsys):
    d = tmp_path / "text"
    d.mkdir()
    (d / "lbl_X.txt").write_bytes("\ufeffred apple\ngreen apple\n".encode())
    (d / "trn_X.txt").write_text("red apple pie\n")
    (d / "trn_X_Y.txt").write_text("1 2\n0:1\n")
    (d / "tst_X.txt").write_text("apple\n")
    (d / "tst_X_Y.txt").write_text("1 2\n1:1\n")
    from gandalf_xmc.data import load_dataset

    assert load_dataset(d).label_texts == ["red apple", "green apple"]


# ---------------------------------------------------------------------------------------------- model directories


@pytest.mark.parametrize(
    "damage,message",
    [
        (lambda d: (d / "model.json").write_text(""), "model.json: malformed JSON (Expecting value: line 1 column 1)"),
        (
            lambda d: (d / "model.json").write_text('{"kind": "bogus"}'),
            "unknown model 'bogus'; choose one of linear, astec, inceptionxml, inceptionxml-lf, dual-encoder, ngame, knn",
        ),
        (
            lambda d: (d / "model.json").write_text("[1]"),
            "model.json: not a model description (expected an object with a string 'kind')",
        ),
        (lambda d: (d / "features_idf.npy").unlink(), "the model directory is incomplete: features_idf.npy is missing"),
        (lambda d: (d / "weights_level0" / "data.npy").write_bytes((d / "weights_level0" / "data.npy").read_bytes()[:50]), None),
        (lambda d: np.save(d / "weights_level1" / "indptr.npy", np.load(d / "weights_level1" / "indptr.npy")[::-1]), None),
        (lambda d: np.save(d / "weights_level0" / "indices.npy", np.load(d / "weights_level0" / "indices.npy") + 10**6), None),
        (
            lambda d: write_json_lines(d / "labels.json.gz", [{"uid": "L0", "title": "x"}]),
            "labels.json.gz: has 1 labels but the model has 4",
        ),
    ],
)
def test_damaged_model_directories(model_dir, tmp_path, capsys, damage, message):
    d = copy_model(model_dir, tmp_path / "m")
    damage(d)
    before = snapshot(tmp_path)
    code, _, err = run_cli(["predict", str(d), "--text", "red apple"], capsys)
    assert code == 2 and len(err.strip().splitlines()) == 1 and "Traceback" not in err, err
    if message is None:
        assert err.startswith(f"error: {d}: damaged model directory"), err
    else:
        assert message in err, err
    assert snapshot(tmp_path) == before


def test_predict_refuses_another_label_set(model_dir, tmp_path, capsys):
    other = write_tiny_dataset(tmp_path / "other", labels=["w", "x", "y", "z"])
    refused(
        capsys,
        tmp_path,
        ["predict", str(model_dir), "--data", str(other), "--out", str(tmp_path / "p.txt")],
        f"{other}: label 0 is 'L0' in the dataset but 'L0' in the model (4 labels on both sides): another label set",
    )
    fewer = write_tiny_dataset(
        tmp_path / "fewer", labels=["red apple", "green apple", "apple pie"], train=[("a", [0])], test=[("b", [1])], filters=None
    )
    refused(
        capsys,
        tmp_path,
        ["predict", str(model_dir), "--data", str(fewer), "--out", str(tmp_path / "p.txt")],
        f"{fewer}: the dataset has 3 labels but the model was trained on 4: predict with the dataset it was trained on",
    )


def test_an_unknown_query_warns(model_dir, capsys):
    code, out, err = run_cli(["predict", str(model_dir), "--text", "!!! zzz"], capsys)
    assert code == 0 and "warning: none of the query's words is in the model's vocabulary" in err
    code, out, err = run_cli(["predict", str(model_dir), "--text", "red apple"], capsys)
    assert code == 0 and "warning" not in err


@pytest.mark.parametrize("query", ["", "   ", "!!! zzz"])
def test_empty_and_unknown_queries_get_no_labels_and_a_flag_everywhere(model_dir, tmp_path, capsys, query):
    from gandalf_xmc.models.registry import load_trained
    from gandalf_xmc.predictor import load_predictor

    for model in (load_trained(model_dir), load_predictor(model_dir, light=True).model):  # the full and the light reader
        assert model.predict_labels([query, "red apple"], k=2)[0] == []
        assert len(model.predict_labels([query, "red apple"], k=2)[1]) == 2
        assert model.known_queries([query, "red apple"]) == [False, True]
    code, out, err = run_cli(["predict", str(model_dir), "--text", query, "--json"], capsys)
    assert code == 0 and json.loads(out) == {"text": query, "labels": [], "out_of_vocabulary": True}
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"title": query}) + "\n" + json.dumps({"title": "red apple"}) + "\n")
    code, out, err = run_cli(["predict", str(model_dir), "--input", str(queries), "-k", "2"], capsys)
    first, second = [json.loads(line) for line in out.splitlines()]
    assert first == {"title": query, "text": query, "labels": [], "out_of_vocabulary": True}
    assert "out_of_vocabulary" not in second and len(second["labels"]) == 2


@pytest.mark.neural
def test_resume_with_a_foreign_checkpoint(work, capsys):
    tmp, data = work
    out = tmp / "m"
    code, _, err = run_cli(
        [
            "train",
            "--model",
            "astec",
            "--data",
            str(data),
            "--out",
            str(out),
            "--epochs",
            "1",
            "--valid-fraction",
            "0",
            "--keep-checkpoints",
        ],
        capsys,
    )
    assert code == 0, err
    import torch

    state = torch.load(out / "checkpoints" / "last.pt", weights_only=True)
    state["model"] = {"encoder.embed.weight": torch.zeros(3, 3)}
    torch.save(state, out / "checkpoints" / "last.pt")
    code, _, err = run_cli(
        [
            "train",
            "--model",
            "astec",
            "--data",
            str(data),
            "--out",
            str(out),
            "--epochs",
            "2",
            "--valid-fraction",
            "0",
            "--resume",
        ],
        capsys,
    )
    assert code == 2 and err.startswith(f"error: {out / 'checkpoints' / 'last.pt'}: checkpoint does not match"), err


@pytest.mark.neural
def test_a_diverging_loss_stops_training(work, capsys, monkeypatch):
    import torch

    import gandalf_xmc.models.neural_training as loop

    tmp, data = work
    real = loop.NetworkObjective.loss
    monkeypatch.setattr(loop.NetworkObjective, "loss", lambda self, idx: real(self, idx) * torch.tensor(float("nan")))
    refused(
        capsys,
        tmp,
        ["train", "--model", "astec", "--data", str(data), "--out", str(tmp / "m"), "--epochs", "1"],
        "the loss became nan at epoch 1, step 1: training diverged (lower --label-point-weight or the learning rate); "
        "nothing was saved",
    )


# ---------------------------------------------------------------------------------------------- signals


def test_sigterm_during_augment_leaves_nothing(tmp_path):
    from gandalf_xmc.data.suite import suite_path

    out = tmp_path / "out"
    proc = subprocess.Popen(
        [sys.executable, "-m", "gandalf_xmc.cli", "augment", "--data", "debian-bookworm", "--out", str(out), "--no-progress"],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        text=True,
    )
    deadline = time.time() + 120
    while time.time() < deadline and not any(p.name.endswith(".tmp") for p in tmp_path.iterdir()):
        time.sleep(0.05)  # until the staging directory exists
    proc.send_signal(signal.SIGTERM)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 130 and "interrupted" in err
    assert list(tmp_path.iterdir()) == []  # no staging directory, no output
    assert suite_path("debian-bookworm").is_dir()


def test_sigterm_removes_a_temporary_directory_like_ctrl_c(tmp_path):
    """After ``terminate_like_interrupt`` (the CLI's and the benchmark suite's entry points), a
    SIGTERM unwinds as ``KeyboardInterrupt``, so a ``TemporaryDirectory`` in flight is removed."""
    import tempfile

    from gandalf_xmc.data.atomic import terminate_like_interrupt

    previous = signal.getsignal(signal.SIGTERM)
    try:
        terminate_like_interrupt()
        with pytest.raises(KeyboardInterrupt):
            with tempfile.TemporaryDirectory(dir=tmp_path) as tmp:
                (Path(tmp) / "checkpoint.pt").write_bytes(b"x")
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(1.0)  # the handler raises before this ends
        assert list(tmp_path.iterdir()) == []
    finally:
        signal.signal(signal.SIGTERM, previous)


def test_an_interrupt_while_writer_threads_start_is_handed_over_when_they_have(monkeypatch):
    """``interrupts_deferred`` holds SIGTERM back during the block (an interrupt inside
    ``ThreadPoolExecutor.submit`` could leave a worker the pool never joins) and hands it to the
    handler that was set, once the block ends; the handler is set back."""
    from gandalf_xmc.data.atomic import interrupts_deferred

    class Stopped(Exception):
        pass

    calls = []

    def handler(signum, frame):
        calls.append(signum)
        raise Stopped

    previous = signal.signal(signal.SIGTERM, handler)
    finished = []
    try:
        with pytest.raises(Stopped):
            with interrupts_deferred():
                os.kill(os.getpid(), signal.SIGTERM)
                time.sleep(0.05)  # the handler would have run by now
                finished.append(calls == [])
        assert finished == [True]  # the block ran to its end before the handler
        assert calls == [signal.SIGTERM] and signal.getsignal(signal.SIGTERM) is handler
    finally:
        signal.signal(signal.SIGTERM, previous)
