"""``gandalf reproduce``: every experiment of the Gandalf paper (and LabelMix) on one dataset.

One *run* trains one model on one training set with one seed (through
:func:`gandalf_xmc.train.pipeline.train_model`, so with the validation split carved from the
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
from dataclasses import dataclass, field, replace
from pathlib import Path

import numpy as np

from ..augment import AugmentConfig
from ..data.atomic import atomic_path
from ..data.dataset import load_dataset, sample_dataset, write_dataset
from ..errors import ConfigError
from ..graph import GraphConfig

DELTA = 0.1  # the paper's delta, for every Gandalf training set unless a table varies it
SUBSAMPLING_PERCENT = (25, 50, 75)
QUICK_SIZES = (800, 200)  # training and test points of --quick's sample
QUICK_EPOCHS = 2
# The full run's epoch budget: the same for every training set (the paper's Figure 3 compares
# training sets at equal compute). The linear model's own default (8, early stopping) would take
# about 140 minutes for the 60 runs here; 3 epochs fit the 90 minutes (README)
REPRODUCE_EPOCHS = 3
RUN_METRICS = ("P@1", "P@3", "P@5", "nDCG@1", "nDCG@3", "nDCG@5", "PSP@1", "PSP@3", "PSP@5", "C@1", "C@3", "C@5")

# Training sets by name: (AugmentConfig for a seed, description shown in the report)
_SETTINGS_DOC = {
    "none": "D (original points)",
    "z-only": "Z (label points only)",
    "gandalf": "G = D u Z (Gandalf, delta 0.1)",
    "uniform": "U(G, N)",
    "identity": "Z^1 u D (self-annotation only)",
    "glas": "G with y = sigmoid(S)",
    "labelmix": "D + LabelMix",
    "gandalf-tempered": "G, tempered targets (this library)",
    "synonym": "D + synonym replacement",
    "mixup": "D + MixUp",
    "label-mixup": "D + Label-MixUp",
    "delta-0": "G, delta = 0",
    "delta-0.2": "G, delta = 0.2",
    "random-walk": "D u Z, random-walk graph",
    **{f"sub-{how}-{p}": f"D u Z of {p}% of labels ({how})" for how in ("random", "tail") for p in SUBSAMPLING_PERCENT},
}


def setting_names() -> list[str]:
    return list(_SETTINGS_DOC)


def describe(setting: str) -> str:
    return _SETTINGS_DOC[setting]


def augment_config(setting: str, seed: int) -> AugmentConfig:
    """The :class:`AugmentConfig` of a named training set (see ``setting_names()``) for ``seed``."""
    from ..train.auto import AUTO_CANDIDATES

    graph = GraphConfig(delta=DELTA, seed=seed)
    if setting == "gandalf-tempered":
        base = AUTO_CANDIDATES["gandalf-tempered"]
        return replace(base, graph=replace(base.graph, seed=seed), seed=seed)
    if setting.startswith("delta-"):
        return AugmentConfig("gandalf", replace(graph, delta=float(setting.split("-", 1)[1])), seed=seed)
    if setting.startswith("sub-"):
        _, how, percent = setting.split("-")
        return AugmentConfig("gandalf", graph, labels_fraction=int(percent) / 100.0, labels_sampling=how, seed=seed)
    if setting not in _SETTINGS_DOC:
        raise ConfigError(f"unknown training set {setting!r}")
    return AugmentConfig(setting, graph, seed=seed)


# What each part of the report needs from the ablation model (the paper's InceptionXML role)
ABLATION_SETTINGS = {
    "table2": ["none", "z-only", "gandalf", "uniform", "identity", "glas"],
    "table4": ["none", "gandalf", "identity", "gandalf-tempered"],
    "table6": ["none", "synonym", "mixup", "label-mixup", "gandalf"],
    "table7": ["none", "delta-0", "gandalf", "delta-0.2", "random-walk"],
    "figure2": ["none", "gandalf", "gandalf-tempered"],
    "figure3": ["none", "gandalf"] + [f"sub-{how}-{p}" for how in ("random", "tail") for p in SUBSAMPLING_PERCENT],
}
TABLE3_SETTINGS = ["none", "gandalf", "labelmix", "gandalf-tempered"]


@dataclass
class ReproduceConfig:
    """What ``gandalf reproduce`` runs.

    ``ablation_model`` answers every table but Table 3 (the paper used InceptionXML); ``models``
    are Table 3's families (each without, with Gandalf, with LabelMix and with the tempered
    variant); ``epochs`` is every model's epoch budget (``REPRODUCE_EPOCHS``; None: each model's
    own default with early stopping); ``quick`` runs everything on a small sample
    (``QUICK_SIZES``) with ``QUICK_EPOCHS``; ``parallel`` runs go at a time, each in its own
    process with ``cpu count / parallel`` threads.
    """

    models: tuple[str, ...] = ("linear",)
    ablation_model: str = "linear"
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int | None = REPRODUCE_EPOCHS
    quick: bool = False
    parallel: int = 2
    settings: dict = field(default_factory=lambda: dict(ABLATION_SETTINGS))

    def validate(self) -> None:
        from ..models.registry import MODEL_NAMES

        for m in (*self.models, self.ablation_model):
            if m != "knn" and m not in MODEL_NAMES:
                raise ConfigError(f"unknown model {m!r}; choose from knn, {', '.join(MODEL_NAMES)}")
        if not self.seeds:
            raise ConfigError("give at least one seed")
        if self.parallel < 1:
            raise ConfigError("--parallel must be >= 1")


@dataclass(frozen=True)
class Run:
    model: str
    setting: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.model}__{self.setting}__s{self.seed}"


def plan(config: ReproduceConfig) -> list[Run]:
    """Every distinct run the report needs, the most expensive first (to balance the pool)."""
    wanted: dict[Run, None] = {}
    for seed in config.seeds:
        for part in config.settings.values():
            for s in part:
                wanted[Run(config.ablation_model, s, seed)] = None
        for m in config.models:
            for s in TABLE3_SETTINGS:
                wanted[Run(m, s, seed)] = None
    cost = {"none": 1, "uniform": 1, "labelmix": 1.4, "synonym": 1.4, "mixup": 1.4, "label-mixup": 1.4, "z-only": 1.2}
    family_cost = {"knn": 0.01, "linear": 1, "dual-encoder": 1.5, "astec": 3, "inceptionxml": 6}
    return sorted(wanted, key=lambda r: -(family_cost.get(r.model, 1) * cost.get(r.setting, 2.5)))


def _init_worker(threads: int) -> None:
    import numba
    import torch

    os.environ.setdefault("HF_HUB_OFFLINE", "1")
    torch.set_num_threads(threads)
    numba.set_num_threads(threads)


def execute(run: Run, data_dir: str | None, runs_dir: str, epochs: int | None) -> dict:
    """Train, predict and score one run; write ``runs_dir/<key>.json`` and ``<key>.top5.npy``."""
    from ..data.stats import frequency_bins
    from ..metrics import bin_contributions, evaluate, inverse_propensity
    from ..metrics.ranking import remove_pairs, top_k_indices
    from ..models import TfidfKNN
    from ..models.registry import model_config
    from ..train.pipeline import train_model

    started = time.perf_counter()
    ds = load_dataset(data_dir)
    aug = augment_config(run.setting, run.seed)
    if run.model == "knn":
        texts, Y = _knn_training_data(ds, aug)
        model = TfidfKNN().fit(texts, Y)
        history, batch_size, n_train = [], 1, len(texts)
    else:
        overrides = {"seed": run.seed, **({"epochs": epochs} if epochs else {})}
        cfg = model_config(run.model, **overrides)
        with tempfile.TemporaryDirectory(prefix="gandalf-run-") as tmp:
            model = train_model(ds, tmp, cfg, aug, progress=False)
            n_train = json.loads((Path(tmp) / "training.json").read_text())["n_train"]
        history, batch_size = model.result.history, cfg.train.batch_size
    train_seconds = time.perf_counter() - started
    pred = model.predict(ds.test.texts, k=100)
    w = inverse_propensity(ds.original_train_Y(), *ds.propensity_constants())
    fp = ds.test.filter_pairs
    metrics = evaluate(pred, ds.test.Y, w, ks=(1, 3, 5), filter_pairs=fp)
    bins = frequency_bins(ds.label_frequencies())
    result = {
        "model": run.model, "setting": run.setting, "seed": run.seed,
        "metrics": {k: metrics[k] for k in RUN_METRICS},
        "bins_P@5": bin_contributions(pred, ds.test.Y, bins, 5, fp).tolist(),
        "bins_PSP@5": bin_contributions(pred, ds.test.Y, bins, 5, fp, inv_propensity=w).tolist(),
        "history": [{k: h[k] for k in ("epoch", "examples", "P@1", "PSP@5") if k in h} for h in history],
        "batch_size": batch_size, "n_train": n_train, "train_seconds": train_seconds,
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


def _knn_training_data(ds, aug: AugmentConfig):
    """The kNN's training texts and targets: a batch transform (LabelMix, synonyms) is drawn once
    and its changed points added, as the linear model does."""
    import scipy.sparse as sp

    from ..augment import FeatureMix, mixer_for, training_set

    train = training_set(ds, aug)
    mixer = mixer_for(ds, aug)
    if mixer is None:
        return train.texts, train.Y
    if isinstance(mixer, FeatureMix):
        raise ConfigError(f"knn indexes texts; {mixer.kind} mixes input vectors")
    mixed_texts, mixed_Y = mixer(list(train.texts), train.Y)
    changed = [i for i, (a, b) in enumerate(zip(mixed_texts, train.texts)) if a != b]
    return list(train.texts) + [mixed_texts[i] for i in changed], sp.vstack([train.Y, mixed_Y[changed]], format="csr")


def reproduce(data_dir: str | Path | None, out_dir: str | Path, config: ReproduceConfig,
              log=print) -> dict:
    """Run everything ``config`` asks for (skipping runs already in ``out_dir/runs``), then write
    ``out_dir/report.md``, the PNG figures and ``out_dir/results.json``. Returns the results."""
    from . import report

    config.validate()
    out = Path(out_dir)
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
        log(f"[{done}/{len(todo)}] {r['model']} {r['setting']} seed {r['seed']}: P@1 {m['P@1']:.2f} "
            f"PSP@5 {m['PSP@5']:.2f} ({r['seconds']:.0f} s; {time.perf_counter() - started:.0f} s so far)")

    if config.parallel == 1 or len(todo) <= 1:
        for r in todo:
            report_run(execute(r, data, str(runs_dir), config.epochs))
    else:
        ctx = multiprocessing.get_context("spawn")  # fresh interpreters: no forked torch/numba thread pools
        with ProcessPoolExecutor(config.parallel, mp_context=ctx, initializer=_init_worker, initargs=(threads,)) as pool:
            futures = [pool.submit(execute, r, data, str(runs_dir), config.epochs) for r in todo]
            for future in as_completed(futures):
                report_run(future.result())
    dataset = load_dataset(data) if config.quick else source  # the full dataset is already loaded
    results = report.write_report(dataset, runs, runs_dir, out, config,
                                  source_name=source.name, seconds=time.perf_counter() - started)
    log(f"wrote {out / 'report.md'} ({time.perf_counter() - started:.0f} s)")
    return results
