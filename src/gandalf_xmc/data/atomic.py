"""Write outputs under a temporary name and rename, so that a failure leaves nothing half-written."""

from __future__ import annotations

import contextlib
import errno
import gzip
import io
import os
import re
import shutil
import signal
import stat
import sys
import tempfile
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import IO, Any, cast

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
        fh = cast(
            IO[bytes],
            gzip.GzipFile(filename="", mode="wb", compresslevel=compresslevel, fileobj=raw, mtime=0)
            if path.suffix == ".gz"
            else raw,
        )
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


def check_output_file(path: str | Path, force: bool = False, inputs: tuple = (), closed: tuple = ()) -> Path | None:
    """Where a command's output file goes, by the rule every command follows: a new path, or an
    existing regular file with ``force``; never a directory or a block device; never one of
    ``inputs`` even with ``force`` (an input file, or any existing file under an input directory:
    a new file beside a dataset's is fine); nothing under a directory of ``closed`` (a model
    directory). A symbolic link is followed: the file it names is written, the link stays.

    Returns the regular file to write atomically, or None when ``path`` is ``-`` (standard
    output) or a character device, FIFO or socket, which is written to, not replaced."""
    if str(path) == "-":
        return None
    given = Path(path)
    try:
        mode: int | None = given.stat().st_mode  # through a link
    except FileNotFoundError:
        mode = None
    except OSError as exc:
        raise OutputError(given, f"cannot write here ({exc.strerror or exc})") from None
    if mode is not None and stat.S_ISDIR(mode):
        raise OutputError(given, "is a directory; give a file name")
    if mode is not None and not stat.S_ISREG(mode):
        if stat.S_ISCHR(mode) or stat.S_ISFIFO(mode) or stat.S_ISSOCK(mode):
            return None
        raise OutputError(given, "is a block device, not a file: refused")
    target = given.resolve() if given.is_symlink() else given
    real = target.resolve()
    for directory in closed:
        if directory is not None and Path(directory).is_dir() and _same_or_inside(real, Path(directory)):
            raise OutputError(given, f"is inside {directory}, which this command reads: choose another --out")
    if mode is not None:
        for source in inputs:
            if source is None or not Path(source).exists():
                continue
            source_real = Path(source).resolve()
            if source_real in real.parents or os.path.samefile(source_real, real):
                raise OutputError(given, f"is an input of this command ({source}): choose another --out")
        if not force:
            raise OutputError(given, "exists; pass --force to replace it")
    return target


@contextlib.contextmanager
def output_file(path: str | Path, force: bool = False, inputs: tuple = (), closed: tuple = ()) -> Iterator[IO[bytes]]:
    """Open a command's output file for bytes by :func:`check_output_file`'s rule: a regular file
    is written atomically (gzip if it ends in .gz), ``-`` is standard output, and a character
    device or FIFO is written to in place."""
    target = check_output_file(path, force, inputs, closed)
    if target is not None:
        with atomic_writer(target) as fh:
            yield fh
        return
    if str(path) == "-":
        sys.stdout.flush()
        yield sys.stdout.buffer
        sys.stdout.buffer.flush()
        return
    try:
        raw = open(path, "wb")
    except OSError as exc:
        raise OutputError(path, f"cannot write ({exc.strerror or exc})") from None
    with raw:
        yield raw


def _same_or_inside(a: Path, b: Path) -> bool:
    a, b = a.resolve(), b.resolve()
    return a == b or b in a.parents or a in b.parents


def check_output_directory(out_dir: str | Path, force: bool = False, inputs: tuple = (), reusable: str | None = None) -> Path:
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

    from ..paths import cache_dir

    out = Path(out_dir)
    lock_path = cache_dir("locks") / (hashlib.sha1(str(out.resolve()).encode()).hexdigest() + ".lock")
    try:
        fh = open(lock_path, "a+")
    except OSError as exc:
        from ..errors import GandalfError

        raise GandalfError(
            f"{lock_path}: the cache directory cannot be written ({exc.strerror or exc}); set "
            "GANDALF_CACHE to a writable directory"
        ) from None
    try:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            raise OutputError(out, "another gandalf command is writing it; wait for it to finish") from None
        yield
    finally:
        fh.close()


def terminate_like_interrupt() -> None:
    """Make SIGTERM unwind like Ctrl-C (``KeyboardInterrupt``), so that staging directories and
    temporary directories are removed when a process is stopped with ``kill``. For entry points
    only: it sets a process-wide handler, from the main thread."""

    def _interrupt(signum, frame) -> None:
        print("interrupted", file=sys.stderr)
        raise KeyboardInterrupt

    signal.signal(signal.SIGTERM, _interrupt)


@contextlib.contextmanager
def interrupts_deferred() -> Iterator[None]:
    """SIGINT and SIGTERM that arrive during the block are held and handed to their handlers as it
    ends. Starting writer threads needs it: an interrupt raised inside ``ThreadPoolExecutor.submit``
    can leave a started worker the pool never joins (CPython records the thread after starting
    it), which then writes into a staging directory being removed. Handlers can only be set from
    the main thread; elsewhere the block runs as it is."""
    if threading.current_thread() is not threading.main_thread():
        yield
        return
    held: list[tuple[int, Any]] = []
    previous: dict[int, Any] = {int(number): signal.getsignal(number) for number in (signal.SIGINT, signal.SIGTERM)}
    for number in previous:
        signal.signal(number, lambda signum, frame: held.append((signum, frame)))
    try:
        yield
    finally:
        for number, handler in previous.items():
            signal.signal(number, handler)
        if held:
            signum, frame = held[0]
            handler = previous[signum]
            if callable(handler):
                handler(signum, frame)
            elif handler == signal.SIG_DFL:
                os.kill(os.getpid(), signum)  # the default action, now that it is back


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


# Staging and old directories get names no user writes (``.NAME.gandalf-staging-XXXXXXXX.tmp``,
# ``.NAME.gandalf-old-XXXXXXXX.old``, XXXXXXXX from mkdtemp) and a marker file inside: clean-up
# removes only a directory whose whole name matches its own output's pattern and that holds the
# marker (or nothing at all), so a user's ``.NAME.mine.tmp`` and a writer of ``NAME.b`` are safe.
STAGING_MARK = ".gandalf-staging"
_TEMP_CHARS = "[a-z0-9_]{8}"  # tempfile's random names: 8 of these characters


def _own_directories(out: Path, kind: str) -> list[Path]:
    """``out``'s staging (``kind`` "staging") or old (``kind`` "old") directories left by this
    program: exact name and the marker (an empty one is an interrupted ``mkdtemp``)."""
    suffix = "tmp" if kind == "staging" else "old"
    pattern = re.compile(rf"\.{re.escape(out.name)}\.gandalf-{kind}-{_TEMP_CHARS}\.{suffix}")
    found = []
    if out.parent.is_dir():
        for entry in out.parent.iterdir():
            if pattern.fullmatch(entry.name) and entry.is_dir() and not entry.is_symlink():
                try:
                    contents = {p.name for p in entry.iterdir()}
                except OSError:
                    continue
                if not contents or STAGING_MARK in contents:
                    found.append(entry)
    return found


def _new_directory(out: Path, kind: str) -> Path:
    """A fresh staging (or old) directory beside ``out``, with its marker."""
    path = Path(
        tempfile.mkdtemp(prefix=f".{out.name}.gandalf-{kind}-", suffix=".tmp" if kind == "staging" else ".old", dir=out.parent)
    )
    (path / STAGING_MARK).touch()
    return path


def _remove_staging(out: Path) -> None:
    """Every staging directory of ``out`` (the caller holds its lock, so they are ours or a killed
    writer's): removing them all, not only the one a name was bound to, also covers an interrupt
    that lands between ``mkdtemp`` making the directory and its name reaching the caller."""
    for staging in _own_directories(out, "staging"):
        shutil.rmtree(staging, ignore_errors=True)


def _make_staging(out: Path) -> Path:
    """A fresh staging directory beside ``out``. The caller holds the lock, so a staging or old
    directory of ``out`` that is already there was left by a writer killed outright: removed, after
    an old directory whose swap was cut short (``out`` gone) is put back in place."""
    _remove_staging(out)
    for stale in _own_directories(out, "old"):
        if (stale / "previous").exists() and not out.exists() and not out.is_symlink():
            os.replace(stale / "previous", out)
        shutil.rmtree(stale, ignore_errors=True)
    try:
        out.parent.mkdir(parents=True, exist_ok=True)
        return _new_directory(out, "staging")
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
            old = _new_directory(out, "old")
            os.replace(out, old / "previous")
        os.replace(staging, out)
        (out / STAGING_MARK).unlink(missing_ok=True)  # after the swap: a staging directory always has it
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
