"""Train a model on a dataset with an augmentation, with a validation split carved from the
original training points (never the test split), and write a self-contained model directory."""

from __future__ import annotations

import json
import shutil
from dataclasses import asdict, dataclass, replace
from pathlib import Path

import numpy as np

from ..augment import AugmentConfig, build_training_set, training_set
from ..data.atomic import check_output_directory, output_lock, replace_directory
from ..data.dataset import Split, XMCDataset
from ..engine.records import ExtraPoints, Validation
from ..errors import ConfigError
from ..metrics import inverse_propensity
from ..metrics.ranking import prepare
from ..models.registry import build_model, config_seed, load_trained
from . import auto
from .validation import BENCHMARK_PROTOCOLS, PROTOCOLS, carve_validation


@dataclass
class TrainedModel:
    """What :func:`train_model` leaves: the model, the record written to ``training.json`` and,
    for ``--augment auto``, the search written to ``auto.json``."""

    model: object
    info: dict
    search: dict | None = None

    @property
    def result(self):
        return self.model.result

    def predict(self, texts: list[str], k: int = 100, progress: bool = False):
        return self.model.predict(texts, k=k, progress=progress)
TRAINING_FILE = "training.json"
AUTO_FILE = "auto.json"


def fit_augmented(rest: XMCDataset, valid: Split, inv, model_config, augment: AugmentConfig,
                  checkpoint_dir: Path | None, resume: bool = False, progress: bool = True
                  ) -> tuple[object, int]:
    """Train one model on ``rest`` with ``augment`` (model selection on ``valid``); returns it and
    the number of training points it saw."""
    built = build_training_set(rest, augment)
    train, mask = built.split, built.extra
    extra = ExtraPoints(mask, augment.extra_weight, augment.extra_share, augment.extra_negatives) if mask.any() else None
    model = build_model(model_config)
    model.set_labels(rest.label_texts, rest.label_uids)
    model.fit(train.texts, train.Y, rest.label_texts,
              valid=Validation(valid.texts, valid.Y, inv, valid.filter_pairs) if len(valid) else None,
              checkpoint_dir=checkpoint_dir, resume=resume, progress=progress, mixer=built.transform,
              extra=extra)
    return model, len(train)


def train_model(dataset: XMCDataset, out_dir: str | Path, model_config, augment: AugmentConfig,
                valid_fraction: float = 0.05, resume: bool = False, progress: bool = True,
                auto_config: auto.AutoConfig | None = None, force: bool = False,
                valid_protocol: str = "random") -> TrainedModel:
    """Train and save to ``out_dir`` (weights, features, clusters, label texts, settings, history).

    Checkpoints go to ``out_dir/checkpoints`` so that ``resume=True`` continues an interrupted run.
    The augmentation's label graph is built from the training part only, so the validation
    points' labels never leak into the extra points. ``augment.training_set == "auto"`` searches
    the candidates of :mod:`gandalf_xmc.workflow.auto` (settings in ``auto_config``) and writes the
    search to ``out_dir/auto.json``. ``valid_protocol`` says how the validation points are chosen
    (:mod:`gandalf_xmc.workflow.validation`).

    ``out_dir`` must be new or empty unless ``force`` (or ``resume``); it is never the dataset's
    directory. The finished model replaces it whole (checkpoints carried over), so an interrupted
    run leaves the old directory, with this run's checkpoints to resume from.
    """
    out = check_output_directory(out_dir, force or resume, inputs=(dataset.path,),
                                 reusable="checkpoints" if resume else None)
    augment.validate()
    with output_lock(out):
        existed = out.exists()
        if not resume and (out / "checkpoints").exists():
            shutil.rmtree(out / "checkpoints")  # a fresh run does not mix with an older run's checkpoints
        try:
            return _train_into(dataset, out, model_config, augment, valid_fraction, resume, progress, auto_config,
                               valid_protocol)
        except BaseException:
            # a new directory holding no checkpoint to resume from is removed again
            if not existed and out.is_dir() and not any(p.is_file() for p in out.rglob("*")):
                shutil.rmtree(out, ignore_errors=True)
            raise


def _train_into(dataset: XMCDataset, out: Path, model_config, augment: AugmentConfig, valid_fraction: float,
                resume: bool, progress: bool, auto_config, valid_protocol: str):
    if valid_protocol in BENCHMARK_PROTOCOLS:  # it drops labels, and the model validated is the one saved
        raise ConfigError(f"the {valid_protocol} protocol is for benchmarks/suite.py; train with one of "
                          f"{', '.join(PROTOCOLS)}")
    rest, valid = carve_validation(dataset, valid_fraction, config_seed(model_config), valid_protocol)
    inv = inverse_propensity(rest.original_train_Y(), *dataset.propensity_constants())
    search = None
    if augment.training_set == "auto":
        if not len(valid):
            raise ConfigError("--augment auto needs a validation split (valid fraction > 0)")

        sizes: dict[str, int] = {}  # training-set size of each trial run here (building one again costs a graph)

        def fit_one(candidate: AugmentConfig, ckpt: Path, resume_trial: bool):
            trained, sizes[json.dumps(asdict(candidate))] = fit_augmented(rest, valid, inv, model_config, candidate, ckpt,
                                                                          resume_trial, progress)
            return trained

        auto_config = auto_config or auto.AutoConfig()
        if auto_config.candidates is None:
            kind = "neural" if hasattr(model_config, "family") else "linear"
            auto_config = replace(auto_config, candidates=auto.candidates_for(kind))
        # enough labels that one is left after a row's filtered pairs go, as validation P@1 counts them
        filtered = np.bincount(np.asarray(valid.filter_pairs, dtype=np.int64).reshape(-1, 2)[:, 0], minlength=1)

        def point_hits(trained) -> np.ndarray:
            pred = trained.predict(valid.texts, k=1 + int(filtered.max()))
            return prepare(pred, valid.Y, 1, valid.filter_pairs).hits[:, 0]

        model, augment, search = auto.search(
            fit_one, lambda m, d: m.save(d), load_trained, out / "checkpoints" / "auto", auto_config,
            seed=augment.seed, resume=resume, log=(print if progress else (lambda _: None)), point_hits=point_hits)
        n_train = sizes.get(json.dumps(asdict(augment))) or len(training_set(rest, augment))  # else: an earlier run's trial
    else:
        model, n_train = fit_augmented(rest, valid, inv, model_config, augment, out / "checkpoints", resume, progress)
    from .. import __version__

    info = {"gandalf_version": __version__, "dataset": dataset.name, "source": str(dataset.path) if dataset.path else None,
            "augment": asdict(augment), "valid_fraction": valid_fraction, "valid_protocol": valid_protocol,
            "n_train": n_train,
            "n_valid": len(valid), "propensity": list(dataset.propensity_constants())}

    def write(staging: Path) -> None:
        model.save(staging)  # with the labels (ids and texts)
        (staging / TRAINING_FILE).write_text(json.dumps(info, indent=1) + "\n")
        if search is not None:
            (staging / AUTO_FILE).write_text(json.dumps(search, indent=1) + "\n")

    replace_directory(out, write, keep=("checkpoints",))
    return TrainedModel(model, info, search)


def write_predictions(model, texts: list[str], n_labels: int, out: str | Path, k: int = 100, batch_size: int = 8192,
                      progress: bool = True, force: bool = False, inputs: tuple = (), closed: tuple = ()) -> None:
    """Predict ``texts`` in batches and stream each batch's top-``k`` to ``out`` (sparse text
    matrix), so memory holds one batch of predictions however many texts there are. ``out``
    follows :func:`..data.atomic.check_output_file`'s rule with ``force``, ``inputs`` and ``closed``."""
    from tqdm.auto import tqdm

    from ..data.formats import write_sparse_text_stream

    def blocks():
        for start in tqdm(range(0, len(texts), batch_size), desc="predict", unit="batch", disable=not progress):
            yield model.predict(texts[start:start + batch_size], k=k)

    from ..data.atomic import output_file

    with output_file(out, force, inputs, closed) as fh:
        write_sparse_text_stream(fh, len(texts), n_labels, blocks())
