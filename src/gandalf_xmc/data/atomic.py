"""Write outputs under a temporary name and rename, so that a failure leaves nothing half-written."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import shutil
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import IO

from ..errors import OutputError


def _umask() -> int:
    mask = os.umask(0)
    os.umask(mask)
    return mask


_WRITE_ERRORS = {errno.ENOSPC, errno.EDQUOT, errno.EACCES, errno.EPERM, errno.EROFS, errno.EIO, errno.EFBIG}


@contextlib.contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; rename it to ``path`` only if the block succeeds."""
    path = Path(path)
    if path.is_dir():
        raise OutputError(path, "is a directory; give a file name")
    try:
        path.parent.mkdir(parents=True, exist_ok=True)
        fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    except OSError as exc:
        raise OutputError(path, f"cannot write here ({exc.strerror or exc})") from None
    os.close(fd)
    os.chmod(tmp, 0o666 & ~_umask())  # mkstemp makes 0600; give the file the usual permissions
    tmp_path = Path(tmp)
    try:
        yield tmp_path
        os.replace(tmp_path, path)
    except OSError as exc:
        if exc.errno in _WRITE_ERRORS:
            raise OutputError(path, f"cannot write ({exc.strerror})") from None
        raise
    finally:
        if tmp_path.exists():
            tmp_path.unlink()


# gzip level 1: several times faster than the default 9 on outputs of gigabytes, ~20% larger
GZIP_LEVEL = 1


@contextlib.contextmanager
def atomic_writer(path: str | Path, compresslevel: int = GZIP_LEVEL) -> Iterator[IO[bytes]]:
    """Open ``path`` for writing bytes (gzip if it ends in .gz) atomically."""
    path = Path(path)
    with atomic_path(path) as tmp, open(tmp, "wb") as raw:
        # no file name and mtime 0 in the gzip header: the same content gives the same bytes, and
        # `gzip -dN` cannot restore the temporary name
        fh: IO[bytes] = gzip.GzipFile(filename="", mode="wb", compresslevel=compresslevel, fileobj=raw, mtime=0) \
            if path.suffix == ".gz" else raw
        try:
            yield fh
        finally:
            if fh is not raw:
                fh.close()


@contextlib.contextmanager
def atomic_text_writer(path: str | Path, compresslevel: int = GZIP_LEVEL) -> Iterator[IO[str]]:
    """Open ``path`` for writing UTF-8 text (gzip if it ends in .gz) atomically."""
    with atomic_writer(path, compresslevel) as raw:
        fh = io.TextIOWrapper(raw, encoding="utf-8", newline="\n")
        try:
            yield fh
        finally:
            fh.flush()
            fh.detach()


def _same_or_inside(a: Path, b: Path) -> bool:
    a, b = a.resolve(), b.resolve()
    return a == b or b in a.parents or a in b.parents


def check_output_directory(out_dir: str | Path, force: bool = False, inputs: tuple = (),
                           reusable: str | None = None) -> Path:
    """Refuse an output directory that would clobber something: a file, the input (or a
    directory inside it or around it), or a directory with contents unless ``force``. A
    directory that holds only ``reusable`` (e.g. ``checkpoints`` to resume) is accepted."""
    out = Path(out_dir)
    for source in inputs:
        if source is not None and Path(source).exists() and _same_or_inside(out, Path(source)):
            raise OutputError(out, f"is the input {source} (or inside it): choose another --out")
    if out.exists() and not out.is_dir():
        raise OutputError(out, "exists and is not a directory")
    if out.is_dir() and not force:
        contents = {p.name for p in out.iterdir() if not p.name.startswith(".gandalf")}
        if contents and not (reusable is not None and contents <= {reusable}):
            raise OutputError(out, "exists and is not empty; pass --force to replace it")
    return out


@contextlib.contextmanager
def output_lock(out_dir: str | Path) -> Iterator[None]:
    """Keep a second gandalf command from writing ``out_dir`` at the same time: an advisory lock on a
    file named by the directory's absolute path in the cache (``locks/``), released when the process
    ends, however it ends. Lock files stay (empty): removing one would let a third process lock a
    new file while a second still waits on the old one."""
    import fcntl
    import hashlib

    from ..paths import cache_root

    out = Path(out_dir)
    lock_path = cache_root() / "locks" / (hashlib.sha1(str(out.resolve()).encode()).hexdigest() + ".lock")
    try:
        lock_path.parent.mkdir(parents=True, exist_ok=True)
        fh = open(lock_path, "a+")
    except OSError as exc:
        raise OutputError(out, f"cannot write here ({exc.strerror or exc})") from None
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputError(out, "another gandalf command is writing it; wait for it to finish") from None
        yield
    finally:
        fh.close()


@contextlib.contextmanager
def atomic_directory(out_dir: str | Path, force: bool = False, inputs: tuple = ()) -> Iterator[Path]:
    """Yield a fresh staging directory; when the block succeeds it takes ``out_dir``'s place (see
    :func:`replace_directory`), so readers see the old directory or the new one, never a mix. If
    the block fails or is interrupted, the staging directory is removed and ``out_dir`` is left as
    it was. ``force`` and ``inputs``: see :func:`check_output_directory`; a lock keeps a second
    writer out.
    """
    out_dir = check_output_directory(out_dir, force, inputs)
    with output_lock(out_dir):
        try:
            staging = _make_staging(out_dir)
            yield staging
            _swap_in(staging, out_dir)
        finally:
            _remove_staging(out_dir)


def replace_directory(out_dir: str | Path, write, keep: tuple[str, ...] = ()) -> None:
    """Write a new ``out_dir`` with ``write(staging)`` and swap it in for the old one: the old
    directory is renamed away, the staging directory renamed in, the old one removed. Entries of
    the old directory named in ``keep`` (a model's checkpoints) are carried over by renaming. The
    caller holds :func:`output_lock`."""
    out = Path(out_dir)
    try:
        staging = _make_staging(out)
        write(staging)
        _swap_in(staging, out, keep)
    finally:
        _remove_staging(out)


def _remove_staging(out: Path) -> None:
    """Every staging directory of ``out``: under the lock they are ours or stale, and removing them
    all (not only the one a name was bound to) also covers an interrupt that lands between
    ``mkdtemp`` making the directory and its name reaching the caller."""
    if out.parent.is_dir():
        for staging in out.parent.glob(f".{out.name}.*.tmp"):
            if staging.is_dir():
                shutil.rmtree(staging, ignore_errors=True)


def _make_staging(out: Path) -> Path:
    """A fresh staging directory beside ``out``. The caller holds the lock, so a staging or old
    directory of ``out`` that is already there was left by a writer killed outright: removed."""
    _remove_staging(out)
    if out.parent.is_dir():
        for stale in out.parent.glob(f".{out.name}.*.old"):
            if stale.is_dir():
                shutil.rmtree(stale, ignore_errors=True)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".tmp", dir=out.parent))
    except OSError as exc:
        raise OutputError(out, f"cannot write here ({exc.strerror or exc})") from None


def _swap_in(staging: Path, out: Path, keep: tuple[str, ...] = ()) -> None:
    moved: list[str] = []
    old = None
    try:
        os.chmod(staging, 0o777 & ~_umask())  # mkdtemp makes 0700
        for name in keep:
            if (out / name).exists():
                os.replace(out / name, staging / name)
                moved.append(name)
        if out.exists():
            old = Path(tempfile.mkdtemp(prefix=f".{out.name}.", suffix=".old", dir=out.parent))
            os.replace(out, old / "previous")
        os.replace(staging, out)
    except BaseException as exc:
        if old is not None and (old / "previous").exists() and not out.exists():
            os.replace(old / "previous", out)  # the old directory goes back
        for name in moved:
            if (staging / name).exists() and out.exists():
                os.replace(staging / name, out / name)
        if isinstance(exc, OSError) and exc.errno in _WRITE_ERRORS:
            raise OutputError(out, f"cannot write ({exc.strerror})") from None
        raise
    finally:
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
