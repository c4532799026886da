"""A saved linear model read and queried with numpy alone, for a fast cold start.

``gandalf predict MODEL --text`` is a whole process for one query: importing scikit-learn, scipy
and numba would take longer than the answer, so this module re-implements the two small pieces
the trained model needs at query time, and ``tests/models/test_linear_reader.py`` checks them
against the full model: the TF-IDF transform (lowercase, ``\\w+`` words and their bigrams, and the
character n-grams within word boundaries where the model has them, sublinear tf times idf, l2
norm) and the beam search of :mod:`gandalf_xmc.engine.beam_search`.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np

from ..engine.layout_format import BLOCK_BITS, has_chunks, map_layout
from ..engine.level_store import map_level
from ..errors import DataFormatError
from ..text import CharGramIds, feature_row
from .base import LabelledModel
from .linear_check import check_level_rows, level_rows, read_char_idf, read_npz_csr, read_saved


def can_read(spec) -> bool:
    """Whether a saved model is one this reader answers for: a linear model (a malformed ``model``
    is this reader's to refuse, with the full loader's reason)."""
    return isinstance(spec, dict) and spec.get("kind") == "linear"


class NeedsFullReader(Exception):
    """A saved linear model this reader does not answer for (the caller loads it in full)."""


class _CSR:
    """A saved level's CSR arrays, mapped from its ``.npy`` files (or read from the ``.npz`` of
    models saved before them), without scipy and without pickles."""

    def __init__(self, d: Path, level: int, n_columns: int, n_rows: int | None = None):
        folder = d / f"weights_level{level}"
        self.name = folder
        if folder.is_dir():
            self.indptr, self.indices, self.data = map_level(folder, n_columns, n_rows)
            self.shape = (self.indptr.size - 1, n_columns)
            return
        self.indptr, self.indices, self.data, self.shape = read_npz_csr(d / f"weights_level{level}.npz")


class _Layout:
    """A saved level kept as its search layout alone (:mod:`gandalf_xmc.engine.level_chunks`),
    mapped; ``child_ptr``: its parents' children."""

    def __init__(self, folder: Path, child_ptr: np.ndarray, n_columns: int):
        self.name = folder
        self.child_ptr = np.asarray(child_ptr, dtype=np.int64)
        self.arrays, self.stride = map_layout(folder, self.child_ptr, n_columns)
        self.blocks = (self.arrays["feat_lo"].size - 1) // (self.child_ptr.size - 1)
        self.shape = (int(self.child_ptr[-1]), n_columns)

    def _end(self, a: int) -> int:
        mark = int(self.arrays["end_mark"][a // self.stride])
        return mark + ((int(self.arrays["feat_end"][a]) - mark) & 0xFFFF)

    def margins(self, parent: int, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
        """The margins of ``parent``'s children for the query ``(ids, values)`` (ids ascending),
        summed in the order the full search sums them."""
        a = self.arrays
        lo_child, hi_child = int(self.child_ptr[parent]), int(self.child_ptr[parent + 1])
        z = np.zeros(hi_child - lo_child)
        first, base, base_hi = int(a["feat_lo"][parent * self.blocks]), int(a["entry_lo"][parent]), int(a["entry_lo"][parent + 1])
        for f, v in zip(ids.tolist(), values.astype(np.float64).tolist()):
            b = f >> BLOCK_BITS
            if b >= self.blocks:
                break
            lo, hi = int(a["feat_lo"][parent * self.blocks + b]), int(a["feat_lo"][parent * self.blocks + b + 1])
            low = f & 0xFFFF
            pos = lo + int(np.searchsorted(a["feat"][lo:hi], low))
            if pos >= hi or int(a["feat"][pos]) != low:
                continue
            start = base if pos == first else self._end(pos - 1)
            stop = self._end(pos)
            children = np.asarray(a["child"][start:stop], dtype=np.int64)
            if start < base or start > stop or stop > base_hi or (children.size and children.max() >= z.size):
                raise DataFormatError(self.name, None, "the search layout is damaged (an entry out of its bounds)")
            np.add.at(z, children, np.asarray(a["value"][start:stop], dtype=np.float64) * v)
        return z


class LinearReader(LabelledModel):
    """The predictions of a saved :class:`~gandalf_xmc.models.linear.XRLinear` (``predict`` returns
    ``(label ids, scores)`` rows as lists; ``predict_labels`` as every model's)."""

    kind = "linear"

    def __init__(self, directory: str | Path):
        d = Path(directory)
        spec, features, self.idf, self.order, self.bounds = read_saved(d)
        if not can_read(spec) or features.get("precomputed") is True:  # no texts to read: the full loader says so
            raise NeedsFullReader(d)
        self.config = spec["model"]
        self.sigmoid = self.config.get("solver", {}).get("loss") == "logistic"  # the full model's level score
        self.n_labels = int(spec["n_labels"])
        self.vocabulary = {term: i for i, term in enumerate(features["vocabulary"])}
        self.ngram_max = int(features["ngram_max"])
        char_idf = read_char_idf(d, features)
        self.chars = None  # (n-gram ids, idf) of the character block, if the model has one
        if char_idf is not None:
            char_vocabulary = {t: i for i, t in enumerate(features["char_vocabulary"])}
            self.chars = (CharGramIds(tuple(features["char_ngrams"]), char_vocabulary), char_idf)
        self.n_features = len(self.vocabulary) + (0 if self.chars is None else len(self.chars[0].vocabulary))
        below = [*self.bounds[1:], np.arange(self.n_labels + 1)]
        self.children = [np.searchsorted(nxt, b) for b, nxt in zip(self.bounds, below)]
        self.levels: list[_CSR | _Layout] = []
        for t in range(int(spec["n_levels"])):
            folder, rows = d / f"weights_level{t}", level_rows(t, self.n_labels, self.bounds)
            if has_chunks(folder) and not (folder / "indices.npy").exists():  # a large level: its layout alone
                child_ptr = np.array([0, self.bounds[0].size - 1]) if t == 0 else self.children[t - 1]
                self.levels.append(_Layout(folder, child_ptr, self.n_features + 1))
            else:
                self.levels.append(_CSR(d, t, self.n_features + 1, rows))
            check_level_rows(d, t, self.levels[-1].shape[0], self.n_labels, self.bounds)
        self.load_labels(d, self.n_labels)

    def features(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The query's (feature ids ascending, values), the bias feature last."""
        ids, values = feature_row(text, self.vocabulary, self.idf, self.ngram_max, self.chars)
        return np.append(ids, self.n_features).astype(np.int64), np.append(values, float(self.config["bias"])).astype(np.float32)

    def known_queries(self, texts: list[str]) -> list[bool]:
        return [self.features(t)[0].size > 1 for t in texts]  # more than the bias feature

    def _margins(self, level: _CSR, nodes: np.ndarray, ids: np.ndarray, values: np.ndarray) -> np.ndarray:
        out = np.zeros(nodes.size, dtype=np.float64)
        for c, node in enumerate(nodes.tolist()):
            lo, hi = level.indptr[node], level.indptr[node + 1]
            row = level.indices[lo:hi]
            pos = np.searchsorted(row, ids)
            ok = pos < row.size
            hit = np.zeros(ids.size, dtype=bool)
            hit[ok] = row[pos[ok]] == ids[ok]
            out[c] = float(np.dot(level.data[lo:hi][pos[hit]].astype(np.float64), values[hit]))
        if not np.isfinite(out).all():  # levels too large to check when loaded (level_store.check_level)
            raise DataFormatError(level.name, None, "damaged model: a weight is not a finite number")
        return out

    def _search(self, text: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        ids, values = self.features(text)
        beam = int(self.config["beam"])
        cand = np.arange(self.levels[0].shape[0])
        parent = np.ones(cand.size)
        kept = [0]  # the parents whose children ``cand`` are (level 0: the root)
        for t, level in enumerate(self.levels):
            if isinstance(level, _Layout):
                margins = np.concatenate([level.margins(p, ids, values) for p in kept])
                if not np.isfinite(margins).all():
                    raise DataFormatError(level.name, None, "damaged model: a weight is not a finite number")
            else:
                margins = self._margins(level, cand, ids, values)
            if self.sigmoid:
                scores = parent / (1.0 + np.exp(-np.maximum(margins, -700.0)))
            else:
                h = np.maximum(1.0 - margins, 0.0)
                scores = parent * np.exp(-h * h * h)
            keep = k if t == len(self.levels) - 1 else beam
            best = np.argsort(-scores, kind="mergesort")[:keep]
            if t == len(self.levels) - 1:
                return self.order[cand[best]], scores[best].astype(np.float32)
            kept = cand[best].tolist()
            ranges = [np.arange(self.children[t][n], self.children[t][n + 1]) for n in kept]
            parent = np.concatenate([np.full(r.size, scores[b]) for r, b in zip(ranges, best.tolist())])
            cand = np.concatenate(ranges)
        raise AssertionError("unreachable")

    def predict(self, texts: list[str], k: int = 100, progress: bool = False):
        """Top-``k`` labels of each text as a CSR-like object with ``indptr``, ``indices`` and ``data``."""
        k = min(int(k), self.n_labels)
        rows = [self._search(t, k) for t in texts]
        return RankedRows([r[0] for r in rows], [r[1] for r in rows], self.n_labels)


class RankedRows:
    """Ranked rows in CSR's shape (what :meth:`LabelledModel.predict_labels` reads)."""

    def __init__(self, labels: list[np.ndarray], scores: list[np.ndarray], n_labels: int):
        self.indptr = np.concatenate([[0], np.cumsum([r.size for r in labels])]).astype(np.int64)
        self.indices = np.concatenate(labels) if labels else np.zeros(0, np.int64)
        self.data = np.concatenate(scores) if scores else np.zeros(0, np.float32)
        self.shape = (len(labels), n_labels)
        self.nnz = int(self.indices.size)
