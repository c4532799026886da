"""Validation splits carved from the original training points (never the test split).

A protocol says which points are held out, so that validation resembles what the model will meet:

* ``random``: a uniform share of the points (a catalogue's own held-out items);
* ``group``: whole groups (the ``group`` key of each point: a package, a namespace, a letter),
  held out together, as items of a group the model has not seen;
* ``new-items``: a uniform share, and every training point that is a near-duplicate of a held-out
  point (TF-IDF cosine >= ``NEAR_DUPLICATE``) or a sibling of one (the same set of labels) leaves
  the training part, as items new to a catalogue have no copies in it.

Two protocols change the label space and are for the benchmarks only (:data:`BENCHMARK_PROTOCOLS`;
``gandalf train`` keeps the model it validates, and that model must know every label):

* ``future``: a uniform share, held out *as if it did not exist yet*: the labels that are
  held-out items leave the label space (their columns, their label points, their filter pairs),
  so a held-out item is scored on the other labels only, with nothing filtered: an older label of
  the same text is a miss, as it is for an item that a later release adds;
* ``future-family``: the same with whole groups held out, where the group key names a family (the
  items built together, as a Debian source package's): a release adds a family with its members,
  so a new item's siblings are missing from the label space too.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..errors import ConfigError

if TYPE_CHECKING:
    import numpy as np

    from ..data.dataset import Split, XMCDataset

PROTOCOLS = {
    "random": "a uniform share of the training points",
    "group": "whole groups of points (the data's group key) held out together",
    "new-items": "a uniform share; their near-duplicates and same-label siblings leave training",
}
BENCHMARK_PROTOCOLS = {
    "future": "a uniform share, as if it did not exist yet: its own labels leave the label space",
    "future-family": "whole groups (families), as if they did not exist yet: their labels leave the label space",
}
# what a deployment's queries are, which says how auto validates (workflow/forecast.py)
QUERY_KINDS = {
    "catalogue": "items of the catalogue, whose own label the filter file or --uid leaves out (validation as held out)",
    "new-items": "new items, absent from the label space: auto forecasts their gain (held-out points as if they did "
    "not exist yet, and the share of --query-sample texts that equal a label's text)",
}
NEAR_DUPLICATE = 0.8  # TF-IDF cosine at which two texts count as copies of one item
FOLD_PROTOCOLS = ("random", "new-items")  # those whose shares are drawn point by point, so folds can follow


def folds_available(n_points: int, fraction: float) -> int:
    """How many disjoint validation shares of ``fraction`` (each ``round(fraction * n_points)``
    points, at least one) ``n_points`` original training points hold, the first included."""
    n_valid = int(round(fraction * n_points))
    return n_points // n_valid if n_valid else 0


def carve_validation(
    dataset: XMCDataset, fraction: float, seed: int, protocol: str = "random", fold: int = 0
) -> tuple[XMCDataset, Split]:
    """Split the ORIGINAL training points into (dataset with the rest as training, validation split).

    Extra points already in the training file (a directory written by ``gandalf augment``) stay in
    the training part, after the remaining original points. With ``new-items``, the training
    points too close to a validation point are in neither part. ``fold`` f > 0 (protocols
    :data:`FOLD_PROTOCOLS`) holds out the f-th next share of the same seed's order, disjoint from
    the shares before it (fold 0 is the share a call without ``fold`` holds out), while
    :func:`folds_available` says there are enough points.
    """
    import numpy as np

    from ..data.dataset import Split, XMCDataset  # here: the CLI lists PROTOCOLS without numpy or data code

    if protocol not in PROTOCOLS and protocol not in BENCHMARK_PROTOCOLS:
        raise ConfigError(f"unknown validation protocol {protocol!r}; choose one of {', '.join(PROTOCOLS)}")
    tr = dataset.train
    n = dataset.n_original
    n_valid = int(round(fraction * n))
    rng = np.random.default_rng(seed)
    if fold and (protocol not in FOLD_PROTOCOLS or fold >= folds_available(n, fraction)):
        raise ConfigError(f"no validation fold {fold} of the {protocol} protocol at a share of {fraction:g}")
    if protocol in ("group", "future-family"):
        valid_mask = _group_holdout(tr.groups[:n] if tr.groups else None, n_valid, rng, protocol)
    else:
        valid_mask = np.zeros(n, dtype=bool)
        valid_mask[rng.permutation(n)[fold * n_valid : (fold + 1) * n_valid]] = True
    train_mask = ~valid_mask
    if protocol == "new-items" and n_valid:
        train_mask &= ~_close_to(tr, n, valid_mask)
    valid_idx, train_idx = np.flatnonzero(valid_mask), np.flatnonzero(train_mask)

    def pick(idx: np.ndarray) -> Split:
        # filter pairs follow their rows (reciprocal pairs are removed when scoring validation too)
        new_row = np.full(len(tr), -1, dtype=np.int64)
        new_row[idx] = np.arange(idx.size)
        fp = tr.filter_pairs.reshape(-1, 2)
        fp = fp[new_row[fp[:, 0]] >= 0]
        fp = np.stack([new_row[fp[:, 0]], fp[:, 1]], axis=1)
        groups = [tr.groups[i] for i in idx] if tr.groups else None
        return Split([tr.uids[i] for i in idx], [tr.texts[i] for i in idx], tr.Y[idx], fp, groups=groups)

    kept = np.concatenate([train_idx, np.arange(n, len(tr))])
    rest = XMCDataset(
        dataset.name,
        dataset.label_uids,
        dataset.label_texts,
        {"trn": pick(kept)},
        n_original_train=train_idx.size if len(tr) > n else None,
        path=dataset.path,
        propensity=dataset.propensity,
    )
    if protocol in BENCHMARK_PROTOCOLS:
        if len(tr) > n:
            raise ConfigError(
                f"the {protocol} protocol cannot drop labels from label points already in the training "
                "file (a directory written by gandalf augment): give the original dataset"
            )
        held = set(tr.uids[i] for i in valid_idx)
        gone = np.array([j for j, uid in enumerate(dataset.label_uids) if uid in held], dtype=np.int64)
        return _without_labels(rest, gone), _split_without_labels(pick(valid_idx), gone, dataset.n_labels)
    return rest, pick(valid_idx)


def _split_without_labels(split: Split, gone: np.ndarray, n_labels: int) -> Split:
    """``split`` with the label columns ``gone`` removed (and their filter pairs; the others renumbered)."""
    import numpy as np

    from ..data.dataset import Split

    keep = np.setdiff1d(np.arange(n_labels), gone)
    new_id = np.full(n_labels, -1, dtype=np.int64)
    new_id[keep] = np.arange(keep.size)
    fp = split.filter_pairs.reshape(-1, 2)
    fp = fp[new_id[fp[:, 1]] >= 0]
    fp = np.stack([fp[:, 0], new_id[fp[:, 1]]], axis=1)
    Y = split.Y.tocsc()[:, keep].tocsr()
    Y.sort_indices()
    return Split(split.uids, split.texts, Y, fp, groups=split.groups)


def _without_labels(dataset: XMCDataset, gone: np.ndarray) -> XMCDataset:
    """``dataset`` (one training split) with the labels ``gone`` out of its label space."""
    from dataclasses import replace

    keep = sorted(set(range(dataset.n_labels)) - set(gone.tolist()))
    return replace(
        dataset,
        label_uids=[dataset.label_uids[j] for j in keep],
        label_texts=[dataset.label_texts[j] for j in keep],
        splits={"trn": _split_without_labels(dataset.train, gone, dataset.n_labels)},
    )


def _group_holdout(
    groups: list[str | None] | None, n_valid: int, rng: np.random.Generator, protocol: str = "group"
) -> np.ndarray:
    """Whole groups, in a seeded order, until ``n_valid`` points are held out (never every group)."""
    import numpy as np

    if not groups or any(g is None for g in groups):
        raise ConfigError(
            f"the {protocol} protocol needs a 'group' key on every training point; this data has none "
            "(use --valid-protocol random or new-items)"
        )
    names, codes = np.unique(np.asarray(groups, dtype=object).astype(str), return_inverse=True)
    if names.size < 2:
        raise ConfigError(f"the {protocol} protocol needs at least 2 groups; this data has {names.size}")
    sizes = np.bincount(codes, minlength=names.size)
    held = np.zeros(names.size, dtype=bool)
    count = 0
    for g in rng.permutation(names.size):
        if count >= n_valid or held.sum() == names.size - 1:
            break
        held[g] = True
        count += sizes[g]
    return held[codes]


def _close_to(tr: Split, n: int, valid_mask: np.ndarray, chunk: int = 512) -> np.ndarray:
    """Which of the first ``n`` points are near-duplicates or same-label siblings of a point of
    ``valid_mask`` (the validation points themselves included)."""
    import numpy as np
    import scipy.sparse as sp

    from ..features import TextFeaturizer

    X = TextFeaturizer().fit_transform(list(tr.texts[:n]))  # rows are l2-normalised
    valid = np.flatnonzero(valid_mask)
    close = np.zeros(n, dtype=bool)
    XT = sp.csr_matrix(X.T)
    for start in range(0, valid.size, chunk):
        S = sp.csr_matrix(X[valid[start : start + chunk]] @ XT)  # cosines of a chunk of validation points
        close[np.unique(S.indices[S.data >= NEAR_DUPLICATE])] = True
    Y = sp.csr_matrix(tr.Y[:n])
    Y.sort_indices()
    label_sets = [Y.indices[Y.indptr[i] : Y.indptr[i + 1]].tobytes() for i in range(n)]
    held_sets = {label_sets[i] for i in valid if label_sets[i]}
    close |= np.fromiter((s in held_sets for s in label_sets), dtype=bool, count=n)
    return close
