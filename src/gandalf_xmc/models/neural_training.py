"""The neural models' objective: soft-target BCE of an :class:`~.network.XMCNetwork` over each
point's cluster shortlist, plus the meta-classifier's loss, and prediction through the clusters.

Each point is scored on its own shortlist: the labels of its (soft) targets plus the labels of
its top meta-classifier clusters (hard negatives), so the cost grows with the shortlist, not with
L. The loss is binary cross-entropy with logits against the (soft) targets, so a target of 0.35
pulls its score towards logit(0.35), from above too unless the label points' targets are floors.
Sparse tables (embeddings, label and cluster classifiers) are updated with SparseAdam, the rest
with AdamW; :func:`gandalf_xmc.engine.loop.run` orders the epochs.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import scipy.sparse as sp
import torch
from torch.nn import functional as F
from tqdm.auto import tqdm

from ..engine.clusters import shortlist_recall
from ..engine.devices import autocast
from ..engine.loop import run
from ..engine.records import LabelPoints, TrainConfig, TrainResult, Validation, validation_metrics
from .network import FeatureBatch, XMCNetwork


def _cluster_targets(Yb: sp.csr_matrix, assign: np.ndarray, n_clusters: int, device: torch.device) -> torch.Tensor:
    """Meta targets: a cluster's target is the largest target among its labels."""
    T = np.zeros((Yb.shape[0], n_clusters), dtype=np.float32)
    rows = np.repeat(np.arange(Yb.shape[0]), np.diff(Yb.indptr))
    np.maximum.at(T, (rows, assign[Yb.indices]), Yb.data)
    return torch.from_numpy(T).to(device)


def _candidate_pairs(
    Yb: sp.csr_matrix, top_clusters: np.ndarray, members: np.ndarray
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
def predict(
    network: XMCNetwork,
    X: sp.csr_matrix | np.ndarray,
    members: np.ndarray,
    k: int = 100,
    n_clusters: int = 128,
    batch_size: int = 128,
    progress: bool = False,
    precision: str = "float32",
) -> sp.csr_matrix:
    """Top-``k`` label scores (sigmoid probabilities) for each row of features ``X``, computed on
    the network's device (float32 scores; ``precision`` ``bfloat16`` autocasts on a GPU)."""
    network.eval()
    device = network.device
    n_clusters = min(n_clusters, members.shape[0])
    rows, cols, vals = [], [], []
    for start in tqdm(range(0, X.shape[0], batch_size), desc="predict", disable=not progress, unit="batch"):
        with autocast(device, precision):
            z = network.encode(FeatureBatch.of_rows(X, slice(start, start + batch_size), device))
            top = torch.topk(network.meta_scores(z), n_clusters, dim=1).indices.cpu().numpy()
            cand = torch.from_numpy(members[top].reshape(top.shape[0], -1)).to(device)
            scores = network.candidate_scores(z, cand).float().masked_fill(cand < 0, float("-inf"))
        kk = min(k, cand.shape[1])
        best = torch.topk(scores, kk, dim=1)
        ids = torch.gather(cand, 1, best.indices).cpu().numpy()
        values = best.values.cpu()
        val = torch.sigmoid(values).numpy()
        ok = np.isfinite(values.numpy()) & (ids >= 0)
        r = np.repeat(np.arange(start, start + z.shape[0]), kk).reshape(-1, kk)
        rows.append(r[ok])
        cols.append(ids[ok])
        vals.append(val[ok])
    n_labels = network.labels.num_embeddings
    if not rows:
        return sp.csr_matrix((X.shape[0], n_labels), dtype=np.float32)
    return sp.csr_matrix(
        (np.concatenate(vals), (np.concatenate(rows), np.concatenate(cols))), shape=(X.shape[0], n_labels), dtype=np.float32
    )


@torch.no_grad()
def candidate_sets(
    network: XMCNetwork,
    X: sp.csr_matrix | np.ndarray,
    members: np.ndarray,
    n_clusters: int = 32,
    batch_size: int = 512,
    precision: str = "float32",
) -> sp.csr_matrix:
    """The labels each point's top meta clusters offer (binary ``n x L``), for shortlist recall."""
    network.eval()
    n_clusters = min(n_clusters, members.shape[0])
    blocks = []
    for start in range(0, X.shape[0], batch_size):
        with autocast(network.device, precision):
            z = network.encode(FeatureBatch.of_rows(X, slice(start, start + batch_size), network.device))
            top = torch.topk(network.meta_scores(z), n_clusters, dim=1).indices.cpu().numpy()
        cand = members[top].reshape(top.shape[0], -1)
        rows = np.repeat(np.arange(cand.shape[0]), cand.shape[1]).reshape(cand.shape)
        ok = cand >= 0
        blocks.append(
            sp.csr_matrix(
                (np.ones(int(ok.sum()), dtype=np.float32), (rows[ok], cand[ok])),
                shape=(cand.shape[0], network.labels.num_embeddings),
            )
        )
    return sp.vstack(blocks, format="csr")


@dataclass(frozen=True)
class TransformedBatches:
    """A text transform (``acts_on == "texts"``, see :mod:`gandalf_xmc.augment.transforms`) applied
    to every training batch: the batch's ``texts`` go through ``transform`` and are featurised
    again with ``featurize``. The transform's generator is reseeded each epoch."""

    transform: Any  # a text transform with a reseedable ``rng``
    texts: list[str]
    featurize: Callable[[list[str]], object]


def _soft_bce(
    logits: torch.Tensor,
    targets: torch.Tensor,
    weight: torch.Tensor | None,
    positive: torch.Tensor | None,
    floors: torch.Tensor | None = None,
) -> torch.Tensor:
    """The mean of ``weight x (positive x t x softplus(-z) + (1 - t) x softplus(z))``: binary
    cross-entropy with logits against soft targets, the positive part of each entry scaled by
    ``positive`` (broadcast like ``weight``; torch's ``pos_weight`` scales by label, not by point).

    ``floors`` (booleans broadcast like ``weight``) marks the entries whose soft targets are floors:
    such an entry with 0 < t < 1 costs nothing once sigmoid(z) >= t, and below that its
    cross-entropy less the least it can be (at sigmoid(z) = t: the entropy of t), times
    ``weight x positive``. The cost is then continuous, and its gradient below the floor is the
    cross-entropy's. Without ``positive`` and ``floors``, torch's own fused loss."""
    if positive is None and floors is None:
        return F.binary_cross_entropy_with_logits(logits, targets, weight=weight)
    scale = torch.ones_like(targets) if positive is None else positive
    missed, exceeded = F.softplus(-logits), F.softplus(logits)  # -log sigmoid(z), -log(1 - sigmoid(z))
    per_entry = scale * targets * missed + (1.0 - targets) * exceeded
    if floors is not None:
        soft = floors & (targets > 0) & (targets < 1)
        t = targets.clamp(1e-6, 1.0 - 1e-6)  # the clamp only keeps the logs finite where soft is False
        cross_entropy = t * missed + (1.0 - t) * exceeded
        entropy = -(t * torch.log(t) + (1.0 - t) * torch.log1p(-t))
        below = scale * (cross_entropy - entropy)
        reached = logits >= torch.log(t) - torch.log1p(-t)
        per_entry = torch.where(soft, torch.where(reached, torch.zeros_like(below), below), per_entry)
    if weight is not None:
        per_entry = weight * per_entry
    return per_entry.mean()


class NetworkObjective:
    """Soft-target BCE of an :class:`XMCNetwork` over each point's cluster shortlist, plus the meta loss."""

    def __init__(
        self,
        network: XMCNetwork,
        X: sp.csr_matrix | np.ndarray,
        Y: sp.csr_matrix,
        assign: np.ndarray,
        members: np.ndarray,
        valid: Validation | None,
        config: TrainConfig,
        sample_weight: np.ndarray | None = None,
        batches: TransformedBatches | None = None,
        targets_only: np.ndarray | None = None,
        positive_weight: np.ndarray | None = None,
        floors: np.ndarray | None = None,
    ):
        """``batches``: each batch's texts and targets go through a text transform and the batch's
        features are recomputed; ``targets_only`` marks examples whose loss covers their targets
        only (no shortlist negatives); ``positive_weight``: each example's factor on the positive
        part of its pairs' and clusters' loss (the linear solver's per-point positive cost);
        ``floors`` marks examples whose soft targets are floors (:func:`_soft_bce`)."""
        self.module = self.network = network
        self.X = sp.csr_matrix(X) if sp.issparse(X) else np.asarray(X)
        self.Y = sp.csr_matrix(Y, dtype=np.float32)
        self.assign, self.members, self.valid, self.config = assign, members, valid, config
        self.n_examples = self.X.shape[0]
        self.device = network.device
        self.weights = None if sample_weight is None else torch.as_tensor(sample_weight, dtype=torch.float32, device=self.device)
        self.batches = batches
        self.targets_only = None if targets_only is None else np.asarray(targets_only, dtype=bool)
        self.floors = None if floors is None else torch.as_tensor(np.asarray(floors, dtype=bool), device=self.device)
        self.positives = (
            None if positive_weight is None else torch.as_tensor(positive_weight, dtype=torch.float32, device=self.device)
        )
        dense_params = network.dense_parameters()
        # a frozen encoder has no dense parameters: keep an (idle) optimizer so checkpoints look alike
        self.optimizers = {
            "sparse": torch.optim.SparseAdam(network.sparse_parameters(), lr=config.lr),
            "dense": torch.optim.AdamW(
                dense_params or [torch.nn.Parameter(torch.zeros(1))], lr=config.dense_lr, weight_decay=config.weight_decay
            ),
        }

    def loss(self, idx: np.ndarray) -> torch.Tensor:
        with autocast(self.device, self.config.gpu_precision):
            return self._loss(idx)

    def _loss(self, idx: np.ndarray) -> torch.Tensor:
        network, config, n_clusters, device = self.network, self.config, self.members.shape[0], self.device
        Yb = self.Y[idx]
        if self.batches is not None:
            transform, texts, featurize = self.batches.transform, self.batches.texts, self.batches.featurize
            originals = [texts[i] for i in idx]
            mixed, Yb = transform(originals, Yb)
            if sp.issparse(self.X):  # TF-IDF rows are cheap: recompute the batch
                Xb = featurize(mixed)
            else:  # sentence embeddings are not: re-encode only the mixed rows
                Xb = np.array(self.X[idx])
                changed = [j for j, (a, b) in enumerate(zip(mixed, originals)) if a != b]
                if changed:
                    Xb[changed] = featurize([mixed[j] for j in changed])
            z = network.encode(FeatureBatch.of_rows(Xb, slice(None), device))
        else:
            z = network.encode(FeatureBatch.of_rows(self.X, idx, device))
        meta = network.meta_scores(z).float()
        top = torch.topk(meta.detach(), min(config.train_clusters, n_clusters), dim=1).indices.cpu().numpy()
        rows, labels, targets = _candidate_pairs(Yb, top, self.members)
        if self.targets_only is not None:
            # these rows' shortlist labels outside their targets are not known negatives: a label
            # point says which labels its text goes with, not which it does not
            keep = (targets > 0) | ~self.targets_only[idx][rows]
            rows, labels, targets = rows[keep], labels[keep], targets[keep]
        rows_t, ids_t = torch.from_numpy(rows).to(device), torch.from_numpy(labels).to(device)
        logits = network.pair_scores(z, rows_t, ids_t).float()
        idx_t = torch.from_numpy(idx).to(device)
        weights = None if self.weights is None else self.weights[idx_t]
        positives = None if self.positives is None else self.positives[idx_t]
        floors = None if self.floors is None else self.floors[idx_t]
        loss = _soft_bce(
            logits,
            torch.from_numpy(targets).to(device),
            None if weights is None else weights[rows_t],
            None if positives is None else positives[rows_t],
            None if floors is None else floors[rows_t],
        )
        meta_loss = _soft_bce(
            meta,
            _cluster_targets(Yb, self.assign, n_clusters, device),
            None if weights is None else weights[:, None],
            None if positives is None else positives[:, None],
            None if floors is None else floors[:, None],
        )
        loss = loss + config.meta_loss_weight * meta_loss
        if config.correction_l2 > 0:
            loss = loss + config.correction_l2 * self.network.correction_penalty(ids_t)
        return loss

    def start_epoch(self, epoch: int) -> None:
        if self.batches is not None:
            self.batches.transform.rng = np.random.default_rng([self.config.seed, epoch, 7])

    def validate(self) -> dict[str, float] | None:
        if self.valid is None:
            return None
        Xv, Yv = self.valid.inputs, self.valid.Y
        precision = self.config.gpu_precision
        pred = predict(self.network, Xv, self.members, k=10, n_clusters=self.config.predict_clusters, precision=precision)
        metrics = validation_metrics(pred, self.valid)
        metrics["shortlist_recall"] = shortlist_recall(
            candidate_sets(self.network, Xv, self.members, self.config.predict_clusters, precision=precision), Yv
        )
        return metrics


def fit(
    network: XMCNetwork,
    X: sp.csr_matrix | np.ndarray,
    Y: sp.csr_matrix,
    assign: np.ndarray,
    members: np.ndarray,
    valid: Validation | None,
    config: TrainConfig,
    checkpoint_dir: str | Path | None = None,
    resume: bool = False,
    sample_weight: np.ndarray | None = None,
    progress: bool = True,
    on_epoch: Callable[[dict], None] | None = None,
    batch_transform: TransformedBatches | None = None,
    label_points: LabelPoints | None = None,
    positive_weight: np.ndarray | None = None,
) -> TrainResult:
    """Train ``network`` on features ``X`` and (soft) targets ``Y`` with :func:`run`.

    Args:
        assign, members: label -> cluster, and the padded cluster -> labels table.
        valid: a :class:`~gandalf_xmc.engine.records.Validation` of features, for model selection,
            or None (then the last epoch is kept).
        checkpoint_dir: where ``last.pt`` and ``best.pt`` go; needed for ``resume``.
        sample_weight: optional per-point loss weights.
        batch_transform: an optional text transform applied to every batch (:class:`TransformedBatches`).
        label_points: which rows are label points, the share of them in each epoch, whether
            they get shortlist negatives and whether their soft targets are floors.
        positive_weight: optional per-point factors on the cost of the positive part of the loss
            (``gandalf-tempered-firm``'s label points).
    """
    targets_only = label_points.mask if label_points is not None and not label_points.negatives else None
    floors = label_points.mask if label_points is not None and label_points.floors else None
    objective = NetworkObjective(
        network, X, Y, assign, members, valid, config, sample_weight, batch_transform, targets_only, positive_weight, floors
    )
    return run(objective, config, checkpoint_dir, resume, progress, on_epoch, label_points)
