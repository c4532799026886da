"""The one epoch loop of every model trained in epochs (:func:`run`): shuffled batches, a progress
bar with loss and examples/s, validation after each epoch and model selection, early stopping,
checkpoints (``last.pt``, ``best.pt``) and resume. What is trained and how its loss is computed is
the model's :class:`Objective`; the loop only orders the work.

Checkpoints are read with ``weights_only``: a model directory may come from someone else, and
nothing in it may run code.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable
from dataclasses import asdict
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
from tqdm.auto import tqdm

from ..data.atomic import atomic_path
from ..errors import CheckpointError, TrainingDiverged
from .records import LAST, LabelPoints, TrainConfig, TrainResult


def save_checkpoint(path: Path, state: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


def load_checkpoint(path: Path) -> dict:
    """A checkpoint written by :func:`run`, read without unpickling arbitrary objects: a model
    directory may come from someone else, and ``weights_only`` refuses anything but tensors and
    plain containers. A damaged or foreign file is a :class:`CheckpointError`."""
    try:
        state = torch.load(path, weights_only=True, map_location="cpu")  # load_state_dict moves it to the model's device
    except FileNotFoundError:
        raise CheckpointError(path, None, "checkpoint not found") from None
    except Exception as exc:  # noqa: BLE001 - torch raises many kinds (pickle refusals, zip errors, EOF)
        text = str(exc).strip()
        if "Weights only load failed" in text:
            why = "it holds objects other than tensors and plain values, which gandalf never unpickles"
        else:
            why = text.splitlines()[0][:200] if text else type(exc).__name__
        raise CheckpointError(path, None, f"not a readable checkpoint ({why})") from None
    if not isinstance(state, dict) or "model" not in state or "epoch" not in state:
        raise CheckpointError(path, None, "not a gandalf training checkpoint")
    return state


class Objective(Protocol):
    """What :func:`run` trains: a module, its optimizers and a loss over a batch of example ids."""

    @property
    def module(self) -> torch.nn.Module:
        """Everything checkpointed."""

    optimizers: dict[str, torch.optim.Optimizer]
    n_examples: int

    def loss(self, idx: np.ndarray) -> torch.Tensor:
        """Mean loss of the examples ``idx`` (sorted ids)."""

    def validate(self) -> dict[str, float] | None:
        """Validation metrics (must hold ``select_metric``), or None when there is no validation split."""

    def start_epoch(self, epoch: int) -> None:
        """Called before each epoch (e.g. to reseed a batch transform so that resuming replays it)."""


def run(
    objective: Objective,
    config: TrainConfig,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    on_epoch: Callable[[dict], None] | None = None,
    label_points: LabelPoints | None = None,
) -> TrainResult:
    """The epoch loop shared by every model: shuffled batches, a progress bar with loss and
    examples/s, validation and model selection, checkpoints, early stopping and resume.

    ``label_points`` (optional) limits each epoch to a share of the label points; their loss
    weight is the objective's business (its sample weights).

    At the end ``objective.module`` holds the best epoch's weights (the last ones without validation).
    """
    torch.manual_seed(config.seed)
    module, optimizers = objective.module, objective.optimizers
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if ckpt is not None:
        ckpt.mkdir(parents=True, exist_ok=True)
    result, start_epoch = _resumed(ckpt, module, optimizers) if resume else (TrainResult(best_epoch=-1, best_score=-np.inf), 0)
    best_state: dict | None = None  # in-memory copy of the best model when there is no checkpoint dir
    started = time.perf_counter()
    seen = 0
    validating = True
    stale = sum(1 for h in result.history if h["epoch"] > result.best_epoch)
    for epoch in range(start_epoch, config.epochs):
        if validating and result.history and stale >= config.patience:
            break
        record = _train_epoch(objective, config, epoch, label_points, progress)
        seen += record["examples"]
        module.eval()
        metrics = objective.validate()
        validating = metrics is not None
        if metrics is not None:
            record.update(metrics)
        score = metrics[config.select_metric] if metrics is not None else float(epoch)
        result.history.append(record)
        if score > result.best_score:
            result.best_score, result.best_epoch = score, epoch
            stale = 0
            if ckpt is not None:
                save_checkpoint(ckpt / "best.pt", {"model": module.state_dict(), "epoch": epoch})
            else:
                best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        else:
            stale += 1
        if ckpt is not None:
            save_checkpoint(
                ckpt / LAST,
                {
                    "model": module.state_dict(),
                    "epoch": epoch,
                    "result": json.dumps(asdict(result), default=float),
                    "optimizers": {name: opt.state_dict() for name, opt in optimizers.items()},
                },
            )
        if on_epoch is not None:
            on_epoch(record)
        if progress:
            _say_epoch(epoch, record)
    if ckpt is not None and (ckpt / "best.pt").exists():
        module.load_state_dict(load_checkpoint(ckpt / "best.pt")["model"])
    elif best_state is not None:
        module.load_state_dict(best_state)
    module.eval()
    result.seconds = time.perf_counter() - started
    result.examples_per_second = seen / max(result.seconds, 1e-9)
    return result


def _resumed(ckpt: Path | None, module: torch.nn.Module, optimizers: dict) -> tuple[TrainResult, int]:
    """The training record and the next epoch of the run ``ckpt/last.pt`` holds, its weights and
    optimizer states loaded into ``module`` and ``optimizers``."""
    if ckpt is None or not (ckpt / LAST).exists():
        raise CheckpointError(
            ckpt / LAST if ckpt else f"checkpoints/{LAST}",
            None,
            "nothing to resume: no checkpoint (train without --resume)",
        )
    state = load_checkpoint(ckpt / LAST)
    try:
        module.load_state_dict(state["model"])
        for name, opt in optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
        result = TrainResult(**json.loads(state["result"]))
    except (KeyError, TypeError, ValueError, RuntimeError) as exc:
        raise CheckpointError(
            ckpt / LAST,
            None,
            f"checkpoint does not match this model and data (written with other settings?): {str(exc).splitlines()[0][:200]}",
        ) from None
    return result, int(state["epoch"]) + 1


def _train_epoch(objective: Objective, config: TrainConfig, epoch: int, label_points: LabelPoints | None, progress: bool) -> dict:
    """One epoch of shuffled batches (the order keyed by the epoch, so resuming replays it); its record."""
    module, optimizers = objective.module, objective.optimizers
    module.train()
    rng = np.random.default_rng([config.seed, epoch])
    torch.manual_seed(config.seed * 1000 + epoch)
    order = rng.permutation(objective.n_examples) if label_points is None else label_points.epoch_order(rng)
    n_epoch = order.size
    objective.start_epoch(epoch)
    total_loss, t0 = 0.0, time.perf_counter()
    bar = tqdm(
        range(0, n_epoch, config.batch_size),
        desc=f"epoch {epoch + 1}/{config.epochs}",
        disable=not progress,
        unit="batch",
        leave=False,
    )
    for step, start in enumerate(bar):
        idx = np.sort(order[start : start + config.batch_size])
        loss = objective.loss(idx)
        if not torch.isfinite(loss):
            raise TrainingDiverged(
                f"the loss became {float(loss.detach())} at epoch {epoch + 1}, step {step + 1}: training "
                "diverged (lower --label-point-weight or the learning rate); nothing was saved"
            )
        for opt in optimizers.values():
            opt.zero_grad()
        loss.backward()
        for opt in optimizers.values():
            opt.step()
        total_loss += float(loss.detach())
        if step % 20 == 0:
            rate = (start + idx.size) / max(time.perf_counter() - t0, 1e-9)
            bar.set_postfix(loss=f"{total_loss / (step + 1):.4f}", ex_s=f"{rate:,.0f}")
    epoch_seconds = time.perf_counter() - t0
    return {
        "epoch": epoch,
        "loss": total_loss / max(1, -(-n_epoch // config.batch_size)),
        "examples": int(n_epoch),
        "seconds": epoch_seconds,
        "examples_per_second": n_epoch / max(epoch_seconds, 1e-9),
    }


def _say_epoch(epoch: int, record: dict) -> None:
    shown = ", ".join(f"{k} {v:.2f}" for k, v in record.items() if k in ("P@1", "PSP@1", "P@5", "PSP@5", "shortlist_recall"))
    tqdm.write(
        f"epoch {epoch + 1}: loss {record['loss']:.4f}, {record['examples_per_second']:,.0f} ex/s"
        + (f", valid {shown}" if shown else "")
    )
