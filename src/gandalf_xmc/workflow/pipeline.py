"""Train a model on a dataset with an augmentation, with a validation split carved from the
original training points (never the test split), and write a self-contained model directory.

Validation chooses (the augmentation under ``auto``, the epoch count of a model trained in
epochs, the blend's weight) and reports; then the final model is trained again on every training point with what was
chosen, so the saved model never loses the validation points (``refit=False`` keeps the validated
model instead). ``training.json`` records both runs.
"""

from __future__ import annotations

import json
import shutil
from collections.abc import Callable
from dataclasses import asdict, dataclass, replace
from functools import partial
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp

from ..augment import AugmentConfig, build_training_set, training_set
from ..data.atomic import atomic_path, check_output_directory, output_lock, replace_directory
from ..data.dataset import Split, XMCDataset
from ..engine.records import TrainResult, Validation, holds_checkpoints
from ..errors import ConfigError
from ..metrics import inverse_propensity
from ..metrics.ranking import prepare, remove_pairs
from ..models.registry import (
    MODELS,
    build_model,
    chooses_on_validation,
    config_seed,
    entry,
    load_trained,
    model_name,
    new_items_config,
    refit_config,
)
from . import auto
from .fitting import fit_model
from .forecast import NewItems, deployment_share
from .validation import BENCHMARK_PROTOCOLS, FOLD_PROTOCOLS, PROTOCOLS, carve_validation, folds_available


@dataclass
class TrainedModel:
    """What :func:`train_model` leaves: the model, the record written to ``training.json`` and,
    for ``--augment auto``, the search written to ``auto.json``."""

    model: Any
    info: dict
    search: dict | None = None
    validated: Any = None  # the validation run's TrainResult (the final model's own when not refitted)

    @property
    def result(self):
        return self.model.result

    def predict(self, texts: list[str], k: int = 100, progress: bool = False):
        return self.model.predict(texts, k=k, progress=progress)


TRAINING_FILE = "training.json"
AUTO_FILE = "auto.json"
VALIDATION_RUN_FILE = "validation-run.json"  # under checkpoints/: a resumed run does not validate twice


def fit_augmented(
    rest: XMCDataset,
    valid: Split | None,
    inv,
    model_config,
    augment: AugmentConfig,
    checkpoint_dir: Path | None,
    resume: bool = False,
    progress: bool = True,
) -> tuple[Any, int]:
    """Train one model on ``rest`` with ``augment`` (model selection on ``valid``, with the labels'
    inverse propensities ``inv``, when given); returns it and the number of training points it saw."""
    built = build_training_set(rest, augment)
    model = build_model(model_config)
    model.set_labels(rest.label_texts, rest.label_uids)
    fit_model(
        model,
        built,
        rest.label_texts,
        valid=Validation(valid.texts, valid.Y, inv, valid.filter_pairs) if valid is not None and len(valid) else None,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        progress=progress,
    )
    return model, len(built)


def train_model(
    dataset: XMCDataset,
    out_dir: str | Path,
    model_config,
    augment: AugmentConfig,
    valid_fraction: float = 0.05,
    resume: bool = False,
    progress: bool = True,
    auto_config: auto.AutoConfig | None = None,
    force: bool = False,
    valid_protocol: str = "random",
    refit: bool = True,
    keep_checkpoints: bool = False,
    valid_split: tuple[str, Split] | None = None,
    new_items: NewItems | None = None,
) -> TrainedModel:
    """Train and save to ``out_dir`` (weights, features, clusters, label texts, settings, history).

    Checkpoints go to ``out_dir/checkpoints`` so that ``resume=True`` continues an interrupted run.
    The augmentation's label graph is built from the training part only, so the validation
    points' labels never leak into the label points. ``augment.augmentation == "auto"`` searches
    the candidates of :mod:`gandalf_xmc.workflow.auto` (settings in ``auto_config``) and writes the
    search to ``out_dir/auto.json``. ``valid_protocol`` says how the validation points are chosen
    (:mod:`gandalf_xmc.workflow.validation`). With ``refit`` (the default) and a validation split,
    the saved model is trained once more on every training point, with the augmentation chosen and
    what else validation chose (a neural model's epoch count, the blend's weight:
    :func:`.models.registry.refit_config`). ``valid_split`` (its name and points, in the dataset's
    label space) validates instead of a share of the training points: the points a deployment
    meets, such as the new items of a later release; every training point trains, so nothing is
    trained again, and ``valid_fraction`` and ``valid_protocol`` are not used. ``new_items`` says
    that the deployment's queries are new items: validation holds out points as if they did not
    exist yet (whole groups of them with ``valid_protocol="group"``), where ``auto`` chooses by the
    forecast of :mod:`.forecast` (each candidate trains once more for the namesakes' part) and a
    model that chooses on validation (:func:`.models.registry.chooses_on_validation`) chooses its
    own settings with a fixed augmentation; the final model is always trained again on every point.

    ``out_dir`` must be new or empty unless ``force`` (or ``resume``); it is never the dataset's
    directory. The finished model replaces it whole, so an interrupted run leaves the old
    directory, with this run's checkpoints to resume from. A finished run removes its checkpoints
    (the trials of ``auto``, a neural model's epochs) unless ``keep_checkpoints`` (to continue it
    for more epochs with ``resume``).
    """
    out = check_output_directory(out_dir, force or resume, inputs=(dataset.path,), reusable="checkpoints" if resume else None)
    augment.validate()
    with output_lock(out):
        existed = out.exists()
        if not resume and (out / "checkpoints").exists():
            shutil.rmtree(out / "checkpoints")  # a fresh run does not mix with an older run's checkpoints
        try:
            trained = _train_into(
                dataset,
                out,
                model_config,
                augment,
                valid_fraction,
                resume,
                progress,
                auto_config,
                valid_protocol,
                refit,
                valid_split,
                new_items,
            )
            if not keep_checkpoints:
                shutil.rmtree(out / "checkpoints", ignore_errors=True)  # often larger than the model
            return trained
        except BaseException:
            # a new directory holding no checkpoint to resume from is removed again
            if not existed and out.is_dir() and not any(p.is_file() for p in out.rglob("*")):
                shutil.rmtree(out, ignore_errors=True)
            raise


def _train_into(
    dataset: XMCDataset,
    out: Path,
    model_config,
    augment: AugmentConfig,
    valid_fraction: float,
    resume: bool,
    progress: bool,
    auto_config,
    valid_protocol: str,
    refit: bool,
    valid_split: tuple[str, Split] | None = None,
    new_items: NewItems | None = None,
) -> TrainedModel:
    namesake_carving = None
    folds = None  # more validation shares for auto's choice (catalogue queries): how many, and a carver
    if new_items is not None:
        _check_new_items(model_config, augment, valid_split, valid_protocol, refit, valid_fraction)
        model_config = new_items_config(model_config)
        seed = config_seed(model_config)
        if augment.augmentation == "auto":  # the forecast's namesakes' part: auto's candidates only
            namesake_carving = carve_validation(dataset, valid_fraction, seed, "random")
        valid_protocol = "future-family" if valid_protocol == "group" else "future"
        valid_source = f"{valid_protocol} share (new items)"
        rest, valid = carve_validation(dataset, valid_fraction, seed, valid_protocol)
    elif valid_split is not None:
        valid_source = f"split {valid_split[0]}"
        (rest, valid), valid_fraction, valid_protocol = (dataset, valid_split[1]), None, None
        if not len(valid):
            raise ConfigError(f"the validation split {valid_split[0]!r} has no points")
    else:
        if valid_protocol in BENCHMARK_PROTOCOLS:  # it drops labels, and the model validated is the one saved
            raise ConfigError(
                f"the {valid_protocol} protocol is for benchmarks/suite.py; train with one of {', '.join(PROTOCOLS)}"
            )
        valid_source = f"{valid_protocol} share" if valid_fraction else None
        rest, valid = carve_validation(dataset, valid_fraction, config_seed(model_config), valid_protocol)
        if valid_protocol in FOLD_PROTOCOLS and valid_fraction:
            carver = partial(carve_validation, dataset, valid_fraction, config_seed(model_config), valid_protocol)
            folds = (folds_available(dataset.n_original, valid_fraction), lambda f: carver(fold=f))
    if augment.augmentation == "auto" and not len(valid):
        raise ConfigError("--augment auto needs a validation split (valid fraction > 0)")
    refitting = refit and len(valid) > 0 and valid_split is None  # a given split took no training point
    in_epochs = MODELS[model_name(model_config)].in_epochs
    record_path = out / "checkpoints" / VALIDATION_RUN_FILE
    request = json.loads(
        json.dumps(
            {
                "model": asdict(model_config),
                "augment": asdict(augment),
                "valid_fraction": valid_fraction,
                "valid_protocol": valid_protocol,
                "valid_source": valid_source,
                **({"new_items": new_items.fingerprint()} if new_items is not None else {}),
            },
            default=str,
        )
    )
    done = json.loads(record_path.read_text()) if refitting and resume and record_path.is_file() else None
    model, search = None, None
    if done is not None and done.get("request") == request:  # the validation run finished before the interruption
        augment, search = AugmentConfig.from_dict(done["augment"]), done["search"]
        validated = TrainResult(**done["result"])
        validation_run = done["validation_run"]
    else:
        model, augment, search, n_fit = _validation_run(
            rest, valid, dataset, out, model_config, augment, resume, progress, auto_config, new_items, namesake_carving, folds
        )
        validated = model.result
        best = validated.best_record()
        validation_run = {
            "n_train": n_fit,
            "n_valid": len(valid),
            "seconds": validated.seconds,
            "best_epoch": validated.best_epoch,
            "epochs": len(validated.history) if in_epochs else None,
            "metrics": {k: v for k, v in best.items() if "@" in k},
            **({"encoder": validated.encoder_history} if validated.encoder_history else {}),  # what ngame's validation kept
        }
        if refitting:
            shutil.rmtree(out / "checkpoints" / "final", ignore_errors=True)  # an earlier request's final run
            out.joinpath("checkpoints").mkdir(parents=True, exist_ok=True)
            with atomic_path(record_path) as tmp:
                tmp.write_text(
                    json.dumps(
                        {
                            "request": request,
                            "augment": asdict(augment),
                            "search": search,
                            "result": asdict(validated),
                            "validation_run": validation_run,
                        },
                        default=float,
                    )
                    + "\n"
                )
    n_train = validation_run["n_train"]
    if refitting:
        model = None  # the validated model's memory is free before the final one trains
        model_config = refit_config(model_config, validated)
        if search is not None and search.get("setting"):  # a setting the forecast chose (auto for new items)
            model_config = replace(model_config, **search["setting"])
        if progress:
            print(
                f"final model: {augment.augmentation} on all {dataset.n_original_train or len(dataset.train):,} "
                "training points (validation chose; the final model keeps every point)",
                flush=True,
            )
        final = out / "checkpoints" / "final"
        # stopped after validation and before the final run's first checkpoint: the final run starts
        final_resume = resume and holds_checkpoints(final)
        model, n_train = fit_augmented(dataset, None, None, model_config, augment, final, final_resume, progress)
    from .. import __version__

    info = {
        "gandalf_version": __version__,
        "dataset": dataset.name,
        "source": str(dataset.path) if dataset.path else None,
        "augment": asdict(augment),
        "valid_fraction": valid_fraction,
        "valid_protocol": valid_protocol,
        "valid_source": valid_source,
        "queries": "new items" if new_items is not None else "catalogue items",
        "n_train": n_train,
        "n_valid": len(valid),
        "refit": refitting,
        "validation_run": validation_run,
        "propensity": list(dataset.propensity_constants()),
    }
    if refitting:
        info["final_run"] = {
            "n_train": n_train,
            "seconds": model.result.seconds,
            "epochs": len(model.result.history) if in_epochs else None,
        }

    def write(staging: Path) -> None:
        model.save(staging)  # with the labels (ids and texts)
        (staging / TRAINING_FILE).write_text(json.dumps(info, indent=1) + "\n")
        if search is not None:
            (staging / AUTO_FILE).write_text(json.dumps(search, indent=1) + "\n")

    replace_directory(out, write, keep=("checkpoints",))
    return TrainedModel(model, info, search, validated)


def _most_filtered(split: Split) -> int:
    """The most filter pairs of one row: predicting that many more labels leaves enough after a
    row's filtered pairs go, as validation counts them."""
    return int(np.bincount(np.asarray(split.filter_pairs, dtype=np.int64).reshape(-1, 2)[:, 0], minlength=1).max())


def _check_new_items(
    model_config, augment: AugmentConfig, valid_split, valid_protocol: str, refit: bool, valid_fraction: float
) -> None:
    """Refuse the settings a new-items deployment cannot validate with, in one line each."""
    name = model_name(model_config)
    if augment.augmentation != "auto" and not chooses_on_validation(name):
        choosers = ", ".join(n for n in MODELS if chooses_on_validation(n))
        raise ConfigError(
            f"new-items queries (--queries new-items) tell validation how to choose, and {name} with --augment "
            f"{augment.augmentation} chooses nothing there; give --augment auto, or one of {choosers}"
        )
    if valid_split is not None:
        raise ConfigError(
            "--queries new-items holds training points out as if new; a labelled split of new items (--valid-split) "
            "validates them directly: give one or the other"
        )
    if valid_protocol not in ("random", "group"):
        raise ConfigError(
            "--queries new-items holds out points as if they did not exist yet: --valid-protocol random "
            "(single points) or group (whole groups, where the group key names families)"
        )
    if not refit:
        raise ConfigError("--queries new-items validates without the held-out items' labels; the final model needs --refit")
    if not valid_fraction:
        raise ConfigError("--queries new-items needs a validation share (--valid-fraction > 0)")


def _namesake_check(dataset: XMCDataset, carving: tuple[XMCDataset, Split], new_items: NewItems, fit) -> auto.NamesakeCheck:
    """The namesakes' part of the new-items forecast: the candidates trained on the catalogue's
    carving ``carving``, scored on its held-out items whose own label is in the label space (a
    filter pair names it), that label left in their answers."""
    rest, valid = carving
    fp = np.asarray(valid.filter_pairs, dtype=np.int64).reshape(-1, 2)
    rows = np.unique(fp[:, 0])  # held-out items whose own label is in the label space (their filter pairs)
    share, interval = deployment_share(new_items.sample, dataset.label_texts)
    if not rows.size:  # no item is a label: no label can be an item's namesake
        share, interval = 0.0, (0.0, 0.0)
    new_row = np.full(len(valid), -1, dtype=np.int64)
    new_row[rows] = np.arange(rows.size)
    truth = remove_pairs(sp.csr_matrix(valid.Y[rows]), np.stack([new_row[fp[:, 0]], fp[:, 1]], axis=1))
    texts = [valid.texts[i] for i in rows]
    inv = inverse_propensity(rest.original_train_Y(), *dataset.propensity_constants())

    def hits(model) -> np.ndarray:
        return prepare(model.predict(texts, k=1), truth, 1).hits[:, 0]  # nothing filtered from the answers

    def fit_catalogue(candidate: AugmentConfig, ckpt: Path, resume_trial: bool):
        return fit(rest, valid, inv, candidate, ckpt, resume_trial)

    return auto.NamesakeCheck(fit_catalogue, hits, share, interval, items=int(rows.size), texts=texts, truth=truth)


def _weight_grid(valid: Split, inv, check: auto.NamesakeCheck) -> auto.WeightGrid:
    """A model's settings (a blend's weights) scored for the forecast: every setting's top-1 hits and
    metrics on the held-out points ``valid``, and its top-1 hits on ``check``'s namesakes."""
    from ..engine.records import validation_metrics

    scored = Validation(valid.texts, valid.Y, inv, valid.filter_pairs)

    def future(model):
        settings, predictions = model.weight_grid(list(valid.texts), 5 + _most_filtered(valid))
        hits = np.array([prepare(p, valid.Y, 1, valid.filter_pairs).hits[:, 0] for p in predictions])
        return settings, hits, [validation_metrics(p, scored) for p in predictions]

    def namesakes(model):
        _, predictions = model.weight_grid(check.texts, 1)
        return np.array([prepare(p, check.truth, 1).hits[:, 0] for p in predictions])

    return auto.WeightGrid(future, namesakes)


def _validation_run(
    rest: XMCDataset,
    valid: Split,
    dataset: XMCDataset,
    out: Path,
    model_config,
    augment: AugmentConfig,
    resume: bool,
    progress: bool,
    auto_config,
    new_items: NewItems | None = None,
    namesake_carving: tuple[XMCDataset, Split] | None = None,
    folds: tuple[int, Callable[[int], tuple[XMCDataset, Split]]] | None = None,
) -> tuple[Any, AugmentConfig, dict | None, int]:
    """Train on ``rest`` and score on ``valid``: one run, or ``auto``'s search (for new items with
    the namesakes' part trained on ``namesake_carving``; for catalogue queries with ``folds``, how
    many validation shares there are and a carver of the f-th, on more shares while undecided).
    Returns the model validated, the augmentation chosen, the search's record (``auto``) and the
    training-set size."""
    inv = inverse_propensity(rest.original_train_Y(), *dataset.propensity_constants())
    if augment.augmentation != "auto":
        model, n_train = fit_augmented(rest, valid, inv, model_config, augment, out / "checkpoints", resume, progress)
        return model, augment, None, n_train
    sizes: dict[str, int] = {}  # training-set size of each trial run here (building one again costs a graph)

    def fit_one(candidate: AugmentConfig, ckpt: Path, resume_trial: bool):
        trained, sizes[json.dumps(asdict(candidate))] = fit_augmented(
            rest, valid, inv, model_config, candidate, ckpt, resume_trial, progress
        )
        return trained

    auto_config = auto_config or auto.AutoConfig()
    if auto_config.candidates is None:
        auto_config = replace(auto_config, candidates=auto.candidates_for(entry(model_name(model_config))))

    def point_hits(trained, valid: Split = valid) -> np.ndarray:
        pred = trained.predict(valid.texts, k=1 + _most_filtered(valid))
        return prepare(pred, valid.Y, 1, valid.filter_pairs).hits[:, 0]

    extra = None
    if folds is not None and new_items is None:
        available, carve = folds

        def fold(f: int):
            part_rest, part_valid = carve(f)
            part_inv = inverse_propensity(part_rest.original_train_Y(), *dataset.propensity_constants())

            def fit_part(candidate: AugmentConfig, ckpt: Path, resume_trial: bool):
                return fit_augmented(part_rest, part_valid, part_inv, model_config, candidate, ckpt, resume_trial, progress)[0]

            return fit_part, lambda trained: point_hits(trained, part_valid)

        extra = auto.ExtraFolds(available, fold)

    check, grid = None, None
    if new_items is not None and namesake_carving is not None:

        def fit_other(part_rest, part_valid, part_inv, candidate, ckpt, resume_trial):
            return fit_augmented(part_rest, part_valid, part_inv, model_config, candidate, ckpt, resume_trial, progress)[0]

        check = _namesake_check(dataset, namesake_carving, new_items, fit_other)
        if hasattr(entry(model_name(model_config)).model_class(), "weight_grid"):
            grid = _weight_grid(valid, inv, check)

    model, augment, search = auto.search(
        fit_one,
        lambda m, d: m.save(d),
        load_trained,
        out / "checkpoints" / "auto",
        auto_config,
        seed=augment.seed,
        resume=resume,
        log=(print if progress else (lambda _: None)),
        point_hits=point_hits,
        namesake_check=check,
        weight_grid=grid,
        extra_folds=extra,
    )
    n_train = sizes.get(json.dumps(asdict(augment))) or len(training_set(rest, augment))  # else: an earlier run's trial
    return model, augment, search, n_train


def write_predictions(
    model,
    texts: list[str],
    n_labels: int,
    out: str | Path,
    k: int = 100,
    batch_size: int = 8192,
    progress: bool = True,
    force: bool = False,
    inputs: tuple = (),
    closed: tuple = (),
    drop_namesakes: bool = False,
    fmt: str = "txt",
) -> None:
    """Predict ``texts`` in batches and stream each batch's top-``k`` to ``out`` as a sparse text
    matrix (``fmt="txt"``: memory holds one batch of predictions however many texts there are), or
    as a scipy ``.npz`` matrix (``fmt="npz"``: all rows at once). ``out`` follows
    :func:`..data.atomic.check_output_file`'s rule with ``force``, ``inputs`` and ``closed``.
    ``drop_namesakes``: labels of exactly a query's text are left out of its row (new items)."""
    from tqdm.auto import tqdm

    from ..data.formats import write_sparse_text_stream
    from ..metrics.ranking import remove_pairs
    from ..sparse_ops import top_k_per_row

    def blocks():
        for start in tqdm(range(0, len(texts), batch_size), desc="predict", unit="batch", disable=not progress):
            batch = texts[start : start + batch_size]
            if not drop_namesakes:
                yield model.predict(batch, k=k)
                continue
            pairs = model.namesake_pairs(batch)
            most = int(np.bincount(pairs[:, 0]).max()) if pairs.size else 0
            yield top_k_per_row(remove_pairs(model.predict(batch, k=min(k + most, n_labels)), pairs), k)

    from ..data.atomic import output_file

    with output_file(out, force, inputs, closed) as fh:
        if fmt == "npz":
            import scipy.sparse as sp

            rows = list(blocks())
            sp.save_npz(fh, sp.vstack(rows, format="csr") if rows else sp.csr_matrix((0, n_labels), dtype=np.float32))
        else:
            write_sparse_text_stream(fh, len(texts), n_labels, blocks())
