"""Reading other people's files with bounded memory: only regular files are opened (a FIFO would
wait forever, ``/dev/zero`` never ends), a line is read at most ``MAX_LINE_BYTES`` at a time (a
gzip that inflates into one endless line stops at the limit, not at the OOM killer), and a
compressed file may not inflate past the memory the machine has. Standard library only: the
query reader of ``gandalf predict`` uses it on its fast start."""

from __future__ import annotations

import gzip
import os
import stat
from collections.abc import Iterator
from pathlib import Path
from typing import IO, cast

from .errors import DataFormatError

# far above any text, label list or feature row of the field's formats, far below memory
MAX_LINE_BYTES = 16 << 20


def available_memory() -> int:
    """Bytes of memory available now (MemAvailable on Linux, else the physical memory)."""
    try:
        with open("/proc/meminfo") as fh:
            for line in fh:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def check_regular(path: str | Path) -> None:
    """Raise DataFormatError unless ``path`` (followed through links) is a regular file; called
    before opening, since opening a FIFO already blocks."""
    try:
        mode = os.stat(path).st_mode
    except FileNotFoundError:
        raise DataFormatError(path, None, "file not found") from None
    except PermissionError:
        raise DataFormatError(path, None, "cannot read: permission denied") from None
    except OSError as exc:
        raise DataFormatError(path, None, f"cannot read: {exc.strerror or exc}") from None
    if stat.S_ISDIR(mode):
        raise DataFormatError(path, None, "is a directory, expected a file")
    if not stat.S_ISREG(mode):
        raise DataFormatError(path, None, "not a regular file (a device, pipe or socket): give a file")


def open_input(path: str | Path) -> IO[bytes]:
    """A regular file opened for bytes, decompressed if its name ends in ``.gz``."""
    path = Path(path)
    check_regular(path)
    try:
        return cast(IO[bytes], gzip.open(path, "rb") if path.suffix == ".gz" else open(path, "rb"))
    except PermissionError:
        raise DataFormatError(path, None, "cannot read: permission denied") from None
    except OSError as exc:
        raise DataFormatError(path, None, f"cannot read: {exc.strerror or exc}") from None


def bounded_lines(
    fh: IO[bytes], name: str | Path, max_line: int | None = None, max_total: int | None = None, block: int = 1 << 20
) -> Iterator[tuple[int, bytes]]:
    """``(line number from 1, raw line without its newline)`` of ``fh``, read ``block`` bytes at a
    time and split in C (several times faster than a readline a line): a line longer than
    ``max_line`` (default :data:`MAX_LINE_BYTES`) is a DataFormatError naming it, as is reading
    more than ``max_total`` bytes in all (a decompression bomb)."""
    limit = MAX_LINE_BYTES if max_line is None else max_line
    budget = float("inf") if max_total is None else max_total
    total = 0  # bytes of the lines yielded, newlines included
    lineno = 0
    rest = b""

    def refuse(at: int, problem: str):
        return DataFormatError(name, at, problem)

    too_long = f"a line longer than {limit:,} bytes: not a file of this format"
    too_much = f"inflates past {budget / 2**30:.1f} GiB, more than this machine's available memory"
    while True:
        chunk = fh.read(block)
        if not chunk:
            break
        lines = (rest + chunk).split(b"\n") if rest else chunk.split(b"\n")
        rest = lines.pop()
        for line in lines:
            lineno += 1
            total += len(line) + 1
            if len(line) > limit:
                raise refuse(lineno, too_long)
            if total > budget:
                raise refuse(lineno, too_much)
            yield lineno, line
        if len(rest) > limit:
            raise refuse(lineno + 1, too_long)
        if total + len(rest) > budget:
            raise refuse(lineno + 1, too_much)
    if rest:
        yield lineno + 1, rest
