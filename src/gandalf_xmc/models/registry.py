"""Every model by name, in one table: what it is, where it lives and how to configure it.

A model module is imported only when its model is asked for, so that naming, configuring or
loading a linear model never imports torch. Each model class keeps one written contract
(:class:`XMCModel`); adding a model is one row here and one module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import ConfigError, DataFormatError
from ..jsonio import read_json_file

if TYPE_CHECKING:
    from ..engine.records import TrainResult, Validation


class XMCModel(Protocol):
    """The contract every model class keeps: what the workflow, the command line and the server use,
    and nothing else. :class:`.base.LabelledModel` gives the label methods to every model; a model
    writes the rest. ``tests/test_contract.py`` checks every row of :data:`MODELS` against it.

    Attributes:
        kind: its row's name in :data:`MODELS`, which ``model.json`` saves and ``load_trained`` reads.
        config: the settings object it was built with: a dataclass whose ``MODEL`` class attribute
            (a neural family's: its ``family`` field) names its row, so that ``build_model(config)``
            finds the class, and whose ``seed`` (``train.seed``) decides everything random.
        result: after ``fit`` or ``load``, a :class:`~gandalf_xmc.engine.records.TrainResult`
            (best epoch and score, one history record an epoch, seconds), or None.
        label_uids, label_texts: the labels it ranks, in label-id order (set by ``fit``, ``load``
            or :meth:`set_labels`).
    """

    kind: str
    config: object
    result: TrainResult | None
    label_uids: list[str] | None
    label_texts: list[str] | None

    def fit(
        self,
        inputs,
        Y,
        label_texts: list[str] | None = None,
        valid: Validation | None = None,
        sample_weight=None,
        checkpoint_dir=None,
        resume: bool = False,
        progress: bool = True,
    ) -> XMCModel:
        """Train, and return the model itself.

        Args:
            inputs: the training texts (or, for models that take them, feature rows ``N x D``).
            Y: ``N x L`` (soft) targets in [0, 1].
            label_texts: the labels' texts (line i = label i); models that need none may take None.
            valid: validation inputs and targets, scored during or after training (epoch choice).
            sample_weight: ``N`` loss weights >= 0 (1 when None); a model without a loss ignores them.
            checkpoint_dir: where a model may keep checkpoints or scratch files; ``resume``:
                continue from them.
            progress: print progress lines.

        A model also takes, as keyword arguments, exactly what its row's ``takes`` names (the
        workflow passes them: ``workflow.fitting``): ``label_points`` (a
        :class:`~gandalf_xmc.engine.records.LabelPoints`: which points are label points, the share
        of them drawn into each epoch, whether they get negatives), ``batch_transform`` (a text
        transform drawn afresh for each batch) and ``feature_mix`` (MixUp, Label-MixUp: drawn once
        in the model's own input space).
        """

    def predict(self, texts, k: int = 100, progress: bool = False):
        """Top-``k`` label scores of each input, a ``len(texts) x L`` float32 CSR (larger = better)."""

    def save(self, directory: str | Path) -> None:
        """Write the model to ``directory``: ``model.json`` with its ``kind``, its weights and
        ``labels.json.gz``; nothing that runs code when read (no pickle)."""

    @classmethod
    def load(cls, directory: str | Path) -> XMCModel:
        """The model :meth:`save` wrote (``load_trained`` picks the class by ``model.json``'s kind)."""

    def set_labels(self, label_texts: list[str], label_uids: list[str] | None = None) -> None:
        """The labels' texts and ids the ranked answers name."""

    def predict_labels(
        self, texts: list[str], k: int = 5, uids: list[str | None] | None = None, drop_namesakes: bool = False
    ) -> list[list[dict]]:
        """Each input's top ``k`` labels as ``{"id", "text", "score"}``, best first; ``uids``: a
        query's own label left out; ``drop_namesakes``: labels of exactly the query's text left out."""

    def rank_labels(
        self, texts: list[str], k: int = 5, uids: list[str | None] | None = None, drop_namesakes: bool = False
    ) -> tuple[list[list[dict]], list[bool]]:
        """:meth:`predict_labels`'s answers and :meth:`known_queries`'s flags, in one pass."""

    def known_queries(self, texts: list[str]) -> list[bool]:
        """Whether the model knows a word of each query (an unknown query gets no labels)."""

    def namesake_pairs(self, texts: list[str]):
        """``(row, label)`` pairs of labels whose text is exactly query ``row``'s."""

    def page_in(self) -> int:
        """Read weights mapped from disk before serving; the bytes read."""

    def hold_in_memory(self) -> int:
        """Copy weights mapped from disk into the process's memory; the bytes copied."""

    def mapped_files(self) -> list[str]:
        """The files whose mappings prediction reads (checked before each request when served mapped)."""


@dataclass(frozen=True)
class ModelEntry:
    """A row of the table: ``module`` holds class ``cls`` and ``config_for(name, seed=, threads=,
    epochs=)`` (and ``device=`` where ``on_gpu``), which returns the model's default settings with
    those applied. ``takes`` names the keyword arguments of the class's ``fit`` beyond the common
    ones (:data:`CAPABILITIES`)."""

    name: str
    summary: str
    module: str
    cls: str
    in_epochs: bool  # trained in epochs (``--epochs`` applies)
    extra: str | None = None  # the package extra its libraries come with
    on_gpu: bool = False  # trains (and may predict) on a CUDA GPU (``--device`` applies)
    takes: tuple[str, ...] = ()  # what its fit takes besides inputs, Y and sample weights (XMCModel.fit)
    # chooses something of its own on validation that its module's refit_config fixes (the blend's
    # weights), besides a model trained in epochs; declared, so that asking loads no extra's libraries
    chooses: bool = False

    def load_module(self):
        try:
            return importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            if self.extra is None or (exc.name or "").startswith("gandalf_xmc"):
                raise
            raise ConfigError(
                f"the {self.name} model needs the '{self.extra}' extra ({exc.name} is not installed): "
                f"pip install -c constraints.txt -e '.[{self.extra}]'"
            ) from None

    def model_class(self):
        return getattr(self.load_module(), self.cls)


CAPABILITIES = ("label_points", "batch_transform", "feature_mix", "positive_weight")  # what a row's ``takes`` may name

MODELS: dict[str, ModelEntry] = {
    e.name: e
    for e in (
        ModelEntry(
            "linear",
            "XR-Linear: sparse linear classifiers over a label tree, TF-IDF input (the default)",
            "gandalf_xmc.models.linear",
            "XRLinear",
            False,
            takes=("feature_mix", "positive_weight"),
        ),
        ModelEntry(
            "astec",
            "bag of uni/bigram embeddings + residual layer, clustered shortlist",
            "gandalf_xmc.models.neural_xmc",
            "NeuralXMC",
            True,
            "neural",
            on_gpu=True,
            takes=("label_points", "batch_transform", "feature_mix", "positive_weight"),
        ),
        ModelEntry(
            "inceptionxml",
            "convolutions over word embeddings, clustered shortlist",
            "gandalf_xmc.models.neural_xmc",
            "NeuralXMC",
            True,
            "neural",
            on_gpu=True,
            takes=("label_points", "batch_transform", "positive_weight"),
        ),
        ModelEntry(
            "inceptionxml-lf",
            "InceptionXML with label classifiers built from the label texts and graph, in two phases",
            "gandalf_xmc.models.neural_xmc",
            "NeuralXMC",
            True,
            "neural",
            on_gpu=True,
            takes=("label_points", "batch_transform", "positive_weight"),
        ),
        ModelEntry(
            "dual-encoder",
            "frozen all-MiniLM-L6-v2 embeddings, label-text-initialised classifiers mixed with the nearest points' vote",
            "gandalf_xmc.models.neural_xmc",
            "NeuralXMC",
            True,
            "neural",
            on_gpu=True,
            takes=("label_points", "batch_transform", "feature_mix", "positive_weight"),
        ),
        ModelEntry(
            "ngame",
            "all-MiniLM-L6-v2 fine-tuned on the points and their label texts (NGAME), then label-text-initialised classifiers",
            "gandalf_xmc.models.neural_xmc",
            "NeuralXMC",
            True,
            "neural",
            on_gpu=True,
            takes=("label_points", "batch_transform", "feature_mix", "positive_weight"),
        ),
        ModelEntry(
            "knn", "TF-IDF k nearest training points, training-free (a reference)", "gandalf_xmc.models.knn", "TfidfKNN", False
        ),
        ModelEntry(
            "linear-knn",
            "XR-Linear's scores plus the TF-IDF neighbours' vote, weighted as validation chooses",
            "gandalf_xmc.models.blend",
            "LinearKnnBlend",
            False,
            takes=("label_points", "positive_weight"),
            chooses=True,
        ),
        ModelEntry(
            "linear-ngame",
            "linear-knn's blend mixed with ngame's scores, the mix chosen on validation (both models' training time)",
            "gandalf_xmc.models.hybrid",
            "LinearNgameHybrid",
            False,
            "neural",
            on_gpu=True,
            takes=("label_points", "positive_weight"),
            chooses=True,
        ),
    )
}
MODEL_NAMES = tuple(MODELS)


def entry(name: str) -> ModelEntry:
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    return MODELS[name]


def model_config(
    name: str, seed: int | None = None, threads: int | None = None, epochs: int | None = None, device: str | None = None
):
    """The default settings of model ``name`` with the given seed, thread count, epochs and device
    (``auto``, ``cpu``, ``cuda`` or ``cuda:N``; the models without ``on_gpu`` run on the CPU, so
    for them only ``auto`` and ``cpu`` are accepted)."""
    e = entry(name)
    if epochs is not None and not e.in_epochs:
        raise ConfigError(f"--epochs applies to the models trained in epochs, not to {name}")
    if device is not None and not e.on_gpu:
        if device not in ("auto", "cpu"):
            gpu_models = ", ".join(n for n, row in MODELS.items() if row.on_gpu)
            raise ConfigError(f"--device {device}: {name} runs on the CPU; the models that use a GPU are {gpu_models}")
        device = None
    hook = e.load_module().config_for
    return hook(name, seed=seed, threads=threads, epochs=epochs, **({} if device is None else {"device": device}))


def config_seed(config) -> int:
    """The seed of a model's settings."""
    return config.seed if hasattr(config, "seed") else config.train.seed


def refit_config(config, result):
    """``config`` with what its validation run chose fixed, for the final model trained on every
    point (a copy): a model trained in epochs keeps the best epoch count; a model module may define
    ``refit_config(config, result)`` for choices of its own (the blend's weight)."""
    from dataclasses import replace

    e = entry(model_name(config))
    if e.in_epochs:
        config = replace(config, train=replace(config.train, epochs=result.best_epoch + 1))
    own = getattr(e.load_module(), "refit_config", None)
    return own(config, result) if own is not None else config


def chooses_on_validation(name: str) -> bool:
    """Whether model ``name`` chooses something of its own on validation (a neural model's epoch
    count and mix, the blend's weights), which :func:`refit_config` then fixes."""
    e = entry(name)
    return e.in_epochs or e.chooses


def new_items_config(config):
    """``config`` for a deployment that meets new items (a copy): a model module may define
    ``new_items_config(config)`` to leave out what does not carry to them (the blend's label-text
    similarity); otherwise ``config`` as it is."""
    own = getattr(entry(model_name(config)).load_module(), "new_items_config", None)
    return own(config) if own is not None else config


def model_name(config) -> str:
    """The model a settings object is for (a neural family's ``family``, else its ``MODEL``)."""
    return getattr(config, "family", None) or type(config).MODEL


def build_model(config) -> XMCModel:
    """An untrained model for ``config`` (any model's settings object)."""
    return entry(model_name(config)).model_class()(config)


def load_trained(directory: str | Path) -> XMCModel:
    """A saved model of any kind (``model.json`` says which)."""
    path = Path(directory) / "model.json"
    try:
        spec = read_json_file(path)
    except FileNotFoundError:
        raise DataFormatError(Path(directory), None, "not a model directory (no model.json)") from None
    kind = spec.get("kind") if isinstance(spec, dict) else None
    if not isinstance(kind, str):
        raise DataFormatError(path, None, "not a model description (expected an object with a string 'kind')")
    if kind == "neural":  # written before each neural family saved its own name; the class reads the family
        kind = "astec"
    return entry(kind).model_class().load(directory)
