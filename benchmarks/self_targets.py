"""What a label point's own target ("text of X -> X") is worth (issue 35): gandalf-tempered with the
self entry of every graph row at 1 (the preset), 0.5 and 0 (``GraphConfig.self_scale``), beside
no augmentation, for the linear model.

    python benchmarks/self_targets.py --split valid     # the five random-split sets (what is chosen on)
    python benchmarks/self_targets.py --split test --datasets debian-new-packages gene-ontology-new-terms

Prints the suite's table and writes ``benchmarks/results/self-targets-<split>.json``.
"""

from __future__ import annotations

import argparse
import json
from dataclasses import replace

from suite import HERE, run_grid, run_one, table

from gandalf_xmc.augment import preset

RANDOM_SPLIT_SETS = ("debian-bookworm", "gene-ontology", "manpages", "jargon", "wordnet")
TEMPERED = preset("gandalf-tempered")
VARIANTS = {
    "none": None,
    "gandalf-tempered": TEMPERED,
    "gandalf-tempered, own target 0.5": replace(TEMPERED, graph=replace(TEMPERED.graph, self_scale=0.5)),
    "gandalf-tempered, own target 0": replace(TEMPERED, graph=replace(TEMPERED.graph, self_scale=0.0)),
}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=list(RANDOM_SPLIT_SETS))
    ap.add_argument("--split", choices=("valid", "test"), default="valid")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    args = ap.parse_args()
    rows = run_grid(
        args.datasets,
        [(name, seed) for name in VARIANTS for seed in args.seeds],
        lambda dataset, name, seed: run_one(dataset, "linear", name, seed, args.split, {}, None, recipe=VARIANTS[name]),
    )
    print(table(rows))
    out = HERE / "results" / f"self-targets-{args.split}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
