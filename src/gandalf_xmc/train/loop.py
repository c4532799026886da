"""The one training loop for every trained model (:func:`run`), and the neural networks' objective.

Each point is scored on its own shortlist: the labels of its (soft) targets plus the labels of
its top meta-classifier clusters (hard negatives), so the cost grows with the shortlist, not
with L. The loss
is binary cross-entropy with logits against the (soft) targets, so a target of 0.35 pulls its
score towards logit(0.35). Sparse tables (embeddings, label and cluster classifiers) are
updated with SparseAdam, the rest with AdamW. After every epoch the model is scored on a
validation split carved from the training data, a checkpoint is written (``last.pt``) and the
best model so far is kept (``best.pt``); training stops early when the selection metric has not
improved for ``patience`` epochs, and ``resume=True`` continues from ``last.pt``.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field
from pathlib import Path
from typing import Protocol

import numpy as np
import scipy.sparse as sp
import torch
from torch.nn import functional as F
from tqdm.auto import tqdm

from ..data.atomic import atomic_path
from ..metrics import evaluate
from ..models.neural import FeatureBatch, XMCNetwork
from .shortlist import shortlist_recall


@dataclass
class TrainConfig:
    """Settings of :func:`fit` (defaults are fixed a priori, never tuned on a test split)."""

    epochs: int = 20
    batch_size: int = 256
    lr: float = 0.01  # SparseAdam, sparse tables
    dense_lr: float = 0.002  # AdamW, dense layers
    weight_decay: float = 0.0
    train_clusters: int = 4  # top meta clusters per point whose labels are hard negatives
    predict_clusters: int = 128  # clusters searched per query at prediction time (validation: 32 -> 128 lifted
    # shortlist recall 45% -> 63% and P@1 29.6 -> 31.3 for the dual-encoder)
    meta_loss_weight: float = 1.0
    correction_l2: float = 0.0  # weight of the penalty on corrections to label-text-initialised classifiers
    patience: int = 3
    select_metric: str = "P@1"
    seed: int = 0
    threads: int | None = None


@dataclass
class ExtraPoints:
    """Which training examples are augmentation points (e.g. Gandalf's label points) and how much
    they count: a loss ``weight`` (the original points weigh 1) and the ``share`` of them drawn,
    afresh and seeded, into each epoch (the original points are all in every epoch)."""

    mask: np.ndarray
    weight: float = 1.0
    share: float = 1.0
    negatives: bool = True  # False: an extra point's loss covers its (soft) targets only

    def __post_init__(self) -> None:
        self.mask = np.asarray(self.mask, dtype=bool)
        if self.weight < 0:
            raise ValueError(f"extra-point weight must be >= 0, got {self.weight}")
        if not 0.0 < self.share <= 1.0:
            raise ValueError(f"extra-point share must be in (0, 1], got {self.share}")

    @property
    def is_neutral(self) -> bool:
        return self.weight == 1.0 and self.share == 1.0 and self.negatives

    def example_weights(self, base: np.ndarray | None = None) -> np.ndarray | None:
        """Per-example loss weights: ``base`` (default 1) times ``weight`` on the extra points."""
        if self.weight == 1.0:
            return base
        w = np.ones(self.mask.size, dtype=np.float32) if base is None else np.asarray(base, dtype=np.float32).copy()
        w[self.mask] *= self.weight
        return w

    def epoch_order(self, rng: np.random.Generator) -> np.ndarray:
        """This epoch's examples in shuffled order: every original point and ``share`` of the extra ones."""
        if self.share >= 1.0:
            return rng.permutation(self.mask.size)
        extra = np.flatnonzero(self.mask)
        drawn = rng.choice(extra, size=int(round(self.share * extra.size)), replace=False)
        return rng.permutation(np.concatenate([np.flatnonzero(~self.mask), drawn]))

    def extended(self, n_more: int) -> ExtraPoints:
        """The same settings after ``n_more`` original points were appended (e.g. LabelMix's)."""
        return ExtraPoints(np.concatenate([self.mask, np.zeros(n_more, dtype=bool)]), self.weight, self.share,
                           self.negatives)


@dataclass
class TrainResult:
    best_epoch: int
    best_score: float
    history: list[dict] = field(default_factory=list)
    seconds: float = 0.0
    examples_per_second: float = 0.0


def _cluster_targets(Yb: sp.csr_matrix, assign: np.ndarray, n_clusters: int) -> torch.Tensor:
    """Meta targets: a cluster's target is the largest target among its labels."""
    T = np.zeros((Yb.shape[0], n_clusters), dtype=np.float32)
    rows = np.repeat(np.arange(Yb.shape[0]), np.diff(Yb.indptr))
    np.maximum.at(T, (rows, assign[Yb.indices]), Yb.data)
    return torch.from_numpy(T)


def _candidate_pairs(Yb: sp.csr_matrix, top_clusters: np.ndarray, members: np.ndarray
                     ) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each point's shortlist as flat (row, label, target) triples: its (soft) positives plus the
    labels of its top clusters that are not already among its positives."""
    n, n_labels = Yb.shape
    pos_rows = np.repeat(np.arange(n), np.diff(Yb.indptr))
    hard = members[top_clusters].reshape(n, -1)  # B x (c * m), -1 padded
    hard_rows = np.repeat(np.arange(n), hard.shape[1])
    hard = hard.ravel()
    keep = hard >= 0
    if Yb.nnz:
        codes = np.sort(pos_rows * n_labels + Yb.indices)
        cand = hard_rows * n_labels + np.maximum(hard, 0)
        at = np.minimum(np.searchsorted(codes, cand), codes.size - 1)
        keep &= codes[at] != cand
    rows = np.concatenate([pos_rows, hard_rows[keep]])
    labels = np.concatenate([Yb.indices.astype(np.int64), hard[keep]])
    targets = np.concatenate([Yb.data.astype(np.float32), np.zeros(int(keep.sum()), dtype=np.float32)])
    return rows, labels, targets


@torch.no_grad()
def predict(network: XMCNetwork, X: sp.csr_matrix | np.ndarray, members: np.ndarray, k: int = 100, n_clusters: int = 128,
            batch_size: int = 128, progress: bool = False) -> sp.csr_matrix:
    """Top-``k`` label scores (sigmoid probabilities) for each row of features ``X``."""
    network.eval()
    n_clusters = min(n_clusters, members.shape[0])
    rows, cols, vals = [], [], []
    for start in tqdm(range(0, X.shape[0], batch_size), desc="predict", disable=not progress, unit="batch"):
        z = network.encode(FeatureBatch.of_rows(X, slice(start, start + batch_size)))
        top = torch.topk(network.meta_scores(z), n_clusters, dim=1).indices.numpy()
        cand = torch.from_numpy(members[top].reshape(top.shape[0], -1))
        scores = network.candidate_scores(z, cand).masked_fill(cand < 0, float("-inf"))
        kk = min(k, cand.shape[1])
        best = torch.topk(scores, kk, dim=1)
        ids = torch.gather(cand, 1, best.indices).numpy()
        val = torch.sigmoid(best.values).numpy()
        ok = np.isfinite(best.values.numpy()) & (ids >= 0)
        r = np.repeat(np.arange(start, start + z.shape[0]), kk).reshape(-1, kk)
        rows.append(r[ok])
        cols.append(ids[ok])
        vals.append(val[ok])
    n_labels = network.labels.num_embeddings
    if not rows:
        return sp.csr_matrix((X.shape[0], n_labels), dtype=np.float32)
    return sp.csr_matrix((np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(X.shape[0], n_labels),
                         dtype=np.float32)


@torch.no_grad()
def candidate_sets(network: XMCNetwork, X: sp.csr_matrix | np.ndarray, members: np.ndarray, n_clusters: int = 32,
                   batch_size: int = 512) -> sp.csr_matrix:
    """The labels each point's top meta clusters offer (binary ``n x L``), for shortlist recall."""
    network.eval()
    n_clusters = min(n_clusters, members.shape[0])
    blocks = []
    for start in range(0, X.shape[0], batch_size):
        z = network.encode(FeatureBatch.of_rows(X, slice(start, start + batch_size)))
        top = torch.topk(network.meta_scores(z), n_clusters, dim=1).indices.numpy()
        cand = members[top].reshape(top.shape[0], -1)
        rows = np.repeat(np.arange(cand.shape[0]), cand.shape[1]).reshape(cand.shape)
        ok = cand >= 0
        blocks.append(sp.csr_matrix((np.ones(int(ok.sum()), dtype=np.float32), (rows[ok], cand[ok])),
                                    shape=(cand.shape[0], network.labels.num_embeddings)))
    return sp.vstack(blocks, format="csr")


def _save(path: Path, state: dict) -> None:
    with atomic_path(path) as tmp:
        torch.save(state, tmp)


class Objective(Protocol):
    """What :func:`run` trains: a module, its optimizers and a loss over a batch of example ids."""

    module: torch.nn.Module  # everything checkpointed
    optimizers: dict[str, torch.optim.Optimizer]
    n_examples: int

    def loss(self, idx: np.ndarray) -> torch.Tensor:
        """Mean loss of the examples ``idx`` (sorted ids)."""

    def validate(self) -> dict[str, float] | None:
        """Validation metrics (must hold ``select_metric``), or None when there is no validation split."""

    def start_epoch(self, epoch: int) -> None:
        """Called before each epoch (e.g. to reseed a batch transform so that resuming replays it)."""


def run(objective: Objective, config: TrainConfig, checkpoint_dir: str | Path | None = None, resume: bool = False,
        progress: bool = True, on_epoch: Callable[[dict], None] | None = None,
        extra: ExtraPoints | None = None) -> TrainResult:
    """The epoch loop shared by every model: shuffled batches, a progress bar with loss and
    examples/s, validation and model selection, checkpoints, early stopping and resume.

    ``extra`` (optional) limits each epoch to a share of the augmentation points; their loss
    weight is the objective's business (see :meth:`ExtraPoints.example_weights`).

    At the end ``objective.module`` holds the best epoch's weights (the last ones without validation).
    """
    if config.threads:
        torch.set_num_threads(config.threads)
    torch.manual_seed(config.seed)
    module, optimizers, n = objective.module, objective.optimizers, objective.n_examples
    ckpt = Path(checkpoint_dir) if checkpoint_dir is not None else None
    if ckpt is not None:
        ckpt.mkdir(parents=True, exist_ok=True)
    result = TrainResult(best_epoch=-1, best_score=-np.inf)
    start_epoch = 0
    if resume:
        if ckpt is None or not (ckpt / "last.pt").exists():
            raise FileNotFoundError("nothing to resume: no last.pt checkpoint")
        state = torch.load(ckpt / "last.pt", weights_only=False)
        module.load_state_dict(state["model"])
        for name, opt in optimizers.items():
            opt.load_state_dict(state["optimizers"][name])
        result = TrainResult(**state["result"])
        start_epoch = state["epoch"] + 1
    best_state: dict | None = None  # in-memory copy of the best model when there is no checkpoint dir
    started = time.perf_counter()
    seen = 0
    validating = True
    stale = sum(1 for h in result.history if h["epoch"] > result.best_epoch)
    for epoch in range(start_epoch, config.epochs):
        if validating and result.history and stale >= config.patience:
            break
        module.train()
        rng = np.random.default_rng([config.seed, epoch])  # epoch-keyed: resuming replays the same order
        torch.manual_seed(config.seed * 1000 + epoch)
        order = rng.permutation(n) if extra is None else extra.epoch_order(rng)
        n_epoch = order.size
        objective.start_epoch(epoch)
        total_loss, t0 = 0.0, time.perf_counter()
        bar = tqdm(range(0, n_epoch, config.batch_size), desc=f"epoch {epoch + 1}/{config.epochs}", disable=not progress,
                   unit="batch", leave=False)
        for step, start in enumerate(bar):
            idx = np.sort(order[start:start + config.batch_size])
            loss = objective.loss(idx)
            for opt in optimizers.values():
                opt.zero_grad()
            loss.backward()
            for opt in optimizers.values():
                opt.step()
            total_loss += float(loss.detach())
            seen += idx.size
            if step % 20 == 0:
                rate = (start + idx.size) / max(time.perf_counter() - t0, 1e-9)
                bar.set_postfix(loss=f"{total_loss / (step + 1):.4f}", ex_s=f"{rate:,.0f}")
        epoch_seconds = time.perf_counter() - t0
        record = {"epoch": epoch, "loss": total_loss / max(1, -(-n_epoch // config.batch_size)),
                  "examples": int(n_epoch), "seconds": epoch_seconds, "examples_per_second": n_epoch / max(epoch_seconds, 1e-9)}
        module.eval()
        metrics = objective.validate()
        validating = metrics is not None
        if metrics is not None:
            record.update(metrics)
            score = metrics[config.select_metric]
        else:
            score = float(epoch)
        result.history.append(record)
        if score > result.best_score:
            result.best_score, result.best_epoch = score, epoch
            stale = 0
            if ckpt is not None:
                _save(ckpt / "best.pt", {"model": module.state_dict(), "epoch": epoch})
            else:
                best_state = {k: v.detach().clone() for k, v in module.state_dict().items()}
        else:
            stale += 1
        if ckpt is not None:
            _save(ckpt / "last.pt", {"model": module.state_dict(), "epoch": epoch, "result": asdict(result),
                                     "optimizers": {name: opt.state_dict() for name, opt in optimizers.items()}})
        if on_epoch is not None:
            on_epoch(record)
        if progress:
            shown = ", ".join(f"{k} {v:.2f}" for k, v in record.items()
                              if k in ("P@1", "PSP@1", "P@5", "PSP@5", "shortlist_recall"))
            tqdm.write(f"epoch {epoch + 1}: loss {record['loss']:.4f}, {record['examples_per_second']:,.0f} ex/s"
                       + (f", valid {shown}" if shown else ""))
    if ckpt is not None and (ckpt / "best.pt").exists():
        module.load_state_dict(torch.load(ckpt / "best.pt", weights_only=False)["model"])
    elif best_state is not None:
        module.load_state_dict(best_state)
    module.eval()
    result.seconds = time.perf_counter() - started
    result.examples_per_second = seen / max(result.seconds, 1e-9)
    return result


def validation_metrics(predictions: sp.csr_matrix, valid: tuple) -> dict[str, float]:
    """P@1/5 and PSP@1/5 of ``predictions`` on ``valid = (features, Y, inverse propensities[, filter pairs])``."""
    scores = evaluate(predictions, valid[1], valid[2], ks=(1, 3, 5), filter_pairs=valid[3] if len(valid) > 3 else None)
    return {m: scores[m] for m in ("P@1", "P@5", "PSP@1", "PSP@5")}


class NetworkObjective:
    """Soft-target BCE of an :class:`XMCNetwork` over each point's cluster shortlist, plus the meta loss."""

    def __init__(self, network: XMCNetwork, X: sp.csr_matrix | np.ndarray, Y: sp.csr_matrix, assign: np.ndarray,
                 members: np.ndarray, valid: tuple | None, config: TrainConfig,
                 example_weights: np.ndarray | None = None, mixer: tuple | None = None,
                 targets_only: np.ndarray | None = None):
        """``mixer = (transform, texts, featurize)``: each batch's texts and targets go through
        ``transform`` (LabelMix) and the batch's features are recomputed with ``featurize``;
        ``targets_only`` marks examples whose loss covers their targets only (no shortlist negatives)."""
        self.module = self.network = network
        self.X = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X)
        self.Y = sp.csr_matrix(Y, dtype=np.float32)
        self.assign, self.members, self.valid, self.config = assign, members, valid, config
        self.n_examples = self.X.shape[0]
        self.weights = None if example_weights is None else torch.as_tensor(example_weights, dtype=torch.float32)
        self.mixer = mixer
        self.targets_only = None if targets_only is None else np.asarray(targets_only, dtype=bool)
        dense_params = network.dense_parameters()
        # a frozen encoder has no dense parameters: keep an (idle) optimizer so checkpoints look alike
        self.optimizers = {
            "sparse": torch.optim.SparseAdam(network.sparse_parameters(), lr=config.lr),
            "dense": torch.optim.AdamW(dense_params or [torch.nn.Parameter(torch.zeros(1))], lr=config.dense_lr,
                                       weight_decay=config.weight_decay)}

    def loss(self, idx: np.ndarray) -> torch.Tensor:
        network, config, n_clusters = self.network, self.config, self.members.shape[0]
        Yb = self.Y[idx]
        if self.mixer is not None:
            transform, texts, featurize = self.mixer
            originals = [texts[i] for i in idx]
            mixed, Yb = transform(originals, Yb)
            if sp.issparse(self.X):  # TF-IDF rows are cheap: recompute the batch
                Xb = featurize(mixed)
            else:  # sentence embeddings are not: re-encode only the mixed rows
                Xb = np.array(self.X[idx])
                changed = [j for j, (a, b) in enumerate(zip(mixed, originals)) if a != b]
                if changed:
                    Xb[changed] = featurize([mixed[j] for j in changed])
            z = network.encode(FeatureBatch.of_rows(Xb, slice(None)))
        else:
            z = network.encode(FeatureBatch.of_rows(self.X, idx))
        meta = network.meta_scores(z)
        top = torch.topk(meta.detach(), min(config.train_clusters, n_clusters), dim=1).indices.numpy()
        rows, labels, targets = _candidate_pairs(Yb, top, self.members)
        if self.targets_only is not None:
            # these rows' shortlist labels outside their targets are not known negatives: a label
            # point says which labels its text goes with, not which it does not
            keep = (targets > 0) | ~self.targets_only[idx][rows]
            rows, labels, targets = rows[keep], labels[keep], targets[keep]
        rows_t, ids_t = torch.from_numpy(rows), torch.from_numpy(labels)
        logits = network.pair_scores(z, rows_t, ids_t)
        weights = None if self.weights is None else self.weights[idx]
        loss = F.binary_cross_entropy_with_logits(logits, torch.from_numpy(targets),
                                                  weight=None if weights is None else weights[rows_t])
        meta_loss = F.binary_cross_entropy_with_logits(meta, _cluster_targets(Yb, self.assign, n_clusters),
                                                       weight=None if weights is None else weights[:, None])
        loss = loss + config.meta_loss_weight * meta_loss
        if config.correction_l2 > 0:
            loss = loss + config.correction_l2 * self.network.correction_penalty(ids_t)
        return loss

    def start_epoch(self, epoch: int) -> None:
        if self.mixer is not None:
            self.mixer[0].rng = np.random.default_rng([self.config.seed, epoch, 7])

    def validate(self) -> dict[str, float] | None:
        if self.valid is None:
            return None
        Xv, Yv = self.valid[:2]
        pred = predict(self.network, Xv, self.members, k=10, n_clusters=self.config.predict_clusters)
        metrics = validation_metrics(pred, self.valid)
        metrics["shortlist_recall"] = shortlist_recall(
            candidate_sets(self.network, Xv, self.members, self.config.predict_clusters), Yv)
        return metrics


def fit(network: XMCNetwork, X: sp.csr_matrix | np.ndarray, Y: sp.csr_matrix, assign: np.ndarray, members: np.ndarray,
        valid: tuple | None, config: TrainConfig,
        checkpoint_dir: str | Path | None = None, resume: bool = False, example_weights: np.ndarray | None = None,
        progress: bool = True, on_epoch: Callable[[dict], None] | None = None, mixer: tuple | None = None,
        extra: ExtraPoints | None = None) -> TrainResult:
    """Train ``network`` on features ``X`` and (soft) targets ``Y`` with :func:`run`.

    Args:
        assign, members: label -> cluster, and the padded cluster -> labels table.
        valid: ``(X_valid, Y_valid, inverse_propensities[, filter_pairs])`` for model selection,
            or None (then the last epoch is kept).
        checkpoint_dir: where ``last.pt`` and ``best.pt`` go; needed for ``resume``.
        example_weights: optional per-point loss weights.
        mixer: optional ``(LabelMix, texts, featurize)`` batch transform.
        extra: which rows are augmentation points, their loss weight and share of each epoch.
    """
    if extra is not None:
        example_weights = extra.example_weights(example_weights)
    targets_only = extra.mask if extra is not None and not extra.negatives else None
    objective = NetworkObjective(network, X, Y, assign, members, valid, config, example_weights, mixer, targets_only)
    return run(objective, config, checkpoint_dir, resume, progress, on_epoch, extra)
