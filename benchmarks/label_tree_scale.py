"""The linear model's label vectors and label tree, timed apart, on a dataset with Gandalf's points.

    python benchmarks/synthetic.py --preset LF-AmazonTitles-1.3M --out /tmp/amazon13m
    python benchmarks/label_tree_scale.py /tmp/amazon13m

Stages, as `gandalf train --augment gandalf` runs them: load the dataset and add the label points,
TF-IDF features of points and label texts, ``label_vectors`` (blocked, budgeted PIFA + label text),
``build_tree`` with the model's default settings. Prints each stage's seconds and the peak resident
memory, and writes ``benchmarks/results/label_tree_scale.json``.
"""

from __future__ import annotations

import argparse
import json
import resource
import time
from pathlib import Path

from gandalf_xmc.augment import AugmentConfig, build_training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.engine.label_tree import build_tree, label_vectors
from gandalf_xmc.features import TextFeaturizer
from gandalf_xmc.models.linear import LinearConfig

RESULTS = Path(__file__).resolve().parent / "results"


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("data", help="a dataset directory")
    ap.add_argument("--threads", type=int, default=2)
    args = ap.parse_args()
    cfg = LinearConfig()
    record: dict = {"data": args.data, "threads": args.threads}
    started = time.perf_counter()

    def stage(name: str, since: float) -> float:
        now = time.perf_counter()
        record[f"{name}_seconds"] = round(now - since, 1)
        print(f"{name}: {now - since:.1f} s", flush=True)
        return now

    ds = load_dataset(args.data)
    built = build_training_set(ds, AugmentConfig("gandalf"))
    t = stage("load_and_label_points", started)
    XZ = TextFeaturizer(cfg.ngram_max, min_df=cfg.min_df).fit_transform(built.split.texts + list(ds.label_texts))
    X, Z = XZ[: len(built.split)], XZ[len(built.split) :]
    t = stage("features", t)
    R = label_vectors(X, built.split.Y, Z, cfg.label_text_weight, threads=args.threads)
    record["label_vector_entries"] = int(R.nnz)
    t = stage("label_vectors", t)
    build_tree(R, cfg.branching, cfg.leaf_size, cfg.seed, cfg.tree_iterations, args.threads)
    stage("tree", t)
    record["peak_resident_gb"] = round(resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1e6, 2)
    print(f"peak resident: {record['peak_resident_gb']} GB")
    RESULTS.mkdir(exist_ok=True)
    (RESULTS / "label_tree_scale.json").write_text(json.dumps(record, indent=1) + "\n")


if __name__ == "__main__":
    main()
