"""The ``gandalf`` command line."""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path
from typing import Optional

import numpy as np
import typer
from rich.console import Console
from rich.table import Table

from .errors import GandalfError

app = typer.Typer(add_completion=False, no_args_is_help=True, pretty_exceptions_enable=False,
                  help="Gandalf / LabelMix label-feature augmentation for extreme multi-label classification.")
console = Console()

DATA_HELP = "Dataset directory (LF json or text layout); the embedded debian-bookworm dataset if omitted."

# Options of the label graph, shared by `augment`, `train` and `analyze` (see graph.GraphConfig).
GRAPH_KIND_OPTION = typer.Option("cooccurrence", "--graph", help="cooccurrence | random-walk | glas | identity")
DELTA_OPTION = typer.Option(0.1, min=0.0, max=0.999999, help="Keep soft targets strictly greater than this.")
TOP_K_OPTION = typer.Option(None, "--top-k", min=0, help="Cap of co-label targets an extra point (largest first).")
SHRINKAGE_OPTION = typer.Option(0.0, min=0.0, help="alpha in G_ji / (G_jj + alpha): shrinks P[i | j] of rare labels j.")
POINT_WEIGHTS_OPTION = typer.Option("none", help="none | inverse-size: a point with n labels counts 1/n in co-occurrence.")
CO_LABEL_SCALE_OPTION = typer.Option(1.0, min=0.0, max=1.0,
                                     help="Factor on an extra point's co-label targets (its own label stays 1).")


def _graph_config(kind: str, delta: float, top_k: Optional[int], shrinkage: float, point_weights: str,
                  co_label_scale: float, seed: int = 0):
    """The GraphConfig of the shared graph options, validated (a bad value is a one-line error)."""
    from .graph import GraphConfig

    config = GraphConfig(kind=kind, delta=delta, top_k=top_k, shrinkage=shrinkage, point_weights=point_weights,
                         co_label_scale=co_label_scale, seed=seed)
    config.validate()
    return config


def _parse_ks(text: str) -> tuple[int, ...]:
    try:
        ks = tuple(sorted({int(x) for x in text.split(",") if x.strip()}))
    except ValueError:
        raise typer.BadParameter(f"expected comma-separated integers, got {text!r}") from None
    if not ks or min(ks) < 1:
        raise typer.BadParameter("every k must be >= 1")
    return ks


@app.command()
def stats(data_dir: Optional[Path] = typer.Argument(None, help=DATA_HELP),
          as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table.")) -> None:
    """Dataset statistics: the paper's Table 1 columns (N, L, APpL, ALpP, AWpP) and tail figures."""
    from .data import dataset_stats, load_dataset
    from .experiments.demo import stats_table

    ds = load_dataset(data_dir)
    st = dataset_stats(ds)
    if as_json:
        print(json.dumps({"dataset": ds.name, **st}))
    else:
        console.print(stats_table(st, f"Dataset {ds.name}"))


@app.command()
def augment(data_dir: Optional[Path] = typer.Argument(None, help=DATA_HELP),
            out: Path = typer.Option(..., "--out", help="Output directory (a complete dataset directory)."),
            delta: float = DELTA_OPTION,
            graph: str = GRAPH_KIND_OPTION,
            top_k: Optional[int] = TOP_K_OPTION,
            shrinkage: float = SHRINKAGE_OPTION,
            point_weights: str = POINT_WEIGHTS_OPTION,
            co_label_scale: float = CO_LABEL_SCALE_OPTION,
            labels_fraction: float = typer.Option(1.0, min=0.0, max=1.0, help="Share of labels that become points."),
            labels_sampling: str = typer.Option("random", help="random | tail (five equi-voluminous bins, tail first)"),
            seed: int = typer.Option(0, help="Random seed (random walk, label subsampling)."),
            dask: Optional[str] = typer.Option(None, "--dask", help="Build the label graph on Dask: 'local:N' (a local "
                                               "cluster of N worker processes) or a scheduler address tcp://HOST:PORT."),
            progress: Optional[bool] = typer.Option(None, "--progress/--no-progress",
                                                    help="Stage lines on stderr (default: when stderr is a terminal).")) -> None:
    """Write Gandalf's extra points (aug.json.gz, aug_X_Y.txt) and the combined trn.json.gz."""
    from contextlib import nullcontext

    from .augment import AugmentConfig
    from .augment.export import write_augmented_dataset
    from .data import load_dataset

    t0 = time.perf_counter()
    config = AugmentConfig("gandalf", _graph_config(graph, delta, top_k, shrinkage, point_weights, co_label_scale, seed),
                           labels_fraction=labels_fraction, labels_sampling=labels_sampling, seed=seed)
    config.validate()
    log = _stage_logger(progress)
    if log:
        log(f"reading {data_dir or 'the embedded dataset'} ...")
    ds = load_dataset(data_dir, splits=("trn", "tst") if _has_test(data_dir) else ("trn",))
    if dask:
        from .graph.distributed import dask_client
    with dask_client(dask) if dask else nullcontext() as client:
        meta = write_augmented_dataset(ds, out, config, log=log, client=client)
    n = max(meta["n_extra"], 1)
    console.print(f"{meta['n_extra']:,} extra points ({meta['extra_targets_nnz'] / n:.2f} targets a point) "
                  f"+ {meta['n_original_train']:,} original -> {out} in {time.perf_counter() - t0:.1f} s", soft_wrap=True)


def _stage_logger(progress: Optional[bool]):
    """A function printing stage lines to stderr, or None when progress is off."""
    if progress is None:
        progress = sys.stderr.isatty()
    return (lambda line: print(line, file=sys.stderr, flush=True)) if progress else None


def _has_test(data_dir: Optional[Path]) -> bool:
    from .data.dataset import embedded_dataset_path

    d = Path(data_dir) if data_dir is not None else embedded_dataset_path()
    return any((d / f).exists() for f in ("tst.json.gz", "tst.json", "tst_X.txt"))


@app.command()
def evaluate(pred_file: Path = typer.Argument(..., help="Predictions: sparse matrix text, one row per point, label:score."),
             data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
             split: str = typer.Option("tst", help="Which split the predictions are for."),
             k: str = typer.Option("1,3,5", "-k", help="Comma-separated cut-offs."),
             a: Optional[float] = typer.Option(None, "-A", help="Propensity A (default: dataset preset)."),
             b: Optional[float] = typer.Option(None, "-B", help="Propensity B (default: dataset preset)."),
             bins: bool = typer.Option(False, "--bins", help="Also report each of five label-frequency bins' share of P@k."),
             as_json: bool = typer.Option(False, "--json", help="Print one JSON object (metrics in percent).")) -> None:
    """Score a prediction file: P@k, nDCG@k, PSP@k, PSnDCG@k, R@k, C@k (filter pairs removed)."""
    from .data import load_dataset
    from .data.formats import read_sparse_text
    from .data.stats import frequency_bins
    from .metrics import bin_contributions, inverse_propensity
    from .metrics import evaluate as evaluate_metrics

    ks = _parse_ks(k)
    ds = load_dataset(data, splits=tuple(dict.fromkeys(("trn", split))))
    target = ds.split(split)
    pred = read_sparse_text(pred_file, expect_shape=(len(target), ds.n_labels))
    w = inverse_propensity(ds.original_train_Y(), *ds.propensity_constants(a, b))
    res = evaluate_metrics(pred, target.Y, w, ks, target.filter_pairs)
    out = {f"{m}@{kk}": res[f"{m}@{kk}"] for m in ("P", "nDCG", "PSP", "PSnDCG", "R", "C") for kk in ks}
    if bins:
        contrib = bin_contributions(pred, target.Y, frequency_bins(ds.label_frequencies()), max(ks), target.filter_pairs)
        out.update({f"bin{i + 1}_P@{max(ks)}": float(c) for i, c in enumerate(contrib)})
    if as_json:
        print(json.dumps(out))
        return
    table = Table(title=f"{pred_file.name} on {ds.name}/{split} ({int(res['n_points']):,} points with labels)")
    table.add_column("metric")
    for kk in ks:
        table.add_column(f"@{kk}", justify="right")
    for m in ("P", "nDCG", "PSP", "PSnDCG", "R", "C"):
        table.add_row(m, *[f"{out[f'{m}@{kk}']:.2f}" for kk in ks])
    console.print(table)
    if bins:
        console.print("share of P@%d by label-frequency bin (1 = head ... 5 = tail): " % max(ks)
                      + ", ".join(f"{out[f'bin{i + 1}_P@{max(ks)}']:.2f}" for i in range(5)))


@app.command()
def train(model: str = typer.Option("linear", "--model", help="linear | astec | inceptionxml | dual-encoder."),
          data: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
          augment: str = typer.Option("none", help="none | gandalf | identity | labelmix | z-only | uniform | glas | "
                                                   "random-walk | synonym | mixup | label-mixup | auto (chosen on the "
                                                   "validation split)"),
          delta: float = DELTA_OPTION,
          top_k: Optional[int] = TOP_K_OPTION,
          shrinkage: float = SHRINKAGE_OPTION,
          point_weights: str = POINT_WEIGHTS_OPTION,
          co_label_scale: float = CO_LABEL_SCALE_OPTION,
          extra_weight: float = typer.Option(1.0, min=0.0, help="Loss weight of an extra (label) point; originals weigh 1."),
          extra_share: float = typer.Option(1.0, min=0.0, max=1.0,
                                            help="Share of the extra points drawn (afresh) into each epoch."),
          extra_negatives: bool = typer.Option(True, "--extra-negatives/--no-extra-negatives",
                                                help="Whether an extra point's shortlist labels outside its targets "
                                                     "count as negatives (neural models)."),
          auto_budget: float = typer.Option(60.0, min=0.0, help="Minutes --augment auto may spend on its trials."),
          out: Path = typer.Option(..., "--out", help="Model directory to write."),
          epochs: Optional[int] = typer.Option(None, min=1, help="Default: the model's (linear 8, astec 20, "
                                               "inceptionxml 20, dual-encoder 4)."),
          valid_fraction: float = typer.Option(0.05, min=0.0, max=0.5,
                                               help="Share of training points held out for model selection."),
          seed: int = typer.Option(0),
          resume: bool = typer.Option(False, help="Continue from OUT/checkpoints/last.pt."),
          encoder_precision: str = typer.Option("auto", help="dual-encoder's MiniLM: auto (bfloat16 where the CPU "
                                                "has it natively, else float32) | float32 | bfloat16 | int8 (fastest "
                                                "single queries, slightly lower scores).")) -> None:
    """Train a model (soft-target BCE over shortlists) and save a self-contained model directory."""
    from .augment import AugmentConfig
    from .data import load_dataset
    from .models.registry import MODEL_NAMES, model_config
    from .train.pipeline import train_model

    if model not in MODEL_NAMES:
        raise typer.BadParameter(f"unknown model {model!r}; choose one of {', '.join(MODEL_NAMES)}")
    ds = load_dataset(data, splits=("trn",))
    overrides = {"seed": seed, **({"epochs": epochs} if epochs else {})}
    config = model_config(model, **overrides)
    if encoder_precision != "auto":
        if model != "dual-encoder":
            raise typer.BadParameter("--encoder-precision applies to the dual-encoder only")
        from .models.sentence import resolve_precision

        try:
            config.encoder_precision = resolve_precision(encoder_precision)
        except ValueError as err:
            raise typer.BadParameter(str(err)) from None
    from .train.auto import AutoConfig

    graph = _graph_config("cooccurrence", delta, top_k, shrinkage, point_weights, co_label_scale)
    aug = AugmentConfig(augment, graph, extra_weight=extra_weight, extra_share=extra_share,
                        extra_negatives=extra_negatives, seed=seed)
    trained = train_model(ds, out, config, aug, valid_fraction, resume, auto_config=AutoConfig(budget_seconds=60 * auto_budget))
    res = trained.result
    if augment == "auto":
        chosen = json.loads((out / "auto.json").read_text())["chosen"]
        console.print(f"auto chose {chosen} (search recorded in {out / 'auto.json'})")
    console.print(f"trained {model} on {ds.name} ({augment}) in {res.seconds:.0f} s, {res.examples_per_second:,.0f} ex/s; "
                  f"best epoch {res.best_epoch + 1} (valid {config.train.select_metric} {res.best_score:.2f}) -> {out}",
                  soft_wrap=True)


@app.command()
def predict(model_dir: Path = typer.Argument(..., help="A directory written by 'gandalf train'."),
            text: Optional[str] = typer.Option(None, "--text", help="One query; prints its top labels."),
            data: Optional[Path] = typer.Option(None, "--data", help="Dataset directory whose split to predict."),
            split: str = typer.Option("tst"),
            out: Optional[Path] = typer.Option(None, "--out", help="Prediction file (sparse text) for --data."),
            k: Optional[int] = typer.Option(None, "-k", min=1,
                                            help="Labels per query (default 5 with --text, 100 with --out).")) -> None:
    """Predict the top-k labels of one query (--text) or of a dataset split (--data ... --out FILE)."""
    from .data.dataset import embedded_dataset_path, find_split_file
    from .data.formats import read_lf_json
    from .errors import DataFormatError
    from .train.pipeline import load_model, write_predictions

    model, label_uids, label_texts = load_model(model_dir)
    if text is not None:
        k = k or 5
        pred = model.predict([text], k=k)
        order = np.argsort(-pred.data, kind="stable")
        table = Table(title=f"top {k} labels for {text!r}")
        for col in ("rank", "label", "text", "score"):
            table.add_column(col, justify="right" if col in ("rank", "score") else "left")
        for rank, pos in enumerate(order, start=1):
            j = int(pred.indices[pos])
            table.add_row(str(rank), label_uids[j], label_texts[j], f"{pred.data[pos]:.3f}")
        console.print(table)
        return
    if out is None:
        raise typer.BadParameter("give --text QUERY, or --data DIR (optional) with --out FILE")
    directory = Path(data) if data is not None else embedded_dataset_path()
    split_path = find_split_file(directory, split)
    if split_path is None:
        raise DataFormatError(directory / f"{split}.json.gz", None, f"missing '{split}' split file")
    points = read_lf_json(split_path, len(label_texts), require_targets=None)
    k = k or 100
    write_predictions(model, points.texts, len(label_texts), out, k=k)
    console.print(f"wrote top-{k} predictions of {len(points.texts):,} points to {out}")


@app.command()
def analyze(data_dir: Optional[Path] = typer.Argument(None, help=DATA_HELP),
            delta: float = DELTA_OPTION,
            graph: str = GRAPH_KIND_OPTION,
            top_k: Optional[int] = TOP_K_OPTION,
            shrinkage: float = SHRINKAGE_OPTION,
            point_weights: str = POINT_WEIGHTS_OPTION,
            co_label_scale: float = CO_LABEL_SCALE_OPTION,
            baseline: Optional[Path] = typer.Option(None, "--baseline", help="Predictions of a model trained without "
                                                    "the augmentation (sparse text, as `gandalf predict --out`)."),
            augmented: Optional[Path] = typer.Option(None, "--augmented", help="Predictions of the same model trained "
                                                     "with it."),
            split: str = typer.Option("tst", help="Which split the predictions are for."),
            k: int = typer.Option(5, "-k", min=1),
            as_json: bool = typer.Option(False, "--json", help="Print one JSON object.")) -> None:
    """Per label-frequency bin: the extra points' soft targets (co-labels a point, share of 1.0
    targets) and, given two prediction files, what the augmentation did to P@k and PSP@k."""
    from .data import load_dataset, read_sparse_text
    from .experiments.analysis import augmentation_effect, soft_target_stats
    from .graph import label_graph
    from .metrics import inverse_propensity

    if (baseline is None) != (augmented is None):
        raise typer.BadParameter("give both --baseline and --augmented, or neither")
    config = _graph_config(graph, delta, top_k, shrinkage, point_weights, co_label_scale)
    ds = load_dataset(data_dir, splits=("trn", split) if baseline is not None else ("trn",))
    Y = ds.original_train_Y()
    freq = ds.label_frequencies()
    result: dict = {"dataset": ds.name, "graph": config.__dict__,
                    "soft_targets": soft_target_stats(label_graph(Y, config), freq)}
    if baseline is not None:
        truth = ds.split(split)
        preds = [read_sparse_text(p, expect_shape=(len(truth), ds.n_labels)) for p in (baseline, augmented)]
        inv = inverse_propensity(Y, *ds.propensity_constants())
        result["effect"] = augmentation_effect(*preds, truth.Y, freq, inv, truth.filter_pairs, k)
    if as_json:
        print(json.dumps(result))
        return
    table = Table(title=f"Extra points' soft targets by label-frequency bin ({graph}, delta {delta})")
    for col in ("bin", "labels", "mean freq", "seen once %", "co-labels a point", "co-labels = 1.0 %", "mean co-label"):
        table.add_column(col, justify="right")
    for r in result["soft_targets"]:
        table.add_row(str(r["bin"]), f"{r['labels']:,}", f"{r['mean_frequency']:.1f}", f"{r['seen_once_pct']:.1f}",
                      f"{r['co_labels_per_point']:.2f}", f"{r['co_label_ones_pct']:.1f}", f"{r['co_label_mean']:.3f}")
    console.print(table)
    console.print("bin 1 = head (most frequent labels) ... bin 5 = tail; each bin holds a fifth of all positives")
    if "effect" in result:
        eff = result["effect"]
        table = Table(title=f"Contribution of each bin to P@{k} and PSP@{k}: baseline -> augmented")
        for col in ("bin", f"P@{k}", f"delta P@{k}", f"PSP@{k}", f"delta PSP@{k}"):
            table.add_column(col, justify="right")
        for r in eff["per_bin"]:
            table.add_row(str(r["bin"]), f"{r[f'baseline_P@{k}']:.2f} -> {r[f'augmented_P@{k}']:.2f}",
                          f"{r[f'delta_P@{k}']:+.2f}", f"{r[f'baseline_PSP@{k}']:.2f} -> {r[f'augmented_PSP@{k}']:.2f}",
                          f"{r[f'delta_PSP@{k}']:+.2f}")
        console.print(table)
        o = eff["overall"]
        console.print(", ".join(f"{m} {o['baseline'][m]:.2f} -> {o['augmented'][m]:.2f}" for m in o["baseline"]))


@app.command()
def demo(data_dir: Optional[Path] = typer.Argument(None, help=DATA_HELP),
         out: Path = typer.Option(Path("gandalf-demo"), "--out", help="Where models, predictions and results.json go."),
         model: str = typer.Option("linear", "--model", help="linear (the best) | astec | inceptionxml | dual-encoder "
                                   "| knn (training-free, fastest)."),
         epochs: Optional[int] = typer.Option(None, min=1, help="Default: the model's."),
         delta: float = typer.Option(0.1, min=0.0, max=0.999999),
         seed: int = typer.Option(0)) -> None:
    """Run the pipeline on a dataset: stats, augment, train/predict without augmentation, with Gandalf
    (from the written files) and with identity label points, evaluate; print one comparison table."""
    from .experiments.demo import run_demo

    run_demo(data_dir, out, model=model, delta=delta, seed=seed, console=console, epochs=epochs)


@app.command()
def reproduce(data_dir: Optional[Path] = typer.Option(None, "--data", help=DATA_HELP),
              out: Path = typer.Option(..., "--out", help="REPORT_DIR: report.md, PNG figures, results.json, runs/."),
              models: str = typer.Option("linear", "--models",
                                         help="Table 3's models, comma-separated: linear, astec, inceptionxml, "
                                              "dual-encoder, knn."),
              ablation_model: str = typer.Option("linear", "--ablation-model",
                                                 help="The model of every other table (the paper's InceptionXML role)."),
              seeds: int = typer.Option(3, min=1, help="Seeds 0..N-1 for every run."),
              epochs: int = typer.Option(3, min=0, help="Epoch budget of every run (0: each model's own default "
                                                         "with early stopping; about 140 min instead of 60 for linear)."),
              parallel: int = typer.Option(2, min=1, help="Runs at a time, each in its own process."),
              quick: bool = typer.Option(False, "--quick", help="Everything on a small sample with 2 epochs, a smoke test "
                                                                "of every table and plot (minutes)."),
              ) -> None:
    """Run every experiment of the paper (Tables 1-7, Figures 2-3) and write REPORT_DIR/report.md.

    Finished runs are kept in REPORT_DIR/runs: run the same command again to continue after an
    interruption."""
    from .experiments.reproduce import ReproduceConfig
    from .experiments.reproduce import reproduce as run_reproduce

    names = tuple(m.strip() for m in models.split(",") if m.strip())
    config = ReproduceConfig(models=names, ablation_model=ablation_model, seeds=tuple(range(seeds)),
                             epochs=epochs or None, quick=quick, parallel=parallel)
    run_reproduce(data_dir, out, config, log=console.print)


def main() -> None:
    """Entry point: user errors become one line on stderr and exit status 2 (no traceback)."""
    try:
        app()
    except GandalfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)


if __name__ == "__main__":
    main()
