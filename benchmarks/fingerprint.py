"""Same seeds, same bytes? A fingerprint of what the library writes, to compare before and after a
change that must not change behaviour (a refactor).

For each (model, augmentation) it trains through ``train_model`` (validation on 5%, then the
final model on every point, seed 0; neural models one epoch), hashes every file of the model
directory (the JSON files without the fields that hold times or paths), scores the test split,
and hashes the augmented datasets ``gandalf augment`` writes. Prints one line a row and writes
JSON:

    python benchmarks/fingerprint.py --out /tmp/before.json        # at the commit before
    python benchmarks/fingerprint.py --out /tmp/after.json         # after the change
    python benchmarks/fingerprint.py --compare /tmp/before.json /tmp/after.json
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import json
import sys
import tempfile
from pathlib import Path

ROWS = [
    ("linear", "none"),
    ("linear", "gandalf"),
    ("linear", "gandalf-tempered"),
    ("linear", "labelmix"),
    ("linear", "mixup"),
    ("linear", "auto"),
    ("knn", "gandalf-tempered"),
    ("knn", "labelmix"),
    ("linear-knn", "gandalf-tempered"),
    ("astec", "gandalf"),
    ("astec", "labelmix"),
    ("astec", "label-mixup"),
    ("inceptionxml", "gandalf-tempered"),
    ("dual-encoder", "gandalf"),
]
EXPORTS = ["gandalf", "gandalf-tempered", "identity", "glas", "random-walk"]
VOLATILE = ("seconds", "second", "time", "path", "source", "created", "started", "finished", "version", "resident")


RENAMED = {  # settings renamed by issue 39: compared under their current names
    "training_set": "augmentation",
    "extra_weight": "label_point_weight",
    "extra_share": "label_point_share",
    "extra_negatives": "label_point_negatives",
}


def _stable(value):
    """``value`` without the keys that change from run to run (times, paths, versions), settings
    under their current names."""
    if isinstance(value, dict):
        return {RENAMED.get(k, k): _stable(v) for k, v in value.items() if not any(word in k.lower() for word in VOLATILE)}
    if isinstance(value, list):
        return [_stable(v) for v in value]
    return value


def _file_digest(path: Path) -> str:
    data = path.read_bytes()
    if path.name.endswith(".json") or path.name.endswith(".json.gz") and path.name != "labels.json.gz":
        text = gzip.decompress(data) if path.name.endswith(".gz") else data
        try:
            data = json.dumps(_stable(json.loads(text)), sort_keys=True).encode()
        except ValueError:
            pass
    return hashlib.sha256(data).hexdigest()[:16]


def directory_digests(directory: Path) -> dict[str, str]:
    return {
        str(p.relative_to(directory)): _file_digest(p)
        for p in sorted(directory.rglob("*"))
        if p.is_file() and "checkpoints" not in p.parts
    }


def fingerprint(dataset_name: str, rows, exports) -> dict:
    from gandalf_xmc.augment import preset
    from gandalf_xmc.augment.export import write_augmented_dataset
    from gandalf_xmc.data import load_dataset
    from gandalf_xmc.metrics import evaluate, inverse_propensity
    from gandalf_xmc.models.registry import MODELS, model_config
    from gandalf_xmc.workflow.pipeline import train_model

    ds = load_dataset(dataset_name)
    inv = inverse_propensity(ds.original_train_Y(), *ds.propensity_constants())
    out: dict = {"dataset": dataset_name, "models": {}, "exports": {}}
    with tempfile.TemporaryDirectory() as tmp:
        for model, augment in rows:
            epochs = 1 if MODELS[model].in_epochs else None
            config = model_config(model, seed=0, epochs=epochs, threads=1)
            trained = train_model(ds, Path(tmp) / f"{model}-{augment}", config, preset(augment), progress=False)
            pred = trained.predict(ds.test.texts, k=5)
            scores = evaluate(pred, ds.test.Y, inv, filter_pairs=ds.test.filter_pairs)
            digests = directory_digests(Path(tmp) / f"{model}-{augment}")
            digests["test predictions"] = hashlib.sha256(
                pred.indices.tobytes() + pred.indptr.tobytes() + pred.data.round(5).tobytes()
            ).hexdigest()[:16]
            row = {"files": digests, "P@1": round(scores["P@1"], 4), "PSP@5": round(scores["PSP@5"], 4)}
            out["models"][f"{model} {augment}"] = row
            print(f"{model:13s} {augment:17s} P@1 {row['P@1']:6.2f} PSP@5 {row['PSP@5']:6.2f}  {len(digests)} files", flush=True)
        for augment in exports:
            target = Path(tmp) / f"augmented-{augment}"
            write_augmented_dataset(ds, target, preset(augment), log=lambda m: None)
            out["exports"][augment] = directory_digests(target)
            print(f"augment {augment}: {len(out['exports'][augment])} files", flush=True)
    return out


def compare(before: dict, after: dict) -> int:
    differ = 0
    for section in ("models", "exports"):
        for name, row in before[section].items():
            other = after[section].get(name)
            if other is None:
                print(f"{section} {name}: missing after")
                differ += 1
                continue
            a, b = (row.get("files", row), other.get("files", other))
            changed = sorted(k for k in a.keys() | b.keys() if a.get(k) != b.get(k))
            scores = "" if section == "exports" else f" P@1 {row['P@1']} -> {other['P@1']}"
            print(f"{section} {name}: {'same bytes' if not changed else 'DIFFERENT: ' + ', '.join(changed)}{scores}")
            differ += bool(changed)
    return differ


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="jargon")
    ap.add_argument("--models", nargs="*", default=None, help="rows as model:augment (default: the built-in list)")
    ap.add_argument("--exports", nargs="*", default=EXPORTS)
    ap.add_argument("--out", type=Path)
    ap.add_argument("--compare", nargs=2, type=Path)
    args = ap.parse_args()
    if args.compare:
        before, after = (json.loads(p.read_text()) for p in args.compare)
        sys.exit(1 if compare(before, after) else 0)
    rows = ROWS if args.models is None else [tuple(m.split(":")) for m in args.models]
    result = fingerprint(args.dataset, rows, args.exports)
    if args.out:
        args.out.write_text(json.dumps(result, indent=1) + "\n")


if __name__ == "__main__":
    main()
