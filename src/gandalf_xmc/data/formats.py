"""Readers and writers for the Extreme Classification Repository's file formats.

Every reader validates what it reads and raises :class:`~gandalf_xmc.errors.DataFormatError`
naming the file, the 1-based line number and the problem. Every writer writes to a temporary
name and renames, so that a failure leaves no half-written file.

Formats (the Extreme Classification Repository's; details the papers leave open: docs/decisions.md,
"Where the papers are silent"):

* LF raw JSON lines (``trn.json.gz``, ``tst.json.gz``, ``lbl.json.gz``): one object a line with
  ``uid``, ``title`` and, for data points, ``target_ind`` plus optional ``target_rel``.
* Sparse matrix text (``trn_X_Y.txt``, prediction files): header ``rows cols``, then one line a
  row of ``index:value`` pairs (0-based); an empty line is an empty row.
* Bag-of-words "XMLRepo" text: header ``N D L``, then ``l1,l2 f:v f:v`` a line.
* Filter pairs (``filter_labels_test.txt``): ``row label`` a line.
"""

from __future__ import annotations

import gzip
import re
import zipfile
import zlib
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import IO

import numpy as np
import orjson
import scipy.sparse as sp

from ..errors import DataFormatError
from ..inputs import available_memory, bounded_lines, open_input
from ..jsonio import JSONProblem, shown
from ..jsonio import loads as json_loads
from .atomic import atomic_text_writer, atomic_writer
from .render import (
    INDICES,
    PAIRS,
    VALUES,
    render_rows,
    row_blocks,
    sparse_text_chunks,
    split_rows,
    streamed_sparse_text_chunks,
)

_CHUNK = 200_000  # lines parsed before their indices are packed into numpy arrays


# --------------------------------------------------------------------------------------------
# Reading lines safely


def iter_lines(path: str | Path, strip_bom: bool = False) -> Iterator[tuple[int, str]]:
    """Yield ``(line_number, line_without_newline)`` with 1-based numbers.

    Lines are decoded one at a time, so a bad byte is reported on its own line. Turns the many
    ways a file can be broken (truncated or corrupt gzip, bad UTF-8, an unreadable path, a device
    or FIFO, a line past :data:`..inputs.MAX_LINE_BYTES`, a gzip that inflates past the memory
    available) into one :class:`DataFormatError`. ``strip_bom``: a UTF-8 byte-order mark opening
    the file is not text.
    """
    path = Path(path)
    fh = open_input(path)
    max_total = available_memory() if path.suffix == ".gz" else None
    lineno = 0
    try:
        with fh:
            for lineno, raw in bounded_lines(fh, path, max_total=max_total):
                if lineno == 1 and strip_bom and raw.startswith(b"\xef\xbb\xbf"):
                    raw = raw[3:]
                try:
                    line = raw.decode("utf-8")
                except UnicodeDecodeError:
                    raise DataFormatError(path, lineno, "not valid UTF-8 text") from None
                yield lineno, line.rstrip("\r")
    except EOFError:
        raise DataFormatError(path, lineno + 1, "truncated gzip file (compressed stream ends early)") from None
    except (gzip.BadGzipFile, zlib.error) as exc:
        raise DataFormatError(path, lineno + 1, f"corrupt gzip file ({exc})") from None
    except PermissionError:
        raise DataFormatError(path, None, "cannot read: permission denied") from None
    except IsADirectoryError:
        raise DataFormatError(path, None, "is a directory, expected a file") from None


# --------------------------------------------------------------------------------------------
# LF raw JSON lines


@dataclass
class LFRecords:
    """Contents of one LF JSON-lines file.

    ``Y`` is ``None`` for label files (no ``target_ind`` field anywhere); otherwise a CSR
    matrix of shape ``(len(texts), n_labels)`` with float32 relevance values (1.0 where the
    file gives no ``target_rel``).
    """

    uids: list[str]
    texts: list[str]
    Y: sp.csr_matrix | None
    groups: list[str] | None = None  # each line's "group" field, when the file has one


class _CsrBuilder:
    """Accumulates rows of (indices, values) in chunks, validating each chunk with numpy."""

    def __init__(self, path: Path, n_cols: int | None, check_values: bool, duplicates: str = "merge"):
        self.path = path
        self.duplicates = duplicates  # "merge": summed (relevances clipped to 1); "error": refused
        self.n_cols = n_cols
        self.check_values = check_values
        self.indptr: list[np.ndarray] = [np.zeros(1, dtype=np.int64)]
        self.indices: list[np.ndarray] = []
        self.values: list[np.ndarray] = []
        self._ind: list = []
        self._val: list = []
        self._len: list[int] = []
        self._lines: list[int] = []
        self._all_lines: list[int] = []  # the line of every row, for errors found after reading
        self._total = 0
        self.max_index = -1

    def add(self, lineno: int, indices: list, values: list | None) -> None:
        self._ind.extend(indices)
        if values is None:
            self._val.extend([1.0] * len(indices))
        else:
            self._val.extend(values)
        self._len.append(len(indices))
        self._lines.append(lineno)
        self._all_lines.append(lineno)
        if len(self._len) >= _CHUNK:
            self.flush()

    def line_of_row(self, row: int) -> int | None:
        return self._all_lines[row] if row < len(self._all_lines) else None

    def _fail_at(self, offsets: np.ndarray, bad_pos: int, problem: str) -> None:
        row = int(np.searchsorted(offsets, bad_pos, side="right")) - 1
        raise DataFormatError(self.path, self._lines[row], problem)

    def flush(self) -> None:
        if not self._len:
            return
        offsets = np.zeros(len(self._len) + 1, dtype=np.int64)
        np.cumsum(self._len, out=offsets[1:])
        bools = [pos for pos, value in enumerate(self._ind) if type(value) is bool]  # numpy would make True a 1
        if bools:
            self._fail_at(offsets, bools[0], f"label id {shown(self._ind[bools[0]])} is not an integer")
        try:
            ind = np.array(self._ind)
        except (ValueError, TypeError, OverflowError):
            ind = np.array(self._ind, dtype=object)
        if ind.size and ind.dtype.kind not in "iu":
            for pos, value in enumerate(self._ind):
                if isinstance(value, int) or (isinstance(value, float) and value.is_integer()):
                    if not -(2**62) < value < 2**62:
                        self._fail_at(offsets, pos, f"label id {shown(value, 'repr')} is out of range")
                if not isinstance(value, int):
                    self._fail_at(offsets, pos, f"label id {shown(value, 'repr')} is not an integer")
        ind = ind.astype(np.int64, copy=False)
        if ind.size:
            neg = np.flatnonzero(ind < 0)
            if neg.size:
                self._fail_at(offsets, int(neg[0]), f"label id {int(ind[neg[0]])} is negative")
            if self.n_cols is not None:
                big = np.flatnonzero(ind >= self.n_cols)
                if big.size:
                    pos = int(big[0])
                    self._fail_at(offsets, pos, f"label id {int(ind[pos])} is out of range (number of labels L = {self.n_cols})")
            self.max_index = max(self.max_index, int(ind.max()))
        try:
            val = np.array(self._val, dtype=np.float64)
        except (ValueError, TypeError):
            for pos, value in enumerate(self._val):
                if not isinstance(value, (int, float)) or isinstance(value, bool):
                    self._fail_at(offsets, pos, f"relevance value {shown(value, 'repr')} is not a number")
            raise
        if val.size:
            bad = np.flatnonzero(~np.isfinite(val))
            if bad.size:
                self._fail_at(offsets, int(bad[0]), f"relevance value {val[bad[0]]} is not finite")
            if self.check_values:
                bad = np.flatnonzero((val < 0) | (val > 1))
                if bad.size:
                    self._fail_at(offsets, int(bad[0]), f"relevance value {val[bad[0]]:g} is outside [0, 1]")
        self.indptr.append(offsets[1:] + self._total)
        self._total += int(offsets[-1])
        self.indices.append(ind.astype(np.int32))
        self.values.append(val.astype(np.float32))
        self._ind, self._val, self._len, self._lines = [], [], [], []

    def _refuse_duplicates(self, M: sp.csr_matrix) -> None:
        rows = np.repeat(np.arange(M.shape[0], dtype=np.int64), np.diff(M.indptr))
        keys = rows * max(M.shape[1], 1) + M.indices
        order = np.argsort(keys, kind="stable")
        same = np.flatnonzero(keys[order][1:] == keys[order][:-1])
        if same.size:
            row = int(rows[order][same[0]])
            raise DataFormatError(
                self.path, self.line_of_row(row), f"label {int(M.indices[order][same[0]])} appears twice in this row"
            )

    def build(self, n_rows: int) -> sp.csr_matrix:
        self.flush()
        n_cols = self.n_cols if self.n_cols is not None else self.max_index + 1
        indptr = np.concatenate(self.indptr)
        indices = np.concatenate(self.indices) if self.indices else np.zeros(0, np.int32)
        values = np.concatenate(self.values) if self.values else np.zeros(0, np.float32)
        Y = sp.csr_matrix((values, indices, indptr), shape=(n_rows, n_cols))
        if self.duplicates == "error":
            self._refuse_duplicates(Y)
        Y.sum_duplicates()  # duplicate ids in one row are summed ...
        if self.check_values and Y.data.size and Y.data.max() > 1:
            np.minimum(Y.data, 1.0, out=Y.data)  # ... and, for relevances, clipped to 1
        Y.eliminate_zeros()
        return Y


def _json_object(path: Path, lineno: int, line: str) -> dict:
    """Line ``lineno`` of an LF JSON file as its object."""
    if not line.strip():
        raise DataFormatError(path, lineno, "empty line (every line must be one JSON object)")
    try:
        obj = orjson.loads(line)
    except orjson.JSONDecodeError as exc:
        try:  # Python's json accepts NaN/Infinity, which then get a precise error later
            obj = json_loads(line)
        except JSONProblem:
            raise DataFormatError(path, lineno, f"malformed JSON ({exc.args[0] if exc.args else exc})") from None
    if not isinstance(obj, dict):
        raise DataFormatError(path, lineno, "expected a JSON object")
    return obj


def _line_targets(path: Path, lineno: int, obj: dict, required: bool) -> tuple[list, list | None] | None:
    """A line's ``(target_ind, target_rel)`` lists as written (None for a line without targets
    where they are not ``required``); their values are checked as they are added."""
    ind = obj.get("target_ind")
    if ind is None:
        if required:
            raise DataFormatError(path, lineno, "missing 'target_ind'")
        return None
    if not isinstance(ind, list):
        raise DataFormatError(path, lineno, "'target_ind' must be a list of label ids")
    rel = obj.get("target_rel")
    if rel is not None:
        if not isinstance(rel, list):
            raise DataFormatError(path, lineno, "'target_rel' must be a list of numbers")
        if len(rel) != len(ind):
            raise DataFormatError(path, lineno, f"'target_rel' has {len(rel)} values but 'target_ind' has {len(ind)}")
    return ind, rel


def read_lf_json(
    path: str | Path, n_labels: int | None = None, *, require_targets: bool | None = None, unique_uids: bool = False
) -> LFRecords:
    """Read an LF JSON-lines file (optionally gzipped).

    Args:
        path: ``trn.json.gz``, ``tst.json.gz``, ``lbl.json.gz`` or an uncompressed ``.json``.
        n_labels: L; label ids must be in ``[0, L)``. ``None`` skips that check.
        require_targets: ``True`` for data points (every line needs ``target_ind``), ``False``
            for label files (targets ignored), ``None`` to accept either.
        unique_uids: refuse a uid seen before in the file (labels are known by their uid).

    Raises:
        DataFormatError: on the first problem, naming the file and line.
    """
    path = Path(path)
    uids: list[str] = []
    texts: list[str] = []
    builder = _CsrBuilder(path, n_labels, check_values=True)
    n_with_targets = 0
    groups: list[str] = []
    n_grouped = 0
    seen_uids: dict[str, int] = {}
    for lineno, line in iter_lines(path):
        obj = _json_object(path, lineno, line)
        title = obj.get("title")
        if not isinstance(title, str):
            raise DataFormatError(path, lineno, "missing or non-string 'title'")
        uid = obj.get("uid", lineno - 1)
        if isinstance(uid, bool) or not isinstance(uid, (str, int, float)):
            raise DataFormatError(path, lineno, f"'uid' must be a string or a number, got {shown(uid)}")
        uid = str(uid)
        if unique_uids:
            if uid in seen_uids:
                raise DataFormatError(path, lineno, f"uid {shown(uid, 'repr')} appears again (first on line {seen_uids[uid]})")
            seen_uids[uid] = lineno
        uids.append(uid)
        texts.append(title)
        group = obj.get("group")
        if group is not None:
            n_grouped += 1
        groups.append("" if group is None else str(group))
        targets = None if require_targets is False else _line_targets(path, lineno, obj, bool(require_targets))
        if targets is not None:
            n_with_targets += 1
            builder.add(lineno, *targets)
    if not uids:
        raise DataFormatError(path, None, "file is empty (no points)")
    kept_groups = groups if n_grouped else None
    if n_with_targets:
        if n_with_targets != len(uids):
            raise DataFormatError(path, None, "some lines have 'target_ind' and others do not")
        return LFRecords(uids, texts, builder.build(len(uids)), kept_groups)
    return LFRecords(uids, texts, None, kept_groups)


def lf_json_chunks(
    uids: list[str], texts: list[str], Y: sp.csr_matrix | None, *, binary_rel: bool = False, block_rows: int = 50_000
) -> Iterator[bytes]:
    """Serialise points as LF JSON lines, in chunks of bytes (each line ends with a newline).

    ``target_rel`` is written unless ``binary_rel`` is set and all of a row's values are 1.
    """
    M = sp.csr_matrix(Y) if Y is not None else None
    blocks = (
        ((s, min(len(uids), s + block_rows)) for s in range(0, len(uids), block_rows)) if M is None else row_blocks(M, block_rows)
    )
    for start, stop in blocks:
        heads = [orjson.dumps({"uid": u, "title": t})[:-1] for u, t in zip(uids[start:stop], texts[start:stop])]
        if M is None:
            yield b"".join(h + b"}\n" for h in heads)
            continue
        indices = split_rows(*render_rows(M, start, stop, INDICES))
        values = split_rows(*render_rows(M, start, stop, VALUES))
        block = M[start:stop]
        not_one = np.concatenate([[0], np.cumsum(block.data != 1)])
        soft = (not_one[block.indptr[1:]] - not_one[block.indptr[:-1]] > 0) | (not binary_rel)
        parts = []
        for head, ind, val, is_soft in zip(heads, indices, values, soft.tolist()):
            line = head + b',"target_ind":[' + ind + b"]"
            if is_soft:
                line += b',"target_rel":[' + val + b"]"
            parts.append(line + b"}\n")
        yield b"".join(parts)


def write_lines(path: str | Path, *parts: Iterable[bytes]) -> None:
    """Write the byte chunks of each iterable in turn, atomically (gzip if ``path`` ends in .gz)."""
    with atomic_writer(path) as fh:
        for chunks in parts:
            for chunk in chunks:
                fh.write(chunk)


def write_lf_json(
    path: str | Path, uids: list[str], texts: list[str], Y: sp.csr_matrix | None, *, binary_rel: bool = False
) -> None:
    """Write LF JSON lines atomically (gzip if ``path`` ends in .gz)."""
    write_lines(path, lf_json_chunks(uids, texts, Y, binary_rel=binary_rel))


# --------------------------------------------------------------------------------------------
# Sparse matrix text


def _parse_pairs(path: Path, lineno: int, tokens: list[str]) -> tuple[list[str], list[str]]:
    idx, val = [], []
    for tok in tokens:
        i, sep, v = tok.partition(":")
        if not sep or not i or not v:
            raise DataFormatError(path, lineno, f"expected 'index:value', got {shown(tok, 'repr')}")
        idx.append(i)
        val.append(v)
    return idx, val


_ASCII_INT = re.compile(r"-?[0-9]{1,18}")  # 18 digits: every such value fits an int64


def _to_numbers(path: Path, lineno: int, idx: list[str], val: list[str]) -> tuple[list[int], list[float]]:
    for i in idx:
        if not _ASCII_INT.fullmatch(i):
            problem = "is out of range" if re.fullmatch(r"-?[0-9]+", i) else "is not an integer"
            raise DataFormatError(path, lineno, f"index {shown(i, 'repr')} {problem}")
    ints = [int(i) for i in idx]
    try:
        floats = [float(v) for v in val]
    except ValueError:
        for v in val:
            try:
                float(v)
            except ValueError:
                raise DataFormatError(path, lineno, f"value {shown(v, 'repr')} is not a number") from None
        raise
    return ints, floats


def _parse_header(path: Path, line: str, n_fields: int, names: str) -> list[int]:
    parts = line.split()
    if len(parts) != n_fields or not all(_ASCII_INT.fullmatch(p) and not p.startswith("-") for p in parts):
        raise DataFormatError(path, 1, f"header must be '{names}' ({n_fields} non-negative integers), got {shown(line, 'repr')}")
    return [int(p) for p in parts]


def read_sparse_text(
    path: str | Path,
    *,
    expect_shape: tuple[int | None, int | None] | None = None,
    relevance: bool = False,
    duplicates: str = "merge",
) -> sp.csr_matrix:
    """Read the sparse matrix text format (``rows cols`` header, ``index:value`` rows).

    Args:
        expect_shape: if given, ``(rows, cols)`` the header must agree with (``None`` = any).
        relevance: values are label relevances and must lie in ``[0, 1]`` (otherwise any
            finite real, e.g. prediction scores).
        duplicates: ``"merge"`` sums an index repeated in a row (relevances clipped to 1),
            ``"error"`` refuses it (predictions: a label scored twice is a broken file).
    """
    path = Path(path)
    lines = iter_lines(path)
    try:
        _, header = next(lines)
    except StopIteration:
        raise DataFormatError(path, None, "file is empty (expected a 'rows cols' header)") from None
    n_rows, n_cols = _parse_header(path, header, 2, "rows cols")
    if expect_shape is not None:
        for name, got, want in (("rows", n_rows, expect_shape[0]), ("columns", n_cols, expect_shape[1])):
            if want is not None and got != want:
                raise DataFormatError(path, 1, f"header says {got} {name} but {want} were expected")
    builder = _CsrBuilder(path, n_cols, check_values=relevance, duplicates=duplicates)
    n_read = 0
    for lineno, line in lines:
        n_read += 1
        if n_read > n_rows:
            if not line.strip():
                continue  # tolerate trailing blank lines
            raise DataFormatError(path, lineno, f"more rows than the header's {n_rows}")
        idx, val = _parse_pairs(path, lineno, line.split())
        ints, floats = _to_numbers(path, lineno, idx, val)
        builder.add(lineno, ints, floats)
    if n_read < n_rows:
        raise DataFormatError(path, None, f"header says {n_rows} rows but the file has {n_read}")
    return builder.build(n_rows)


def write_sparse_text(path: str | Path, *parts: sp.spmatrix) -> None:
    """Write a sparse matrix (the row-wise concatenation of ``parts``) in the ``rows cols`` /
    ``index:value`` text format, atomically."""
    write_lines(path, sparse_text_chunks(*parts))


def write_sparse_text_stream(path: str | Path | IO[bytes], n_rows: int, n_cols: int, blocks: Iterable[sp.spmatrix]) -> None:
    """Write row blocks produced one at a time (bounded memory) as one sparse text matrix,
    atomically: nothing is left at ``path`` if producing a block fails. ``path`` may also be an
    open binary file (the caller decides how it is written)."""
    if isinstance(path, (str, Path)):
        write_lines(path, streamed_sparse_text_chunks(n_rows, n_cols, blocks))
        return
    for chunk in streamed_sparse_text_chunks(n_rows, n_cols, blocks):
        path.write(chunk)


# --------------------------------------------------------------------------------------------
# Bag-of-words XMLRepo text


def read_bow(path: str | Path) -> tuple[sp.csr_matrix, sp.csr_matrix]:
    """Read the BoW "XMLRepo" format: header ``N D L``, then ``l1,l2 f:v f:v ...`` a line.

    Returns ``(X, Y)``: features ``N x D`` and binary labels ``N x L`` (float32 CSR).
    """
    path = Path(path)
    lines = iter_lines(path)
    try:
        _, header = next(lines)
    except StopIteration:
        raise DataFormatError(path, None, "file is empty (expected an 'N D L' header)") from None
    n, d, n_labels = _parse_header(path, header, 3, "N D L")
    xb = _CsrBuilder(path, d, check_values=False)
    yb = _CsrBuilder(path, n_labels, check_values=True)
    n_read = 0
    for lineno, line in lines:
        n_read += 1
        if n_read > n:
            if not line.strip():
                continue
            raise DataFormatError(path, lineno, f"more points than the header's {n}")
        tokens = line.split(" ")
        labels: list[int] = []
        if tokens and tokens[0] and ":" not in tokens[0]:
            try:
                labels = [int(t) for t in tokens[0].split(",") if t != ""]
            except ValueError:
                raise DataFormatError(
                    path, lineno, f"label list {shown(tokens[0], 'repr')} is not comma-separated integers"
                ) from None
            tokens = tokens[1:]
        idx, val = _parse_pairs(path, lineno, [t for t in tokens if t])
        ints, floats = _to_numbers(path, lineno, idx, val)
        xb.add(lineno, ints, floats)
        yb.add(lineno, labels, None)
    if n_read < n:
        raise DataFormatError(path, None, f"header says {n} points but the file has {n_read}")
    return xb.build(n), yb.build(n)


def write_bow(path: str | Path, X: sp.spmatrix, Y: sp.spmatrix) -> None:
    """Write features and labels in the BoW "XMLRepo" format, atomically."""
    X, Y = sp.csr_matrix(X), sp.csr_matrix(Y)
    if X.shape[0] != Y.shape[0]:
        raise ValueError("X and Y must have the same number of rows")

    def chunks(block_rows: int = 100_000) -> Iterator[bytes]:
        yield f"{X.shape[0]} {X.shape[1]} {Y.shape[1]}\n".encode()
        for start in range(0, X.shape[0], block_rows):
            stop = min(X.shape[0], start + block_rows)
            labels = split_rows(*render_rows(Y, start, stop, INDICES))
            feats = split_rows(*render_rows(X, start, stop, PAIRS))
            # no labels -> the line starts with a space
            yield b"".join((lab + b" " + feat).rstrip() + b"\n" for lab, feat in zip(labels, feats))

    write_lines(path, chunks())


# --------------------------------------------------------------------------------------------
# Filter pairs


def read_filter_pairs(path: str | Path, n_rows: int | None = None, n_labels: int | None = None) -> np.ndarray:
    """Read ``row label`` pairs; returns an ``(n, 2)`` int64 array. Blank lines are skipped."""
    path = Path(path)
    pairs: list[tuple[int, int]] = []
    for lineno, line in iter_lines(path):
        parts = line.split()
        if not parts:
            continue
        if len(parts) != 2:
            raise DataFormatError(path, lineno, f"expected 'row label', got {shown(line, 'repr')}")
        try:
            r, l = int(parts[0]), int(parts[1])
        except ValueError:
            raise DataFormatError(path, lineno, f"expected two integers, got {shown(line, 'repr')}") from None
        if r < 0 or l < 0:
            raise DataFormatError(path, lineno, "row and label must be non-negative")
        if n_rows is not None and r >= n_rows:
            raise DataFormatError(path, lineno, f"row {r} is out of range ({n_rows} points)")
        if n_labels is not None and l >= n_labels:
            raise DataFormatError(path, lineno, f"label id {l} is out of range (number of labels L = {n_labels})")
        pairs.append((r, l))
    return np.array(pairs, dtype=np.int64).reshape(-1, 2)


def write_filter_pairs(path: str | Path, pairs: np.ndarray) -> None:
    """Write ``row label`` pairs, atomically."""
    with atomic_text_writer(path) as fh:
        for r, l in np.asarray(pairs).reshape(-1, 2).tolist():
            fh.write(f"{r} {l}\n")


def write_text_lines(path: str | Path, texts: list[str]) -> None:
    """Write one text a line (``trn_X.txt``-style), atomically; a line break inside a text becomes a space."""
    with atomic_text_writer(path) as fh:
        for text in texts:
            fh.write(" ".join(text.splitlines()) + "\n")


def read_text_lines(path: str | Path) -> list[str]:
    """Read one text a line (``trn_X.txt``-style raw texts); a byte-order mark opening the file is dropped."""
    return [line for _, line in iter_lines(path, strip_bom=True)]


def read_predictions(path: str | Path, expect_shape: tuple[int, int]) -> sp.csr_matrix:
    """Predictions for scoring: the sparse text format, or a scipy ``.npz`` matrix as PECOS and
    scipy write them (read without unpickling). Shape and values are checked; a label scored twice
    in a row is an error, not a sum."""
    path = Path(path)
    if path.suffix == ".npz":
        try:
            P = sp.load_npz(path)
        except FileNotFoundError:
            raise DataFormatError(path, None, "file not found") from None
        except (OSError, ValueError, KeyError, zlib.error, zipfile.BadZipFile, EOFError) as exc:
            raise DataFormatError(path, None, f"not a scipy sparse .npz matrix ({exc})") from None
        P = sp.csr_matrix(P, dtype=np.float32)
        if P.shape != tuple(expect_shape):
            raise DataFormatError(
                path,
                None,
                f"matrix is {P.shape[0]} x {P.shape[1]} but {expect_shape[0]} x {expect_shape[1]} (points x labels) was expected",
            )
        if P.data.size and not np.isfinite(P.data).all():
            raise DataFormatError(path, None, "a score is not finite")
        if P.has_canonical_format is False:
            copy = P.copy()
            copy.sum_duplicates()
            if copy.nnz != P.nnz:
                raise DataFormatError(path, None, "a label appears twice in one row")
        return P
    P = read_sparse_text(path, expect_shape=expect_shape, duplicates="error")
    return P
