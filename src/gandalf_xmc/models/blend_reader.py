"""A saved knn model or linear-knn blend read and queried with numpy alone, for a fast cold start
(``gandalf predict MODEL --text``), as :mod:`.linear_reader` reads a linear model: the neighbours'
index from its ``.npz`` arrays, the tree by that reader, and the scores by :mod:`.one_query`, the
arithmetic the full models' single-query paths run. A blend with the label-text similarity needs
the sentence encoder, so the full loader reads it."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..engine.level_store import check_level, load_array
from ..errors import DataFormatError
from ..jsonio import read_json_file
from ..text import feature_row
from .base import LabelledModel
from .linear_check import check_idf, read_npz_csr
from .linear_reader import LinearReader, NeedsFullReader, RankedRows
from .one_query import CSRArrays, blend_row, knn_row


def can_read(spec) -> bool:
    """Whether a saved model is one these readers answer for: knn, or linear-knn without the text part."""
    if not isinstance(spec, dict):
        return False
    return spec.get("kind") == "knn" or (spec.get("kind") == "linear-knn" and spec.get("text_weight", 0.0) == 0)


def reader_for(directory: Path, spec: dict):
    """The reader of a model whose ``model.json`` (``spec``, read by the caller) :func:`can_read`
    accepts (raises NeedsFullReader for one it cannot read)."""
    return KnnReader(directory, spec=spec) if spec.get("kind") == "knn" else BlendReader(directory, spec)


def _number(where: Path, spec: dict, name: str, whole: bool = False) -> float:
    value = spec.get(name)
    ok = not isinstance(value, bool) and isinstance(value, int if whole else (int, float))
    if not ok or not math.isfinite(value) or value < (1 if whole else 0):
        kind = "a whole number of at least 1" if whole else "a finite number >= 0"
        raise DataFormatError(where, None, f"'{name}' must be {kind}, got {value!r}")
    return value


def read_csr(path: Path, shape: tuple[int | None, int | None]) -> CSRArrays:
    """A CSR matrix saved by scipy's ``save_npz`` as its arrays and number of columns, without
    scipy and without pickles, checked (``shape``'s known sides, then as a tree level is checked:
    offsets, column ids, finite float32 values) so that a damaged file is one line naming it."""
    indptr, indices, data, (rows, columns) = read_npz_csr(path)
    if any(want is not None and got != want for got, want in zip((rows, columns), shape)):
        expected = " x ".join("any" if side is None else f"{side:,}" for side in shape)
        raise DataFormatError(path, None, f"damaged model: a {rows:,} x {columns:,} matrix where {expected} was expected")
    try:
        if indptr.size != rows + 1:
            raise ValueError(f"{path.name}: {indptr.size - 1:,} row offsets for {rows:,} rows")
        check_level(indptr, indices, data, columns, path.name, check_entries=max(indices.size, 1))
    except ValueError as exc:
        raise DataFormatError(path, None, f"damaged model: {exc}") from None
    return indptr, indices, data, columns


class KnnReader(LabelledModel):
    """The predictions of a saved :class:`~.knn.TfidfKNN` of texts (``predict`` returns its rows in
    CSR's shape, ``predict_labels`` as every model's); ``read_labels=False``: the part of a blend,
    whose labels the blend holds."""

    kind = "knn"

    def __init__(self, directory: str | Path, n_labels: int | None = None, read_labels: bool = True, spec: dict | None = None):
        d = Path(directory)
        spec = read_json_file(d / "model.json") if spec is None else spec
        features = read_json_file(d / "features.json")
        if not isinstance(features, dict) or not isinstance(features.get("vocabulary"), list):
            raise NeedsFullReader(d)  # precomputed feature rows: the full loader reads (or refuses) them
        config = spec.get("model") if isinstance(spec, dict) and isinstance(spec.get("model"), dict) else {}
        self.n_neighbours = int(_number(d / "model.json", config, "n_neighbours", whole=True))
        self.power = float(_number(d / "model.json", config, "power"))
        self.n_labels = int(_number(d / "model.json", spec, "n_labels", whole=True)) if n_labels is None else n_labels
        self.ngram_max = int(_number(d / "features.json", features, "ngram_max", whole=True))
        self.vocabulary = {str(term): i for i, term in enumerate(features["vocabulary"])}
        self.idf = load_array(d / "features_idf.npy")
        check_idf(d / "features_idf.npy", self.idf, len(self.vocabulary), "a word n-gram")
        self.points = read_csr(d / "knn_points.npz", (len(self.vocabulary), None))
        self.targets = read_csr(d / "knn_targets.npz", (self.points[3], self.n_labels))
        if read_labels:
            self.load_labels(d, self.n_labels)

    def row(self, text: str) -> tuple[np.ndarray, np.ndarray]:
        """The text's TF-IDF row, as ``TextFeaturizer.row`` gives it."""
        ids, values = feature_row(text, self.vocabulary, self.idf, self.ngram_max)
        return ids.astype(np.int32), values.astype(np.float32)

    def scores(self, text: str, k: int, share: bool = False) -> tuple[np.ndarray, np.ndarray]:
        """The text's top ``k`` labels and scores (``share``: the vote), in label order."""
        return knn_row(*self.row(text), self.points, self.targets, self.n_neighbours, self.power, k, share)

    def known_queries(self, texts: list[str]) -> list[bool]:
        return [self.row(t)[0].size > 0 for t in texts]

    def predict(self, texts: list[str], k: int = 100, progress: bool = False) -> RankedRows:
        """Top-``k`` labels of each text, in CSR's shape (each row in label order)."""
        rows = [self.scores(t, min(int(k), self.n_labels)) for t in texts]
        return RankedRows([r[0] for r in rows], [r[1] for r in rows], self.n_labels)


class BlendReader(LabelledModel):
    """The predictions of a saved :class:`~.blend.LinearKnnBlend` without the text part
    (``predict`` returns its rows in CSR's shape, ``predict_labels`` as every model's)."""

    kind = "linear-knn"

    def __init__(self, directory: str | Path, spec: dict | None = None):
        d = Path(directory)
        spec = read_json_file(d / "model.json") if spec is None else spec
        if not (can_read(spec) and spec.get("kind") == "linear-knn"):
            raise NeedsFullReader(d)
        where = d / "model.json"
        self.n_labels = int(_number(where, spec, "n_labels", whole=True))
        self.knn_weight = float(_number(where, spec, "knn_weight"))
        config = spec.get("model") if isinstance(spec.get("model"), dict) else {}
        self.candidates = int(_number(where, config, "candidates", whole=True))
        self.tree = LinearReader(d / "linear")
        if self.tree.n_labels != self.n_labels:
            problem = f"{self.tree.n_labels:,} labels, the blend has {self.n_labels:,}"
            raise DataFormatError(d / "linear" / "model.json", None, problem)
        self.knn = KnnReader(d / "knn", self.n_labels, read_labels=False) if self.knn_weight else None
        self.load_labels(d, self.n_labels)

    def known_queries(self, texts: list[str]) -> list[bool]:
        return self.tree.known_queries(texts)  # the tree's vocabulary decides, as the full blend's

    def _row(self, text: str, k: int) -> tuple[np.ndarray, np.ndarray]:
        candidates = min(max(self.candidates, k), self.n_labels)
        labels, scores = self.tree._search(text, candidates)
        voted, votes = self.knn.scores(text, candidates, share=True) if self.knn is not None else (labels[:0], scores[:0])
        return blend_row(labels, scores, voted, votes, self.knn_weight, min(k, self.n_labels))

    def predict(self, texts: list[str], k: int = 100, progress: bool = False) -> RankedRows:
        """Top-``k`` blended labels of each text, in CSR's shape (each row in label order)."""
        rows = [self._row(t, int(k)) for t in texts]
        return RankedRows([r[0] for r in rows], [r[1] for r in rows], self.n_labels)
