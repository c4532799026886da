"""Fixtures shared by the tests (helpers live in ``helpers.py``)."""

from __future__ import annotations

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
