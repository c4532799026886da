"""A trainable neural XMC model with one fit/predict/save/load shape for every encoder family."""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from sklearn.preprocessing import normalize

from .. import sentence
from ..augment.conventional import append_mixed
from ..engine.clusters import balanced_clusters, cluster_members, label_representations
from ..engine.devices import describe, resolve_device
from ..engine.records import LabelPoints, TrainConfig, TrainResult, Validation, has_checkpoint, validation_metrics
from ..errors import ConfigError, DataFormatError
from ..features import TextFeaturizer
from ..settings import check_ranges
from .astec import BagOfEmbeddings
from .base import LabelledModel, checked_positive_weights
from .contrastive import ContrastiveConfig, TunedEncoder, chosen_epochs, fine_tune
from .dual_encoder import FrozenEmbeddings
from .inception import EMBED_DIM, InceptionEncoder, WordVocabulary, term_vectors, token_bags
from .inception_lf import LabelFeatureNetwork, graph_text_bags, label_text_bags
from .neighbours import EmbeddingNeighbours, mixed
from .network import XMCNetwork
from .neural_training import TransformedBatches, fit, predict
from .spec import read_result, read_spec, write_spec


@dataclass(frozen=True)
class Family:
    """A model family: its encoder, what it reads (``tfidf`` rows, ``minilm`` embeddings or word ids,
    ``words``), whether its label classifiers start from the label texts' vectors, whether its
    sentence encoder is fine-tuned first (NGAME's first stage, :mod:`.contrastive`) and whether its
    label classifiers are built from the label texts and graph in two phases (InceptionXML-LF,
    :mod:`.inception_lf`)."""

    build: Callable[[int, int, float], torch.nn.Module]  # (n_features, dim, dropout) -> encoder
    inputs: str
    fixed_dim: int | None = None
    init_from_label_text: bool = False
    train_defaults: dict = field(default_factory=dict)  # TrainConfig fields this family changes
    tunes_encoder: bool = False
    label_features: bool = False

    def train_config(self, **overrides) -> TrainConfig:
        """The family's training settings, then ``overrides``."""
        return TrainConfig(**{**self.train_defaults, **overrides})


FAMILIES: dict[str, Family] = {
    "astec": Family(lambda n, d, p: BagOfEmbeddings(n, d, p), "tfidf"),
    # 20 epochs, all trained, the best kept: its validation P@1 is noisy between epochs (docs/decisions.md, "The neural models")
    "inceptionxml": Family(
        lambda n, d, p: InceptionEncoder(n, d, p), "words", train_defaults={"epochs": 20, "dense_lr": 0.001, "patience": 20}
    ),
    # few epochs: training erodes the label-text prior after an epoch or two (docs/decisions.md, "The neural models")
    "dual-encoder": Family(
        lambda n, d, p: FrozenEmbeddings(),
        "minilm",
        sentence.EMBEDDING_DIM,
        True,
        {"lr": 0.001, "correction_l2": 0.1, "epochs": 2, "patience": 2},
    ),
}
# the dual-encoder's classifier stage on an encoder fine-tuned first (NGAME + Renee), one epoch: on
# a tuned encoder the classifiers can lose their label-text start within an epoch (docs/decisions.md, "The fine-tuned encoder")
FAMILIES["ngame"] = replace(
    FAMILIES["dual-encoder"], tunes_encoder=True, train_defaults={**FAMILIES["dual-encoder"].train_defaults, "epochs": 1}
)
# InceptionXML's encoder, label classifiers from the label texts (in the word embeddings' space,
# hence their 384 dimensions) and two phases of 10 epochs each (docs/decisions.md, "InceptionXML-LF")
FAMILIES["inceptionxml-lf"] = Family(
    lambda n, d, p: InceptionEncoder(n, d, p),
    "words",
    EMBED_DIM,
    train_defaults={"epochs": 10, "dense_lr": 0.001, "patience": 10},
    label_features=True,
)


# neighbour_mix None and no validation split: the mix that wins leaving each dev dataset out
# (benchmarks/neighbour_mix.py), for the packaged encoder and for a fine-tuned one (docs/decisions.md,
# "The dual-encoder's neighbours")
UNVALIDATED_NEIGHBOUR_MIX = 0.5
UNVALIDATED_TUNED_NEIGHBOUR_MIX = 0.2


def is_a_share(value) -> bool:
    """Whether ``value`` is a number in [0, 1] (a bool is not)."""
    return not isinstance(value, bool) and isinstance(value, (int, float)) and 0 <= value <= 1


@dataclass
class ModelConfig:
    """Architecture and training settings of :class:`NeuralXMC`."""

    family: str = "astec"
    dim: int = 256
    dropout: float = 0.2
    max_cluster_size: int = 32
    cluster_dim: int = 64
    init_scale: float = 5.0  # label classifiers start at init_scale x label-text vector (when the family does)
    max_features: int = 1_000_000  # TF-IDF vocabulary cap: the embedding table has this many rows at most
    # astec: its word and word-pair embeddings start from all-MiniLM-L6-v2's word pieces, not at random
    pretrained_words: bool = False
    # the dual-encoder's sentence encoder: auto (bfloat16 on CPUs that have it, else float32; fixed
    # at construction, so that a saved model keeps it), float32, bfloat16 or int8
    encoder_precision: str = sentence.AUTO
    train: TrainConfig = field(default_factory=TrainConfig)
    contrastive: ContrastiveConfig = field(default_factory=ContrastiveConfig)  # the ngame family's first stage
    first_phase_epochs: int | None = None  # inceptionxml-lf's first phase (None: train.epochs, as the second)
    # a sentence encoder's families (dual-encoder, ngame): the training points' vote (.neighbours)
    # mixed into the classifiers' scores, (1 - mix) * classifier + mix * vote; the mixes tried on
    # validation in order, or a mix fixed (None: chosen on validation, else the unvalidated one below)
    neighbours: int = 30
    neighbour_power: float = 2.0
    neighbour_share: bool = True  # the vote divided by the neighbours' weight (a share), else by their number (a mean)
    neighbour_mixes: tuple[float, ...] = (0.0, 0.1, 0.2, 0.3, 0.4, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0)
    neighbour_mix: float | None = None
    candidates: int = 100  # labels the classifiers and the vote each rank for the mix

    def __post_init__(self) -> None:
        check_ranges(
            self,
            positive=("dim", "max_cluster_size", "cluster_dim", "max_features"),
            below_one=("dropout",),
            non_negative=("init_scale",),
        )
        if self.first_phase_epochs is not None:
            check_ranges(self, positive=("first_phase_epochs",))
        check_ranges(self, positive=("neighbours", "candidates"), non_negative=("neighbour_power",))
        self.neighbour_mixes = tuple(self.neighbour_mixes)  # a list where read from model.json
        mixes = self.neighbour_mixes + (() if self.neighbour_mix is None else (self.neighbour_mix,))
        if not self.neighbour_mixes or not all(is_a_share(m) for m in mixes):
            raise ConfigError(f"neighbour_mixes and neighbour_mix must be numbers in [0, 1], got {mixes!r}")
        if self.family not in FAMILIES:
            raise ConfigError(f"family must be one of {', '.join(FAMILIES)}, got {self.family!r}")
        if self.encoder_precision not in (sentence.AUTO, *sentence.PRECISIONS):
            raise ConfigError(
                f"encoder_precision must be one of {', '.join((sentence.AUTO, *sentence.PRECISIONS))}, "
                f"got {self.encoder_precision!r}"
            )
        if self.encoder_precision != sentence.AUTO and FAMILIES[self.family].inputs != "minilm":
            raise ConfigError(f"encoder_precision applies to a sentence encoder (dual-encoder, ngame), not {self.family}")
        if self.pretrained_words and FAMILIES[self.family].inputs != "tfidf":
            raise ConfigError(f"pretrained_words applies to a family that reads TF-IDF rows (astec), not {self.family}")
        if self.neighbour_mix and FAMILIES[self.family].inputs != "minilm":
            raise ConfigError(f"neighbour_mix applies to a sentence encoder's families (dual-encoder, ngame), not {self.family}")
        if self.encoder_precision == "int8" and FAMILIES[self.family].tunes_encoder:
            raise ConfigError("encoder_precision int8 is PyTorch's quantisation of the packaged encoder; ngame's is fine-tuned")


def config_for(
    name: str, seed: int | None = None, threads: int | None = None, epochs: int | None = None, device: str | None = None
) -> ModelConfig:
    """The default settings of neural family ``name`` (the registry's hook; torch's thread count is
    the process's, set by the entry point)."""
    overrides = {k: v for k, v in (("seed", seed), ("epochs", epochs), ("device", device)) if v is not None}
    if device is not None:
        resolve_device(device)  # a GPU asked for and missing: said now, before any work
    return ModelConfig(family=name, train=FAMILIES[name].train_config(**overrides))


def first_phase_best(history: list[dict]) -> int:
    """The epoch an inceptionxml-lf run kept from its first phase (its records in ``encoder_history``;
    the last one where none says so)."""
    phase = [r for r in history if r.get("phase") == 1]
    kept = [r["epoch"] for r in phase if r.get("kept")]
    return int(kept[-1] if kept else phase[-1]["epoch"])


def refit_config(config: ModelConfig, result: TrainResult) -> ModelConfig:
    """The registry's hook for the final model: the encoder's fine-tuning epochs that validation
    kept (ngame; 0 when the packaged encoder won), or the first phase's best epoch count
    (inceptionxml-lf), beside the classifier epochs the registry fixes."""
    family = FAMILIES[config.family]
    record = result.best_record()
    if family.inputs == "minilm" and config.neighbour_mix is None and record.get("neighbour_mix") is not None:
        config = replace(config, neighbour_mix=float(record["neighbour_mix"]))
    if family.label_features and result.encoder_history:
        return replace(config, first_phase_epochs=first_phase_best(result.encoder_history) + 1)
    if not family.tunes_encoder or not result.encoder_history:
        return config
    return replace(config, contrastive=replace(config.contrastive, epochs=chosen_epochs(result.encoder_history)))


class NeuralXMC(LabelledModel):
    """Features -> encoder -> meta-classifier over label clusters -> label classifier.

    ``fit(texts, Y, label_texts)`` learns from soft targets; ``predict(texts, k)`` returns the
    top-k labels of each text as a CSR matrix of probabilities.
    """

    def __init__(self, config: ModelConfig | None = None):
        config = config or ModelConfig()
        self.family = FAMILIES[config.family]
        if self.family.fixed_dim is not None:
            config = replace(config, dim=self.family.fixed_dim)
        self.device = resolve_device(config.train.device)  # checked now: a missing GPU is said before any work
        if self.family.inputs == "minilm":
            try:
                precision = sentence.resolve_precision(config.encoder_precision, self.device.type)
            except ValueError as exc:  # a precision the device cannot run
                raise ConfigError(f"encoder_precision: {exc}") from None
            config = replace(config, encoder_precision=precision)
        self.config = config  # a copy where the family fixes a setting: the caller's object is not changed
        self.featurizer: TextFeaturizer | None = None
        self.tokens: WordVocabulary | None = None
        self.network: XMCNetwork | None = None
        self.tuned: TunedEncoder | None = None  # the ngame family's fine-tuned sentence encoder
        self.assign: np.ndarray | None = None
        self.members: np.ndarray | None = None
        self.result: TrainResult | None = None
        self.neighbours: EmbeddingNeighbours | None = None  # a sentence encoder's families, where the mix is above 0
        self.neighbour_mix = 0.0

    def _build(self, n_features: int, n_labels: int, n_clusters: int) -> XMCNetwork:
        cfg = self.config
        network = LabelFeatureNetwork if self.family.label_features else XMCNetwork
        return network(self.family.build(n_features, cfg.dim, cfg.dropout), cfg.dim, n_labels, n_clusters)

    def _points_and_labels(self, texts: list[str], label_texts: list[str], progress: bool):
        """The features of the training texts and of the label texts. A sentence encoder embeds the
        label texts as the one list other models embed too (the embedding cache is keyed by a list),
        then the distinct training texts that are no label's text: no text twice."""
        if self.family.inputs != "minilm":
            return self.features(texts, progress), self.features(label_texts, progress)
        label_vectors = self.features(label_texts, progress)
        ids: dict[str, int] = {}
        for i, t in enumerate(label_texts):
            ids.setdefault(t, i)  # a text's first label
        others = list(dict.fromkeys(t for t in texts if t not in ids))
        ids.update((t, len(label_texts) + i) for i, t in enumerate(others))
        vectors = label_vectors if not others else np.vstack([label_vectors, self.features(others, progress)])
        return vectors[np.array([ids[t] for t in texts], dtype=np.int64)], label_vectors

    def features(self, texts: list[str], progress: bool = False) -> sp.csr_matrix | np.ndarray:
        """The model's input for texts: TF-IDF rows, sentence embeddings or word ids."""
        if self.tuned is not None:  # ngame's tuned encoder (where validation kept the packaged one, as the dual-encoder)
            return self.tuned.embed(texts, self.config.encoder_precision, progress=progress)
        if self.family.inputs == "minilm":
            device = str(self.device)
            return sentence.embed(texts, progress=progress, precision=self.config.encoder_precision, device=device)
        if self.family.inputs == "words":
            if self.tokens is None:
                raise RuntimeError("fit or load the model first")
            return self.tokens.transform(texts)
        if self.featurizer is None:
            raise RuntimeError("fit or load the model first")
        return self.featurizer.transform(texts)

    @property
    def kind(self) -> str:
        """Its row of the model table: the family (astec, inceptionxml, inceptionxml-lf, dual-encoder, ngame)."""
        return self.config.family

    def _n_features(self, X=None) -> int:
        if self.featurizer is not None:
            return self.featurizer.n_features
        if self.tokens is not None:
            return self.tokens.vocab_size
        return self.config.dim if X is None else X.shape[1]

    def fit(
        self,
        inputs,
        Y: sp.spmatrix,
        label_texts: list[str] | None = None,
        valid: Validation | None = None,
        sample_weight: np.ndarray | None = None,
        checkpoint_dir: str | Path | None = None,
        resume: bool = False,
        progress: bool = True,
        label_points: LabelPoints | None = None,
        batch_transform=None,
        feature_mix=None,
        positive_weight: np.ndarray | None = None,
    ) -> NeuralXMC:
        """Train on texts ``inputs`` with (soft) targets ``Y`` and per-point loss weights
        ``sample_weight`` (1 when None).

        ``valid`` (a :class:`~gandalf_xmc.engine.records.Validation` of texts) selects the best epoch;
        ``label_points`` says which points are label points, the share of them drawn into each epoch
        and whether they get shortlist negatives; ``batch_transform``
        (:class:`~gandalf_xmc.augment.LabelMix` or :class:`~gandalf_xmc.augment.SynonymReplacement`)
        transforms every training batch; ``feature_mix`` (:class:`~gandalf_xmc.augment.FeatureMix`)
        adds its mixed points once (families that read TF-IDF rows or sentence embeddings only);
        ``positive_weight`` multiplies the cost of each point's positive targets (1 when None).

        ngame with ``valid`` trains its classifiers twice, on the tuned encoder and on the packaged
        one (the dual-encoder), and keeps the better on validation.
        """
        began = time.perf_counter()
        given = (inputs, Y, label_texts, valid, sample_weight)  # as given: the body below rebinds some
        rest = dict(
            progress=progress,
            label_points=label_points,
            batch_transform=batch_transform,
            feature_mix=feature_mix,
            positive_weight=positive_weight,
        )
        texts = inputs
        positive_weight = checked_positive_weights(positive_weight, Y.shape[0])
        if label_texts is None:
            raise ConfigError("fit needs the labels' texts (label_texts=dataset.label_texts)")
        cfg = self.config
        self.device = resolve_device(cfg.train.device)
        self.set_labels(label_texts)
        torch.manual_seed(cfg.train.seed)
        if self.family.inputs == "tfidf":
            self.featurizer = TextFeaturizer(max_features=cfg.max_features).fit(list(texts) + list(label_texts))
        if self.family.inputs == "words":
            self.tokens = WordVocabulary().fit(list(texts) + list(label_texts))
        encoder_history: list[dict] = []
        # first stage: on the original points (label points join the classifiers)
        if self.family.tunes_encoder and cfg.contrastive.epochs > 0:
            original = np.arange(len(texts)) if label_points is None else np.flatnonzero(~label_points.mask)
            if original.size < 2:  # a training set of label points alone (z-only): they are what there is
                original = np.arange(len(texts))
            self.tuned = TunedEncoder(cfg.contrastive.max_length, self.device)
            encoder_history = fine_tune(
                self.tuned,
                [texts[i] for i in original],
                Y[original],
                list(label_texts),
                cfg.contrastive,
                cfg.train.seed,
                cfg.train.gpu_precision,
                checkpoint_dir,
                resume,
                progress,
                cfg.encoder_precision,
            )
        X, Z = self._points_and_labels(list(texts), list(label_texts), progress)
        Y = sp.csr_matrix(Y, dtype=np.float32)
        points, point_targets = X, Y  # the vote's index: the points given, before any feature mix appends its own
        if self.tokens is not None:  # cluster labels on bags of words
            reps = label_representations(
                token_bags(X, self.tokens.vocab_size), Y, token_bags(Z, self.tokens.vocab_size), cfg.cluster_dim, cfg.train.seed
            )
        else:
            reps = label_representations(X, Y, Z, cfg.cluster_dim, cfg.train.seed)
        self.assign = balanced_clusters(reps, cfg.max_cluster_size, cfg.train.seed)
        self.members, _ = cluster_members(self.assign)
        self.network = self._build(self._n_features(X), len(label_texts), self.members.shape[0])
        encoder: Any = self.network.encoder  # the family's encoder module
        if self.tokens is not None:
            encoder.init_pretrained(self.tokens.pretrained_vectors())
        if cfg.pretrained_words and self.featurizer is not None:
            encoder.init_pretrained(term_vectors(self.featurizer.word_terms()), cfg.train.seed)
        if hasattr(encoder, "fit_token_weights"):
            encoder.fit_token_weights(np.concatenate([X, Z]))
        if self.family.init_from_label_text:
            self.network.init_from_label_vectors(Z, self.assign, cfg.init_scale)
        self.network.to(self.device)
        if feature_mix is not None:  # drawn once, after clustering on the original points
            if self.tokens is not None:
                raise ConfigError(f"{feature_mix.kind} mixes input vectors; {cfg.family} reads word ids")
            X, Y, sample_weight, label_points, positive_weight = append_mixed(
                feature_mix, X, Y, Z, sample_weight, label_points, positive_weight
            )
        v = None if valid is None else valid.with_inputs(self.features(valid.inputs))
        batches = None if batch_transform is None else TransformedBatches(batch_transform, list(texts), self.features)

        def train(config: TrainConfig, directory: Path | None, resume: bool) -> TrainResult:
            assert self.network is not None and self.assign is not None and self.members is not None
            return fit(
                self.network,
                X,
                Y,
                self.assign,
                self.members,
                v,
                config,
                directory,
                resume,
                sample_weight,
                progress,
                batch_transform=batches,
                label_points=label_points,
                positive_weight=positive_weight,
            )

        if self.family.label_features:
            self.result = self._fit_two_phases(train, Z, Y, label_points, checkpoint_dir, resume)
        else:
            # ngame: a run stopped while fine-tuning has no classifier checkpoint yet; its classifiers start
            classifiers_resume = resume and (not self.family.tunes_encoder or has_checkpoint(checkpoint_dir))
            self.result = train(cfg.train, None if checkpoint_dir is None else Path(checkpoint_dir), classifiers_resume)
        self.result.device = describe(self.device)
        if self.family.inputs == "minilm":
            index = EmbeddingNeighbours(points, point_targets, cfg.neighbours, cfg.neighbour_power, cfg.neighbour_share)
            self._choose_neighbour_mix(index, v)
        if self.family.tunes_encoder:
            self.result.encoder_history = encoder_history
        if self.tuned is not None and valid is not None:
            packaged = NeuralXMC(replace(cfg, contrastive=replace(cfg.contrastive, epochs=0)))
            packaged_dir = None if checkpoint_dir is None else Path(checkpoint_dir) / "packaged"
            self._keep_the_better(packaged.fit(*given, checkpoint_dir=packaged_dir, resume=resume, **rest))
        if self.family.tunes_encoder:
            self.result.seconds = time.perf_counter() - began  # the encoder's fine-tuning (and both classifier runs) included
        return self

    def _fit_two_phases(
        self,
        train: Callable[[TrainConfig, Path | None, bool], TrainResult],
        label_ids: np.ndarray,
        Y: sp.csr_matrix,
        label_points: LabelPoints | None,
        checkpoint_dir: str | Path | None,
        resume: bool,
    ) -> TrainResult:
        """InceptionXML-LF's two phases (:mod:`.inception_lf`); the second's record, the first's
        epochs as its ``encoder_history`` (``phase`` 1), the seconds and examples a second of both.
        A resumed run resumes the phase it was in: a finished first phase only reloads its best weights."""
        assert isinstance(self.network, LabelFeatureNetwork)
        began = time.perf_counter()
        cfg, network = self.config, self.network
        original = Y if label_points is None else Y[~label_points.mask]
        encoder: Any = network.encoder  # InceptionEncoder
        text_bags = label_text_bags(label_ids, encoder.token_weight.cpu().numpy())
        network.set_label_bags(text_bags, graph_text_bags(text_bags, original))
        directory = None if checkpoint_dir is None else Path(checkpoint_dir)
        first = replace(cfg.train, epochs=cfg.first_phase_epochs or cfg.train.epochs)
        first_result = train(first, None if directory is None else directory / "phase-1", resume)
        vectors = network.label_text_vectors()
        self.assign = balanced_clusters(normalize(vectors).astype(np.float32), cfg.max_cluster_size, cfg.train.seed)
        self.members, _ = cluster_members(self.assign)
        network.start_second_phase(vectors, self.members.shape[0])
        second_dir = None if directory is None else directory / "phase-2"
        result = train(cfg.train, second_dir, resume and has_checkpoint(second_dir))
        best = first_result.best_epoch
        result.encoder_history = [{"phase": 1, **r, "kept": r["epoch"] == best} for r in first_result.history]
        result.seconds = time.perf_counter() - began  # both phases and the reclustering between them
        seen = sum(r["examples"] for r in first_result.history + result.history)
        result.examples_per_second = seen / max(result.seconds, 1e-9)
        return result

    def _choose_neighbour_mix(self, neighbours: EmbeddingNeighbours, valid: Validation | None) -> None:
        """The mix of the classifiers' scores and the training points' vote: the configured one, else
        the one of best validation P@1 (on a tie the smaller) recorded in the best epoch's record and
        made the result's score, else :data:`UNVALIDATED_NEIGHBOUR_MIX` (on a fine-tuned encoder
        :data:`UNVALIDATED_TUNED_NEIGHBOUR_MIX`). The index is kept only
        where the mix is above 0."""
        assert self.result is not None
        cfg = self.config
        self.neighbours, self.neighbour_mix = neighbours, cfg.neighbour_mix
        if cfg.neighbour_mix is None and valid is not None:
            classifier, vote = self.parts(valid.inputs, 10)
            tried = [validation_metrics(mixed(classifier, vote, m, 10), valid) for m in cfg.neighbour_mixes]
            best = max(range(len(tried)), key=lambda i: (tried[i]["P@1"], -cfg.neighbour_mixes[i]))
            self.neighbour_mix = float(cfg.neighbour_mixes[best])
            record = self.result.best_record()
            record["neighbour_mix"] = self.neighbour_mix
            record["neighbour_mixes_tried"] = {str(m): t["P@1"] for m, t in zip(cfg.neighbour_mixes, tried, strict=True)}
            self.result.best_score = tried[best]["P@1"]
        elif self.neighbour_mix is None:
            self.neighbour_mix = UNVALIDATED_NEIGHBOUR_MIX if self.tuned is None else UNVALIDATED_TUNED_NEIGHBOUR_MIX
        if not self.neighbour_mix:
            self.neighbours = None

    def parts(self, inputs, k: int = 0) -> tuple[sp.csr_matrix, sp.csr_matrix]:
        """The classifiers' top labels and the training points' vote for texts (or their
        embeddings): ``candidates`` labels of each, or ``k`` where more are asked for."""
        if self.network is None or self.members is None or self.neighbours is None:
            raise RuntimeError("fit the model first (the vote's index is kept where the mix is above 0)")
        E = inputs if isinstance(inputs, np.ndarray) else self.features(list(inputs))
        n = self._candidates(k)
        return self._classifier_scores(E, n), self.neighbours.vote(E, n)

    def _candidates(self, k: int) -> int:
        """Labels each part ranks for the mix: ``candidates``, or ``k`` where more are asked for, at most every label."""
        assert self.assign is not None
        return min(max(self.config.candidates, k), len(self.assign))

    def _classifier_scores(self, E, k: int, progress: bool = False) -> sp.csr_matrix:
        assert self.network is not None and self.members is not None
        precision = self.config.train.gpu_precision
        clusters = self.config.train.predict_clusters
        return predict(self.network, E, self.members, k, clusters, progress=progress, precision=precision)

    def _keep_the_better(self, packaged: NeuralXMC) -> None:
        """ngame: this model's classifiers on the tuned encoder, or ``packaged``'s on the packaged one
        where they validate better (the dual-encoder's model); the comparison joins the encoder's records."""
        assert self.result is not None and packaged.result is not None
        tuned_score, packaged_score = self.result.best_score, packaged.result.best_score
        history = self.result.encoder_history
        if packaged_score > tuned_score:  # fine-tuning did not pay on validation
            self.config, self.tuned, self.network, self.result = packaged.config, None, packaged.network, packaged.result
            self.assign, self.members = packaged.assign, packaged.members
            self.neighbours, self.neighbour_mix = packaged.neighbours, packaged.neighbour_mix
        self.result.encoder_history = [
            *history,
            {"stage": "classifiers", "tuned": tuned_score, "packaged": packaged_score, "kept": self.tuned is not None},
        ]

    def to(self, device: str) -> NeuralXMC:
        """Predict on ``device`` from now on (``auto``, ``cpu``, ``cuda``, ``cuda:N``); a loaded model
        starts on the CPU, where a single query is quickest. Returns the model itself."""
        if self.network is None:
            raise RuntimeError("fit or load the model first")
        self.device = resolve_device(device)
        self.network.to(self.device)
        if self.tuned is not None:
            self.tuned.to(self.device)
        return self

    def predict(self, texts: list[str], k: int = 100, progress: bool = False) -> sp.csr_matrix:
        if self.network is None or self.members is None:
            raise RuntimeError("fit or load the model first")
        E = self.features(texts)
        if self.neighbours is None or not self.neighbour_mix:
            return self._classifier_scores(E, k, progress)
        n = self._candidates(k)
        classifier = self._classifier_scores(E, n, progress)
        return mixed(classifier, self.neighbours.vote(E, n), self.neighbour_mix, min(k, classifier.shape[1]))

    def save(self, directory: str | Path) -> None:
        """Write config, features, clusters and weights into ``directory``."""
        assert self.network is not None and self.assign is not None
        encoder = {"encoder": "tuned" if self.tuned is not None else "packaged"} if self.family.tunes_encoder else {}
        d = write_spec(
            directory,
            self.kind,
            self.config,
            self.result,
            n_labels=int(self.assign.size),
            n_features=self._n_features(),
            **encoder,
            **({"neighbour_mix": self.neighbour_mix} if self.family.inputs == "minilm" else {}),
        )
        if self.featurizer is not None:
            self.featurizer.save(d)
        if self.tokens is not None:
            self.tokens.save(d)
        np.save(d / "clusters.npy", self.assign)
        self.save_labels(d)
        torch.save({name: t.cpu() for name, t in self.network.state_dict().items()}, d / "weights.pt")
        if self.neighbours is not None and self.neighbour_mix:
            self.neighbours.save(d)
        if self.tuned is not None:
            torch.save({name: t.cpu() for name, t in self.tuned.state_dict().items()}, d / "encoder.pt")

    @classmethod
    def load(cls, directory: str | Path) -> NeuralXMC:
        d = Path(directory)
        config, spec = read_spec(d, ModelConfig)
        # loaded on the CPU, where a single query is quickest (.to() moves it), also where it trained on a GPU
        model = cls(replace(config, train=replace(config.train, device="cpu")))
        model.config = replace(model.config, train=config.train)  # the settings as saved
        model.result = read_result(spec)
        if model.family.inputs == "tfidf":
            model.featurizer = TextFeaturizer.load(d)
        if model.family.inputs == "words":
            model.tokens = WordVocabulary.load(d)
        model.assign = np.load(d / "clusters.npy")
        model.members, _ = cluster_members(model.assign)
        model.network = model._build(int(spec["n_features"]), int(spec["n_labels"]), model.members.shape[0])
        model.network.load_state_dict(torch.load(d / "weights.pt", weights_only=True, map_location="cpu"))
        model.network.eval()
        if spec.get("encoder") == "tuned":
            model.tuned = TunedEncoder(model.config.contrastive.max_length)
            model.tuned.load_state_dict(torch.load(d / "encoder.pt", weights_only=True, map_location="cpu"))
            model.tuned.eval()
        model.load_labels(d, int(spec["n_labels"]))
        mix = spec.get("neighbour_mix", 0.0)  # absent: saved before the vote existed, the classifiers alone
        if isinstance(mix, bool) or not isinstance(mix, (int, float)) or not 0 <= mix <= 1:
            raise DataFormatError(d / "model.json", None, "'neighbour_mix' must be a number in [0, 1]")
        model.neighbour_mix = float(mix)
        if model.neighbour_mix:
            cfg = model.config
            model.neighbours = EmbeddingNeighbours.load(
                d, int(spec["n_labels"]), cfg.dim, cfg.neighbours, cfg.neighbour_power, cfg.neighbour_share
            )
        return model
