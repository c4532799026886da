"""The demo: stats -> augment -> train/predict -> evaluate, without and with Gandalf."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

from rich.console import Console
from rich.table import Table

from ..augment import AugmentConfig, training_set
from ..augment.export import write_augmented_dataset
from ..data.atomic import atomic_path
from ..data.dataset import XMCDataset, load_dataset
from ..data.formats import write_sparse_text
from ..data.stats import dataset_stats
from ..errors import ConfigError
from ..graph import GraphConfig
from ..metrics import evaluate, inverse_propensity
from ..models import TfidfKNN

DEMO_METRICS = ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5", "C@5")


STAT_NAMES = {
    "N": "N (training points)", "L": "L (labels)", "APpL": "APpL (points a label)",
    "ALpP": "ALpP (labels a point)", "AWpP": "AWpP (words a point)",
    "labels_le5_pct": "labels with <= 5 positives (%)", "labels_0_pct": "labels with 0 positives (%)",
    "max_label_freq": "largest label frequency", "N_test": "test points", "ALpP_test": "labels a test point",
}


def stats_table(stats: dict, title: str) -> Table:
    """A rich two-column table of :func:`dataset_stats` output."""
    table = Table(title=title)
    table.add_column("statistic")
    table.add_column("value", justify="right")
    for key, value in stats.items():
        table.add_row(STAT_NAMES.get(key, key), f"{value:,}" if isinstance(value, int) else f"{value:.2f}")
    return table


def results_table(rows: dict[str, dict[str, float]], title: str, metrics: tuple[str, ...] = DEMO_METRICS) -> Table:
    """A rich table with one row per setting and one column per metric (plus time if present)."""
    table = Table(title=title)
    table.add_column("training data", no_wrap=True)
    for m in metrics:
        table.add_column(m, justify="right")
    has_time = any("seconds" in r for r in rows.values())
    if has_time:
        table.add_column("sec", justify="right")
    for name, r in rows.items():
        cells = [f"{r[m]:.2f}" for m in metrics]
        if has_time:
            cells.append(f"{r.get('seconds', float('nan')):.0f}")
        table.add_row(name, *cells)
    return table


def run_demo(data_dir: str | Path | None, out_dir: str | Path, *, model: str = "linear", delta: float = 0.1,
             seed: int = 0, console: Console | None = None, top_k: int = 20, epochs: int | None = None) -> dict:
    """Run the whole pipeline with ``model`` (default: the best one, ``linear``; ``knn`` is the
    training-free TF-IDF kNN) and return every number.

    Writes to ``out_dir``: ``augmented/`` (Gandalf data as files, then read back for training, to
    show they are plug-and-play), ``model_<setting>/`` (trained models for ``gandalf predict``),
    ``pred_<setting>.txt`` (prediction files for ``gandalf evaluate``) and ``results.json``.
    """
    from ..models.registry import MODEL_NAMES, model_config
    from ..train.auto import AUTO_CANDIDATES
    from ..train.pipeline import train_model

    if model != "knn" and model not in MODEL_NAMES:
        raise ConfigError(f"unknown model {model!r}; choose knn or one of {', '.join(MODEL_NAMES)}")
    console = console or Console()
    out_dir = Path(out_dir)
    started = time.perf_counter()
    ds = load_dataset(data_dir)
    stats = dataset_stats(ds)
    console.print(stats_table(stats, f"Dataset {ds.name}"))

    t0 = time.perf_counter()
    aug_dir = out_dir / "augmented"
    meta = write_augmented_dataset(ds, aug_dir, AugmentConfig("gandalf", GraphConfig(delta=delta), seed=seed))
    aug_seconds = time.perf_counter() - t0
    console.print(f"augment: {meta['n_extra']:,} extra points, {meta['extra_targets_nnz']:,} soft targets "
                  f"-> {aug_dir} ({aug_seconds:.1f} s)", soft_wrap=True)
    augmented = load_dataset(aug_dir, splits=("trn",))

    w = inverse_propensity(ds.original_train_Y(), *ds.propensity_constants())
    settings: dict[str, XMCDataset | AugmentConfig] = {
        "none": AugmentConfig("none"),  # D
        "gandalf": augmented,  # D u Z, read back from the files just written
        "identity": AugmentConfig("identity", seed=seed),  # D u Z^1, built in memory
        # this library's variant for data where the paper's soft targets cost head accuracy
        "tempered": replace(AUTO_CANDIDATES["gandalf-tempered-light"], seed=seed),
    }
    rows: dict[str, dict[str, float]] = {}
    for name, how in settings.items():
        t0 = time.perf_counter()
        if model == "knn":
            train = how.train if isinstance(how, XMCDataset) else training_set(ds, how)
            predictor = TfidfKNN().fit(train.texts, train.Y)
            n_train = len(train)
        else:
            source, augment = (how, AugmentConfig("none")) if isinstance(how, XMCDataset) else (ds, how)
            overrides = {"seed": seed, **({"epochs": epochs} if epochs else {})}
            console.print(f"training {model} on {name} ...")
            predictor = train_model(source, out_dir / f"model_{name}", model_config(model, **overrides), augment)
            n_train = json.loads((out_dir / f"model_{name}" / "training.json").read_text())["n_train"]
        pred = predictor.predict(ds.test.texts, k=top_k, progress=True)
        write_sparse_text(out_dir / f"pred_{name}.txt", pred)
        res = evaluate(pred, ds.test.Y, w, filter_pairs=ds.test.filter_pairs)
        res["seconds"] = time.perf_counter() - t0
        res["n_train"] = n_train
        rows[name] = res
        console.print(f"{name}: P@1 {res['P@1']:.2f}  PSP@1 {res['PSP@1']:.2f}  ({res['seconds']:.1f} s)")
    title = "TF-IDF kNN" if model == "knn" else f"{model} model"
    console.print(results_table(rows, f"{title} on {ds.name} (test split, filter pairs removed)"))
    console.print(f"none = D (original points); gandalf = D u Z (label points, co-occurrence soft targets, "
                  f"delta={delta}); identity = D u Z^1 (label points, self target only); tempered = D u Z with "
                  f"shrunk, size-weighted estimates (at most 10 co-labels, scaled by 0.5) and label points at half "
                  f"loss weight (gandalf train --augment auto's first candidate)", soft_wrap=True)
    results = {"dataset": ds.name, "model": model, "stats": stats, "augment_seconds": aug_seconds, "results": rows,
               "total_seconds": time.perf_counter() - started}
    with atomic_path(out_dir / "results.json") as tmp:
        tmp.write_text(json.dumps(results, indent=1, default=float) + "\n")
    console.print(f"done in {results['total_seconds']:.0f} s; predictions and results.json in {out_dir}")
    return results
