"""Does a neural model repeat to the bit? Trains each model twice on one dataset with one seed, in
this process, and prints the largest weight difference and both weight hashes.

    python benchmarks/repeatability.py                                   # astec on jargon, the CPU
    python benchmarks/repeatability.py --device cuda --models astec inceptionxml dual-encoder \\
        --precisions float32 bfloat16                                    # on a GPU

Run it twice to compare across processes (the hashes). ``--threads`` sets torch's threads.
"""

from __future__ import annotations

import argparse
import hashlib
from dataclasses import replace

import torch

from gandalf_xmc.data import load_dataset
from gandalf_xmc.models.registry import build_model, model_config


def train_once(ds, model: str, device: str, precision: str, epochs: int) -> dict[str, torch.Tensor]:
    config = model_config(model, seed=0, epochs=epochs, device=device)
    config = replace(config, train=replace(config.train, gpu_precision=precision))
    fitted = build_model(config).fit(ds.train.texts, ds.train.Y, ds.label_texts, progress=False)
    return {k: v.detach().float().cpu() for k, v in fitted.network.state_dict().items()}


def digest(state: dict[str, torch.Tensor]) -> str:
    h = hashlib.sha1()
    for tensor in state.values():
        h.update(tensor.numpy().tobytes())
    return h.hexdigest()[:12]


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--dataset", default="jargon")
    ap.add_argument("--models", nargs="+", default=["astec"])
    ap.add_argument("--device", default="cpu")
    ap.add_argument("--precisions", nargs="+", default=["float32"])
    ap.add_argument("--epochs", type=int, default=2)
    ap.add_argument("--threads", type=int, default=None)
    args = ap.parse_args()
    if args.threads:
        torch.set_num_threads(args.threads)
    ds = load_dataset(args.dataset)
    for model in args.models:
        for precision in args.precisions:
            a, b = (train_once(ds, model, args.device, precision, args.epochs) for _ in range(2))
            diff = max(float((a[k] - b[k]).abs().max()) for k in a if a[k].numel())
            print(
                f"{model} {args.device} {precision} ({torch.get_num_threads()} threads): largest weight difference "
                f"{diff:.3g}, hashes {digest(a)} {digest(b)}",
                flush=True,
            )


if __name__ == "__main__":
    main()
