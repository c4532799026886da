"""``gandalf reproduce``: every experiment of the Gandalf paper (and LabelMix) on one dataset.

One *run* trains one model on one training set with one seed (through
:func:`gandalf_xmc.workflow.pipeline.train_model`, so with the validation split carved from the
training points), predicts the test split and keeps what the tables and plots need: every metric,
each label-frequency bin's contribution to P@5 and PSP@5, the validation curve of each epoch and
each test point's top 5. Runs are independent, so they go to a pool of worker processes, and
each is written to ``REPORT_DIR/runs/`` when it ends: an interrupted reproduction continues where
it stopped when run again. :mod:`gandalf_xmc.experiments.report` then writes the report.
"""

from __future__ import annotations

import json
import multiprocessing
import os
import tempfile
import time
from concurrent.futures import ProcessPoolExecutor, as_completed
from dataclasses import replace
from pathlib import Path

import numpy as np

from ..data.atomic import atomic_path
from ..data.dataset import load_dataset, sample_dataset, write_dataset
from ..engine.threads import limit_threads
from .plan import QUICK_EPOCHS, QUICK_SIZES, RUN_METRICS, ReproduceConfig, Run, augment_config, plan


def execute(run: Run, data_dir: str | None, runs_dir: str, epochs: int | None, device: str = "auto") -> dict:
    """Train, predict and score one run; write ``runs_dir/<key>.json`` and ``<key>.top5.npy``."""
    from ..data.stats import frequency_bins
    from ..metrics import bin_contributions, evaluate, inverse_propensity
    from ..metrics.ranking import remove_pairs, top_k_indices
    from ..models.registry import MODELS, model_config
    from ..workflow.pipeline import train_model

    started = time.perf_counter()
    ds = load_dataset(data_dir)
    aug = augment_config(run.setting, run.seed)
    in_epochs = MODELS[run.model].in_epochs
    cfg = model_config(run.model, seed=run.seed, epochs=epochs if in_epochs else None, device=device)
    with tempfile.TemporaryDirectory(prefix="gandalf-run-") as tmp:
        # validation picks a neural model's epoch count; a linear model's would only be reported
        trained = train_model(ds, Path(tmp) / "model", cfg, aug, progress=False, valid_fraction=0.05 if in_epochs else 0.0)
    model, n_train = trained.model, trained.info["n_train"]
    history = trained.validated.history if in_epochs else []
    batch_size = cfg.train.batch_size if in_epochs else 1
    train_seconds = time.perf_counter() - started
    pred = model.predict(ds.test.texts, k=100)
    w = inverse_propensity(ds.original_train_Y(), *ds.propensity_constants())
    fp = ds.test.filter_pairs
    metrics = evaluate(pred, ds.test.Y, w, ks=(1, 3, 5), filter_pairs=fp)
    bins = frequency_bins(ds.label_frequencies())
    result = {
        "model": run.model,
        "setting": run.setting,
        "seed": run.seed,
        "metrics": {k: metrics[k] for k in RUN_METRICS},
        "bins_P@5": bin_contributions(pred, ds.test.Y, bins, 5, fp).tolist(),
        "bins_PSP@5": bin_contributions(pred, ds.test.Y, bins, 5, fp, inv_propensity=w).tolist(),
        "history": [{k: h[k] for k in ("epoch", "examples", "P@1", "PSP@5") if k in h} for h in history],
        "batch_size": batch_size,
        "n_train": n_train,
        "train_seconds": train_seconds,
        "seconds": time.perf_counter() - started,
    }
    top5 = top_k_indices(remove_pairs(pred, fp), 5).astype(np.int32)
    runs = Path(runs_dir)
    with atomic_path(runs / f"{run.key}.top5.npy") as tmp:
        with open(tmp, "wb") as fh:
            np.save(fh, top5)
    with atomic_path(runs / f"{run.key}.json") as tmp:
        tmp.write_text(json.dumps(result, indent=1) + "\n")
    return result


# what a report directory holds: a directory holding anything else is refused without --force
REPORT_ENTRIES = ("runs", "data", "report.md", "results.json")


def check_report_directory(out_dir: str | Path, force: bool = False, inputs: tuple = ()) -> Path:
    """``out_dir`` if it may take a report: new, empty, an earlier report of this command (to
    continue it), or anything with ``force`` (written into; nothing else there is touched); never
    the input dataset or a directory inside or around it."""
    from ..data.atomic import check_output_directory
    from ..errors import OutputError

    out = check_output_directory(out_dir, force=True, inputs=inputs)
    if out.is_dir() and not force:
        foreign = sorted(
            p.name
            for p in out.iterdir()
            if p.name not in REPORT_ENTRIES and p.suffix != ".png" and not p.name.startswith(".gandalf")
        )
        if foreign:
            raise OutputError(
                out,
                f"holds {foreign[0]!r}, which is not part of a report: choose a new --out, or pass "
                "--force to write the report into it",
            )
    return out


def reproduce(data_dir: str | Path | None, out_dir: str | Path, config: ReproduceConfig, log=print, force: bool = False) -> dict:
    """Run everything ``config`` asks for (skipping runs already in ``out_dir/runs``), then write
    ``out_dir/report.md``, the PNG figures and ``out_dir/results.json``. Returns the results.
    ``out_dir``: see :func:`check_report_directory`; a lock keeps a second writer out."""
    from ..data.atomic import output_lock
    from ..data.suite import resolve

    config.validate()
    out = check_report_directory(out_dir, force, inputs=(resolve(data_dir),))
    with output_lock(out):
        return _reproduce(data_dir, out, config, log)


def _reproduce(data_dir: str | Path | None, out: Path, config: ReproduceConfig, log) -> dict:
    from . import report

    runs_dir = out / "runs"
    runs_dir.mkdir(parents=True, exist_ok=True)
    started = time.perf_counter()
    source = load_dataset(data_dir)
    if config.quick:
        config = replace(config, epochs=QUICK_EPOCHS)
        sample_dir = out / "data" / f"{source.name}-sample"
        if not (sample_dir / "lbl.json.gz").exists():
            write_dataset(sample_dataset(source, *QUICK_SIZES, seed=0), sample_dir)
        data = str(sample_dir)
    else:
        data = None if data_dir is None else str(data_dir)
    runs = plan(config)
    todo = [r for r in runs if not (runs_dir / f"{r.key}.json").exists()]
    log(f"{len(runs)} runs ({len(runs) - len(todo)} already done), {config.parallel} at a time -> {runs_dir}")
    threads = max(1, (os.cpu_count() or 1) // config.parallel)
    done = 0

    def report_run(r: dict) -> None:
        nonlocal done
        done += 1
        m = r["metrics"]
        log(
            f"[{done}/{len(todo)}] {r['model']} {r['setting']} seed {r['seed']}: P@1 {m['P@1']:.2f} "
            f"PSP@5 {m['PSP@5']:.2f} ({r['seconds']:.0f} s; {time.perf_counter() - started:.0f} s so far)"
        )

    if config.parallel == 1 or len(todo) <= 1:
        for r in todo:
            report_run(execute(r, data, str(runs_dir), config.epochs, config.device))
    else:
        ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no forked torch/numba thread pools
        with ProcessPoolExecutor(config.parallel, mp_context=ctx, initializer=limit_threads, initargs=(threads,)) as pool:
            futures = [pool.submit(execute, r, data, str(runs_dir), config.epochs, config.device) for r in todo]
            for future in as_completed(futures):
                report_run(future.result())
    dataset = load_dataset(data) if config.quick else source  # the full dataset is already loaded
    results = report.write_report(
        dataset, runs, runs_dir, out, config, source_name=source.name, seconds=time.perf_counter() - started
    )
    log(f"wrote {out / 'report.md'} ({time.perf_counter() - started:.0f} s)")
    return results
