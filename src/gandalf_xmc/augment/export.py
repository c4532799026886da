"""Write Gandalf data as files any XMC tool can read (plug-and-play)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict, replace
from pathlib import Path

from ..data.atomic import atomic_directory, interrupts_deferred
from ..data.dataset import AUGMENT_METADATA, SPLIT_FILTER_FILES, XMCDataset
from ..data.formats import lf_json_chunks, write_lf_json, write_lines, write_sparse_text
from ..errors import ConfigError
from . import AugmentConfig, graph_for, label_points

_COPIED_TEST = ("tst.json.gz", "tst.json")  # copied as they are when the test split was not loaded


EXPORT_FORMATS = ("lf", "text", "npz", "bow")


def write_augmented_dataset(
    dataset: XMCDataset,
    out_dir: str | Path,
    config: AugmentConfig,
    log: Callable[[str], None] | None = None,
    client=None,
    force: bool = False,
    export: str = "lf",
) -> dict:
    """Write ``out_dir`` with the label points and the combined training set.

    Files:
        ``aug.json.gz``: one line per label point, in label order (uid, title, target_ind, target_rel);
        ``aug_X_Y.txt``: the same targets as a sparse text matrix (header ``rows L``);
        ``trn.json.gz``: original training points followed by the label points;
        ``trn_X_Y.txt``: the combined targets as a sparse text matrix;
        ``lbl.json.gz``, ``tst.json.gz``, ``filter_labels_*.txt``: from the source, so that
        ``out_dir`` is a complete dataset directory;
        ``augment.json``: the settings and ``n_original_train`` (so that propensities and
        frequency bins keep coming from the original points only).

    ``export`` adds a layout for other tools beside the LF files: ``text`` (the repository's
    text layout: ``trn_X.txt`` / ``trn_X_Y.txt``, ``tst_*``, ``lbl_X.txt``), ``npz`` (TF-IDF
    features and targets as scipy matrices, ``X.trn.npz`` / ``Y.trn.npz`` (binary) / ``R.trn.npz``
    (the soft targets) and ``X.tst.npz`` / ``Y.tst.npz``, as PECOS reads them) or ``bow`` (the
    XMLRepo bag-of-words files ``train.txt`` / ``test.txt``, which hold binary labels only: refused
    when the targets are soft).

    Everything is written to a staging directory that replaces ``out_dir`` at the end. ``out_dir``
    must be new or empty unless ``force``, and never the source dataset's directory.
    ``log`` receives a line per stage (progress for long runs); ``client`` (a
    ``distributed.Client``) builds the label graph on a Dask cluster. Returns the metadata written
    to ``augment.json``.
    """
    started = time.perf_counter()

    def say(message: str) -> None:
        if log is not None:
            log(f"[{time.perf_counter() - started:7.1f} s] {message}")

    if export not in EXPORT_FORMATS:
        raise ConfigError(f"unknown format {export!r}; choose one of {', '.join(EXPORT_FORMATS)}")
    say(f"label graph ({graph_for(config).kind}, delta={config.graph.delta}) ...")
    points, label_ids = label_points(dataset, config, client)
    _check_exportable(dataset, config, points, export)
    say(f"{len(points):,} label points, {points.Y.nnz:,} soft targets")
    meta = {
        "source": str(dataset.path) if dataset.path else None,
        "source_name": dataset.name,
        "n_original_train": dataset.n_original,
        "n_extra": len(points),
        "n_labels": dataset.n_labels,
        "extra_targets_nnz": int(points.Y.nnz),
        "config": asdict(replace(config, graph=graph_for(config))),  # the graph as built (its kind, the walk's seed)
    }
    with atomic_directory(out_dir, force, inputs=(dataset.path,)) as staging:
        say("writing aug.json.gz, aug_X_Y.txt, trn.json.gz, trn_X_Y.txt ...")
        _write_lf_files(dataset, points, staging)
        _copy_source_files(dataset, staging)
        (staging / "label_ids.txt").write_text("".join(f"{j}\n" for j in label_ids.tolist()))
        if export != "lf":
            say(f"writing the {export} layout ...")
            _write_layout(dataset, points, staging, export)
        (staging / AUGMENT_METADATA).write_text(json.dumps(meta, indent=1) + "\n")
    say(f"wrote {out_dir}")
    return meta


def _check_exportable(dataset: XMCDataset, config: AugmentConfig, points, export: str) -> None:
    """Refuse label points that the files cannot hold: none at all, or soft targets in a binary format."""
    if not len(points):
        raise ConfigError(
            f"no label becomes a point (labels fraction {config.labels_fraction} of "
            f"{dataset.n_labels:,} labels rounds to 0): raise --labels-fraction"
        )
    if export == "bow" and points.Y.nnz and (points.Y.data != 1.0).any():
        raise ConfigError(
            "the BoW format holds binary labels, and these label points have soft targets "
            "(they would be rounded to 1): use --format npz or lf, or --augment identity"
        )


def _write_lf_files(dataset: XMCDataset, points, staging: Path) -> None:
    """The LF files: label points alone and after the original points, labels, test split."""
    n_orig, train = dataset.n_original, dataset.train
    original_Y = dataset.original_train_Y()
    jobs = [  # largest first; each writes its own file
        lambda: write_lines(
            staging / "trn.json.gz",
            lf_json_chunks(train.uids[:n_orig], train.texts[:n_orig], original_Y, binary_rel=True),
            lf_json_chunks(points.uids, points.texts, points.Y),
        ),
        lambda: write_lines(staging / "aug.json.gz", lf_json_chunks(points.uids, points.texts, points.Y)),
        lambda: write_sparse_text(staging / "trn_X_Y.txt", original_Y, points.Y),
        lambda: write_sparse_text(staging / "aug_X_Y.txt", points.Y),
        lambda: write_lf_json(staging / "lbl.json.gz", dataset.label_uids, dataset.label_texts, None),
    ]
    if "tst" in dataset.splits:
        jobs.append(
            lambda: write_lf_json(staging / "tst.json.gz", dataset.test.uids, dataset.test.texts, dataset.test.Y, binary_rel=True)
        )
    # two writers at a time: gzip and the numba renderer release the GIL, so they overlap
    with ThreadPoolExecutor(max_workers=2) as pool:
        with interrupts_deferred():  # every worker started is one the pool joins
            futures = [pool.submit(job) for job in jobs]
        try:
            for future in futures:
                future.result()
        except BaseException:
            for future in futures:
                future.cancel()
            raise


def _copy_source_files(dataset: XMCDataset, staging: Path) -> None:
    """The source's filter files (and its test files when the test split was not read), as they are."""
    if dataset.path is None:
        return
    names = list(SPLIT_FILTER_FILES.values()) + ([] if "tst" in dataset.splits else list(_COPIED_TEST))
    for name in names:
        src = Path(dataset.path) / name
        if src.exists():
            shutil.copyfile(src, staging / name)


def _write_layout(dataset: XMCDataset, points, staging: Path, export: str) -> None:
    """The combined training set (and the test split) in another tool's layout."""
    import numpy as np
    import scipy.sparse as sp

    from ..data.formats import write_bow, write_text_lines

    n_orig = dataset.n_original
    texts = list(dataset.train.texts[:n_orig]) + list(points.texts)
    Y = sp.vstack([dataset.original_train_Y(), points.Y], format="csr", dtype=np.float32)
    splits = {"trn": (texts, Y)}
    if "tst" in dataset.splits:
        splits["tst"] = (dataset.test.texts, dataset.test.Y)
    if export == "text":
        write_text_lines(staging / "lbl_X.txt", dataset.label_texts)
        for name, (t, M) in splits.items():
            write_text_lines(staging / f"{name}_X.txt", t)
            write_sparse_text(staging / f"{name}_X_Y.txt", M)
        return
    from ..features import TextFeaturizer

    featurizer = TextFeaturizer().fit(texts + list(dataset.label_texts))
    for name, (t, M) in splits.items():
        X = featurizer.transform(list(t))
        if export == "npz":
            binary = M.copy()
            binary.data[:] = 1.0
            sp.save_npz(staging / f"X.{name}.npz", X)
            sp.save_npz(staging / f"Y.{name}.npz", binary)
            if name == "trn":
                sp.save_npz(staging / f"R.{name}.npz", M)
        else:
            write_bow(staging / ("train.txt" if name == "trn" else "test.txt"), X, M)
    if export == "npz":
        sp.save_npz(staging / "X.lbl.npz", featurizer.transform(list(dataset.label_texts)))
