"""The linear family's blend mixed with a fine-tuned encoder's scores, the mix chosen on validation.

A query's score for label l is ``(1 - m) * blend(l) + m * ngame(l)``: ``blend`` is
:class:`~.blend.LinearKnnBlend`'s score (the tree, the TF-IDF neighbours' vote and the label texts'
similarity) and ``ngame`` :class:`~.neural_xmc.NeuralXMC`'s of the ``ngame`` family (all-MiniLM-L6-v2
fine-tuned on the points and their labels' texts, its classifiers mixed with the nearest points'
vote). Each part ranks its top ``candidates`` labels and the hybrid ranks their union. The mix
``m`` is chosen on the validation split among :attr:`HybridConfig.mixes` by P@1 (0 and 1 among
them, so on that split the hybrid is never below either part alone; on a tie the smaller); without
a validation split, the configured ``ngame_mix``, else the one mix of ``mixes`` where it has one,
else :data:`UNVALIDATED_MIX`. For new items (:func:`new_items_config`) the mix is 0. Each part makes its
own choices on the same validation split first (the blend's weights; ngame's epochs, encoder and
its own neighbour mix), and a model retrained on every point after validation keeps them all
(:func:`refit_config`); where ``m`` is 0 the retrained model does not train its ngame part.

The blend trains on every point it is given, label points included; ngame on the original points
only (``ngame_label_points``), since label points lowered its P@1 on the dev suite
(docs/benchmarks.md, "ngame: a fine-tuned encoder and its classifiers").

Why: the tree and the neighbours remember the corpus's words, the tuned encoder knows meanings that
share no word with them (a dictionary's cross-references); which is worth more differs by corpus,
so the corpus's own validation decides (docs/decisions.md, "The encoder hybrid").
"""

from __future__ import annotations

import time
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import ClassVar

import numpy as np
import scipy.sparse as sp

from ..engine.records import LabelPoints, TrainResult, Validation, validation_metrics
from ..errors import ConfigError, DataFormatError
from ..jsonio import read_json_file
from ..sparse_ops import top_k_per_row
from .base import LabelledModel
from .blend import BlendConfig, LinearKnnBlend
from .neural_xmc import ModelConfig, NeuralXMC, is_a_share
from .spec import write_spec

# ngame_mix None and no validation split: the mix chosen with each dev dataset left out
# (benchmarks/encoder_hybrid.py; docs/decisions.md, "The encoder hybrid")
UNVALIDATED_MIX = 0.8


@dataclass
class HybridConfig:
    """Settings of :class:`LinearNgameHybrid`: its two parts' and its own."""

    MODEL: ClassVar[str] = "linear-ngame"
    blend: BlendConfig = field(default_factory=BlendConfig)
    ngame: ModelConfig = field(default_factory=lambda: ModelConfig(family="ngame"))
    mixes: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)  # tried on validation, in order
    ngame_mix: float | None = None  # fixed; None: chosen on validation (else UNVALIDATED_MIX)
    ngame_label_points: bool = False  # ngame's part trains on label points too
    candidates: int = 100  # labels each part ranks for the hybrid
    seed: int = 0

    def __post_init__(self) -> None:
        self.mixes = tuple(self.mixes)
        if not self.mixes or not all(is_a_share(m) for m in self.mixes):
            raise ConfigError(f"mixes must be a non-empty list of numbers in [0, 1], got {self.mixes!r}")
        if self.ngame_mix is not None and not is_a_share(self.ngame_mix):
            raise ConfigError(f"ngame_mix must be a number in [0, 1] or null, got {self.ngame_mix!r}")
        if self.ngame.family != "ngame":
            raise ConfigError(f"the hybrid's encoder part is ngame, not {self.ngame.family!r}")
        if not isinstance(self.candidates, int) or isinstance(self.candidates, bool) or self.candidates < 1:
            raise ConfigError(f"candidates must be a positive whole number, got {self.candidates!r}")


def config_for(
    name: str, seed: int | None = None, threads: int | None = None, epochs: int | None = None, device: str | None = None
) -> HybridConfig:
    """The default settings (the registry's hook): linear-knn's and ngame's defaults; ``epochs`` and
    ``device`` are ngame's."""
    from .blend import config_for as blend_config
    from .neural_xmc import config_for as neural_config

    seed = 0 if seed is None else seed
    return HybridConfig(
        blend=blend_config("linear-knn", seed=seed, threads=threads),
        ngame=neural_config("ngame", seed=seed, epochs=epochs, device=device),
        seed=seed,
    )


def refit_config(config: HybridConfig, result: TrainResult) -> HybridConfig:
    """``config`` with what its validation run chose fixed: the mix, and each part's own choices
    (for the final model on every point)."""
    from .registry import refit_config as part_refit

    record = result.best_record()
    parts = record.get("parts") or {}
    if parts.get("linear-knn"):
        config = replace(config, blend=part_refit(config.blend, TrainResult(**parts["linear-knn"])))
    if parts.get("ngame"):
        config = replace(config, ngame=part_refit(config.ngame, TrainResult(**parts["ngame"])))
    if record.get("ngame_mix") is not None:
        config = replace(config, ngame_mix=float(record["ngame_mix"]))
    return config


def new_items_config(config: HybridConfig) -> HybridConfig:
    """``config`` for new items: the blend's part as for new items (its label-text similarity not
    tried) and the mix 0, so that no ngame part trains, unless the caller fixed a mix: no
    validation of ours foresaw what the encoder's scores do to new items (docs/decisions.md, "The
    encoder hybrid and new items")."""
    from .blend import new_items_config as blend_new_items

    config = replace(config, blend=blend_new_items(config.blend))
    return config if config.ngame_mix is not None else replace(config, mixes=(0.0,))


def _rows(mask: np.ndarray, *arrays):
    """Each of ``arrays`` (a list, a sparse matrix, a vector or None) at the rows of ``mask``."""
    rows = np.flatnonzero(mask)
    return [None if a is None else [a[i] for i in rows] if isinstance(a, list) else a[rows] for a in arrays]


class LinearNgameHybrid(LabelledModel):
    """Fit both parts on one training set; predict their mixed top-k."""

    kind = "linear-ngame"

    def __init__(self, config: HybridConfig | None = None):
        self.config = config or HybridConfig()
        self.blend = LinearKnnBlend(replace(self.config.blend, seed=self.config.seed))
        self.ngame: NeuralXMC | None = NeuralXMC(
            replace(self.config.ngame, train=replace(self.config.ngame.train, seed=self.config.seed))
        )
        self.ngame_mix = self.config.ngame_mix if self.config.ngame_mix is not None else UNVALIDATED_MIX
        self.result: TrainResult | None = None

    @property
    def featurizer(self):
        """The tree's vocabulary where only the blend counts; None (every text known) where the encoder does."""
        return None if self.ngame_mix else self.blend.featurizer

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
    ) -> LinearNgameHybrid:
        """Train the blend on every point and ngame on the original points (both where
        ``ngame_label_points``), each with ``valid`` for its own choices; then, with ``valid``, choose
        the mix of highest validation P@1 (the smaller on a tie). A mix fixed at 0 trains no ngame
        part. ``label_points`` and ``positive_weight`` go to the blend (and to ngame with its
        label points)."""
        if label_texts is None:
            raise ConfigError("fit needs the labels' texts (label_texts=dataset.label_texts)")
        started = time.perf_counter()
        texts = list(inputs)
        self.set_labels(label_texts, self.label_uids if self.label_uids and len(self.label_uids) == len(label_texts) else None)
        directory = None if checkpoint_dir is None else Path(checkpoint_dir)
        self.blend.fit(
            texts,
            Y,
            label_texts,
            valid=valid,
            sample_weight=sample_weight,
            checkpoint_dir=None if directory is None else directory / "linear-knn",
            resume=resume,
            progress=progress,
            label_points=label_points,
            positive_weight=positive_weight,
        )
        parts: dict = {"linear-knn": asdict(self.blend.result) if self.blend.result else None, "ngame": None}
        mixes = self.config.mixes if self.config.ngame_mix is None else (self.config.ngame_mix,)
        if valid is None and len(mixes) > 1:  # nothing to choose on: the mix the dev datasets left out chose
            mixes = (UNVALIDATED_MIX,)
        record: dict = {"epoch": 0}
        if not any(mixes):
            self.ngame, self.ngame_mix = None, 0.0
        else:
            assert self.ngame is not None
            is_label = np.zeros(len(texts), dtype=bool)
            if label_points is not None and not self.config.ngame_label_points:
                is_label[: label_points.mask.size] = label_points.mask  # points a text transform appended are not label points
            keep = ~is_label if is_label.sum() < len(texts) - 1 else np.ones(len(texts), dtype=bool)
            ngame_texts, ngame_Y, ngame_weights = _rows(keep, texts, sp.csr_matrix(Y), sample_weight)
            with_points = label_points is not None and self.config.ngame_label_points
            self.ngame.fit(
                ngame_texts,
                ngame_Y,
                label_texts,
                valid=valid,
                sample_weight=ngame_weights,
                checkpoint_dir=None if directory is None else directory / "ngame",
                resume=resume,
                progress=progress,
                label_points=label_points if with_points else None,
                positive_weight=positive_weight if with_points else None,
            )
            parts["ngame"] = asdict(self.ngame.result) if self.ngame.result else None
            if valid is None:
                self.ngame_mix = float(mixes[0])
            else:
                queries = list(valid.inputs)
                blend, ngame = self.parts(queries)
                tried = {m: validation_metrics(self.combine(blend, ngame, m, 10), valid) for m in mixes}
                best = max(mixes, key=lambda m: (tried[m]["P@1"], -m))
                self.ngame_mix = float(best)
                record.update(tried[best])
                record["mixes_tried"] = {str(m): tried[m]["P@1"] for m in mixes}
            if not self.ngame_mix:
                self.ngame = None  # nothing to keep: the model predicts without torch's encoder
        record["ngame_mix"] = self.ngame_mix
        record["parts"] = parts
        seconds = time.perf_counter() - started
        record["seconds"] = seconds
        self.result = TrainResult(
            best_epoch=0,
            best_score=record.get("P@1", 0.0),
            history=[record],
            seconds=seconds,
            examples_per_second=len(texts) / max(seconds, 1e-9),
            device=self.ngame.result.device if self.ngame is not None and self.ngame.result else "cpu",
        )
        if progress:
            print(
                f"hybrid: ngame mix {self.ngame_mix:g}"
                + (f" (validation P@1 by mix: {record['mixes_tried']})" if "mixes_tried" in record else "")
                + ("" if self.ngame_mix else ": the blend alone"),
                flush=True,
            )
        return self

    def parts(self, texts: list[str], k: int = 0) -> tuple[sp.csr_matrix, sp.csr_matrix | None]:
        """The blend's and ngame's top candidates for ``texts`` (``candidates`` labels, or ``k``
        where more are asked for); ngame's is None where it does not count."""
        k = min(max(self.config.candidates, k), self.n_labels)
        blend = sp.csr_matrix(self.blend.predict(texts, k=k))
        return blend, None if self.ngame is None else sp.csr_matrix(self.ngame.predict(texts, k=k))

    def combine(self, blend: sp.csr_matrix, ngame: sp.csr_matrix | None, mix: float, k: int) -> sp.csr_matrix:
        """The top ``k`` of ``(1 - mix) * blend + mix * ngame`` a row (each part alone at 0 and 1, as
        :meth:`predict` ranks them: no zero entries of the other part)."""
        if not mix or ngame is None:
            scores = blend
        else:
            scores = ngame if mix == 1 else (1 - mix) * blend + mix * ngame
        return top_k_per_row(sp.csr_matrix(scores), min(k, self.n_labels))

    @property
    def n_labels(self) -> int:
        return len(self.label_uids) if self.label_uids is not None else self.blend.n_labels

    def predict(self, texts: list[str], k: int = 100, progress: bool = False) -> sp.csr_matrix:
        """Top-``k`` hybrid label scores for each text (``len(texts) x L`` CSR)."""
        if self.result is None:
            raise RuntimeError("fit or load the model first")
        texts = list(texts)
        if self.ngame is None or not self.ngame_mix:
            return self.blend.predict(texts, k=k)
        if self.ngame_mix == 1:
            return self.ngame.predict(texts, k=k)
        blend, ngame = self.parts(texts, k)
        return self.combine(blend, ngame, self.ngame_mix, k)

    def to(self, device: str) -> LinearNgameHybrid:
        """ngame's part predicts on ``device`` from now on (the blend runs on the CPU). Returns the model itself."""
        if self.ngame is not None:
            self.ngame.to(device)
        return self

    def save(self, directory: str | Path) -> None:
        """The parts in ``linear-knn/`` and ``ngame/`` (where it counts), the labels and ``model.json``."""
        if self.result is None:
            raise RuntimeError("fit the model before saving it")
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        self.blend.save(d / "linear-knn")
        if self.ngame is not None:
            self.ngame.save(d / "ngame")
        self.save_labels(d)
        write_spec(d, self.kind, self.config, self.result, ngame_mix=self.ngame_mix, n_labels=self.n_labels)

    @classmethod
    def load(cls, directory: str | Path) -> LinearNgameHybrid:
        d = Path(directory)
        spec = read_json_file(d / "model.json")
        mix = spec.get("ngame_mix") if isinstance(spec, dict) else None
        if not is_a_share(mix):
            raise DataFormatError(d / "model.json", None, "a linear-ngame model needs an 'ngame_mix' in [0, 1]")
        blend = LinearKnnBlend.load(d / "linear-knn")
        ngame = NeuralXMC.load(d / "ngame") if mix else None
        settings = spec["model"]
        config = HybridConfig(
            blend=blend.config,
            ngame=ngame.config if ngame is not None else ModelConfig(family="ngame"),
            mixes=tuple(settings.get("mixes", HybridConfig.mixes)),
            ngame_mix=settings.get("ngame_mix"),
            ngame_label_points=bool(settings.get("ngame_label_points", False)),
            candidates=int(settings.get("candidates", 100)),
            seed=int(settings.get("seed", 0)),
        )
        model = cls(replace(config, ngame=ModelConfig(family="ngame")))  # built on the CPU, as NeuralXMC.load does
        model.config, model.blend, model.ngame, model.ngame_mix = config, blend, ngame, float(mix)
        model.result = TrainResult(**spec["result"]) if spec.get("result") else None
        model.load_labels(d, int(spec["n_labels"]))
        return model

    def page_in(self) -> int:
        """The blend's mapped weights read in (and its encoder loaded where it counts)."""
        return self.blend.page_in()

    def hold_in_memory(self) -> int:
        return self.blend.hold_in_memory()

    def mapped_files(self) -> list[str]:
        return self.blend.mapped_files()
