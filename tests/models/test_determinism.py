"""Every model trained twice with the same seed in separate processes saves the same bytes (timings
aside). With another thread count, the linear model and knn still do; torch's parallel sums add in
another order, so the neural models' weights agree to float rounding and their rankings agree."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest


def train(data, out, model, threads, extra=()):
    cmd = [
        sys.executable,
        "-m",
        "gandalf_xmc.cli",
        "--threads",
        str(threads),
        "train",
        "--model",
        model,
        "--data",
        str(data),
        "--out",
        str(out),
        "--seed",
        "3",
        "--no-progress",
        *extra,
    ]
    subprocess.run(cmd, check=True, capture_output=True)


def same_model(a, b) -> list[str]:
    """Names of the files that differ (model.json compared without its timings)."""
    differ = []
    for f in sorted(a.iterdir()):
        if f.is_dir():
            continue
        other = b / f.name
        if f.name in ("model.json", "training.json"):

            def strip(d):
                if isinstance(d, dict):
                    return {k: strip(v) for k, v in d.items() if k not in ("seconds", "examples_per_second", "threads")}
                if isinstance(d, list):
                    return [strip(v) for v in d]
                return d

            if strip(json.loads(f.read_text())) != strip(json.loads(other.read_text())):
                differ.append(f.name)
        elif f.read_bytes() != other.read_bytes():
            differ.append(f.name)
    return differ


@pytest.mark.parametrize(
    "model,extra",
    [
        ("linear", ["--augment", "gandalf"]),
        ("knn", ["--augment", "identity"]),
        # on the CPU: a GPU's sums run in an order of their own (tests/models/test_devices.py)
        pytest.param("astec", ["--epochs", "2", "--augment", "labelmix", "--device", "cpu"], marks=pytest.mark.neural),
        pytest.param("inceptionxml", ["--epochs", "2", "--device", "cpu"], marks=pytest.mark.neural),
        pytest.param("inceptionxml-lf", ["--epochs", "1", "--augment", "gandalf", "--device", "cpu"], marks=pytest.mark.neural),
        pytest.param("dual-encoder", ["--epochs", "1", "--device", "cpu"], marks=pytest.mark.neural),
    ],
)
def test_same_seed_same_bytes_across_processes_and_threads(tiny_dir, tmp_path, model, extra):
    train(tiny_dir, tmp_path / "a", model, 1, extra)
    train(tiny_dir, tmp_path / "b", model, 1, extra)
    train(tiny_dir, tmp_path / "c", model, 2, extra)
    assert same_model(tmp_path / "a", tmp_path / "b") == []
    if model in ("linear", "knn"):
        assert same_model(tmp_path / "a", tmp_path / "c") == []
        return
    import numpy as np
    import torch

    from gandalf_xmc.data import load_dataset
    from gandalf_xmc.models.registry import load_trained

    wa = torch.load(tmp_path / "a" / "weights.pt", weights_only=True)
    wc = torch.load(tmp_path / "c" / "weights.pt", weights_only=True)
    for name in wa:
        assert torch.allclose(wa[name].float(), wc[name].float(), atol=1e-4), name
    texts = load_dataset(tiny_dir).test.texts
    pa, pc = (load_trained(tmp_path / d).predict(texts, k=3) for d in ("a", "c"))
    for i in range(len(texts)):
        assert sorted(pa[i].indices.tolist()) == sorted(pc[i].indices.tolist())
        np.testing.assert_allclose(np.sort(pa[i].data), np.sort(pc[i].data), atol=1e-4)
