"""Shortlist recall and validation metrics against the number of meta clusters searched.

    python benchmarks/shortlist_sweep.py [--model dual-encoder] [--epochs 1]

Trains the model on the embedded dataset minus a 5% validation split (seed 0) and scores only
that validation split (filter pairs removed) while searching 32, 128, 512 and all clusters.
Prints a table and writes ``benchmarks/results/shortlist_sweep.json``.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from gandalf_xmc.augment import AugmentConfig, training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.engine.clusters import shortlist_recall
from gandalf_xmc.engine.records import Validation
from gandalf_xmc.metrics import evaluate, inverse_propensity
from gandalf_xmc.models.neural_training import candidate_sets, predict
from gandalf_xmc.models.neural_xmc import FAMILIES, ModelConfig, NeuralXMC
from gandalf_xmc.workflow.pipeline import carve_validation

RESULTS = Path(__file__).resolve().parent / "results"


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--model", default="dual-encoder", choices=sorted(FAMILIES))
    ap.add_argument("--epochs", type=int, default=1)
    args = ap.parse_args(argv)
    ds = load_dataset(splits=("trn",))
    rest, valid = carve_validation(ds, 0.05, 0)
    train = training_set(rest, AugmentConfig("none"))
    inv = inverse_propensity(rest.train.Y, *ds.propensity_constants())
    model = NeuralXMC(ModelConfig(family=args.model, train=FAMILIES[args.model].train_config(epochs=args.epochs)))
    model.fit(train.texts, train.Y, ds.label_texts, valid=Validation(valid.texts, valid.Y, inv, valid.filter_pairs))
    Xv = model.features(valid.texts)
    rows = []
    print(f"{'clusters':>8} {'recall %':>9} {'P@1':>6} {'P@5':>6} {'PSP@1':>6} {'PSP@5':>6}")
    for c in (32, 128, 512, model.members.shape[0]):
        res = evaluate(predict(model.network, Xv, model.members, k=10, n_clusters=c), valid.Y, inv, (1, 5), valid.filter_pairs)
        recall = shortlist_recall(candidate_sets(model.network, Xv, model.members, c), valid.Y)
        rows.append({"clusters": c, "recall": recall, **{m: res[m] for m in ("P@1", "P@5", "PSP@1", "PSP@5")}})
        print(f"{c:>8} {recall:>9.1f} {res['P@1']:>6.2f} {res['P@5']:>6.2f} {res['PSP@1']:>6.2f} {res['PSP@5']:>6.2f}")
    RESULTS.mkdir(parents=True, exist_ok=True)
    (RESULTS / "shortlist_sweep.json").write_text(json.dumps({"model": args.model, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
