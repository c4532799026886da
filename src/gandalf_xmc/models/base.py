"""What every model shares: the labels it ranks (ids and texts, saved beside its weights as
``labels.json.gz``, so that any saved model directory can be loaded and queried on its own) and
ranked predictions with ids, texts and scores."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from ..errors import ConfigError, DataFormatError

LABELS_FILE = "labels.json.gz"


def checked_positive_weights(positive_weight, n: int):
    """``n`` factors on the points' positive costs as a float64 array (None stays None), each
    finite and > 0 (a ``fit``'s ``positive_weight``)."""
    import numpy as np  # here: the module imports without numpy (the reader's cold start)

    if positive_weight is None:
        return None
    positives = np.asarray(positive_weight, dtype=np.float64)
    if positives.shape != (n,) or not np.all(np.isfinite(positives) & (positives > 0)):
        raise ConfigError(f"positive_weight must be {n:,} finite numbers > 0, one a point")
    return positives


def read_labels(path: str | Path) -> tuple[list[str], list[str]]:
    """Label ids and texts of a ``labels.json.gz`` (LF JSON lines), read with orjson only (this is
    on the cold-start path of ``gandalf predict``)."""
    import orjson

    from ..inputs import bounded_lines, open_input

    path = Path(path)
    if not path.exists():
        raise DataFormatError(path, None, "file not found (the model directory is incomplete)")
    uids, texts = [], []
    try:
        with open_input(path) as fh:  # a regular file, lines split in blocks: faster than a readline each
            for lineno, line in bounded_lines(fh, path):
                try:
                    obj = orjson.loads(line)
                    uid, text = obj["uid"], obj["title"]
                except (orjson.JSONDecodeError, KeyError, TypeError):
                    raise DataFormatError(path, lineno, "expected a JSON object with 'uid' and 'title'") from None
                if not isinstance(text, str) or isinstance(uid, (dict, list)) or uid is None:
                    raise DataFormatError(path, lineno, "'uid' must be a string or number and 'title' a string")
                uids.append(str(uid))
                texts.append(text)
    except (OSError, EOFError) as exc:
        raise DataFormatError(path, None, f"unreadable ({exc})") from None
    return uids, texts


def _is_matrix(inputs) -> bool:
    """Feature rows (a scipy sparse matrix or a 2-D numpy array) rather than texts; tested without
    importing either (this module is on the numpy-only reader's cold-start path)."""
    return getattr(inputs, "ndim", None) == 2


def folded_text(text: str) -> str:
    """``text`` with case and runs of white space folded: two texts that read the same are equal."""
    return " ".join(str(text).lower().split())


Inputs = Any  # a list of texts, or feature rows (N x D sparse or dense) for a model of precomputed features


class LabelledModel:
    """Mixin of every model: ``label_uids`` / ``label_texts`` and :meth:`predict_labels`."""

    label_uids: list[str] | None = None
    label_texts: list[str] | None = None
    _label_index: dict | None = None  # uid -> label, built on first use
    _text_index: dict | None = None  # folded text -> labels, built on first use
    predict: Callable[..., Any]  # each model's own: texts (or feature rows) -> top-k CSR scores

    def set_labels(self, label_texts: list[str], label_uids: list[str] | None = None) -> None:
        """The labels this model ranks (ids default to their positions; ids set before with the
        same number of labels are kept)."""
        texts = [str(t) for t in label_texts]
        if label_uids is None and self.label_uids is not None and len(self.label_uids) == len(texts):
            label_uids = self.label_uids
        self.label_texts = texts
        self.label_uids = [str(u) for u in label_uids] if label_uids is not None else [str(i) for i in range(len(texts))]
        self._label_index = None
        self._text_index = None

    def predict_labels(
        self, texts: list[str], k: int = 5, uids: list[str | None] | None = None, drop_namesakes: bool = False
    ) -> list[list[dict]]:
        """For each text, its top ``k`` labels best first, as ``{"id", "text", "score"}``; none for
        a text without a word the model knows (:meth:`known_queries`: empty or out of vocabulary).

        ``uids``: each query's own id where it is an item of the catalogue (None where not): the
        label with that id, the query itself, is left out of its answer, as the field's filter
        files leave it out of scoring (a package is not its own dependency).

        ``drop_namesakes``: the queries are new items, outside the catalogue: every label whose
        text is exactly the query's (case and spacing folded), such as an older version or another
        build of the item, is left out of its answer, as a filter file would leave out the item
        itself (label points teach a label's own text to name it; docs/benchmarks.md, "New items")."""
        return self.rank_labels(texts, k, uids, drop_namesakes)[0]

    def rank_labels(
        self, texts: Inputs, k: int = 5, uids: list[str | None] | None = None, drop_namesakes: bool = False
    ) -> tuple[list[list[dict]], list[bool]]:
        """:meth:`predict_labels`'s answers and, for each text, whether the model knows one of its
        words (:meth:`known_queries`), computed once for both."""
        if self.label_uids is None:
            raise RuntimeError("fit or load the model first")
        rows = _is_matrix(texts)  # feature rows, for a model trained on precomputed features
        n = texts.shape[0] if rows else len(texts)
        if uids is not None and len(uids) != n:
            raise ValueError(f"{len(uids)} uids for {n} texts")
        if drop_namesakes and rows:
            from ..errors import ConfigError

            raise ConfigError("drop_namesakes compares texts; feature rows have none")
        k = max(1, min(int(k), len(self.label_uids)))
        leave_out = [set() if j < 0 else {j} for j in (self._own_labels(uids) if uids is not None else [-1] * n)]
        if drop_namesakes:
            for left, text in zip(leave_out, texts):
                left.update(self._namesakes(text))
        most = max((len(left) for left in leave_out), default=0)
        P, known = self.scores_and_known(texts if rows else list(texts), min(k + most, len(self.label_uids)))
        out = []
        for i in range(P.shape[0]):
            lo, hi = P.indptr[i], P.indptr[i + 1]
            ranked = sorted(
                ((s, j) for s, j in zip(P.data[lo:hi].tolist(), P.indices[lo:hi].tolist()) if j not in leave_out[i]),
                key=lambda sc: (-sc[0], sc[1]),
            )[:k]
            out.append(
                [{"id": self.label_uids[j], "text": self.label_texts[j], "score": round(s, 6)} for s, j in ranked]
                if known[i]
                else []
            )
        return out, known

    def scores_and_known(self, texts: Inputs, k: int) -> tuple[Any, list[bool]]:
        """:meth:`predict`'s top-``k`` scores and :meth:`known_queries`' flags; a model that can
        featurise a query once for both overrides it (a single query's latency)."""
        return self.predict(texts, k=k), self.known_queries(texts)

    def known_queries(self, texts: list[str]) -> list[bool]:
        """For each text, whether the model knows one of its words (an empty text never; a row of
        features: whether it has a non-zero): a query it does not know gets no labels from
        :meth:`predict_labels` rather than the labels' prior.
        Models without a vocabulary of their own (a sentence encoder) know every non-empty text."""
        featurizer = getattr(self, "featurizer", None)
        if featurizer is None:
            return [bool(str(t).strip()) for t in texts]
        X = featurizer.transform(texts if _is_matrix(texts) else [str(t) for t in texts])
        return [bool(n) for n in (X.indptr[1:] - X.indptr[:-1]).tolist()]

    def _own_labels(self, uids: list[str | None]) -> list[int]:
        """Each uid's label index, -1 for None or a uid that is no label."""
        index = getattr(self, "_label_index", None)
        if index is None:
            index = {u: j for j, u in enumerate(self.label_uids)}
            self._label_index = index
        return [-1 if u is None else index.get(str(u), -1) for u in uids]

    def namesake_pairs(self, texts: list[str]):
        """``(row, label)`` pairs, one a label whose text is exactly that of query ``row`` (folded):
        what ``drop_namesakes`` leaves out, as an ``(n, 2)`` array of filter pairs."""
        import numpy as np

        pairs = [(i, j) for i, text in enumerate(texts) for j in self._namesakes(text)]
        return np.asarray(pairs, dtype=np.int64).reshape(-1, 2)

    def _namesakes(self, text: str) -> list[int]:
        """The labels whose text is ``text``, case and spacing folded."""
        index = getattr(self, "_text_index", None)
        if index is None:
            index = {}
            for j, label_text in enumerate(self.label_texts):
                index.setdefault(folded_text(label_text), []).append(j)
            self._text_index = index
        return index.get(folded_text(text), [])

    def page_in(self) -> int:
        """Bring weights read mapped from disk into memory before serving; returns the bytes read
        (models that hold their weights in memory read nothing)."""
        return 0

    def hold_in_memory(self) -> int:
        """Copy weights read mapped from disk into the process's own memory, out of reach of
        later changes to the files; returns the bytes copied (0 for models that map nothing)."""
        return 0

    def mapped_files(self) -> list[str]:
        """The files whose mappings prediction reads (none for models held in memory)."""
        return []

    def save_labels(self, directory: str | Path) -> None:
        from ..data.formats import write_lf_json

        write_lf_json(Path(directory) / LABELS_FILE, self.label_uids, self.label_texts, None)

    def load_labels(self, directory: str | Path, n_labels: int) -> None:
        path = Path(directory) / LABELS_FILE
        uids, texts = read_labels(path)
        if len(uids) != n_labels:
            raise DataFormatError(path, None, f"has {len(uids):,} labels but the model has {n_labels:,}")
        self.label_uids, self.label_texts = uids, texts
        self._label_index = None
        self._text_index = None
