"""Handing a training set to a model. Every model takes inputs, targets and sample weights; the
rest of a training set (which points are label points, a batch transform) goes only to a model
whose row of the model table declares it takes it (``ModelEntry.takes``), and is applied here for
the others, so that no model interprets an augmentation."""

from __future__ import annotations

from typing import Any, Protocol

from ..augment.catalog import TrainingSet
from ..engine.records import Validation
from ..errors import ConfigError
from ..models.registry import ModelEntry, entry, model_name


class LabelPointCounts(Protocol):
    """How label points count while training (an ``AugmentConfig`` or a built ``TrainingSet``)."""

    @property
    def label_point_share(self) -> float: ...

    @property
    def label_point_negatives(self) -> bool: ...

    @property
    def label_point_floors(self) -> bool: ...

    @property
    def label_point_positive_cost(self) -> float: ...


def label_point_refusal(row: ModelEntry, counts: LabelPointCounts) -> str | None:
    """Why the model of ``row`` cannot train on label points that count as ``counts`` says (None:
    it can): a share a epoch, no shortlist negatives and soft targets as floors are for the models
    trained in epochs, a factor on the positives' cost for the models whose row takes one (those with
    a loss: all but knn)."""
    share, negatives, floors = counts.label_point_share, counts.label_point_negatives, counts.label_point_floors
    if (share < 1.0 or not negatives or floors) and not row.in_epochs:
        option = (
            "--label-point-share" if share < 1.0 else "--no-label-point-negatives" if not negatives else "--label-point-floors"
        )
        return f"{option} applies to the models trained in epochs; {row.name} trains on every point alike"
    if counts.label_point_positive_cost != 1.0 and "positive_weight" not in row.takes:
        return (
            "a label-point positive cost (--label-point-positive-cost, gandalf-tempered-firm) applies to the models "
            f"trained with a loss, not to {row.name}"
        )
    return None


def fit_arguments(training_set: TrainingSet, row: ModelEntry) -> tuple[list[str], Any, Any, dict]:
    """``(texts, Y, sample_weight, capabilities)`` for the model of ``row``: the label points' loss
    weight folded into the sample weights; a text transform drawn once and its changed points
    appended, unless the model draws it each batch; a feature mix, the label points' mask, share,
    negatives and floors, and the factors on the positives' cost passed where the row takes them,
    refused where it cannot use them."""
    from ..augment.transforms import append_text_draw

    texts, Y, weights = list(training_set.texts), training_set.Y, training_set.sample_weight
    given: dict = {}
    points = training_set.label_points
    if points is not None and (why := label_point_refusal(row, training_set)) is not None:
        raise ConfigError(why)
    if "label_points" in row.takes:
        given["label_points"] = points
    if (positives := training_set.positive_weight) is not None:
        given["positive_weight"] = positives
    transform = training_set.batch_transform
    if transform is not None and transform.acts_on == "features":
        if "feature_mix" not in row.takes:
            raise ConfigError(f"a feature mix (MixUp, Label-MixUp) mixes input vectors, which the {row.name} model does not take")
        given["feature_mix"] = transform
    elif transform is not None and "batch_transform" in row.takes:
        given["batch_transform"] = transform
    elif transform is not None:  # drawn once: a model without batches sees one draw
        texts, Y, weights = append_text_draw(transform, texts, Y, weights)
    return texts, Y, weights, given


def fit_model(
    model,
    training_set: TrainingSet,
    label_texts: list[str],
    valid: Validation | None = None,
    checkpoint_dir=None,
    resume: bool = False,
    progress: bool = True,
):
    """Train ``model`` (any row of the model table) on ``training_set``, as ``gandalf train`` does;
    returns the model. ``fit_model(XRLinear(), training_set(ds, preset("gandalf-tempered")), ds.label_texts)``."""
    texts, Y, weights, given = fit_arguments(training_set, entry(model_name(model.config)))
    return model.fit(
        texts,
        Y,
        label_texts,
        valid=valid,
        sample_weight=weights,
        checkpoint_dir=checkpoint_dir,
        resume=resume,
        progress=progress,
        **given,
    )
