"""JSON from files and requests that other people wrote: every way it can fail (malformed, nested
deeper than the parser's stack, an integer of thousands of digits) becomes one short reason,
never a RecursionError or a stray ValueError (the standard library raises all three)."""

from __future__ import annotations

import json
from pathlib import Path

from .errors import DataFormatError


class JSONProblem(ValueError):
    """Text that is not acceptable JSON; the message is the reason, fit for one line."""


def loads(text: str | bytes):
    """``json.loads`` with every failure a :class:`JSONProblem` (NaN and Infinity are parsed as
    Python's json parses them: callers that need finite numbers check them)."""
    try:
        return json.loads(text)
    except RecursionError:
        raise JSONProblem("malformed JSON (nested too deeply)") from None
    except json.JSONDecodeError as exc:
        raise JSONProblem(f"malformed JSON ({exc.msg}: line {exc.lineno} column {exc.colno})") from None
    except UnicodeDecodeError:
        raise JSONProblem("not valid UTF-8 text") from None
    except ValueError as exc:  # e.g. an integer past the interpreter's digit limit
        first = str(exc).split(";")[0].split(":")[0]
        raise JSONProblem(f"malformed JSON ({first})") from None


def read_json_file(path: str | Path, max_bytes: int = 1 << 30):
    """The JSON document in ``path`` (a small description file: ``dataset.json``,
    ``model.json``...): refused with a DataFormatError naming the file when it is not a regular
    file, larger than ``max_bytes``, or not JSON."""
    import os
    import stat

    path = Path(path)
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):  # before open: opening a FIFO waits for a writer
            raise DataFormatError(path, None, "not a regular file")
        with open(path, "rb") as fh:
            if info.st_size > max_bytes:
                raise DataFormatError(path, None, f"{info.st_size:,} bytes: larger than a description file can be")
            raw = fh.read(max_bytes + 1)
    except FileNotFoundError:
        raise
    except IsADirectoryError:
        raise DataFormatError(path, None, "is a directory, expected a file") from None
    except OSError as exc:
        raise DataFormatError(path, None, f"cannot read ({exc.strerror or exc})") from None
    try:
        return loads(raw)
    except JSONProblem as exc:
        raise DataFormatError(path, None, str(exc)) from None


def shown(value, style: str = "json", limit: int = 80) -> str:
    """``value`` for an error message: as JSON (``style="json"``) or Python's repr ("repr"), cut to
    ``limit`` characters, and never recursing into nesting deep enough to overflow the stack (a
    parser that accepts it, as older orjson does, hands such values on)."""
    try:
        text = json.dumps(value, ensure_ascii=False) if style == "json" else repr(value)
    except (RecursionError, TypeError, ValueError):
        text = "a deeply nested " + ("list" if isinstance(value, list) else type(value).__name__)
    return text if len(text) <= limit else text[: limit - 3] + "..."
