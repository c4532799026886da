"""The neural models on a GPU against the same machine's CPU, each pair in one run: training time,
median epoch time, prediction throughput, the GPU's peak memory and the accuracy on each device.

    python benchmarks/device.py                                    # jargon and manpages, validation
    python benchmarks/device.py --datasets debian-bookworm --set train.epochs=2 --models astec

Every (dataset, model, augmentation, seed) trains once on each ``--devices`` entry through
``suite.run_one`` (the suite's validation split, or ``--split test``), with the model's own
settings and ``--set`` changes; on a GPU in bfloat16 mixed precision unless ``--set
train.gpu_precision=float32``. The table gives each device's figures and the GPU's speed-up (CPU
seconds / GPU seconds, same run, same machine). Writes ``benchmarks/results/device-<split>.json``
(or ``--out``) with the machine's description. Without a CUDA GPU it says so and stops.
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path

from suite import HERE, cpu_model, run_grid, run_one

from gandalf_xmc.settings import parse_settings


def machine() -> dict:
    import torch

    return {
        "torch": torch.__version__,
        "cuda": torch.version.cuda,
        "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
        "cpu": cpu_model(),
        "cpu_count": os.cpu_count(),
        "torch_threads": torch.get_num_threads(),
    }


def table(rows: list[dict]) -> str:
    out = [
        "| dataset | model | augment | device | P@1 | PSP@5 | train s | epochs | median epoch s | queries/s | GPU peak MiB |"
        " speed-up (train, epoch) |",
        "|" + " --- |" * 12,
    ]
    keyed = {(r["dataset"], r["model"], r["augment"], r["seed"], r["device_asked"]): r for r in rows}
    for r in rows:
        cpu = keyed.get((r["dataset"], r["model"], r["augment"], r["seed"], "cpu"))
        speed = ""
        if r["device_asked"] != "cpu" and cpu is not None:
            epoch = (
                f"{cpu['median_epoch_seconds'] / r['median_epoch_seconds']:.1f}x"
                if cpu["median_epoch_seconds"] and r["median_epoch_seconds"]
                else "-"
            )
            speed = f"{cpu['train_seconds'] / r['train_seconds']:.1f}x, {epoch}"
        median = f"{r['median_epoch_seconds']:.2f}" if r["median_epoch_seconds"] else "-"
        peak = f"{r['peak_gpu_mib']:.0f}" if r["peak_gpu_mib"] else "-"
        out.append(
            f"| {r['dataset']} | {r['model']} | {r['augment']} | {r['device']} | {r['P@1']:.2f} | {r['PSP@5']:.2f} | "
            f"{r['train_seconds']:.1f} | {r['epochs_run']} | {median} | {r['queries_per_second']:,.0f} | {peak} | {speed} |"
        )
    return "\n".join(out)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=["jargon", "manpages"])
    ap.add_argument("--models", nargs="+", default=["astec", "inceptionxml", "dual-encoder"])
    ap.add_argument("--augments", nargs="+", default=["none", "gandalf-tempered"])
    ap.add_argument("--devices", nargs="+", default=["cpu", "cuda"])
    ap.add_argument("--seeds", nargs="+", type=int, default=[0])
    ap.add_argument("--split", choices=("valid", "test"), default="valid")
    ap.add_argument("--set", dest="settings", action="append", default=[], metavar="KEY=VALUE")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    about = machine()
    if any(d.startswith("cuda") for d in args.devices) and about["gpu"] is None:
        raise SystemExit("device.py: torch sees no CUDA GPU here; run it where there is one (or --devices cpu)")
    print(json.dumps(about), flush=True)
    settings = parse_settings(args.settings)

    def measure(dataset: str, model: str, augment: str, seed: int, device: str) -> dict:
        row = run_one(dataset, model, augment, seed, args.split, settings, None, device=device)
        return {**row, "device_asked": device}

    # devices innermost: each pair runs back to back, on the same machine in the same state
    rows = run_grid(
        args.datasets,
        [(m, a, s, d) for m in args.models for a in args.augments for s in args.seeds for d in args.devices],
        measure,
    )
    print(table(rows))
    out = args.out or HERE / "results" / f"device-{args.split}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps({"machine": about, "rows": rows}, indent=1) + "\n")


if __name__ == "__main__":
    main()
