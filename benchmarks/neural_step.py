"""A neural model's training step on the CPU, timed: milliseconds a step, and the (point, label)
pairs and distinct shortlist labels of each step, from the first batches of a seeded epoch.

    python benchmarks/neural_step.py --model inceptionxml-lf --augment gandalf
    python benchmarks/neural_step.py --model inceptionxml --augment none --no-reuse-memory

The model is set up as ``gandalf train`` sets it up (vocabulary, clusters, label points); then,
instead of its epochs, ``--steps`` batches of one shuffled order are trained, the first two
untimed (warm-up). ``--no-reuse-memory`` leaves glibc's thresholds as they are (the entry point's
``engine.allocator.reuse_step_memory`` is called otherwise, as ``gandalf train`` does). Prints one
line and writes ``benchmarks/results/neural-step.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import json
import time
from pathlib import Path

import numpy as np
import torch

from gandalf_xmc.augment import AugmentConfig, training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.engine.allocator import reuse_step_memory
from gandalf_xmc.models import neural_training
from gandalf_xmc.models.neural_xmc import NeuralXMC, config_for
from gandalf_xmc.models.registry import entry
from gandalf_xmc.workflow.fitting import fit_arguments

HERE = Path(__file__).resolve().parent
WARM_UP = 2


class _Stop(Exception):
    """Raised once the steps are timed: the rest of the training is not wanted."""


def timed_steps(objective, batch_size: int, steps: int, seed: int) -> dict:
    """Train ``steps`` batches of ``objective`` (a :class:`neural_training.NetworkObjective`) in a
    seeded order; the time of all but the first :data:`WARM_UP`, and each step's pairs and labels."""
    network = objective.network
    counted: list[tuple[int, int]] = []
    scores = network.pair_scores

    def counting(z, rows, label_ids):
        counted.append((int(rows.numel()), int(torch.unique(label_ids).numel())))
        return scores(z, rows, label_ids)

    network.pair_scores = counting  # this instance only
    order = np.random.default_rng(seed).permutation(objective.n_examples)
    network.train()
    started = None
    for step in range(steps):
        if step == WARM_UP:
            started = time.perf_counter()
        loss = objective.loss(np.sort(order[step * batch_size : (step + 1) * batch_size]))
        for optimizer in objective.optimizers.values():
            optimizer.zero_grad()
        loss.backward()
        for optimizer in objective.optimizers.values():
            optimizer.step()
    assert started is not None
    seconds = time.perf_counter() - started
    pairs, labels = np.array(counted[WARM_UP:]).T
    return {
        "ms_per_step": 1000 * seconds / (steps - WARM_UP),
        "pairs": [int(pairs.min()), int(np.median(pairs)), int(pairs.max())],
        "labels": [int(labels.min()), int(np.median(labels)), int(labels.max())],
        "examples": int(objective.n_examples),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="debian-bookworm")
    ap.add_argument("--model", default="inceptionxml-lf")
    ap.add_argument("--augment", default="gandalf")
    ap.add_argument("--steps", type=int, default=42)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--reuse-memory", action=argparse.BooleanOptionalAction, default=True)
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    if args.steps <= WARM_UP:
        ap.error(f"--steps must be above {WARM_UP} (the warm-up)")
    reused = reuse_step_memory() if args.reuse_memory else False
    ds = load_dataset(args.dataset, splits=("trn",))
    texts, Y, weights, given = fit_arguments(training_set(ds, AugmentConfig(args.augment, seed=args.seed)), entry(args.model))
    config = config_for(args.model, seed=args.seed, epochs=1, device="cpu")
    found: dict = {}

    def instead_of_epochs(objective, train_config, *rest, **kwargs):
        found.update(timed_steps(objective, train_config.batch_size, args.steps, args.seed))
        raise _Stop

    neural_training.run = instead_of_epochs  # the model's own set-up, then these steps instead of its epochs
    try:
        NeuralXMC(config).fit(texts, Y, ds.label_texts, sample_weight=weights, progress=False, **given)
    except _Stop:
        pass
    row = {
        "dataset": args.dataset,
        "model": args.model,
        "augment": args.augment,
        "threads": torch.get_num_threads(),
        "reuse_memory": reused,
        "steps_timed": args.steps - WARM_UP,
        **found,
    }
    print(
        f"{args.model} {args.augment} on {args.dataset}: {row['ms_per_step']:.0f} ms a step over {row['steps_timed']} steps "
        f"({row['threads']} threads, glibc thresholds {'raised' if reused else 'as they were'}); pairs a step "
        f"{row['pairs'][0]:,}-{row['pairs'][2]:,} (median {row['pairs'][1]:,}), shortlist labels {row['labels'][0]:,}-"
        f"{row['labels'][2]:,} (median {row['labels'][1]:,})"
    )
    out = args.out or HERE / "results" / "neural-step.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(row, indent=1) + "\n")


if __name__ == "__main__":
    main()
