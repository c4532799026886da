"""What a label-point augmentation will do to a deployment's new items, foreseen from the training
release alone (issue 35; docs/decisions.md, "auto for new items").

A new item's own label does not exist yet, and some labels that do exist have exactly its text (an
older version, another build, a sibling) without being right. So a candidate's P@1 gain over none
on new items is forecast as

    (1 - s) x its gain on held-out items as if they did not exist yet (the ``future`` protocol:
              their labels leave the label space; whole families of them with ``future-family``)
    +     s x its gain on held-out items whose own label stays, unfiltered, as a wrong namesake,

where ``s`` is the share of the deployment's queries whose text equals a label's text. ``s`` is read
from an unlabelled sample of those queries, with a 90% interval from resampling the sample (whole
families where it was drawn by family); without a sample it may be anything from 0 to 1. Each
gain carries its paired standard error over the validation items.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from ..models.base import folded_text

SHARE_LEVEL = 0.9  # the interval of s


@dataclass(frozen=True)
class QuerySample:
    """Unlabelled texts of the queries a deployment meets, and the family of each where the
    sample was drawn by family (``None``: each text stands alone)."""

    texts: list[str]
    groups: list[str] | None = None


@dataclass(frozen=True)
class NewItems:
    """The deployment's queries are new items, absent from the label space. ``sample``: unlabelled
    texts of them (``None``: the share of namesakes is unknown, anything from 0 to 1)."""

    sample: QuerySample | None = None

    def fingerprint(self) -> dict:
        """What a resumed run compares (the sample by a digest, not its texts)."""
        import hashlib

        digest = None
        if self.sample is not None:
            h = hashlib.sha256()
            for text, group in zip(self.sample.texts, self.sample.groups or [None] * len(self.sample.texts)):
                h.update(f"{text}\x00{group}\x01".encode())
            digest = h.hexdigest()
        return {"queries": "new-items", "sample_sha256": digest}


@dataclass(frozen=True)
class Deployment:
    """What a training takes its queries to be: ``new_items`` (None: catalogue queries), the
    validation protocol that goes with them unless one is given, and a line saying what was taken
    from the dataset (empty when nothing was)."""

    new_items: NewItems | None
    valid_protocol: str
    note: str = ""


def deployment_for(
    dataset, queries: str | None, read_sample: Callable[[], QuerySample] | None, declared_applies: bool
) -> Deployment:
    """``queries`` as given, the rest from ``dataset``: where ``declared_applies``, a dataset whose
    ``dataset.json`` says its test split holds new items is trained for new items. For new items
    (however said) ``read_sample`` gives the sample, read only then; without it the dataset's ``val``
    split's texts (no target read) sample them; validation takes a family at a time where the
    dataset's groups are families."""
    from ..data import load_dataset
    from ..data.dataset import find_split_file
    from ..data.suite import NEW_ITEMS_SPLIT

    declared = dataset.test_split == "new-items" and declared_applies
    kind = queries or ("new-items" if declared else "catalogue")
    if kind != "new-items":
        return Deployment(None, "random")
    families = dataset.groups_are_families
    protocol = "group" if families else "random"
    note = "queries: new items (the dataset's dataset.json says its test split holds them)" if queries is None else ""
    if read_sample is not None:
        return Deployment(NewItems(read_sample()), protocol, note)
    if NEW_ITEMS_SPLIT in dataset.splits:
        split = dataset.split(NEW_ITEMS_SPLIT)
    elif dataset.path is not None and find_split_file(dataset.path, NEW_ITEMS_SPLIT) is not None:
        split = load_dataset(dataset.path, splits=(NEW_ITEMS_SPLIT,)).split(NEW_ITEMS_SPLIT)
    else:
        return Deployment(NewItems(None), protocol, note)
    found = split_sample(split, families)
    how = ", by family" if found.groups else ""
    note = (note + "; " if note else "") + f"the query sample: the {NEW_ITEMS_SPLIT} split's {len(found.texts):,} texts{how}"
    return Deployment(NewItems(found), protocol, note)


def split_sample(split, families: bool) -> QuerySample:
    """A split's texts as a sample of the queries a deployment meets (its targets unread), each
    with its group as its family where ``families`` and the split has groups."""
    return QuerySample(list(split.texts), list(split.groups) if families and split.groups else None)


def namesakes(texts: list[str], label_texts: list[str]) -> np.ndarray:
    """1.0 for each of ``texts`` equal (case and spacing folded) to some label's text, else 0.0."""
    labels = {folded_text(t) for t in label_texts}
    return np.array([folded_text(t) in labels for t in texts], dtype=float)


def namesake_share(texts: list[str], label_texts: list[str]) -> float:
    """The share of ``texts`` equal (case and spacing folded) to some label's text."""
    return float(namesakes(texts, label_texts).mean()) if texts else 0.0


def namesake_share_interval(
    texts: list[str], groups: list[str] | None, label_texts: list[str], seed: int = 0, resamples: int = 1000
) -> tuple[float, float]:
    """A :data:`SHARE_LEVEL` interval of :func:`namesake_share` over ``resamples`` draws of whole
    families (the ``groups``, where the sample was drawn by family; else each text its own)."""
    hit = namesakes(texts, label_texts)
    if not hit.size:
        return 0.0, 0.0
    _, family = np.unique(np.asarray(groups if groups else range(hit.size), dtype=str), return_inverse=True)
    hits, sizes = np.bincount(family, hit), np.bincount(family).astype(float)
    rng = np.random.default_rng(seed)
    draws = rng.integers(0, sizes.size, size=(resamples, sizes.size))
    shares = hits[draws].sum(1) / sizes[draws].sum(1)
    low, high = np.percentile(shares, [50 * (1 - SHARE_LEVEL), 50 * (1 + SHARE_LEVEL)])
    return float(low), float(high)


def deployment_share(sample: QuerySample | None, label_texts: list[str]) -> tuple[float | None, tuple[float, float]]:
    """``s`` and its interval from ``sample``; without one, ``(None, (0, 1))``: any share."""
    if sample is None or not sample.texts:
        return None, (0.0, 1.0)
    share = namesake_share(sample.texts, label_texts)
    return share, namesake_share_interval(sample.texts, sample.groups, label_texts)


def paired_gain(hits: np.ndarray, base: np.ndarray) -> tuple[float, float]:
    """The mean of ``hits - base`` over the same items and its standard error, in points of P@1
    (``(0, 0)`` without items)."""
    diff = np.asarray(hits, dtype=np.float64) - np.asarray(base, dtype=np.float64)
    if not diff.size:
        return 0.0, 0.0
    se = float(diff.std(ddof=1) / np.sqrt(diff.size)) if diff.size > 1 else 0.0
    return 100 * float(diff.mean()), 100 * se


def forecast_from_hits(
    hits: np.ndarray,
    base: np.ndarray,
    namesake_hits: np.ndarray | None,
    namesake_base: np.ndarray | None,
    interval: tuple[float, float],
) -> dict:
    """:func:`new_items_forecast` of top-1 ``hits`` against ``base`` (the same held-out items), and
    of the namesakes' hits against theirs where both are given (else that part is 0)."""
    namesake = (0.0, 0.0) if namesake_hits is None or namesake_base is None else paired_gain(namesake_hits, namesake_base)
    return new_items_forecast(paired_gain(hits, base), namesake, interval)


def new_items_forecast(future: tuple[float, float], namesake: tuple[float, float], interval: tuple[float, float]) -> dict:
    """The forecast P@1 gain on new items at both ends of the interval of ``s``, from the ``future``
    and the ``namesake`` gains (each ``(gain, standard error)``). ``lowest`` is the smallest of
    ``gain - 2 x standard error`` over the two ends: the loss the forecast cannot rule out."""
    ends, errors = [], []
    for s in interval:
        ends.append((1 - s) * future[0] + s * namesake[0])
        errors.append(float(np.hypot((1 - s) * future[1], s * namesake[1])))
    return {
        "future_gain": round(future[0], 2),
        "future_se": round(future[1], 2),
        "namesake_gain": round(namesake[0], 2),
        "namesake_se": round(namesake[1], 2),
        "at_share_ends": [round(e, 2) for e in ends],
        "two_se": [round(2 * e, 2) for e in errors],
        "lowest": round(min(e - 2 * se for e, se in zip(ends, errors)), 2),
        "highest": round(max(e + 2 * se for e, se in zip(ends, errors)), 2),
    }
