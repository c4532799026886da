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


class OutputError(GandalfError):
    """An output that cannot or must not be written: names the path and the problem."""

    def __init__(self, path: str | Path, problem: str):
        self.path, self.problem = Path(path), problem
        super().__init__(f"{path}: {problem}")


class ConfigError(GandalfError, ValueError):
    """An invalid setting (a delta out of range, an unknown graph kind, ...)."""


class CheckpointError(DataFormatError):
    """A checkpoint that is missing, damaged, not ours, or written for another model or dataset."""


class TrainingDiverged(GandalfError):
    """The loss stopped being a finite number."""
