"""Where the library keeps what it downloads, builds or caches, and the scoped environment the
offline sentence model is loaded under."""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterator
from pathlib import Path


def cache_root() -> Path:
    """``$GANDALF_CACHE``, else ``~/.cache/gandalf-xmc``."""
    return Path(os.environ.get("GANDALF_CACHE") or Path.home() / ".cache" / "gandalf-xmc")


def cache_dir(name: str) -> Path:
    """``cache_root() / name``, made if missing; a cache that cannot be written is a GandalfError
    that says so (not the fault of whatever output the command writes)."""
    from .errors import GandalfError

    path = cache_root() / name
    try:
        path.mkdir(parents=True, exist_ok=True)
        if not os.access(path, os.W_OK | os.X_OK):
            raise PermissionError(13, "Permission denied")
    except OSError as exc:
        raise GandalfError(
            f"{path}: the cache directory cannot be written ({exc.strerror or exc}); set GANDALF_CACHE to a writable directory"
        ) from None
    return path


@contextlib.contextmanager
def offline_hub() -> Iterator[None]:
    """Hugging Face libraries told not to reach for a hub (and to keep quiet) while the block runs;
    the variables are restored after, so the setting does not outlive the model load."""
    wanted = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_VERBOSITY": "error"}
    before = {k: os.environ.get(k) for k in wanted}
    os.environ.update(wanted)
    try:
        yield
    finally:
        for k, v in before.items():
            if v is None:
                os.environ.pop(k, None)
            else:
                os.environ[k] = v
