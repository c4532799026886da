"""The top-level package exports the names programs need, lazily: the linear path never imports torch."""

from __future__ import annotations

import importlib.util
import subprocess
import sys

import gandalf_xmc


def test_every_exported_name_resolves():
    neural = importlib.util.find_spec("torch") is not None
    for name in gandalf_xmc.__all__:
        if neural or name not in ("NeuralXMC", "ModelConfig"):  # the [neural] extra's
            assert getattr(gandalf_xmc, name) is not None, name


def test_linear_path_does_not_import_torch():
    code = (
        "import sys, gandalf_xmc as g\n"
        "ds = g.load_dataset('jargon')\n"
        "train = g.training_set(ds, g.preset('gandalf', 0))\n"
        "m = g.XRLinear(g.LinearConfig()).fit(train.texts[:300], train.Y[:300], ds.label_texts, progress=False)\n"
        "print(m.predict(ds.test.texts[:5], k=3).shape, 'torch' in sys.modules)\n"
    )
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split()[-1] == "False"


def test_the_python_quick_start_trains_what_gandalf_train_trains(tmp_path, capsys):
    """The README's recipe in Python (a training set handed over by fit_model) and `gandalf train` with
    the same recipe and seed give the same model; handing over texts and Y alone drops the label
    points' half weight, and the model differs."""
    from helpers import run_cli, write_tiny_dataset

    words = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "peach"]
    train_rows = [
        (f"{size} {w} and {words[(j + 1) % 8]}", [j, (j + 1) % 8])
        for j, w in enumerate(words)
        for size in ("small", "big", "ripe")
    ]
    data = write_tiny_dataset(
        tmp_path / "d",
        train=train_rows,
        labels=[f"{w} fruit" for w in words],
        test=[(f"fresh {w} pie", [j]) for j, w in enumerate(words)],
        filters=None,
    )
    ds = gandalf_xmc.load_dataset(data)
    train = gandalf_xmc.training_set(ds, gandalf_xmc.preset("gandalf-tempered", seed=0))
    assert train.sample_weight.tolist() == [1.0] * 24 + [0.5] * 8
    model = gandalf_xmc.fit_model(gandalf_xmc.XRLinear(gandalf_xmc.LinearConfig()), train, ds.label_texts, progress=False)
    code, _, err = run_cli(
        [
            "train",
            "--data",
            str(data),
            "--augment",
            "gandalf-tempered",
            "--seed",
            "0",
            "--valid-fraction",
            "0",
            "--out",
            str(tmp_path / "m"),
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0, err
    trained = gandalf_xmc.load_trained(tmp_path / "m")
    texts = ds.test.texts
    assert (model.predict(texts, k=8) != trained.predict(texts, k=8)).nnz == 0
    unweighted = gandalf_xmc.XRLinear(gandalf_xmc.LinearConfig()).fit(train.texts, train.Y, ds.label_texts, progress=False)
    assert (unweighted.predict(texts, k=8) != trained.predict(texts, k=8)).nnz > 0
