"""The demo: stats -> augment -> train/predict -> evaluate, without and with Gandalf."""

from __future__ import annotations

import json
import time
from pathlib import Path

from ..augment.export import write_augmented_dataset
from ..data.atomic import atomic_path
from ..data.dataset import load_dataset
from ..data.formats import write_sparse_text
from ..data.stats import dataset_stats
from ..metrics import evaluate, inverse_propensity

DEMO_METRICS = ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5", "C@5")


STAT_NAMES = {
    "N": "N (training points)",
    "L": "L (labels)",
    "APpL": "APpL (points a label)",
    "ALpP": "ALpP (labels a point)",
    "AWpP": "AWpP (words a point)",
    "labels_le5_pct": "labels with <= 5 positives (%)",
    "labels_0_pct": "labels with 0 positives (%)",
    "max_label_freq": "largest label frequency",
    "N_test": "test points",
    "ALpP_test": "labels a test point",
}


def run_demo(
    data: str | Path | None,
    out_dir: str | Path,
    *,
    model: str = "linear",
    seed: int = 0,
    epochs: int | None = None,
    device: str | None = None,
    force: bool = False,
    progress: bool = False,
    say=print,
    table=None,
    top_k: int = 20,
) -> dict:
    """Run the whole pipeline with ``model`` and return every number.

    Trains on D (the original points), on the Gandalf files ``gandalf augment`` writes (read back,
    to show they are plug-and-play), on identity label points, on the tempered variant and, for a
    model whose solver weighs positives (the linear ones), on firm label points, and scores each on
    the test split. Writes to ``out_dir`` (new or empty unless ``force``):
    ``augmented/`` (the Gandalf data as files), ``model_<setting>/`` (for ``gandalf predict``),
    ``pred_<setting>.txt`` (for ``gandalf evaluate``) and ``results.json``. ``table(title,
    columns, rows, right)`` prints a table (default: plain lines through ``say``).
    """
    from ..augment import preset
    from ..augment.catalog import FIRM_POSITIVE_COST
    from ..data.atomic import check_output_directory, output_lock
    from ..models.registry import entry, model_config
    from ..workflow.fitting import label_point_refusal
    from ..workflow.pipeline import train_model

    out_dir = check_output_directory(out_dir, force)
    table = table or (lambda title, columns, rows, right=(): [say(title), *[say("  ".join(r)) for r in [columns, *rows]]])
    with output_lock(out_dir):
        started = time.perf_counter()
        from ..engine.linear_solver import kernels_cached

        if not kernels_cached():
            say("compiling the numeric kernels (numba) on this first run: about a minute, then cached ...")
        ds = load_dataset(data)
        stats = dataset_stats(ds)
        table(
            f"Dataset {ds.name}",
            ["statistic", "value"],
            [[STAT_NAMES.get(k, k), f"{v:,}" if isinstance(v, int) else f"{v:.2f}"] for k, v in stats.items()],
            ("value",),
        )
        t0 = time.perf_counter()
        aug_dir = out_dir / "augmented"
        meta = write_augmented_dataset(ds, aug_dir, preset("gandalf", seed), force=True)
        aug_seconds = time.perf_counter() - t0
        say(
            f"augment: {meta['n_extra']:,} label points, {meta['extra_targets_nnz']:,} soft targets -> {aug_dir} "
            f"({aug_seconds:.1f} s)"
        )
        augmented = load_dataset(aug_dir, splits=("trn",))
        w = inverse_propensity(ds.original_train_Y(), *ds.propensity_constants())
        settings: dict[str, tuple] = {
            "none": (ds, preset("none", seed)),  # D
            "gandalf": (augmented, preset("none", seed)),  # D u Z, read back from the files just written
            "identity": (ds, preset("identity", seed)),  # D u Z^1, built in memory
            "tempered": (ds, preset("gandalf-tempered", seed)),  # the library's variant (see README)
        }
        firm = preset("gandalf-tempered-firm", seed)  # the recommended label points, where the model can weigh them
        if label_point_refusal(entry(model), firm) is None:
            settings["firm"] = (ds, firm)
        rows: dict[str, dict[str, float]] = {}
        for name, (source, augment) in settings.items():
            t0 = time.perf_counter()
            say(f"training {model} on {name} ...")
            trained = train_model(
                source,
                out_dir / f"model_{name}",
                model_config(model, seed=seed, epochs=epochs, device=device),
                augment,
                valid_fraction=0.0,
                progress=progress,
                force=True,
            )  # scored on test below
            pred = trained.predict(ds.test.texts, k=top_k)
            write_sparse_text(out_dir / f"pred_{name}.txt", pred)
            res = evaluate(pred, ds.test.Y, w, filter_pairs=ds.test.filter_pairs)
            res["seconds"] = time.perf_counter() - t0
            res["n_train"] = trained.info["n_train"]
            rows[name] = res
            say(f"{name}: P@1 {res['P@1']:.2f}  PSP@1 {res['PSP@1']:.2f}  ({res['seconds']:.1f} s)")
        table(
            f"{model} on {ds.name} (test split, filter pairs removed)",
            ["training data", *DEMO_METRICS, "sec"],
            [[name, *[f"{r[m]:.2f}" for m in DEMO_METRICS], f"{r['seconds']:.0f}"] for name, r in rows.items()],
            (*DEMO_METRICS, "sec"),
        )
        say(
            "none = D (original points); gandalf = D u Z (label points, co-occurrence soft targets, delta 0.1); "
            "identity = D u Z^1 (label points, self target only); tempered = D u Z with shrunk, size-weighted estimates "
            "(at most 10 co-labels, scaled by 0.5) at half loss weight (--augment gandalf-tempered)"
            + (
                f"; firm = tempered, label points' positives at {FIRM_POSITIVE_COST:g} times the cost (gandalf-tempered-firm)"
                if "firm" in rows
                else ""
            )
        )
        results = {
            "dataset": ds.name,
            "model": model,
            "stats": stats,
            "augment_seconds": aug_seconds,
            "results": rows,
            "total_seconds": time.perf_counter() - started,
        }
        with atomic_path(out_dir / "results.json") as tmp:
            tmp.write_text(json.dumps(results, indent=1, default=float) + "\n")
        say(f"done in {results['total_seconds']:.0f} s; predictions and results.json in {out_dir}")
    return results
