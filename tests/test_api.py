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
    code = ("import sys, gandalf_xmc as g\n"
            "ds = g.load_dataset('jargon')\n"
            "train = g.training_set(ds, g.preset('gandalf', 0))\n"
            "m = g.XRLinear(g.LinearConfig()).fit(train.texts[:300], train.Y[:300], ds.label_texts, progress=False)\n"
            "print(m.predict(ds.test.texts[:5], k=3).shape, 'torch' in sys.modules)\n")
    out = subprocess.run([sys.executable, "-c", code], check=True, capture_output=True, text=True).stdout
    assert out.split()[-1] == "False"
