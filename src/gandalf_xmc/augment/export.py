"""Write Gandalf data as files any XMC tool can read (plug-and-play)."""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import asdict
from pathlib import Path

from ..data.atomic import atomic_directory
from ..data.dataset import AUGMENT_METADATA, SPLIT_FILTER_FILES, XMCDataset
from ..data.formats import lf_json_chunks, write_lf_json, write_lines, write_sparse_text
from . import AugmentConfig, extra_points, graph_for

_COPIED_TEST = ("tst.json.gz", "tst.json")  # copied as they are when the test split was not loaded


def write_augmented_dataset(dataset: XMCDataset, out_dir: str | Path, config: AugmentConfig,
                            log: Callable[[str], None] | None = None, client=None) -> dict:
    """Write ``out_dir`` with the extra points and the combined training set.

    Files:
        ``aug.json.gz``: one line per extra point, in label order (uid, title, target_ind, target_rel);
        ``aug_X_Y.txt``: the same targets as a sparse text matrix (header ``rows L``);
        ``trn.json.gz``: original training points followed by the extra points;
        ``trn_X_Y.txt``: the combined targets as a sparse text matrix;
        ``lbl.json.gz``, ``tst.json.gz``, ``filter_labels_*.txt``: from the source, so that
        ``out_dir`` is a complete dataset directory;
        ``augment.json``: the settings and ``n_original_train`` (so that propensities and
        frequency bins keep coming from the original points only).

    Everything is written to a staging directory first and moved into place at the end.
    ``log`` receives a line per stage (progress for long runs); ``client`` (a
    ``distributed.Client``) builds the label graph on a Dask cluster. Returns the metadata written
    to ``augment.json``.
    """
    started = time.perf_counter()

    def say(message: str) -> None:
        if log is not None:
            log(f"[{time.perf_counter() - started:7.1f} s] {message}")

    say(f"label graph ({graph_for(config).kind}, delta={config.graph.delta}) ...")
    extra, label_ids = extra_points(dataset, config, client)
    say(f"{len(extra):,} extra points, {extra.Y.nnz:,} soft targets")
    n_orig = dataset.n_original_train or len(dataset.train)
    train = dataset.train
    meta = {
        "source": str(dataset.path) if dataset.path else None,
        "source_name": dataset.name,
        "n_original_train": n_orig,
        "n_extra": len(extra),
        "n_labels": dataset.n_labels,
        "extra_targets_nnz": int(extra.Y.nnz),
        "config": {**asdict(config)},
    }
    with atomic_directory(out_dir) as staging:
        original_Y = dataset.original_train_Y()
        say("writing aug.json.gz, aug_X_Y.txt, trn.json.gz, trn_X_Y.txt ...")
        jobs = [  # largest first; each writes its own file
            lambda: write_lines(staging / "trn.json.gz",
                                lf_json_chunks(train.uids[:n_orig], train.texts[:n_orig], original_Y, binary_rel=True),
                                lf_json_chunks(extra.uids, extra.texts, extra.Y)),
            lambda: write_lines(staging / "aug.json.gz", lf_json_chunks(extra.uids, extra.texts, extra.Y)),
            lambda: write_sparse_text(staging / "trn_X_Y.txt", original_Y, extra.Y),
            lambda: write_sparse_text(staging / "aug_X_Y.txt", extra.Y),
            lambda: write_lf_json(staging / "lbl.json.gz", dataset.label_uids, dataset.label_texts, None),
        ]
        if "tst" in dataset.splits:
            jobs.append(lambda: write_lf_json(staging / "tst.json.gz", dataset.test.uids, dataset.test.texts,
                                              dataset.test.Y, binary_rel=True))
        # two writers at a time: gzip and the numba renderer release the GIL, so they overlap
        with ThreadPoolExecutor(max_workers=2) as pool:
            futures = [pool.submit(job) for job in jobs]
            try:
                for future in futures:
                    future.result()
            except BaseException:
                for future in futures:
                    future.cancel()
                raise
        if dataset.path is not None:
            names = list(SPLIT_FILTER_FILES.values()) + ([] if "tst" in dataset.splits else list(_COPIED_TEST))
            for name in names:
                src = Path(dataset.path) / name
                if src.exists():
                    shutil.copyfile(src, staging / name)
        (staging / "label_ids.txt").write_text("".join(f"{j}\n" for j in label_ids.tolist()))
        (staging / AUGMENT_METADATA).write_text(json.dumps(meta, indent=1) + "\n")
    say(f"wrote {out_dir}")
    return meta
