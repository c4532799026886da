"""The checks a saved linear model directory passes before either reader answers from it: the full
loader (:meth:`gandalf_xmc.models.linear.XRLinear.load`) and the numpy-only reader
(:mod:`gandalf_xmc.models.linear_reader`) run the same routine, so a tampered or damaged directory
gives the same one line from ``gandalf predict --text``, ``--data`` and ``gandalf serve``, never a
silently wrong ranking. Numpy only: it is on the cold-start path."""

from __future__ import annotations

import math
from pathlib import Path

import numpy as np

from ..errors import DataFormatError


def _whole(value) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def check_spec(spec, features, directory: Path) -> None:
    """The fields of ``model.json`` (``spec``) and ``features.json`` (``features``) that the
    readers use. Raises DataFormatError naming the file and the field."""
    where = directory / "model.json"
    if not isinstance(spec, dict):
        raise DataFormatError(where, None, "expected a JSON object")
    model = spec.get("model")
    if not isinstance(model, dict):
        raise DataFormatError(where, None, "'model' must be an object of settings")
    for name in ("n_labels", "n_levels"):
        if not (_whole(spec.get(name)) and spec[name] >= 1):
            raise DataFormatError(where, None, f"'{name}' must be a whole number of at least 1, got {spec.get(name)!r}")
    for name in ("beam", "ngram_max"):
        if not (_whole(model.get(name)) and model[name] >= 1):
            raise DataFormatError(where, None, f"'model.{name}' must be a whole number of at least 1, got {model.get(name)!r}")
    bias = model.get("bias")
    if isinstance(bias, bool) or not isinstance(bias, (int, float)) or not math.isfinite(bias) or bias < 0:
        raise DataFormatError(where, None, f"'model.bias' must be a finite number >= 0, got {bias!r}")
    where = directory / "features.json"
    if not isinstance(features, dict):
        raise DataFormatError(where, None, "expected a JSON object")
    if features.get("precomputed") is True:  # trained on the caller's feature rows: no vocabulary
        if not (_whole(features.get("n_features")) and features["n_features"] >= 1):
            raise DataFormatError(
                where, None, f"'n_features' must be a whole number of at least 1, got {features.get('n_features')!r}"
            )
        return
    vocabulary = features.get("vocabulary")
    if not isinstance(vocabulary, list):  # a term that is no string never matches a word: not worth a pass here
        raise DataFormatError(where, None, "'vocabulary' must be a list of terms")
    if not (_whole(features.get("ngram_max")) and features["ngram_max"] >= 1):
        raise DataFormatError(where, None, f"'ngram_max' must be a whole number of at least 1, got {features.get('ngram_max')!r}")
    chars = features.get("char_ngrams")
    if chars is not None:
        if not (
            isinstance(chars, list) and len(chars) == 2 and all(_whole(n) and n >= 1 for n in chars) and chars[0] <= chars[1]
        ):
            raise DataFormatError(
                where, None, f"'char_ngrams' must be [shortest, longest], 1 <= shortest <= longest, got {chars!r}"
            )
        if not isinstance(features.get("char_vocabulary"), list):
            raise DataFormatError(where, None, "'char_vocabulary' must be a list of terms")


def check_arrays(
    directory: Path,
    n_labels: int,
    n_levels: int,
    n_terms: int,
    idf: np.ndarray | None,
    order: np.ndarray,
    bounds: list[np.ndarray],
) -> None:
    """The idf, the tree's label order and its node bounds, against each other and the spec:
    ``idf`` one finite positive value a vocabulary term (None: a model of precomputed features,
    without one); ``order`` a permutation of the labels;
    ``bounds`` one increasing array a level, from 0 to ``n_labels``, each level's cuts among the
    next one's (the nodes nest). Raises DataFormatError naming the file."""
    if idf is not None:
        check_idf(directory / "features_idf.npy", idf, n_terms, "a vocabulary term")
    if (
        order.ndim != 1
        or order.size != n_labels
        or order.dtype.kind not in "iu"
        or (order.size and (order.min() < 0 or order.max() >= n_labels or np.bincount(order, minlength=n_labels).max() != 1))
    ):
        raise DataFormatError(
            directory / "tree_order.npy", None, f"not a permutation of the {n_labels:,} labels (each label id once)"
        )
    where = directory / "tree_bounds.npz"
    if len(bounds) != n_levels - 1:  # the last level of weights is the labels'
        raise DataFormatError(
            where, None, f"{len(bounds)} tree levels, but model.json's n_levels {n_levels} needs {n_levels - 1}"
        )
    previous = None
    for t, cuts in enumerate(bounds):
        if (
            cuts.ndim != 1
            or cuts.size < 2
            or cuts.dtype.kind not in "iu"
            or cuts[0] != 0
            or cuts[-1] != n_labels
            or np.any(np.diff(cuts) <= 0)
        ):
            raise DataFormatError(where, None, f"level {t}'s node bounds do not cut 0..{n_labels:,} in increasing order")
        if previous is not None and not np.isin(previous, cuts).all():
            raise DataFormatError(where, None, f"level {t}'s nodes do not nest under level {t - 1}'s")
        previous = cuts


def level_rows(level: int, n_labels: int, bounds: list[np.ndarray]) -> int:
    """Rows of weights level ``level`` has: its nodes (the last level: the labels)."""
    return int(bounds[level].size - 1) if level < len(bounds) else n_labels


def check_level_rows(directory: Path, level: int, n_rows: int, n_labels: int, bounds: list[np.ndarray]) -> None:
    """A level's weights have one row a node of that level (the last level: a row a label)."""
    nodes = level_rows(level, n_labels, bounds)
    if n_rows != nodes:
        raise DataFormatError(
            directory / f"weights_level{level}", None, f"{n_rows:,} rows of weights for the level's {nodes:,} nodes"
        )


def load_bounds(path: Path) -> list[np.ndarray]:
    """The tree's node bounds, one array a level (``tree_bounds.npz``: ``arr_0``, ``arr_1``, ...),
    read without pickles from a regular file."""
    import os
    import stat

    if not stat.S_ISREG(os.stat(path).st_mode):
        raise DataFormatError(path, None, "not a regular file")
    with np.load(path, allow_pickle=False) as archive:
        names = set(archive.files)
        if names != {f"arr_{i}" for i in range(len(names))}:
            raise DataFormatError(path, None, "expected arrays arr_0, arr_1, ... (one a level)")
        return [archive[f"arr_{i}"] for i in range(len(names))]


def read_saved(directory: Path) -> tuple[dict, dict, np.ndarray | None, np.ndarray, list[np.ndarray]]:
    """``(model.json, features.json, idf (None without a vocabulary), tree order, tree bounds)`` of a
    saved linear model, each
    read once and checked by :func:`check_spec` and :func:`check_arrays`: what both readers start
    from (the levels are read by each, with :func:`level_rows` rows)."""
    from ..engine.level_store import load_array
    from ..jsonio import read_json_file

    spec = read_json_file(directory / "model.json")
    features = read_json_file(directory / "features.json")
    check_spec(spec, features, directory)
    precomputed = features.get("precomputed") is True
    idf = None if precomputed else load_array(directory / "features_idf.npy")
    order = load_array(directory / "tree_order.npy")
    bounds = load_bounds(directory / "tree_bounds.npz")
    n_terms = features["n_features"] if precomputed else len(features["vocabulary"])
    check_arrays(directory, spec["n_labels"], spec["n_levels"], n_terms, idf, order, bounds)
    return spec, features, idf, order, bounds


def read_char_idf(directory: Path, features: dict) -> np.ndarray | None:
    """The idf of a saved model's character n-grams (``features_char_idf.npy``), one finite
    positive value a term of ``char_vocabulary``; None for a model of words alone."""
    from ..engine.level_store import load_array

    if features.get("char_ngrams") is None:
        return None
    path = directory / "features_char_idf.npy"
    idf = load_array(path)
    check_idf(path, idf, len(features["char_vocabulary"]), "a character n-gram")
    return idf


def check_idf(path: Path, idf: np.ndarray, n_terms: int, term: str) -> None:
    """``idf`` one finite positive value a term (``term`` names what a term is), else DataFormatError naming ``path``."""
    bad = idf.ndim != 1 or idf.size != n_terms or idf.dtype.kind != "f"
    if bad or (idf.size and not (np.isfinite(idf).all() and idf.min() > 0)):
        raise DataFormatError(
            path,
            None,
            f"expected {n_terms:,} finite positive values (one {term}), "
            f"got {idf.size:,} {idf.dtype.name} values" + ("" if idf.size != n_terms else " with a bad one"),
        )


def read_npz_csr(path: Path) -> tuple[np.ndarray, np.ndarray, np.ndarray, tuple[int, int]]:
    """The arrays and shape of a CSR matrix saved by scipy's ``save_npz``, read without scipy and
    without pickles (unchecked: the caller checks them for what it reads them for)."""
    with np.load(path, allow_pickle=False) as f:
        fmt = f["format"].item()
        if (fmt.decode() if isinstance(fmt, bytes) else str(fmt)) != "csr":
            raise ValueError(f"{path.name}: expected a CSR matrix")
        rows, columns = (int(x) for x in f["shape"])
        return f["indptr"], f["indices"], f["data"], (rows, columns)
