"""NGAME's first stage (Dahiya et al., WSDM 2023): all-MiniLM-L6-v2 fine-tuned so that a training
point's embedding lies nearer its labels' texts than the other labels' texts of its batch.

* **Negative-mining-aware batches**: each epoch the points are embedded by the encoder as it is and
  split by balanced 2-means into groups of at most ``batch_size``; a group is a batch, so the
  other points' labels in it, the in-batch negatives, are labels of similar points: hard ones.
* **Loss**: each point draws one of its labels (seeded); softmax cross-entropy over the batch's
  drawn labels at ``temperature``, a label that is also one of the point's own masked out
  (a false negative).
* **Selection** is the classifier stage's: the model trains its classifiers on the tuned encoder
  and on the packaged one and keeps the better on validation, so fine-tuning that does not help is
  undone (:class:`~gandalf_xmc.models.neural_xmc.NeuralXMC`).
* An epoch takes a seeded sample of ``pairs_per_epoch`` points (0: every one), on any device: a
  run on a CPU stays within minutes, and most of the classifier stage's points are then points the
  encoder was not fitted to, as a deployment's are.
* The encoder's head is the sentence model's (mean over tokens, l2 norm), so that before tuning it
  embeds as :func:`gandalf_xmc.sentence.embed` does; texts are cut at ``max_length`` tokens.

The classifier stage (Renee's one-vs-all classifiers on the frozen, tuned encoder, where Gandalf's
label points join) is :class:`~gandalf_xmc.models.neural_xmc.NeuralXMC`'s ``ngame`` family.
"""

from __future__ import annotations

import contextlib
import time
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch
import torch.nn.functional as F
from torch import nn
from tqdm.auto import tqdm

from .. import sentence
from ..engine.clusters import balanced_clusters
from ..engine.loop import load_checkpoint, save_checkpoint
from ..errors import CheckpointError, ConfigError
from ..settings import check_ranges

CHECKPOINT = "contrastive.pt"  # the first stage's checkpoint, beside the classifier stage's last.pt


@dataclass
class ContrastiveConfig:
    """Settings of the first stage (fixed a priori; docs/decisions.md, "The fine-tuned encoder")."""

    epochs: int = 2  # 0: the packaged encoder as it is
    batch_size: int = 64
    lr: float = 5e-5  # AdamW on the encoder's weights
    weight_decay: float = 0.01
    temperature: float = 0.05
    warmup: float = 0.1  # share of the first epoch's steps over which the learning rate rises from 0
    max_length: int = 32  # tokens kept of a text, in training and when embedding
    # the word embeddings are half the encoder's weights: AdamW would update all 11.7M each step
    tune_word_embeddings: bool = False
    # an epoch fine-tunes on a seeded sample of this many points (0: every point), on any device
    pairs_per_epoch: int = 4096

    def __post_init__(self) -> None:
        check_ranges(
            self,
            positive=("batch_size", "lr", "temperature", "max_length"),
            non_negative=("epochs", "weight_decay", "pairs_per_epoch"),
            below_one=("warmup",),
        )
        if self.batch_size < 2:
            raise ConfigError(f"contrastive batch_size must be at least 2 (a batch needs negatives), got {self.batch_size}")


def _precision(device: torch.device, precision: str):
    """bfloat16 autocast where asked (the CPU's native bfloat16, or a GPU), else float32."""
    if precision == "bfloat16":
        return torch.autocast(device.type, dtype=torch.bfloat16)
    return contextlib.nullcontext()


class TunedEncoder(nn.Module):
    """A trainable all-MiniLM-L6-v2 (tokeniser, BERT, mean over tokens, l2 norm)."""

    def __init__(self, max_length: int, device: torch.device | str = "cpu"):
        super().__init__()
        model = sentence.trainable_model(str(device))
        self.tokenizer = model[0].tokenizer
        self.bert = model[0].auto_model
        self.max_length = max_length

    @property
    def device(self) -> torch.device:
        return next(self.bert.parameters()).device

    def forward(self, texts: list[str]) -> torch.Tensor:
        """``len(texts) x 384`` l2-normalised embeddings (float32), with gradients when enabled."""
        return sentence.sentence_vectors(self.tokenizer, self.bert, texts, self.max_length)

    @torch.no_grad()
    def embed(self, texts: list[str], precision: str = "float32", batch_size: int = 256, progress: bool = False) -> np.ndarray:
        """Embeddings as a float32 array, in batches of texts of similar length (less padding)."""
        was_training = self.training
        self.eval()
        texts = list(texts)
        out = np.zeros((len(texts), sentence.EMBEDDING_DIM), dtype=np.float32)
        order = np.argsort([len(t) for t in texts], kind="stable")
        starts = range(0, len(texts), batch_size)
        with _precision(self.device, precision):
            for start in tqdm(starts, disable=not progress, desc="tuned MiniLM", leave=False):
                rows = order[start : start + batch_size]
                out[rows] = self([texts[i] for i in rows]).cpu().numpy()
        self.train(was_training)
        return out


def mined_batches(vectors: np.ndarray, batch_size: int, rng: np.random.Generator) -> list[np.ndarray]:
    """NGAME's batches: row ids grouped by balanced 2-means into groups of at most ``batch_size``
    similar rows (each at least half that, where there are enough rows), in a seeded order."""
    assign = balanced_clusters(vectors, batch_size, seed=int(rng.integers(2**31)))
    order = np.argsort(assign, kind="stable")
    groups = np.split(order, np.flatnonzero(np.diff(assign[order])) + 1)
    return [groups[i] for i in rng.permutation(len(groups))]


def batch_loss(
    encoder: TunedEncoder,
    texts: list[str],
    label_texts: list[str],
    Y: sp.csr_matrix,
    rows: np.ndarray,
    rng: np.random.Generator,
    temperature: float,
) -> torch.Tensor:
    """Mean in-batch softmax loss of the points ``rows``, each against one drawn label of its own
    (``Y``'s entries > 0), the batch's other drawn labels as negatives unless also its own."""
    counts = np.diff(Y.indptr)[rows]
    drawn = Y.indices[Y.indptr[rows] + (rng.random(rows.size) * counts).astype(np.int64)]
    labels, target = np.unique(drawn, return_inverse=True)
    own = Y[rows][:, labels].toarray() > 0
    own[np.arange(rows.size), target] = False  # the drawn label is the positive, not a false negative
    q = encoder([texts[i] for i in rows])
    z = encoder([label_texts[j] for j in labels])
    logits = (q @ z.T).float() / temperature
    logits = logits.masked_fill(torch.from_numpy(own).to(logits.device), float("-inf"))
    return F.cross_entropy(logits, torch.from_numpy(target.astype(np.int64)).to(logits.device))


def chosen_epochs(history: list[dict]) -> int:
    """How many epochs of fine-tuning a run kept (0: the packaged encoder), from its records: the
    epoch records of :func:`fine_tune`, then, where the model compared its classifiers on the tuned
    and the packaged encoder, that record (``stage`` ``classifiers``)."""
    if any(h.get("stage") == "classifiers" and not h["kept"] for h in history):
        return 0
    return len([h for h in history if h.get("epoch", -1) >= 0])  # an earlier version recorded the packaged encoder as -1


def epoch_sample_size(config: ContrastiveConfig, n_points: int) -> int:
    """How many of ``n_points`` an epoch fine-tunes on: ``pairs_per_epoch`` of them (every one
    where that is 0 or more than there are)."""
    if 0 < config.pairs_per_epoch < n_points:
        return max(2, config.pairs_per_epoch)
    return n_points


def fine_tune(
    encoder: TunedEncoder,
    texts: list[str],
    Y: sp.csr_matrix,
    label_texts: list[str],
    config: ContrastiveConfig,
    seed: int = 0,
    gpu_precision: str = "bfloat16",
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    progress: bool = True,
    precision: str = "float32",
) -> list[dict]:
    """Fine-tune ``encoder`` in place on the points ``texts`` and their labels ``Y`` (points without
    a label are left out); returns the records of the epochs (mean loss, pairs, seconds, pairs/s).

    Args:
        gpu_precision: ``bfloat16`` autocasts the forward pass on a GPU.
        precision: the encoder's precision on the CPU (``bfloat16`` where the CPU has it natively):
            the forward pass autocasts to it there, and an epoch's batches are mined at it.
        checkpoint_dir: where ``contrastive.pt`` is written after each epoch; with ``resume`` a
            run starts after the last epoch written there (the draws of an epoch are seeded by
            ``seed`` and the epoch, so a resumed run replays what an unbroken one does).
    """
    if config.epochs == 0:
        return []
    Y = sp.csr_matrix(Y, dtype=np.float32, copy=True)
    Y.data = (Y.data > 0).astype(np.float32)  # a soft target's label counts as the point's own
    Y.eliminate_zeros()
    points = np.flatnonzero(np.diff(Y.indptr) > 0)
    if points.size < 2:
        raise ConfigError("the encoder's fine-tuning needs at least two training points with a label")
    encoder.bert.get_input_embeddings().weight.requires_grad_(config.tune_word_embeddings)
    tuned = [p for p in encoder.parameters() if p.requires_grad]
    optimizer = torch.optim.AdamW(tuned, lr=config.lr, weight_decay=config.weight_decay)
    ckpt = None if checkpoint_dir is None else Path(checkpoint_dir) / CHECKPOINT
    history: list[dict] = []
    start = 0
    if resume and ckpt is not None and ckpt.exists():
        state = load_checkpoint(ckpt)
        try:
            encoder.load_state_dict(state["model"])
            optimizer.load_state_dict(state["optimizer"])
        except (KeyError, RuntimeError, ValueError) as exc:
            why = str(exc).splitlines()[0][:200]
            raise CheckpointError(ckpt, None, f"checkpoint does not match this encoder ({why})") from None
        start, history = int(state["epoch"]) + 1, list(state.get("history", []))
    per_epoch = epoch_sample_size(config, points.size)
    warmup_steps = max(1, int(config.warmup * per_epoch / config.batch_size))
    forward_precision = gpu_precision if encoder.device.type == "cuda" else precision
    encoder.train()
    for epoch in range(start, config.epochs):
        began = time.perf_counter()
        rng = np.random.default_rng([seed, epoch, 11])
        drawn = points if per_epoch == points.size else np.sort(rng.choice(points, per_epoch, replace=False))
        vectors = encoder.embed([texts[i] for i in drawn], precision)
        batches = [drawn[b] for b in mined_batches(vectors, config.batch_size, rng) if b.size > 1]
        total = 0.0
        bar = tqdm(batches, disable=not progress, desc=f"encoder epoch {epoch + 1}/{config.epochs}", leave=False)
        gpus = [encoder.device] if encoder.device.type == "cuda" else []
        with torch.random.fork_rng(devices=gpus):  # dropout's draws seeded by the epoch, the caller's generator untouched
            torch.manual_seed(int(rng.integers(2**31)))
            for step, rows in enumerate(bar):
                if epoch == 0:
                    for group in optimizer.param_groups:
                        group["lr"] = config.lr * min(1.0, (step + 1) / warmup_steps)
                with _precision(encoder.device, forward_precision):
                    loss = batch_loss(encoder, texts, label_texts, Y, rows, rng, config.temperature)
                optimizer.zero_grad(set_to_none=True)
                loss.backward()
                optimizer.step()
                total += float(loss.detach())
                bar.set_postfix(loss=f"{total / (step + 1):.3f}")
        seconds = time.perf_counter() - began
        history.append(
            {
                "epoch": epoch,
                "loss": total / max(1, len(batches)),
                "pairs": int(drawn.size),
                "seconds": seconds,
                "pairs_per_second": drawn.size / seconds,
            }
        )
        if ckpt is not None:
            ckpt.parent.mkdir(parents=True, exist_ok=True)
            save_checkpoint(
                ckpt, {"model": encoder.state_dict(), "optimizer": optimizer.state_dict(), "epoch": epoch, "history": history}
            )
    encoder.eval()
    return history
