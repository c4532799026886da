"""Any model and augmentation over the dev suite: one table per dataset, scored on validation
splits carved from the training points (``--split valid``, what defaults are chosen on) or on the
test split (``--split test``, for reporting only).

    python benchmarks/suite.py --models linear --augments none gandalf auto --seeds 0 1 2
    python benchmarks/suite.py --models linear --set beam=20 --set solver.C=2 --datasets gene-ontology jargon
    python benchmarks/suite.py --augments none --hold-out 0.05   # what a model without its refit loses

The validation share is 5% of the training points, raised to reach 1,000 points where the data
allows, at most 20% (small datasets would otherwise be judged on a few dozen points). Seed s
carves split s and trains with seed s. ``--set`` changes a setting of the model (dotted names
reach nested settings), or of the augmentation where its name starts with ``augment.``
(``--set augment.label_point_floors=true``: every augmentation named, ``auto`` refused).
``auto`` and models that choose on validation (``linear-knn``) run ``gandalf train``'s pipeline
(``train_model``: its own validation split carved from the training part, then the final model
trained again on all of it with what was chosen); with ``--valid-split NAME`` they validate on that
split of each dataset that has one instead (the new-items sets' ``val``: new items of the later
release, whole families apart from the test's) and train once on every training point; with
``--queries new-items`` ``auto`` chooses for new items by its forecast (``gandalf train --queries
new-items``) and a model that chooses on validation chooses on points held out as if new; the
query sample is the texts of each dataset's ``val`` split where it has one (their families where
the dataset's group key names families; no label is read), else none.
``--split new-items`` scores the new-items sets' labelled new items (their ``val``), trained on
every training point. ``--hold-out F`` trains on the training part less a random share F, as a
final model that is not trained again after its validation run. ``--device`` says where the
neural models train (each row records the device, the CPU's name, its GPU's peak memory and the
median epoch time); they train once, for their configured epochs, without validation (the
dual-encoder's and ngame's neighbour mix then its unvalidated default), unless ``--validate-neural``
runs them through ``train_model`` as ``gandalf train`` does (validation chooses their epoch and mix,
ngame its encoder, then the final model on every training point). A row validated keeps its
validation run's figures (``validation_run``). Writes ``benchmarks/results/suite-<split>.json``
(or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import platform
import time
from dataclasses import replace
from pathlib import Path

import numpy as np

from gandalf_xmc.augment import AugmentConfig, training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.data.atomic import terminate_like_interrupt
from gandalf_xmc.data.dataset import find_split_file
from gandalf_xmc.data.suite import NEW_ITEMS_SPLIT, SUITE, build, is_available, suite_path
from gandalf_xmc.engine.allocator import reuse_step_memory
from gandalf_xmc.engine.threads import limit_threads
from gandalf_xmc.metrics import evaluate, inverse_propensity
from gandalf_xmc.models.registry import build_model, chooses_on_validation, entry, model_config
from gandalf_xmc.settings import apply_settings, parse_settings
from gandalf_xmc.workflow.auto import AUTO_CANDIDATES
from gandalf_xmc.workflow.fitting import fit_model
from gandalf_xmc.workflow.forecast import QuerySample, deployment_for, split_sample
from gandalf_xmc.workflow.validation import BENCHMARK_PROTOCOLS, PROTOCOLS, carve_validation

HERE = Path(__file__).resolve().parent
AUGMENT = "augment."  # --set names with this prefix are the augmentation's
METRICS = ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")


def cpu_model(cpuinfo: Path = Path("/proc/cpuinfo")) -> str:
    """The processor's name, as Linux gives it ("model name"), else what ``platform`` knows: the
    neural models' float32 sums round by the kernels torch picks for the instruction set, so a row's
    figures and seconds belong to its CPU."""
    try:
        for line in cpuinfo.read_text().splitlines():
            key, _, value = line.partition(":")
            if key.strip() == "model name" and value.strip():
                return value.strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def valid_fraction(n: int) -> float:
    return float(np.clip(1000 / max(n, 1), 0.05, 0.2))


def augment_config(name: str, seed: int) -> AugmentConfig:
    base = AUTO_CANDIDATES[name] if name in AUTO_CANDIDATES else AugmentConfig(name)
    return replace(base, seed=seed)


def recipe_for(augment: str, seed: int, recipe: AugmentConfig | None) -> AugmentConfig:
    return augment_config(augment, seed) if recipe is None else replace(recipe, seed=seed)


def scored_split(dataset: str, seed: int, split: str, protocol: str = "random", splits: tuple[str, ...] | None = None):
    """``(dataset, training part, scored split, inverse propensities)``: the suite's validation
    split of ``seed`` (``split="valid"``) carved from the training points, a new-items set's
    labelled new items (``split="new-items"``: its ``val``, every training point kept), or the test
    split."""
    if split == "new-items":
        ds = load_dataset(dataset, splits=tuple(dict.fromkeys(("trn", NEW_ITEMS_SPLIT, *(splits or ())))))
        return ds, ds, ds.split(NEW_ITEMS_SPLIT), inverse_propensity(ds.original_train_Y(), *ds.propensity_constants())
    ds = load_dataset(dataset, splits=splits or (("trn", "tst") if split == "test" else ("trn",)))
    if split == "valid":
        rest, target = carve_validation(ds, valid_fraction(ds.n_original_train or len(ds.train)), seed, protocol)
    else:
        rest, target = ds, ds.test
    return ds, rest, target, inverse_propensity(rest.original_train_Y(), *ds.propensity_constants())


def minilm_part(fitted):
    """The model, or linear-ngame's ngame part (None where its mix is 0), where it has a sentence encoder."""
    neural = getattr(fitted, "ngame", fitted)
    return neural if getattr(getattr(neural, "family", None), "inputs", None) == "minilm" else None


def validation_chose(trained) -> str | None:
    """What validation chose for a model ``train_model`` trained, each part where the model has it:
    auto's augmentation, the blend's weights, linear-ngame's mix, a neural model's neighbour mix and
    ngame's encoder."""
    fitted = trained.model
    said = [trained.search["chosen"] if trained.search else None]
    blend = getattr(fitted, "blend", fitted)  # linear-ngame's blend part
    if hasattr(blend, "knn_weight"):
        said.append(f"knn weight {blend.knn_weight:g}, text weight {blend.text_weight:g}")
    if hasattr(fitted, "ngame_mix"):  # linear-ngame's
        said.append(f"ngame mix {fitted.ngame_mix:g}")
    neural = minilm_part(fitted)
    if neural is not None:  # the mix it uses, however chosen
        said.append(f"neighbour mix {neural.neighbour_mix:g}")
        if neural.family.tunes_encoder:  # ngame: the encoder validation kept
            tuned = neural.config.contrastive.epochs  # refit_config's: 0 where the packaged encoder won
            said.append(f"encoder tuned {tuned} epochs" if tuned else "packaged encoder")
    return ", ".join(filter(None, said)) or None


def validation_run(trained) -> dict | None:
    """The validation run of a model ``train_model`` trained, as its ``training.json`` records it
    (points trained and validated on, seconds, the epoch kept and the epochs run, the kept epoch's
    metrics): what the final model's choices were read from; auto's winning trial where auto
    searched. ``None`` where nothing was validated."""
    run = trained.info.get("validation_run")
    return None if run is None else {k: v for k, v in run.items() if k != "encoder"}  # figures, not histories


def encoder_precision(fitted) -> str | None:
    """The fine-tuned or packaged sentence encoder's precision as resolved (auto is bfloat16 on a CPU with it
    natively), of the model or of its ngame part (linear-ngame); None for a model without one: rows differ by it."""
    neural = minilm_part(fitted)
    return neural.config.encoder_precision if neural is not None else None


def run_one(
    dataset: str,
    model: str,
    augment: str,
    seed: int,
    split: str,
    settings: dict,
    threads: int | None,
    protocol: str = "random",
    hold_out: float = 0.0,
    recipe: AugmentConfig | None = None,
    valid_split: str | None = None,
    device: str | None = None,
    queries: str = "catalogue",
    validate_neural: bool = False,
    auto_budget_minutes: float = 60.0,
) -> dict:
    """One trained model scored on ``split``; ``recipe`` (its seed replaced by ``seed``) stands for
    the augmentation named ``augment`` where a script compares variants the suite has no name for;
    ``device`` is where a model that can use a GPU trains and predicts (the others run on the CPU);
    ``queries`` what the deployment meets (``new-items``: auto chooses by its forecast, a model
    that chooses on validation on points held out as if new);
    ``validate_neural``: a model trained in epochs goes through ``train_model`` too;
    ``auto_budget_minutes``: ``gandalf train --auto-budget``."""
    given = valid_split if valid_split and find_split_file(suite_path(dataset), valid_split) else None
    splits = ("trn", "tst") if split == "test" else ("trn",)
    if given:
        splits += (given,)
    chooses = chooses_on_validation(model) and (validate_neural or not entry(model).in_epochs)
    new_items = queries == "new-items" and (augment == "auto" or chooses)
    if new_items and NEW_ITEMS_SPLIT not in splits and find_split_file(suite_path(dataset), NEW_ITEMS_SPLIT):
        splits += (NEW_ITEMS_SPLIT,)
    ds, rest, target, inv = scored_split(dataset, seed, split, protocol, splits)
    deployment = deployment_for(ds, "new-items" if new_items else "catalogue", None, False)
    if hold_out:
        rest, _ = carve_validation(rest, hold_out, seed + 1000)  # another seed than the validation split's

    device = device if entry(model).on_gpu else None
    gpu = _reset_gpu_peak(device)
    t0 = time.perf_counter()
    chosen, forecast, trials, mixes_tried, skipped, validation = None, None, None, None, None, None
    if augment == "auto" or chooses:  # validation chooses for it (the blend's weights); a neural model trains once unless asked
        import tempfile

        from gandalf_xmc.workflow.auto import AutoConfig
        from gandalf_xmc.workflow.pipeline import train_model

        config = (
            model_config(model, seed=seed, threads=threads)
            if model == "knn"
            else apply_settings(model_config(model, seed=seed, threads=threads, device=device), settings)
        )
        with tempfile.TemporaryDirectory(prefix="gandalf-suite-") as tmp:
            trained = train_model(
                rest,
                Path(tmp) / "model",
                config,
                recipe_for(augment, seed, recipe),
                valid_fraction=valid_fraction(rest.n_original_train or len(rest.train)),
                progress=False,
                valid_split=None if given is None else (given, ds.split(given)),
                # as gandalf train reads --queries new-items: the val split's texts, by family where groups are families
                valid_protocol=deployment.valid_protocol,
                new_items=deployment.new_items,
                auto_config=AutoConfig(budget_seconds=60 * auto_budget_minutes),
            )
        fitted, chosen = trained.model, validation_chose(trained)
        search = trained.search or {}
        forecast, skipped = search.get("new_items"), search.get("skipped")
        trials = search_trials(trained.search)
        mixes_tried = trained.validated.best_record().get("neighbour_mixes_tried")  # each mix's validation P@1
        validation = validation_run(trained)
    elif model == "knn":
        from gandalf_xmc.models.knn import TfidfKNN

        train = training_set(rest, recipe_for(augment, seed, recipe))
        fitted = TfidfKNN().fit(train.texts, train.Y)
    else:
        config = apply_settings(model_config(model, seed=seed, threads=threads, device=device), settings)
        train = training_set(rest, recipe_for(augment, seed, recipe))
        fitted = fit_model(build_model(config), train, rest.label_texts, progress=False)
    seconds = time.perf_counter() - t0
    t0 = time.perf_counter()
    pred = fitted.predict(target.texts, k=10)
    predict_seconds = time.perf_counter() - t0
    res = evaluate(pred, target.Y, inv, (1, 3, 5), target.filter_pairs)
    result = getattr(fitted, "result", None)
    epochs = [h["seconds"] for h in (result.history if result else []) if "seconds" in h]
    return {
        "dataset": dataset,
        "model": model,
        "augment": augment,
        "seed": seed,
        "split": split,
        "protocol": protocol if split == "valid" else None,
        "valid_split": given,
        "queries": queries if augment == "auto" or chooses else None,
        "validated": bool(augment == "auto" or chooses),
        "new_items_forecast": forecast,
        "auto_trials": trials,
        "auto_skipped": skipped,  # the candidates auto's budget left untried
        "neighbour_mixes_tried": mixes_tried,
        "validation_run": validation,
        "n_train": len(rest.train),
        "hold_out": hold_out,
        "chosen": chosen,
        "settings": {k: list(v) if isinstance(v, tuple) else v for k, v in settings.items()},
        "n_eval": int(target.Y.shape[0]),
        "train_seconds": seconds,
        "device": result.device if result is not None else "cpu",
        "cpu": cpu_model(),
        "encoder_precision": encoder_precision(fitted),
        "epochs_run": len(epochs),
        "median_epoch_seconds": float(np.median(epochs)) if epochs else None,
        "encoder_seconds": sum(h.get("seconds", 0.0) for h in result.encoder_history)
        if result and result.encoder_history
        else None,
        "peak_gpu_mib": _gpu_peak_mib() if gpu else None,
        "queries_per_second": len(target.texts) / max(predict_seconds, 1e-9),
        **{m: res[m] for m in METRICS},
    }


def search_trials(search: dict | None) -> dict | None:
    """Each auto trial's validation P@1 and PSP@5 and its P@1 gain over none with the interval
    (the record a rule of choice can be replayed on), or ``None`` without a search. Where auto
    validated on more shares, the rule read only the candidates it kept on all of them: those, with
    their pooled figures (``folds``: how many shares)."""
    if not search:
        return None
    gains = search.get("p1_gain_over_none", {})
    pooled = search.get("pooled", {})
    out = {}
    for t in search["trials"]:
        if t.get("fold") or (pooled and t["name"] not in pooled):
            continue
        name = t["name"]
        scores = pooled.get(name, t["valid"])
        out[name] = {
            "P@1": scores["P@1"],
            "PSP@5": scores["PSP@5"],
            **({"gain": gains[name]["gain"], "interval": gains[name]["interval"]} if name in gains else {}),
            **({"n_valid": search["pooled_points"] if name in pooled else t["p1_hits"]["n"]} if "p1_hits" in t else {}),
            **({"folds": search["folds"]} if name in pooled else {}),
        }
    return out


def _reset_gpu_peak(device: str | None) -> bool:
    """Whether the run may use a GPU (then its peak memory counter starts afresh)."""
    if device is None or device == "cpu":
        return False
    import torch

    if not torch.cuda.is_available():
        return False
    torch.cuda.reset_peak_memory_stats()
    return True


def _gpu_peak_mib() -> float:
    import torch

    return torch.cuda.max_memory_allocated() / 2**20


def run_grid(datasets: list[str], combinations: list[tuple], measure) -> list[dict]:
    """``measure(dataset, *combination)`` for every dataset (built first where it is not) and
    combination, each row printed as a JSON line as it comes (a measure that returns None is
    skipped); returns the rows."""
    rows = []
    for dataset in datasets:
        if not is_available(dataset):
            build(dataset)
        for combination in combinations:
            row = measure(dataset, *combination)
            if row is None:
                continue
            rows.append(row)
            print(json.dumps({k: (round(v, 2) if isinstance(v, float) else v) for k, v in rows[-1].items()}), flush=True)
    return rows


def variants_main(doc: str, datasets: tuple[str, ...], variants, measure, name: str) -> None:
    """The command line of a script that compares ``variants`` of one model (``--datasets``,
    ``--split``, ``--seeds``): ``measure(dataset, variant, seed, split)`` for each, the table
    printed and the rows written to ``benchmarks/results/<name>-<split>.json``."""
    ap = argparse.ArgumentParser(description=doc.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(datasets))
    ap.add_argument("--split", choices=("valid", "test"), default="valid")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = ap.parse_args()
    rows = run_grid(
        args.datasets,
        [(v, s) for v in variants for s in args.seeds],
        lambda dataset, variant, seed: measure(dataset, variant, seed, args.split),
    )
    print(table(rows))
    out = HERE / "results" / f"{name}-{args.split}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")


def markdown_table(headers: list[str], rows: list[list]) -> str:
    """A Markdown table of ``headers`` and ``rows`` (each cell written with ``str``)."""
    lines = ["| " + " | ".join(headers) + " |", "|" + " --- |" * len(headers)]
    return "\n".join(lines + ["| " + " | ".join(str(c) for c in row) + " |" for row in rows])


def write_results(path: Path, payload) -> None:
    """``payload`` as indented JSON at ``path`` (its folder made where missing)."""
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(payload, indent=1) + "\n")


def table(rows: list[dict]) -> str:
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        sub = [r for r in rows if r["dataset"] == dataset]
        out.append(f"\n{dataset} ({sub[0]['split']}, {sub[0]['n_eval']:,} points)\n")
        out.append("| model | augment | settings | seeds | " + " | ".join(METRICS) + " | train s |")
        out.append("|" + " --- |" * (len(METRICS) + 5))
        groups: dict = {}
        for r in sub:
            name = r["augment"] + (f" (hold-out {r['hold_out']})" if r.get("hold_out") else "")
            changed = {**r["settings"], **{AUGMENT + k: v for k, v in r.get("augment_settings", {}).items()}}
            groups.setdefault((r["model"], name, json.dumps(changed)), []).append(r)
        for (model, augment, settings), rs in groups.items():
            if any(r.get("chosen") for r in rs):
                said = [
                    r["chosen"] + (f" [budget: {len(r['auto_skipped'])} untried]" if r.get("auto_skipped") else "") for r in rs
                ]
                augment += " (chose " + ", ".join(said) + ")"
            cells = []
            for m in METRICS:
                v = np.array([r[m] for r in rs])
                cells.append(f"{v.mean():.2f}" + (f" ± {v.std(ddof=1):.2f}" if v.size > 1 else ""))
            secs = np.mean([r["train_seconds"] for r in rs])
            out.append(
                f"| {model} | {augment} | {settings if settings != '{}' else ''} | {len(rs)} | "
                + " | ".join(cells)
                + f" | {secs:.1f} |"
            )
    return "\n".join(out)


def query_sample(ds, dataset: str) -> QuerySample | None:
    """A new-items set's unlabelled sample of its deployment's queries: the texts of ``ds``'s
    ``val`` split (loaded with it), and their families where the set's group key names them (no
    label is read); None where ``ds`` has no such split."""
    if NEW_ITEMS_SPLIT not in ds.splits:
        return None
    return split_sample(ds.split(NEW_ITEMS_SPLIT), ds.groups_are_families)


def main() -> None:
    terminate_like_interrupt()  # a killed run removes its temporary directory of checkpoints
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=[d.name for d in SUITE])
    ap.add_argument("--models", nargs="+", default=["linear"])
    ap.add_argument("--augments", nargs="+", default=["none"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument(
        "--split",
        choices=("valid", "test", "new-items"),
        default="valid",
        help="what is scored: a validation split carved from the training points, the test split, or a new-items "
        "set's labelled new items (its val; every training point kept, the other sets skipped)",
    )
    ap.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--threads", type=int, default=None, help="numba's, torch's and the solver's threads (default: every core)")
    ap.add_argument(
        "--protocol",
        default="random",
        choices=(*PROTOCOLS, *BENCHMARK_PROTOCOLS),
        help="how validation points are chosen (gandalf_xmc.workflow.validation)",
    )
    ap.add_argument(
        "--hold-out",
        type=float,
        default=0.0,
        help="train on the training part less this random share (a model not trained again after validation)",
    )
    ap.add_argument(
        "--valid-split",
        default=None,
        metavar="NAME",
        help="models that choose on validation (auto, linear-knn) validate on this split where a dataset has it (val)",
    )
    ap.add_argument(
        "--device",
        default=None,
        help="where the models that can use a GPU train: auto, cpu, cuda (default: the model's own, auto)",
    )
    ap.add_argument(
        "--queries",
        choices=("catalogue", "new-items"),
        default="catalogue",
        help="what validation chooses for: catalogue items (its validation split) or new items (auto: its "
        "forecast; a model that chooses on validation: points held out as if new)",
    )
    ap.add_argument(
        "--validate-neural",
        action="store_true",
        help="the neural models train as gandalf train trains them: validation chooses their epoch and settings, "
        "then the final model on every training point (default: once, without validation)",
    )
    ap.add_argument(
        "--auto-budget",
        type=float,
        default=60.0,
        metavar="MINUTES",
        help="as gandalf train --auto-budget: minutes auto may spend on its candidates",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    settings = parse_settings(args.settings)
    augment_settings = {k.removeprefix(AUGMENT): v for k, v in settings.items() if k.startswith(AUGMENT)}
    settings = {k: v for k, v in settings.items() if not k.startswith(AUGMENT)}
    if augment_settings and "auto" in args.augments:
        ap.error("--set augment.*: auto chooses among its own candidates; name the augmentations instead")
    if args.threads:
        limit_threads(args.threads)
    if any(entry(m).in_epochs for m in args.models):  # as gandalf train does for the neural models
        reuse_step_memory()
    rows = run_grid(
        args.datasets,
        [(m, a, s) for m in args.models for a in args.augments for s in args.seeds],
        lambda dataset, model, augment, seed: (
            None
            if args.split == "new-items" and not find_split_file(suite_path(dataset), NEW_ITEMS_SPLIT)
            else {
                **run_one(
                    dataset,
                    model,
                    augment,
                    seed,
                    args.split,
                    settings if model != "knn" else {},
                    args.threads,
                    args.protocol,
                    args.hold_out,
                    recipe=apply_settings(augment_config(augment, seed), augment_settings) if augment_settings else None,
                    valid_split=args.valid_split,
                    device=args.device,
                    queries=args.queries,
                    validate_neural=args.validate_neural,
                    auto_budget_minutes=args.auto_budget,
                ),
                "augment_settings": augment_settings,
            }
        ),
    )
    print(table(rows))
    out = args.out or HERE / "results" / f"suite-{args.split}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
