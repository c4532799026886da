"""What a label point's own target ("text of X -> X") is worth (issue 35): gandalf-tempered with the
self entry of every graph row at 1 (the preset), 0.5 and 0 (``GraphConfig.self_scale``), beside
no augmentation, for the linear model.

    python benchmarks/self_targets.py --split valid     # the five random-split sets (what is chosen on)
    python benchmarks/self_targets.py --split test --datasets debian-new-packages gene-ontology-new-terms

Prints the suite's table and writes ``benchmarks/results/self-targets-<split>.json``.
"""

from __future__ import annotations

from dataclasses import replace

from suite import run_one, variants_main

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
    variants_main(
        __doc__,
        RANDOM_SPLIT_SETS,
        VARIANTS,
        lambda dataset, name, seed, split: run_one(dataset, "linear", name, seed, split, {}, None, recipe=VARIANTS[name]),
        "self-targets",
    )


if __name__ == "__main__":
    main()
