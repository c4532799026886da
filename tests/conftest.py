"""Fixtures shared by the tests (helpers live in ``helpers.py``)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from helpers import write_tiny_dataset


@pytest.fixture
def tiny_dir(tmp_path: Path) -> Path:
    return write_tiny_dataset(tmp_path / "tiny")


@pytest.fixture(autouse=True, scope="session")
def _own_cache(tmp_path_factory):
    """Locks, downloads and caches of the tests go to a directory of their own, not the user's."""
    import os

    os.environ["GANDALF_CACHE"] = str(tmp_path_factory.mktemp("cache"))
    yield


# A test marked with an extra's name is skipped where that extra is not installed (the core-only
# environment of `run.sh test`); the module named is the one the extra brings.
EXTRAS = {"neural": "torch", "serve": "starlette", "dask": "distributed", "plots": "matplotlib"}


def pytest_configure(config):
    for name, module in EXTRAS.items():
        config.addinivalue_line("markers", f"{name}: needs the [{name}] extra ({module})")
    config.addinivalue_line("markers", "gpu: needs a CUDA GPU that torch sees (skipped elsewhere; `pytest -m gpu` runs them)")


def _cuda_available() -> bool:
    import importlib.util

    if importlib.util.find_spec("torch") is None:
        return False
    import torch

    return torch.cuda.is_available()


def pytest_collection_modifyitems(config, items):
    import importlib.util

    missing = {name for name, module in EXTRAS.items() if importlib.util.find_spec(module) is None}
    if any(item.get_closest_marker("gpu") for item in items) and not _cuda_available():
        missing.add("gpu")
    for item in items:
        for name in missing & {m.name for m in item.iter_markers()}:
            why = "needs a CUDA GPU" if name == "gpu" else f"needs the [{name}] extra"
            item.add_marker(pytest.mark.skip(reason=why))


# a dataset to work on, and one model trained on the tiny dataset for a whole test module
@pytest.fixture
def work(tmp_path):
    data = write_tiny_dataset(tmp_path / "data")
    return tmp_path, data


@pytest.fixture(scope="module")
def model_dir(tmp_path_factory):
    root = tmp_path_factory.mktemp("model")
    data = write_tiny_dataset(root / "data")
    import contextlib
    import io

    from gandalf_xmc import cli

    old = sys.argv
    sys.argv = ["gandalf", "train", "--data", str(data), "--out", str(root / "m"), "--no-progress"]
    try:
        with contextlib.redirect_stdout(io.StringIO()), contextlib.suppress(SystemExit):
            cli.main()
    finally:
        sys.argv = old
    assert (root / "m" / "model.json").exists()
    return root / "m"


@pytest.fixture
def spilled_model(tiny_dir, tmp_path, monkeypatch):
    """A linear model whose levels went to files (a one-byte budget): its search layouts are mapped."""
    from gandalf_xmc.data import load_dataset
    from gandalf_xmc.engine import linear_solver
    from gandalf_xmc.models.linear import LinearConfig, XRLinear

    monkeypatch.setattr(linear_solver, "SPILL_BYTES", 1)
    ds = load_dataset(tiny_dir)
    model = XRLinear(LinearConfig(branching=2, leaf_size=2, threads=1))
    model.set_labels(ds.label_texts, ds.label_uids)
    model.fit(ds.train.texts, ds.train.Y, ds.label_texts, checkpoint_dir=tmp_path / "c", progress=False)
    model.save(tmp_path / "m")
    assert list((tmp_path / "m").glob("weights_level*/chunk_value.npy"))
    return tmp_path / "m"
