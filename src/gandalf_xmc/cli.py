"""The ``gandalf`` command line.

Heavy libraries are imported inside the commands that use them, so that ``gandalf predict MODEL
--text`` on a linear model starts in well under a second. Every text from data is printed as
plain text (never as markup), and user errors are one line on stderr with exit status 2.
"""

from __future__ import annotations

import gc
import json
import sys
import time
from enum import Enum
from pathlib import Path
from typing import Any, Optional

import typer

from .augment.catalog import AUGMENTATIONS
from .data.atomic import terminate_like_interrupt
from .errors import GandalfError
from .graph import GRAPH_KINDS
from .models.registry import MODELS
from .workflow.validation import PROTOCOLS, QUERY_KINDS

app = typer.Typer(
    add_completion=False,
    no_args_is_help=True,
    pretty_exceptions_enable=False,
    rich_markup_mode=None,
    help="Gandalf / LabelMix label-feature augmentation for extreme multi-label classification.",
)

# choices, from the tables that define them
ModelName = Enum("ModelName", {n: n for n in MODELS}, type=str)  # type: ignore[misc]  # members from a table
PredictionFormat = Enum("PredictionFormat", {n: n for n in ("jsonl", "txt", "npz")}, type=str)  # type: ignore[misc]  # members from a table
AugmentName = Enum("AugmentName", {n: n for n in AUGMENTATIONS}, type=str)  # type: ignore[misc]  # members from a table
WrittenAugmentName = Enum(  # type: ignore[misc]
    "WrittenAugmentName", {row.name: row.name for row in AUGMENTATIONS.values() if row.writes_files}, type=str
)
GraphKind = Enum("GraphKind", {n: n for n in GRAPH_KINDS}, type=str)  # type: ignore[misc]  # members from a table
PointWeights = Enum("PointWeights", {"none": "none", "inverse-size": "inverse-size"}, type=str)  # type: ignore[misc]  # members from a table
Sampling = Enum("Sampling", {"random": "random", "tail": "tail"}, type=str)  # type: ignore[misc]  # members from a table
Precision = Enum("Precision", {n: n for n in ("auto", "float32", "bfloat16", "int8")}, type=str)  # type: ignore[misc]  # members from a table
ExportFormat = Enum("ExportFormat", {n: n for n in ("lf", "text", "npz", "bow")}, type=str)  # type: ignore[misc]  # members from a table
ValidProtocol = Enum("ValidProtocol", {n: n for n in PROTOCOLS}, type=str)  # type: ignore[misc]  # members from a table
QueryKind = Enum("QueryKind", {n: n for n in QUERY_KINDS}, type=str)  # type: ignore[misc]  # members from a table

DATA_OPTION = typer.Option(
    None,
    "--data",
    help="A dataset directory (LF JSON or text layout) or a suite dataset's name (gandalf datasets); default debian-bookworm.",
)
DERIVE_OPTION = typer.Option(
    True,
    "--derive-filters/--no-derive-filters",
    help="When a split has no filter file, filter the pairs where a point is itself a label.",
)
PROGRESS_OPTION = typer.Option(
    None, "--progress/--no-progress", help="Progress bars and stage lines on stderr (default: when stderr is a terminal)."
)
FORCE_OPTION = typer.Option(False, "--force", help="Replace --out if it exists and is not empty.")
SEED_OPTION = typer.Option(0, min=0, help="Random seed.")
DEVICE_OPTION = typer.Option(
    "auto",
    "--device",
    metavar="auto|cpu|cuda",
    help="Where the neural models train: auto (a CUDA GPU when torch sees one, in bfloat16 mixed precision), cpu, "
    "cuda or cuda:N; the other models run on the CPU.",
)
# the label graph, shared by augment, train and analyze (see graph.GraphConfig); None: the training set's own
GRAPH_OPTION = typer.Option(None, "--graph", help="Label graph (default: cooccurrence, or the --augment preset's).")
DELTA_OPTION = typer.Option(None, min=0.0, max=0.999999, help="Keep soft targets strictly greater than this (0.1).")
TOP_K_OPTION = typer.Option(None, "--top-k", min=0, help="Cap of co-label targets a label point (largest first).")
SHRINKAGE_OPTION = typer.Option(None, min=0.0, help="alpha in G_ji / (G_jj + alpha): shrinks P[i | j] of rare labels j.")
POINT_WEIGHTS_OPTION = typer.Option(None, help="inverse-size: a point with n labels counts 1/n in co-occurrence.")
CO_LABEL_SCALE_OPTION = typer.Option(None, min=0.0, max=1.0, help="Factor on a label point's co-label targets.")
SELF_SCALE_OPTION = typer.Option(
    None, min=0.0, max=1.0, help="Factor on a label point's own label's target (0: it teaches only its co-labels)."
)


def _version(value: bool) -> None:
    if value:
        from . import __version__

        print(f"gandalf-xmc {__version__}")
        raise typer.Exit()


@app.callback()
def _main(
    version: bool = typer.Option(False, "--version", callback=_version, is_eager=True, help="Print the version and exit."),
    threads: Optional[int] = typer.Option(
        None, "--threads", min=1, help="Threads for numba kernels and torch (default: every core)."
    ),
) -> None:
    """Gandalf / LabelMix label-feature augmentation for extreme multi-label classification."""
    if threads:
        import os

        # set before numba or torch is imported: they read these once (the only process-wide setting)
        os.environ["NUMBA_NUM_THREADS"] = os.environ["OMP_NUM_THREADS"] = str(threads)


def _show_progress(progress: Optional[bool]) -> bool:
    return sys.stderr.isatty() if progress is None else progress


def _stage_logger(progress: Optional[bool]):
    """A function printing stage lines to stderr, or None when progress is off."""
    return (lambda line: print(line, file=sys.stderr, flush=True)) if _show_progress(progress) else None


def _console():
    from rich.console import Console

    return Console(highlight=False)


def _say(text: str) -> None:
    """One line of plain text to stdout (data never goes through markup; no rich import for a line)."""
    print(text, flush=True)


def _load(data, splits=("trn", "tst"), derive_filters: bool = True):
    from .data import load_dataset

    ds = load_dataset(data, splits=splits, derive_filters=derive_filters)
    for note in ds.notes:
        print(f"note: {note}", file=sys.stderr)
    return ds


def _graph_config(base, kind, delta, top_k, shrinkage, point_weights, co_label_scale, self_scale):
    """``base`` (a GraphConfig) with the options that were given, validated."""
    from dataclasses import replace

    given = {
        "kind": kind.value if kind else None,
        "delta": delta,
        "top_k": top_k,
        "shrinkage": shrinkage,
        "point_weights": point_weights.value if point_weights else None,
        "co_label_scale": co_label_scale,
        "self_scale": self_scale,
    }
    config = replace(base, **{k: v for k, v in given.items() if v is not None})
    config.validate()
    return config


def _listed(values: list[str], option: str) -> list[str]:
    """A list option's items: every option takes ``A,B,C`` and repeats alike (``-k 1,3 -k 5``)."""
    from .errors import ConfigError

    items = [item.strip() for value in values for item in value.split(",")]
    if not items or any(not item for item in items):
        raise ConfigError(f"{option}: an empty item in {','.join(values)!r} (give A,B,C or repeat the option)")
    return items


def _whole_numbers(items: list[str], option: str) -> list[int]:
    from .errors import ConfigError

    if not all(item.isdigit() and int(item) >= 1 for item in items):
        raise ConfigError(f"{option}: expected whole numbers of at least 1, got {','.join(items)!r}")
    return [int(item) for item in items]


def _table(title: str, columns: list[str], rows: list[list[str]], right: tuple[str, ...] = ()):
    """A table on a terminal; plain tab-separated lines, never cut to a width, when stdout is a
    pipe or a file (the title goes to stderr there, so the lines stay data)."""
    if not sys.stdout.isatty():
        print(f"# {title}", file=sys.stderr)
        for row in (columns, *rows):
            print("\t".join(" ".join(str(cell).split()) for cell in row))
        sys.stdout.flush()
        return
    from rich.table import Table
    from rich.text import Text

    table = Table(title=Text(title))
    for col in columns:
        table.add_column(Text(col), justify="right" if col in right else "left")
    for row in rows:
        table.add_row(*[Text(c) for c in row])
    _console().print(table)


# ---------------------------------------------------------------------------------------------
datasets_app = typer.Typer(help="The dev suite's datasets: list them (the default) or build one.", rich_markup_mode=None)
app.add_typer(datasets_app, name="datasets")
FIGURES = ("N", "L", "APpL", "ALpP", "AWpP", "labels_le5_pct", "labels_0_pct", "N_test", "N_valid")


@datasets_app.callback(invoke_without_command=True)
def datasets(
    ctx: typer.Context, as_json: bool = typer.Option(False, "--json", help="Print a JSON list (name, path, domain, figures).")
) -> None:
    """List the suite's datasets with their Table 1 figures; every command takes a name for --data."""
    if ctx.invoked_subcommand is not None:
        return
    from .data.suite import SUITE, is_available, suite_path

    rows = []
    for entry in SUITE:
        path = suite_path(entry.name)
        available = is_available(entry.name)
        figures = json.loads((path / "stats.json").read_text()) if available else {}
        rows.append(
            {
                "name": entry.name,
                "path": str(path),
                "domain": entry.domain,
                "test_split": entry.test_split,
                "available": available,
                "shipped": entry.shipped,
                **{k: figures[k] for k in FIGURES if k in figures},
            }
        )
    if as_json:
        print(json.dumps(rows))
        return
    cells = [
        [
            r["name"] + ("" if r["available"] else " (not built)"),
            r["domain"],
            r["test_split"],
            *[f"{r[k]:,}" if isinstance(r.get(k), int) else f"{r[k]:.2f}" if k in r else "-" for k in FIGURES],
            r["path"],
        ]
        for r in rows
    ]
    _table(
        "Datasets (gandalf datasets build NAME builds one not yet built)",
        ["name", "domain", "test split", *FIGURES, "where"],
        cells,
        right=FIGURES,
    )


@datasets_app.command("build")
def datasets_build(
    name: str = typer.Argument(..., help="A suite dataset with a builder."),
    out: Optional[Path] = typer.Option(None, "--out", help="Directory to write (default: the suite's place for it)."),
    mirror: Optional[str] = typer.Option(None, "--mirror", help="Debian mirror (default deb.debian.org)."),
    force: bool = FORCE_OPTION,
    progress: Optional[bool] = PROGRESS_OPTION,
) -> None:
    """Build a suite dataset from its pinned Debian package versions, byte for byte."""
    from .data.suite import build

    target = build(name, out, mirror, log=_stage_logger(progress), force=force)
    _say(f"built {name} -> {target}")


# ---------------------------------------------------------------------------------------------
@app.command()
def stats(
    data: Optional[str] = DATA_OPTION,
    derive_filters: bool = DERIVE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object instead of a table."),
) -> None:
    """Dataset statistics: the paper's Table 1 columns (N, L, APpL, ALpP, AWpP) and tail figures."""
    from .data import dataset_stats
    from .experiments.demo import STAT_NAMES

    ds = _load(data, derive_filters=derive_filters)
    st = dataset_stats(ds)
    if as_json:
        print(json.dumps({"dataset": ds.name, **st}))
        return
    _table(
        f"Dataset {ds.name}",
        ["statistic", "value"],
        [[STAT_NAMES.get(k, k), f"{v:,}" if isinstance(v, int) else f"{v:.2f}"] for k, v in st.items()],
        ("value",),
    )


@app.command()
def augment(
    data: Optional[str] = DATA_OPTION,
    out: Path = typer.Option(..., "--out", help="Output directory: a complete dataset directory."),
    training_set: WrittenAugmentName = typer.Option(
        "gandalf",
        "--augment",
        help=" | ".join(f"{row.name}: {row.description}" for row in AUGMENTATIONS.values() if row.writes_files),
    ),
    graph: Optional[GraphKind] = GRAPH_OPTION,
    delta: Optional[float] = DELTA_OPTION,
    top_k: Optional[int] = TOP_K_OPTION,
    shrinkage: Optional[float] = SHRINKAGE_OPTION,
    point_weights: Optional[PointWeights] = POINT_WEIGHTS_OPTION,
    co_label_scale: Optional[float] = CO_LABEL_SCALE_OPTION,
    self_scale: Optional[float] = SELF_SCALE_OPTION,
    labels_fraction: float = typer.Option(1.0, min=0.0, max=1.0, help="Share of labels that become points."),
    labels_sampling: Sampling = typer.Option("random", help="random | tail (five equi-voluminous bins, tail first)"),
    export: ExportFormat = typer.Option(
        "lf",
        "--format",
        help="lf: LF JSON + sparse text targets (default); "
        "text: the repository's text layout; npz: TF-IDF and targets as scipy "
        "matrices (PECOS); bow: XMLRepo bag of words (binary targets only).",
    ),
    seed: int = SEED_OPTION,
    dask: Optional[str] = typer.Option(
        None,
        "--dask",
        help="Build the label graph on Dask: 'local:N' (a local "
        "cluster of N worker processes) or a scheduler address tcp://HOST:PORT.",
    ),
    derive_filters: bool = DERIVE_OPTION,
    force: bool = FORCE_OPTION,
    progress: Optional[bool] = PROGRESS_OPTION,
) -> None:
    """Write the augmented training set as files other XMC tools read (label points, combined training set)."""
    from contextlib import nullcontext
    from dataclasses import replace

    from .augment import preset
    from .augment.export import write_augmented_dataset

    t0 = time.perf_counter()
    base = preset(training_set.value, seed)
    graph_config = _graph_config(base.graph, graph, delta, top_k, shrinkage, point_weights, co_label_scale, self_scale)
    config = replace(base, graph=graph_config, labels_fraction=labels_fraction, labels_sampling=labels_sampling.value)
    config.validate()
    log = _stage_logger(progress)
    if log:
        log(f"reading {data or 'debian-bookworm'} ...")
    ds = _load(data, splits=("trn", "tst") if _has_test(data) else ("trn",), derive_filters=derive_filters)
    if dask:
        from .graph.distributed import dask_client
    with dask_client(dask) if dask else nullcontext() as client:
        meta = write_augmented_dataset(ds, out, config, log=log, client=client, force=force, export=export.value)
    n = max(meta["n_extra"], 1)
    _say(
        f"{meta['n_extra']:,} label points ({meta['extra_targets_nnz'] / n:.2f} targets a point) "
        f"+ {meta['n_original_train']:,} original -> {out} in {time.perf_counter() - t0:.1f} s"
    )


def _has_test(data: Optional[str]) -> bool:
    from .data.dataset import find_split_file
    from .data.suite import resolve

    d = resolve(data)
    return find_split_file(d, "tst") is not None or (d / "tst_X.txt").exists()


@app.command()
def evaluate(
    pred_files: list[Path] = typer.Argument(
        ...,
        help="Prediction files: sparse matrix text (label:score a "
        "row) or a scipy .npz matrix (one row a point); several are "
        "scored side by side.",
    ),
    data: Optional[str] = DATA_OPTION,
    split: str = typer.Option("tst", help="Which split the predictions are for."),
    k: list[str] = typer.Option(["1,3,5"], "-k", help="Cut-offs: -k 1,3,5 or -k 1 -k 3 -k 5."),
    a: Optional[float] = typer.Option(None, "-A", help="Propensity A (default: the dataset's)."),
    b: Optional[float] = typer.Option(None, "-B", help="Propensity B (default: the dataset's)."),
    bins: bool = typer.Option(
        False, "--bins", help="Also report each of five label-frequency bins' contribution to P@k (the five add up to P@k)."
    ),
    bootstrap: int = typer.Option(
        0,
        min=0,
        help="Resamples of the test points for 90% intervals of P@k "
        "and PSP@k, shared by every file, so a second file's difference from the "
        "first gets its own interval (e.g. 1000; 0: none).",
    ),
    plot: Optional[Path] = typer.Option(
        None,
        "--plot",
        help="Also write a PNG: P@k and PSP@k of the files "
        "side by side, and each label-frequency bin's contribution to them "
        "(needs the plots extra).",
    ),
    force: bool = FORCE_OPTION,
    seed: int = SEED_OPTION,
    derive_filters: bool = DERIVE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object (metrics in percent)."),
) -> None:
    """Score prediction files: P@k, nDCG@k, PSP@k, PSnDCG@k, R@k, C@k (filter pairs removed)."""
    from .data.formats import read_predictions
    from .data.stats import frequency_bins
    from .metrics import bin_contributions, bootstrap_intervals, inverse_propensity
    from .metrics import evaluate as evaluate_metrics

    if plot is not None:
        from .data.atomic import check_output_file
        from .errors import ConfigError

        try:
            import matplotlib  # noqa: F401
        except ImportError:
            raise ConfigError("--plot needs matplotlib: pip install 'gandalf-xmc[plots]'") from None
        plot = check_output_file(plot, force, inputs=tuple(pred_files))
        if plot is None:
            raise ConfigError("--plot needs a file path (a PNG), not standard output or a device")
    ds = _load(data, splits=tuple(dict.fromkeys(("trn", split))), derive_filters=derive_filters)
    target = ds.split(split)
    ks = tuple(sorted(set(_whole_numbers(_listed(k, "-k"), "-k"))))
    pa, pb = ds.propensity_constants(a, b)  # checked there
    w = inverse_propensity(ds.original_train_Y(), pa, pb)
    preds = [read_predictions(f, expect_shape=(len(target), ds.n_labels)) for f in pred_files]
    names = [f.name if [g.name for g in pred_files].count(f.name) == 1 else str(f) for f in pred_files]
    label_bins = frequency_bins(ds.label_frequencies()) if bins or plot else None
    scores, figure_bins = [], []
    for pred in preds:
        res = evaluate_metrics(pred, target.Y, w, ks, target.filter_pairs)
        out = {f"{m}@{kk}": res[f"{m}@{kk}"] for m in ("P", "nDCG", "PSP", "PSnDCG", "R", "C") for kk in ks}
        if bins or plot:
            contrib = bin_contributions(pred, target.Y, label_bins, max(ks), target.filter_pairs)
            if bins:
                out.update({f"bin{i + 1}_P@{max(ks)}": float(c) for i, c in enumerate(contrib)})
            if plot:
                figure_bins.append(
                    {
                        "bins_P": contrib,
                        "bins_PSP": bin_contributions(pred, target.Y, label_bins, max(ks), target.filter_pairs, inv_propensity=w),
                    }
                )
        scores.append(out)
    n_points = int(res["n_points"])
    intervals = bootstrap_intervals(preds, target.Y, w, ks, target.filter_pairs, bootstrap, seed) if bootstrap else None
    if plot:
        import numpy as np

        from .experiments.report import comparison_figure

        comparison_figure(
            plot, names, [{**sc, **fb} for sc, fb in zip(scores, figure_bins)], ks, np.bincount(label_bins, minlength=5)
        )
        print(f"figure: {plot}", file=sys.stderr)
    if as_json:
        extra = {"propensity": {"A": pa, "B": pb}, "n_points": n_points}
        if len(preds) == 1:
            print(json.dumps({**scores[0], **extra, **({"intervals": intervals[0]} if intervals else {})}))
        else:
            print(
                json.dumps(
                    {
                        "files": {
                            name: {**sc, **({"intervals": iv} if intervals else {})}
                            for name, sc, iv in zip(names, scores, intervals or [None] * len(names))
                        },
                        **extra,
                    }
                )
            )
        return
    where = f"{ds.name}/{split} ({n_points:,} points with labels)"
    if len(preds) == 1:
        _table(
            f"{names[0]} on {where}",
            ["metric", *[f"@{kk}" for kk in ks]],
            [[m, *[f"{scores[0][f'{m}@{kk}']:.2f}" for kk in ks]] for m in ("P", "nDCG", "PSP", "PSnDCG", "R", "C")],
            right=tuple(f"@{kk}" for kk in ks),
        )
    else:
        _table(
            f"{len(preds)} prediction files on {where}",
            ["metric", *names],
            [
                [f"{m}@{kk}", *[f"{sc[f'{m}@{kk}']:.2f}" for sc in scores]]
                for m in ("P", "nDCG", "PSP", "PSnDCG", "R", "C")
                for kk in ks
            ],
            right=tuple(names),
        )
    _say(f"propensity A = {pa:g}, B = {pb:g} (PSP, PSnDCG)")
    if intervals:
        for name, iv in zip(names, intervals):
            _say(
                f"{name}: 90% intervals over {bootstrap:,} resamples of the points: "
                + ", ".join(f"{m} {lo:.2f} to {hi:.2f}" for m, (lo, hi) in iv.items())
            )
    if bins:
        for name, sc in zip(names, scores):
            _say(
                f"{name}: contribution to P@{max(ks)} by label-frequency bin (1 = head ... 5 = tail; they add up "
                f"to P@{max(ks)}): " + ", ".join(f"{sc[f'bin{i + 1}_P@{max(ks)}']:.2f}" for i in range(5))
            )


@app.command()
def train(
    model: ModelName = typer.Option("linear", "--model", help=" | ".join(f"{n}: {e.summary}" for n, e in MODELS.items())),
    data: Optional[str] = DATA_OPTION,
    training_set: AugmentName = typer.Option(
        "none", "--augment", help=" | ".join(f"{n}: {row.description}" for n, row in AUGMENTATIONS.items())
    ),
    graph: Optional[GraphKind] = GRAPH_OPTION,
    delta: Optional[float] = DELTA_OPTION,
    top_k: Optional[int] = TOP_K_OPTION,
    shrinkage: Optional[float] = SHRINKAGE_OPTION,
    point_weights: Optional[PointWeights] = POINT_WEIGHTS_OPTION,
    co_label_scale: Optional[float] = CO_LABEL_SCALE_OPTION,
    self_scale: Optional[float] = SELF_SCALE_OPTION,
    label_point_weight: Optional[float] = typer.Option(
        None,
        "--label-point-weight",
        "--extra-weight",
        min=0.0,
        help="Loss weight of a label point; originals weigh 1 (default 1, gandalf-tempered 0.5).",
    ),
    label_point_share: float = typer.Option(
        1.0,
        "--label-point-share",
        "--extra-share",
        min=0.0,
        max=1.0,
        help="Share of the label points drawn (afresh) into each epoch (models trained in epochs).",
    ),
    label_point_negatives: bool = typer.Option(
        True,
        "--label-point-negatives/--no-label-point-negatives",
        "--extra-negatives/--no-extra-negatives",
        help="Whether a label point's shortlist labels outside its targets count as negatives (models trained in epochs).",
    ),
    label_point_floors: bool = typer.Option(
        False,
        "--label-point-floors/--no-label-point-floors",
        help="A label point's soft target t is a floor: no cost once its probability reaches t (models trained in epochs).",
    ),
    label_point_positive_cost: Optional[float] = typer.Option(
        None,
        "--label-point-positive-cost",
        help="Factor on the cost of a label point's positive entries (every model but knn; default: the augmentation's).",
    ),
    auto_budget: float = typer.Option(60.0, min=0.0, help="Minutes --augment auto may spend on its trials."),
    out: Path = typer.Option(..., "--out", help="Model directory to write."),
    epochs: Optional[int] = typer.Option(None, min=1, help="Epochs (models trained in epochs; default: the model's)."),
    valid_fraction: float = typer.Option(
        0.05,
        min=0.0,
        max=0.5,
        help="Share of training points held out for model selection and the validation report (0: none; one run on every point).",
    ),
    valid_protocol: Optional[ValidProtocol] = typer.Option(
        None,
        help="Which points are held out: "
        + " | ".join(f"{name}: {what}" for name, what in PROTOCOLS.items())
        + " (default: random; group for new items where the dataset's groups are families).",
    ),
    valid_split: Optional[str] = typer.Option(
        None,
        "--valid-split",
        metavar="NAME",
        help="Validate on this split of the data directory (its NAME.json.gz or NAME_X.txt, e.g. val: items "
        "like the ones the model will meet, such as new items of a later release) instead of a share of the "
        "training points; every training point then trains, once (--valid-fraction and --valid-protocol unused).",
    ),
    queries: Optional[QueryKind] = typer.Option(
        None,
        "--queries",
        help="What the deployment's queries are (how validation chooses): "
        + " | ".join(f"{name}: {what}" for name, what in QUERY_KINDS.items())
        + ". With a named augmentation, new-items holds out points as if new for what the model chooses on "
        "validation (a neural model's epochs and mix, linear-knn's weights). Default: catalogue; for --augment auto, "
        "what the dataset's dataset.json says its test split holds.",
    ),
    query_sample: Optional[str] = typer.Option(
        None,
        "--query-sample",
        metavar="FILE",
        help="With --queries new-items: unlabelled queries the deployment meets, one a line (plain text, or JSON lines "
        "with a 'title' or 'text' and optionally the 'group' that the sample was drawn by); without it, the texts of "
        "the dataset's val split where it has one, else any share of namesakes is allowed for.",
    ),
    refit: bool = typer.Option(
        True,
        "--refit/--no-refit",
        help="After validation has chosen, train the final "
        "model again on every training point (--no-refit keeps the validated model, "
        "trained without the validation points: one run instead of two).",
    ),
    seed: int = SEED_OPTION,
    settings: Optional[list[str]] = typer.Option(
        None,
        "--set",
        metavar="NAME=VALUE",
        help="Change one of the model's settings by its (dotted) name, e.g. "
        "--set solver.max_iter=10 or --set beam=20 (repeatable; the names are the fields of the model's settings "
        "class, e.g. LinearConfig; values are JSON).",
    ),
    resume: bool = typer.Option(False, help="Continue from OUT/checkpoints."),
    keep_checkpoints: bool = typer.Option(
        False,
        "--keep-checkpoints",
        help="Keep OUT/checkpoints once the "
        "run has finished (to continue it for more epochs with --resume); by "
        "default they are removed.",
    ),
    encoder_precision: Precision = typer.Option(
        "auto",
        help="dual-encoder's MiniLM: auto (bfloat16 on a GPU or where the CPU has it natively, else float32) | float32 "
        "| bfloat16 | int8 (CPU only).",
    ),
    device: str = DEVICE_OPTION,
    derive_filters: bool = DERIVE_OPTION,
    force: bool = FORCE_OPTION,
    progress: Optional[bool] = PROGRESS_OPTION,
) -> None:
    """Train a model and save a self-contained model directory (gandalf predict / serve read it)."""
    from .errors import ConfigError
    from .models.registry import model_config
    from .settings import apply_settings, parse_settings
    from .workflow.auto import AutoConfig
    from .workflow.forecast import deployment_for
    from .workflow.pipeline import train_model

    if label_point_weight is not None and label_point_weight != label_point_weight or label_point_weight == float("inf"):
        raise ConfigError(f"--label-point-weight must be a finite number, got {label_point_weight}")
    if valid_split is not None and valid_split in ("trn", "train"):
        raise ConfigError("--valid-split names a split other than the training split (e.g. val)")
    if valid_split is not None and valid_protocol is not None and valid_protocol.value != "random":
        raise ConfigError("--valid-split and --valid-protocol exclude each other: the split given is the validation")
    if query_sample is not None and queries is not None and queries.value != "new-items":
        raise ConfigError("--query-sample is read with --queries new-items only")
    if training_set.value == "auto":  # each candidate is a whole recipe: an option given for it would be ignored
        given = {
            "--graph": graph is not None,
            "--delta": delta is not None,
            "--top-k": top_k is not None,
            "--shrinkage": shrinkage is not None,
            "--point-weights": point_weights is not None,
            "--co-label-scale": co_label_scale is not None,
            "--self-scale": self_scale is not None,
            "--label-point-weight": label_point_weight is not None,
            "--label-point-share": label_point_share != 1.0,
            "--no-label-point-negatives": not label_point_negatives,
            "--label-point-floors": label_point_floors,
            "--label-point-positive-cost": label_point_positive_cost is not None,
        }
        if named := [option for option, is_given in given.items() if is_given]:
            raise ConfigError(
                f"{', '.join(named)}: --augment auto trains its own candidates' recipes (workflow/auto.py); "
                "name an augmentation to set its options"
            )
    if MODELS[model.value].in_epochs:  # a neural model's steps reuse their temporaries (engine/allocator.py)
        from .engine.allocator import reuse_step_memory

        reuse_step_memory()
    ds = _load(data, splits=("trn",) if valid_split is None else ("trn", valid_split), derive_filters=derive_filters)
    # the dataset's word on its queries is for auto's choice, where a share of training points validates it
    declared_applies = training_set.value == "auto" and valid_split is None and refit and valid_fraction > 0
    read_sample = None if query_sample is None else (lambda: _query_sample(query_sample))
    deployment = deployment_for(ds, queries.value if queries is not None else None, read_sample, declared_applies)
    if deployment.note:
        _say(deployment.note)
    if query_sample is not None and deployment.new_items is None:
        raise ConfigError("--query-sample is read with --queries new-items only")
    new_items = deployment.new_items
    protocol = valid_protocol.value if valid_protocol is not None else deployment.valid_protocol
    config = model_config(model.value, seed=seed, epochs=epochs, device=device)
    config = _with_encoder_precision(apply_settings(config, parse_settings(settings or [])), encoder_precision.value)
    graph_config = (graph, delta, top_k, shrinkage, point_weights, co_label_scale, self_scale)
    aug = _augment_config(
        training_set.value,
        seed,
        graph_config,
        label_point_weight,
        label_point_share,
        label_point_negatives,
        label_point_positive_cost,
        label_point_floors,
    )
    started = time.perf_counter()
    trained = train_model(
        ds,
        out,
        config,
        aug,
        valid_fraction,
        resume,
        progress=_show_progress(progress),
        auto_config=AutoConfig(budget_seconds=60 * auto_budget),
        force=force,
        valid_protocol=protocol,
        refit=refit,
        keep_checkpoints=keep_checkpoints,
        valid_split=None if valid_split is None else (valid_split, ds.split(valid_split)),
        new_items=new_items,
    )
    if trained.search is not None:
        _say_auto_choice(trained.search, out)
    checked, res = trained.validated, trained.result
    best = checked.best_record()
    valid = f"valid P@1 {best['P@1']:.2f}, PSP@5 {best['PSP@5']:.2f}" if "P@1" in best else "no validation split"
    epochs_note = f"best epoch {checked.best_epoch + 1} of {len(checked.history)}, " if MODELS[model.value].in_epochs else ""
    final = (
        f"; then the final model on all {trained.info['n_train']:,} training points ({res.seconds:.1f} s)"
        if trained.info["refit"]
        else ""
    )
    _say(
        f"trained {model.value} on {ds.name} ({training_set.value}) in {time.perf_counter() - started:.1f} s "
        f"all told; {epochs_note}{valid}{final} -> {out}"
    )


def _query_sample(sample_file: str):
    """The texts (and groups) of ``--query-sample``: the queries of a new-items deployment."""
    from .errors import DataFormatError
    from .predictor import read_queries
    from .workflow.forecast import QuerySample

    texts, groups = [], []
    for text, _, fields in read_queries(sample_file):
        texts.append(text)
        group = fields.get("group")
        groups.append(None if group is None else str(group))
    if not texts:
        raise DataFormatError(sample_file, None, "the query sample holds no query")
    if any(g is None for g in groups) and any(g is not None for g in groups):
        raise DataFormatError(sample_file, None, "give a 'group' on every line of the query sample or on none")
    return QuerySample(texts, groups if groups[0] is not None else None)


def _with_encoder_precision(config, precision: str):
    """``config`` with ``--encoder-precision`` applied (the settings check where it applies)."""
    if precision == "auto":
        return config
    from dataclasses import replace

    from .errors import ConfigError

    if not hasattr(config, "encoder_precision"):
        raise ConfigError("--encoder-precision applies to a model with a sentence encoder (dual-encoder, ngame) only")
    return replace(config, encoder_precision=precision)


def _augment_config(
    name: str,
    seed: int,
    graph_options: tuple,
    weight: float | None,
    share: float,
    negatives: bool,
    positive_cost: float | None = None,
    floors: bool = False,
):
    """The augmentation ``--augment`` names, with the graph's and the label points' options applied."""
    from dataclasses import replace

    from .augment import preset

    base = preset(name, seed)
    changes = {
        "graph": _graph_config(base.graph, *graph_options),
        "label_point_share": share,
        "label_point_negatives": negatives,
        "label_point_floors": floors,
    }
    if weight is not None:
        changes["label_point_weight"] = weight
    if positive_cost is not None:
        changes["label_point_positive_cost"] = positive_cost
    return replace(base, **changes)


def _say_auto_choice(search: dict, out: Path) -> None:
    from .workflow.auto import skipped_note

    chosen = search["chosen"]
    gain = search.get("p1_gain_over_none", {}).get(chosen)
    shares = f" on {search['folds']} validation shares" if search.get("folds", 1) > 1 else ""
    sure = (
        f"; valid P@1 {gain['gain']:+.2f} over none{shares}, {100 * gain['level']:.0f}% interval "
        f"{gain['interval'][0]:+.2f} to {gain['interval'][1]:+.2f}"
        if gain
        else ""
    )
    new_items = search.get("new_items")
    if new_items is not None:  # the forecast chose, not the validation P@1
        low, high = new_items["share_interval"]
        ends = new_items["forecast"].get(chosen, {}).get("at_share_ends")
        sure = (
            f"; forecast P@1 gain on new items {ends[0]:+.2f} to {ends[1]:+.2f} (namesakes {low:.3f} to {high:.3f} of queries)"
            if ends
            else f" for new items (namesakes {low:.3f} to {high:.3f} of queries)"
        )
    _say(f"auto chose {chosen}{sure} (search recorded in {out / 'auto.json'})")
    why = search["decided"]["why"] if not search.get("decided", {"sure": True})["sure"] else ""
    if why:
        _say(f"note: {why}")
    untried = skipped_note(search["skipped"], search["budget_seconds"]) if search.get("skipped") else ""
    if untried and untried not in why:  # an undecided note may already name the untried candidates
        _say(f"note: {untried}")


@app.command()
def predict(
    model_dir: Path = typer.Argument(..., help="A directory written by 'gandalf train'."),
    text: Optional[str] = typer.Option(None, "--text", help="One query; prints its top labels."),
    uid: Optional[str] = typer.Option(
        None,
        "--uid",
        help="With --text: the query's own id when it is an item of the catalogue; the label with that id (itself) is left out.",
    ),
    input_file: Optional[str] = typer.Option(
        None,
        "--input",
        help="A file of queries, one a line (plain text, or "
        "JSON lines with a 'title' and optionally the query's own 'uid', "
        "whose label is then left out); '-' reads stdin. Writes ranked JSON "
        "lines.",
    ),
    data: Optional[str] = typer.Option(
        None, "--data", help="A dataset (directory or suite name) whose split to predict (with --out)."
    ),
    split: str = typer.Option("tst"),
    out: Optional[Path] = typer.Option(
        None, "--out", help="Output file: sparse text predictions for --data, JSON lines for --input (default stdout)."
    ),
    k: Optional[int] = typer.Option(None, "-k", min=1, help="Labels per query (default 5; 100 with --data)."),
    fmt: Optional[PredictionFormat] = typer.Option(
        None,
        "--format",
        help="jsonl: ranked labels a line, each "
        "with the query's fields (--input's default) | txt: a "
        "sparse text matrix (--data's default) | npz: a scipy "
        "matrix, one row a query.",
    ),
    as_json: bool = typer.Option(False, "--json", help="With --text: print one JSON object."),
    drop_namesakes: bool = typer.Option(
        False,
        "--drop-namesakes",
        help="The queries are new items, outside the "
        "catalogue: leave out labels of exactly the query's text (an older "
        "version, another build), as a filter file leaves out the item itself.",
    ),
    force: bool = typer.Option(
        False, "--force", help="Replace --out if it is an existing file (never one of this command's inputs)."
    ),
    progress: Optional[bool] = PROGRESS_OPTION,
) -> None:
    """Top labels of one query (--text), of a file of raw queries (--input), or of a dataset split (--data --out).

    --out is a new file, or an existing one with --force; '-' is standard output, and a device or
    pipe is written to, not replaced."""
    from .errors import ConfigError
    from .predictor import load_predictor

    modes = [text is not None, input_file is not None, data is not None]
    if sum(modes) != 1:
        raise ConfigError("give one of --text QUERY, --input FILE (or -), or --data DATASET with --out FILE")
    if uid is not None and text is None:
        raise ConfigError("--uid goes with --text (in an --input file, give each JSON line a 'uid')")
    fmt_name = None if fmt is None else fmt.value
    if fmt_name is not None and text is not None:
        raise ConfigError("--format goes with --input or --data (--text prints a table, or JSON with --json)")
    if fmt_name == "npz" and (out is None or str(out) == "-"):
        raise ConfigError("--format npz writes a binary file: give --out FILE")
    # numpy-only for ranked queries: a fast start; a matrix of scores needs the full model
    predictor = load_predictor(model_dir, light=data is None and fmt_name in (None, "jsonl"))
    if text is not None:
        answers, knows = predictor.rank_labels([text], k or 5, None if uid is None else [uid], drop_namesakes)
        ranked, known = answers[0], knows[0]
        if as_json:
            print(
                json.dumps({"text": text, "labels": ranked, **({} if known else {"out_of_vocabulary": True})}, ensure_ascii=False)
            )
        else:
            shown = text if len(text) <= 80 else text[:77] + "..."
            _table(
                f"top {k or 5} labels for {shown!r}",
                ["rank", "label", "text", "score"],
                [[str(i + 1), r["id"], r["text"], f"{r['score']:.3f}"] for i, r in enumerate(ranked)],
                ("rank", "score"),
            )
        if not known:
            print(
                "warning: none of the query's words is in the model's vocabulary: no labels (out_of_vocabulary)", file=sys.stderr
            )
        return
    if input_file is not None and fmt_name in (None, "jsonl"):
        from .predictor import predict_lines

        n = predict_lines(predictor, input_file, out, k or 5, force=force, drop_namesakes=drop_namesakes)
        if out is not None and str(out) != "-":
            _say(f"wrote the top-{k or 5} labels of {n:,} queries to {out}")
        return
    from .workflow.pipeline import write_predictions

    if input_file is not None:  # a matrix of the queries' scores, one row a line of the file
        from .predictor import read_queries

        texts = [query[0] for query in read_queries(input_file)]
        write_predictions(
            predictor.model,
            texts,
            predictor.n_labels,
            "-" if out is None else out,
            k=k or 5,
            progress=_show_progress(progress),
            force=force,
            inputs=() if input_file == "-" else (input_file,),
            closed=(model_dir,),
            drop_namesakes=drop_namesakes,
            fmt=fmt_name,
        )
        return
    if out is None:
        raise ConfigError("--data needs --out FILE (the prediction file)")
    from .predictor import split_queries

    texts, uids, directory, notes = split_queries(predictor, data, split)
    for note in notes:
        print(f"note: {note}", file=sys.stderr)
    kk = k or 100
    if fmt_name == "jsonl":  # ranked labels with each point's uid (its own label left out, as filter files do)
        from .predictor import predict_lines

        predict_lines(
            predictor,
            None,
            out,
            kk,
            force=force,
            drop_namesakes=drop_namesakes,
            queries=((t, u, {}) for t, u in zip(texts, uids)),
            inputs=(directory,),
        )
    else:
        write_predictions(
            predictor.model,
            texts,
            predictor.n_labels,
            out,
            k=kk,
            progress=_show_progress(progress),
            force=force,
            inputs=(directory,),
            closed=(model_dir,),
            drop_namesakes=drop_namesakes,
            fmt=fmt_name or "txt",
        )
    if str(out) != "-":
        _say(f"wrote top-{kk} predictions of {len(texts):,} points to {out}")


@app.command()
def serve(
    model_dir: Path = typer.Argument(..., help="A directory written by 'gandalf train'."),
    host: str = typer.Option("127.0.0.1", help="Address to listen on."),
    port: int = typer.Option(8000, min=0, max=65535, help="Port (0: any free port, printed)."),
    max_batch: int = typer.Option(1024, min=1, help="Most texts one request may hold (more: 413)."),
    max_k: int = typer.Option(100, min=1, help="Largest k a request may ask for (more: 422)."),
    max_body_bytes: int = typer.Option(1 << 20, min=1, help="Largest request body in bytes (more: 413)."),
    read_timeout: float = typer.Option(
        10.0,
        min=0.1,
        help="Seconds a connection has to deliver a whole request after it opens or after its last answer; then it is closed.",
    ),
    max_connections: int = typer.Option(256, min=1, help="Open connections at most; past it requests get 503."),
    access_log: bool = typer.Option(
        True, "--access-log/--no-access-log", help="A line on stderr for every request (client, method, path, status)."
    ),
    weights: str = typer.Option(
        "auto",
        help="memory: copy the weights into the server's memory (changes to the "
        "model directory cannot reach it); mapped: read them through file mappings "
        "(for models larger than memory); auto: memory when they fit in half of it.",
    ),
) -> None:
    """Answer POST /predict (JSON: {"text": ...} or {"texts": [...]}, "k") and GET /health over HTTP.

    To replace a served model, write the new one elsewhere and rename it into place (gandalf train
    --force does); never copy files over a served model directory."""
    from .serve import ServeLimits, run_server

    limits = ServeLimits(
        max_batch=max_batch,
        max_k=max_k,
        max_body_bytes=max_body_bytes,
        read_timeout=read_timeout,
        max_connections=max_connections,
    )
    run_server(model_dir, host, port, limits=limits, weights=weights, access_log=access_log)


@app.command()
def info(
    model_dir: Path = typer.Argument(..., help="A directory written by 'gandalf train'."),
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """What a model directory holds: kind, settings, labels, training data, validation metrics, size."""
    from .predictor import model_info

    described = model_info(model_dir)
    if as_json:
        print(json.dumps(described))
        return
    t = described["training"]
    rows = [
        ["kind", str(described["kind"])],
        ["labels", f"{described['labels']:,}" if described["labels"] else "-"],
        [
            "trained on",
            f"{t['dataset']} ({t['points']:,} points, augmentation {t['augment']})" if t["points"] is not None else "-",
        ],
        [
            "validation",
            (
                ", ".join(f"{k} {v:.2f}" for k, v in described["validation"].items())
                or (f"none ({t['validation_points']} points held out)" if t["validation_points"] is not None else "-")
            )
            + (f" ({t['validation_points']:,} points held out; then trained again on every point)" if t["refit"] else "")
            + (
                f" ({t['validation_points']:,} points of its {t['valid_source']})"
                if str(t.get("valid_source")).startswith("split")
                else ""
            ),
        ],
        [
            "training time",
            (f"{t['seconds']:.1f} s" if isinstance(t["seconds"], (int, float)) else "-")
            + (f" on {t['device']}" if isinstance(t.get("device"), str) else ""),
        ],
        [
            "on disk",
            f"{described['bytes'] / 2**20:,.1f} MiB in {described['files']} files"
            + (" (and checkpoints)" if described["has_checkpoints"] else ""),
        ],
        ["written by", f"gandalf-xmc {described['version']}" if described["version"] else "an earlier version"],
        ["settings", json.dumps(described["settings"])],
    ]
    _table(f"Model {model_dir}", ["", "value"], rows)


@app.command()
def analyze(
    data: Optional[str] = DATA_OPTION,
    recipe: Optional[Path] = typer.Option(
        None,
        "--recipe",
        help="A model directory or a `gandalf augment` "
        "directory: describe the label points it was trained with or holds "
        "(and its data, unless --data).",
    ),
    training_set: Optional[AugmentName] = typer.Option(
        None,
        "--augment",
        help="gandalf | gandalf-tempered | ...: which label graph's soft targets to describe (default gandalf).",
    ),
    graph: Optional[GraphKind] = GRAPH_OPTION,
    delta: Optional[float] = DELTA_OPTION,
    top_k: Optional[int] = TOP_K_OPTION,
    shrinkage: Optional[float] = SHRINKAGE_OPTION,
    point_weights: Optional[PointWeights] = POINT_WEIGHTS_OPTION,
    co_label_scale: Optional[float] = CO_LABEL_SCALE_OPTION,
    self_scale: Optional[float] = SELF_SCALE_OPTION,
    baseline: Optional[Path] = typer.Option(
        None, "--baseline", help="Predictions of a model trained without the augmentation (as `gandalf predict --out`)."
    ),
    augmented: Optional[Path] = typer.Option(None, "--augmented", help="Predictions of the same model trained with it."),
    split: str = typer.Option("tst", help="Which split the predictions are for."),
    k: int = typer.Option(5, "-k", min=1),
    seed: int = SEED_OPTION,
    derive_filters: bool = DERIVE_OPTION,
    as_json: bool = typer.Option(False, "--json", help="Print one JSON object."),
) -> None:
    """Per label-frequency bin: the label points' soft targets and, given two prediction files, what
    the augmentation did to P@k and PSP@k."""
    from dataclasses import asdict

    from .augment import graph_for, preset
    from .data.formats import read_predictions
    from .errors import ConfigError
    from .experiments.analysis import augmentation_effect, soft_target_stats
    from .graph import label_graph
    from .metrics import inverse_propensity

    if (baseline is None) != (augmented is None):
        raise ConfigError("give both --baseline and --augmented, or neither")
    if recipe is not None and training_set is not None:
        raise ConfigError("give --recipe (a model or augment directory) or --augment, not both")
    if recipe is not None:
        from .workflow.recipe import read_recipe

        found = read_recipe(recipe)
        base = found.augment
        if not AUGMENTATIONS[base.augmentation].has_label_points:
            raise ConfigError(
                f"{found.origin}: trained with --augment {base.augmentation}, which has no label points to describe"
            )
        data = data if data is not None else found.data
    else:
        base = preset(training_set.value if training_set else "gandalf", seed)
    config = _graph_config(graph_for(base), graph, delta, top_k, shrinkage, point_weights, co_label_scale, self_scale)
    ds = _load(data, splits=("trn", split) if baseline is not None else ("trn",), derive_filters=derive_filters)
    Y = ds.original_train_Y()
    freq = ds.label_frequencies()
    result: dict = {"dataset": ds.name, "graph": asdict(config), "soft_targets": soft_target_stats(label_graph(Y, config), freq)}
    if baseline is not None:
        truth = ds.split(split)
        preds = [read_predictions(p, expect_shape=(len(truth), ds.n_labels)) for p in (baseline, augmented)]
        inv = inverse_propensity(Y, *ds.propensity_constants())
        baseline_pred, augmented_pred = preds
        result["effect"] = augmentation_effect(baseline_pred, augmented_pred, truth.Y, freq, inv, truth.filter_pairs, k)
    if as_json:
        print(json.dumps(result))
        return
    _table(
        f"Extra points' soft targets by label-frequency bin ({config.kind}, delta {config.delta})",
        ["bin", "labels", "mean freq", "seen once %", "co-labels a point", "co-labels = 1.0 %", "mean co-label"],
        [
            [
                str(r["bin"]),
                f"{r['labels']:,}",
                f"{r['mean_frequency']:.1f}",
                f"{r['seen_once_pct']:.1f}",
                f"{r['co_labels_per_point']:.2f}",
                f"{r['co_label_ones_pct']:.1f}",
                f"{r['co_label_mean']:.3f}",
            ]
            for r in result["soft_targets"]
        ],
        right=("labels", "mean freq", "seen once %", "co-labels a point", "co-labels = 1.0 %", "mean co-label"),
    )
    _say("bin 1 = head (most frequent labels) ... bin 5 = tail; each bin holds a fifth of all positives")
    if "effect" in result:
        eff = result["effect"]
        _table(
            f"Contribution of each bin to P@{k} and PSP@{k}: baseline -> augmented",
            ["bin", f"P@{k}", f"delta P@{k}", f"PSP@{k}", f"delta PSP@{k}"],
            [
                [
                    str(r["bin"]),
                    f"{r[f'baseline_P@{k}']:.2f} -> {r[f'augmented_P@{k}']:.2f}",
                    f"{r[f'delta_P@{k}']:+.2f}",
                    f"{r[f'baseline_PSP@{k}']:.2f} -> {r[f'augmented_PSP@{k}']:.2f}",
                    f"{r[f'delta_PSP@{k}']:+.2f}",
                ]
                for r in eff["per_bin"]
            ],
        )
        o = eff["overall"]
        _say(", ".join(f"{m} {o['baseline'][m]:.2f} -> {o['augmented'][m]:.2f}" for m in o["baseline"]))


@app.command()
def demo(
    data: Optional[str] = DATA_OPTION,
    out: Optional[Path] = typer.Option(
        None,
        "--out",
        help="Where models, predictions and results.json go "
        "(default: gandalf-demo/DATASET-MODEL, one directory a dataset and model).",
    ),
    model: ModelName = typer.Option("linear", "--model", help=" | ".join(MODELS)),
    epochs: Optional[int] = typer.Option(None, min=1, help="Epochs (models trained in epochs)."),
    device: str = DEVICE_OPTION,
    seed: int = SEED_OPTION,
    force: bool = FORCE_OPTION,
    progress: Optional[bool] = PROGRESS_OPTION,
) -> None:
    """Run the pipeline on a dataset: stats, augment, train and predict without augmentation and with
    label points (the paper's Gandalf, identity, tempered), evaluate; print one comparison table."""
    from .data.suite import resolve
    from .errors import ConfigError
    from .experiments.demo import run_demo

    if out is None:
        out = Path("gandalf-demo") / f"{resolve(data).name}-{model.value}"
        if out.is_dir() and any(out.iterdir()) and not force:
            raise ConfigError(
                f"{out} holds an earlier demo of this dataset and model: add --force to run it again there, or give another --out"
            )
    run_demo(
        data,
        out,
        model=model.value,
        seed=seed,
        epochs=epochs,
        device=device,
        force=force,
        progress=_show_progress(progress),
        say=_say,
        table=_table,
    )


@app.command()
def reproduce(
    data: Optional[str] = DATA_OPTION,
    out: Path = typer.Option(..., "--out", help="REPORT_DIR: report.md, PNG figures, results.json, runs/."),
    models: list[str] = typer.Option(
        ["linear"],
        "--models",
        help="Table 3's models: --models linear,astec or --models linear --models astec (" + " | ".join(MODELS) + ").",
    ),
    ablation_model: ModelName = typer.Option(
        "linear", "--ablation-model", help="The model of every other table (the paper's InceptionXML role)."
    ),
    seeds: int = typer.Option(3, min=1, help="Seeds 0..N-1 for every run."),
    epochs: int = typer.Option(3, min=0, help="Epoch budget of the models trained in epochs (0: each model's own default)."),
    parallel: int = typer.Option(2, min=1, help="Runs at a time, each in its own process."),
    device: str = DEVICE_OPTION,
    quick: bool = typer.Option(
        False, "--quick", help="Everything on a small sample: a smoke test of every table and plot (minutes)."
    ),
    force: bool = typer.Option(
        False,
        "--force",
        help="Write the report into --out even if it holds other files (an earlier report is continued without it).",
    ),
) -> None:
    """Run every experiment of the paper (Tables 1-7, Figures 2-3) and write REPORT_DIR/report.md.

    Finished runs are kept in REPORT_DIR/runs: the same command again continues after an interruption."""
    from .experiments.reproduce import ReproduceConfig
    from .experiments.reproduce import reproduce as run_reproduce

    chosen = _listed(models, "--models")
    unknown = [m for m in chosen if m not in MODELS]
    if unknown:
        from .errors import ConfigError

        raise ConfigError(f"--models: unknown model {unknown[0]!r}; choose from {', '.join(MODELS)}")
    config = ReproduceConfig(
        models=tuple(dict.fromkeys(chosen)),
        ablation_model=ablation_model.value,
        seeds=tuple(range(seeds)),
        epochs=epochs or None,
        quick=quick,
        parallel=parallel,
        device=device,
    )
    run_reproduce(data, out, config, log=_say, force=force)


def _click_exceptions(name: str) -> tuple[type[BaseException], ...]:
    """``name`` from click and from the copy of click that newer typer releases carry
    (``typer._click``), whichever are present."""
    import importlib

    found = []
    for module in ("click.exceptions", "typer._click.exceptions"):
        try:
            found.append(getattr(importlib.import_module(module), name))
        except (ImportError, AttributeError):
            pass
    return tuple(found)


_USAGE_ERRORS = _click_exceptions("UsageError")
_ABORTS = _click_exceptions("Abort")


def main() -> None:
    """Entry point: user errors become one line on stderr and exit status 2 (no traceback)."""
    terminate_like_interrupt()
    try:
        code = app(standalone_mode=False)  # usage errors come back here, to be told on one line
    except _USAGE_ERRORS as caught:
        exc: Any = caught  # click's UsageError, from either copy of click
        if type(exc).__name__ == "NoArgsIsHelpError":  # a bare group: its help, as older click gave it
            print(exc.format_message())
            sys.exit(0)
        command = exc.ctx.command_path if exc.ctx is not None else "gandalf"
        print(f"error: {command}: {exc.format_message()} (see '{command} --help')", file=sys.stderr)
        sys.exit(2)
    except _ABORTS:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except GandalfError as exc:
        print(f"error: {exc}", file=sys.stderr)
        sys.exit(2)
    except KeyboardInterrupt:
        print("interrupted", file=sys.stderr)
        sys.exit(130)
    except MemoryError:
        print("error: out of memory", file=sys.stderr)
        sys.exit(2)
    sys.exit(code if isinstance(code, int) else 0)


def run() -> None:
    """The console script: :func:`main` with rarer full garbage collections and, after a command
    that succeeded, no last collection at exit (both sweep numba's objects, docs/decisions.md, "The linear model (XR-Linear)"); a
    failed or interrupted command exits as usual, its last collection still closing what it left."""
    young, middle, _ = gc.get_threshold()
    gc.set_threshold(young, middle, 100)
    try:
        main()
    except SystemExit as exc:
        if exc.code not in (0, None):
            raise
    gc.freeze()


if __name__ == "__main__":
    run()
