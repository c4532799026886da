"""Training through the pipeline: validation labels never reach the label graph, the CLI resume
path, and killed commands (augment, train, predict) leave whole results or nothing."""

from __future__ import annotations

import json
import random
import signal
import subprocess
import sys
import time

import numpy as np
import pytest

from gandalf_xmc.augment import AugmentConfig, build_training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.graph import GraphConfig, label_graph
from gandalf_xmc.workflow.pipeline import carve_validation

from helpers import write_tiny_dataset


def test_validation_labels_never_reach_the_label_graph(tmp_path, monkeypatch):
    # label 3 is on one training point only; with that point carved out for validation, label 3's
    # extra point may only point at itself
    data = write_tiny_dataset(
        tmp_path / "d",
        train=[
            ("fresh red apple", [0, 1]),
            ("apple pie with green apple", [0, 1, 2]),
            ("red apple juice", [0, 3]),
            ("homemade apple pie", [2]),
            ("red apple pie", [0, 2]),
        ],
        filters=None,
    )
    ds = load_dataset(data)
    for seed in range(20):
        rest, valid = carve_validation(ds, 0.2, seed)
        if "red apple juice" in valid.texts:
            break
    else:
        pytest.fail("no seed carves the label-3 point out")
    built = build_training_set(rest, AugmentConfig("gandalf", GraphConfig(delta=0.0)))
    extra = built.split.Y[built.is_label_point].toarray()
    assert extra[3].tolist() == [0, 0, 0, 1]
    np.testing.assert_allclose(extra, label_graph(rest.train.Y, GraphConfig(delta=0.0)).toarray(), rtol=1e-6)
    full = label_graph(ds.train.Y, GraphConfig(delta=0.0)).toarray()
    assert full[3, 0] == 1.0  # with the validation point, label 3 would have pointed at label 0
    from gandalf_xmc.models import linear

    seen = []
    real = linear.XRLinear.fit

    def spy(self, texts, Y=None, *args, **kwargs):
        seen.append((texts.Y if Y is None else Y).toarray())  # the workflow hands over a TrainingSet
        return real(self, texts, Y, *args, **kwargs)

    monkeypatch.setattr(linear.XRLinear, "fit", spy)
    from gandalf_xmc.models.registry import model_config
    from gandalf_xmc.workflow.pipeline import train_model

    trained = train_model(
        ds,
        tmp_path / "m",
        model_config("linear", seed=seed),
        AugmentConfig("gandalf", GraphConfig(delta=0.0), seed=seed),
        valid_fraction=0.2,
        progress=False,
    )
    assert trained.info["n_valid"] == 1
    validated, final = seen  # the validation run, then the final model on every point
    np.testing.assert_allclose(validated[-4:], extra, rtol=1e-6)
    np.testing.assert_allclose(final[-4:], full, rtol=1e-6)


def test_train_model_refuses_auto_with_a_recipe_setting_and_writes_nothing(tiny_dir, tmp_path):
    from gandalf_xmc.errors import ConfigError
    from gandalf_xmc.models.registry import model_config
    from gandalf_xmc.workflow.pipeline import train_model

    ds = load_dataset(tiny_dir)
    for config, named in (
        (AugmentConfig("auto", label_point_floors=True), "label_point_floors"),
        (AugmentConfig("auto", GraphConfig(delta=0.3), label_point_share=0.5), "graph, label_point_share"),
    ):
        with pytest.raises(ConfigError, match=f"^{named}: 'auto' trains its own candidates' recipes"):
            train_model(ds, tmp_path / "m", model_config("linear"), config, progress=False)
        assert not (tmp_path / "m").exists()
    AugmentConfig("auto", seed=7).validate()  # the seed is auto's own: it seeds the search


def gandalf(*args, threads=1):
    return [sys.executable, "-m", "gandalf_xmc.cli", "--threads", str(threads), *args, "--no-progress"]


@pytest.mark.neural
def test_cli_resume_equals_an_uninterrupted_run(tiny_dir, tmp_path):
    base = ["train", "--model", "astec", "--data", str(tiny_dir), "--seed", "1", "--valid-fraction", "0.25", "--no-refit"]
    subprocess.run(gandalf(*base, "--epochs", "4", "--out", str(tmp_path / "whole")), check=True, capture_output=True)
    subprocess.run(
        gandalf(*base, "--epochs", "2", "--out", str(tmp_path / "part"), "--keep-checkpoints"), check=True, capture_output=True
    )
    subprocess.run(gandalf(*base, "--epochs", "4", "--out", str(tmp_path / "part"), "--resume"), check=True, capture_output=True)
    assert (tmp_path / "whole" / "weights.pt").read_bytes() == (tmp_path / "part" / "weights.pt").read_bytes()
    history = json.loads((tmp_path / "part" / "model.json").read_text())["result"]["history"]
    assert [h["epoch"] for h in history] == [0, 1, 2, 3]


def _kill_at_random(cmd, rng, low, high, sig):
    proc = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    time.sleep(rng.uniform(low, high))
    proc.send_signal(sig)
    proc.wait(timeout=120)


@pytest.mark.neural
def test_killed_commands_leave_whole_results_or_nothing(tiny_dir, tmp_path):
    """Fault injection: augment, train and predict killed at random times (seeded; SIGTERM, and
    SIGKILL which nothing can catch), then run again: the outputs are whole or absent, nothing
    half-written is left, and the resumed training ends with the uninterrupted run's weights."""
    rng = random.Random(7)
    train = ["train", "--model", "astec", "--data", str(tiny_dir), "--seed", "2", "--epochs", "6", "--valid-fraction", "0.25"]
    subprocess.run(gandalf(*train, "--out", str(tmp_path / "whole")), check=True, capture_output=True)
    want = (tmp_path / "whole" / "weights.pt").read_bytes()
    for trial in range(3):
        sig = (signal.SIGTERM, signal.SIGKILL)[trial % 2]
        out = tmp_path / f"t{trial}"
        _kill_at_random(gandalf(*train, "--out", str(out)), rng, 2.0, 8.0, sig)
        if (out / "model.json").exists():  # finished before the signal: a whole model
            assert (out / "weights.pt").read_bytes() == want
            continue
        done = subprocess.run(gandalf(*train, "--out", str(out), "--resume"), capture_output=True, text=True)
        if done.returncode == 2 and "nothing to resume" in done.stderr:  # killed before the first checkpoint
            done = subprocess.run(gandalf(*train, "--out", str(out), "--force"), capture_output=True, text=True)
        assert done.returncode == 0, done.stderr
        assert (out / "weights.pt").read_bytes() == want
    for trial in range(3):
        sig = (signal.SIGKILL, signal.SIGTERM)[trial % 2]
        out = tmp_path / f"a{trial}"
        _kill_at_random(gandalf("augment", "--data", "debian-bookworm", "--out", str(out)), rng, 0.5, 4.0, sig)
        if out.exists():
            assert json.loads((out / "augment.json").read_text())["n_original_train"] > 0
            load_dataset(out, splits=("trn",))
        rerun = subprocess.run(
            gandalf("augment", "--data", str(tiny_dir), "--out", str(out), "--force"), capture_output=True, text=True
        )
        assert rerun.returncode == 0, rerun.stderr
    pred = tmp_path / "pred.txt"
    _kill_at_random(
        gandalf("predict", str(tmp_path / "whole"), "--data", str(tiny_dir), "--out", str(pred)), rng, 0.5, 3.0, signal.SIGKILL
    )
    if pred.exists():
        assert pred.read_text().splitlines()[0] == "3 4"
    leftovers = [p.name for p in tmp_path.iterdir() if p.name.startswith(".") and p.suffix in (".tmp", ".old")]
    assert leftovers == []
