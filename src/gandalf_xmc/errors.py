"""Errors that the command line reports as one clear line (no traceback)."""

from __future__ import annotations

from pathlib import Path


class GandalfError(Exception):
    """Base class for every error meant for the user rather than for a developer."""


class DataFormatError(GandalfError):
    """Bad input: names the file, the 1-based line number (if known) and the problem."""

    def __init__(self, path: str | Path, line: int | None, problem: str):
        self.path = str(path)
        self.line = line
        self.problem = problem
        where = self.path if line is None else f"{self.path}:{line}"
        super().__init__(f"{where}: {problem}")


class ConfigError(GandalfError, ValueError):
    """An invalid setting (a delta out of range, an unknown graph kind, ...)."""
