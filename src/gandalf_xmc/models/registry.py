"""Every model by name, in one table: what it is, where it lives and how to configure it.

A model module is imported only when its model is asked for, so that naming, configuring or
loading a linear model never imports torch. Each model class follows one protocol
(:class:`XMCModel`): ``fit(texts, Y, label_texts, ...)``, ``predict(texts, k)``, ``save(dir)`` and
``load(dir)``; adding a model is one row here and one module.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

from ..errors import ConfigError, DataFormatError
from ..jsonio import read_json_file

if TYPE_CHECKING:
    from ..engine.records import Validation


class XMCModel(Protocol):
    """What every model offers (see :class:`gandalf_xmc.models.linear.XRLinear` for the arguments).
    ``fit`` takes texts and targets, or a :class:`~gandalf_xmc.augment.TrainingSet` whole
    (:func:`.base.unpack_training_set`)."""

    kind: str
    result: object

    def fit(self, texts, Y=None, label_texts: list[str] | None = None, valid: Validation | None = None,
            example_weights=None, checkpoint_dir=None, resume: bool = False, progress: bool = True, mixer=None,
            extra=None) -> XMCModel: ...

    def predict(self, texts: list[str], k: int = 100, progress: bool = False): ...

    def save(self, directory: str | Path) -> None: ...


@dataclass(frozen=True)
class ModelEntry:
    """A row of the table: ``module`` holds class ``cls`` and ``config_for(name, seed=, threads=,
    epochs=)``, which returns the model's default settings with those applied."""

    name: str
    summary: str
    module: str
    cls: str
    in_epochs: bool  # trained in epochs (``--epochs`` applies)
    extra: str | None = None  # the package extra its libraries come with

    def load_module(self):
        try:
            return importlib.import_module(self.module)
        except ModuleNotFoundError as exc:
            if self.extra is None or (exc.name or "").startswith("gandalf_xmc"):
                raise
            raise ConfigError(f"the {self.name} model needs the '{self.extra}' extra ({exc.name} is not installed): "
                              f"pip install -c constraints.txt -e '.[{self.extra}]'") from None

    def model_class(self):
        return getattr(self.load_module(), self.cls)


MODELS: dict[str, ModelEntry] = {e.name: e for e in (
    ModelEntry("linear", "XR-Linear: sparse linear classifiers over a label tree, TF-IDF input (the default)",
               "gandalf_xmc.models.linear", "XRLinear", False),
    ModelEntry("astec", "bag of uni/bigram embeddings + residual layer, clustered shortlist",
               "gandalf_xmc.models.classifier", "NeuralXMC", True, "neural"),
    ModelEntry("inceptionxml", "convolutions over word embeddings, clustered shortlist",
               "gandalf_xmc.models.classifier", "NeuralXMC", True, "neural"),
    ModelEntry("dual-encoder", "frozen all-MiniLM-L6-v2 embeddings, label-text-initialised classifiers",
               "gandalf_xmc.models.classifier", "NeuralXMC", True, "neural"),
    ModelEntry("knn", "TF-IDF k nearest training points, training-free (a reference)",
               "gandalf_xmc.models.knn", "TfidfKNN", False),
    ModelEntry("linear-knn", "XR-Linear's scores plus the TF-IDF neighbours' vote, weighted as validation chooses",
               "gandalf_xmc.models.blend", "LinearKnnBlend", False),
)}
MODEL_NAMES = tuple(MODELS)


def entry(name: str) -> ModelEntry:
    if name not in MODELS:
        raise ConfigError(f"unknown model {name!r}; choose one of {', '.join(MODEL_NAMES)}")
    return MODELS[name]


def model_config(name: str, seed: int | None = None, threads: int | None = None, epochs: int | None = None):
    """The default settings of model ``name`` with the given seed, thread count and epochs."""
    e = entry(name)
    if epochs is not None and not e.in_epochs:
        raise ConfigError(f"--epochs applies to the models trained in epochs, not to {name}")
    return e.load_module().config_for(name, seed=seed, threads=threads, epochs=epochs)


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
    kinds = {"neural": "astec"}  # every neural family saves kind "neural"
    return entry(kinds.get(kind, kind)).model_class().load(directory)
