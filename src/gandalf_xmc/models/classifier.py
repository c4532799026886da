"""A trainable neural XMC model with one fit/predict/save/load shape for every encoder family."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass, field
from pathlib import Path

import numpy as np
import scipy.sparse as sp
import torch

from ..train.loop import TrainConfig, TrainResult, fit, predict
from ..train.shortlist import balanced_clusters, cluster_members, label_representations
from .astec import BagOfEmbeddings
from .features import TextFeaturizer
from .neural import XMCNetwork

ENCODERS = {"astec": BagOfEmbeddings}


@dataclass
class ModelConfig:
    """Architecture and training settings of :class:`NeuralXMC`."""

    family: str = "astec"
    dim: int = 256
    dropout: float = 0.2
    max_cluster_size: int = 32
    cluster_dim: int = 64
    train: TrainConfig = field(default_factory=TrainConfig)


class NeuralXMC:
    """Features -> encoder -> meta-classifier over label clusters -> label classifier.

    ``fit(texts, Y, label_texts)`` learns from soft targets; ``predict(texts, k)`` returns the
    top-k labels of each text as a CSR matrix of probabilities.
    """

    def __init__(self, config: ModelConfig | None = None):
        self.config = config or ModelConfig()
        if self.config.family not in ENCODERS:
            raise ValueError(f"unknown model family {self.config.family!r}")
        self.featurizer: TextFeaturizer | None = None
        self.network: XMCNetwork | None = None
        self.assign: np.ndarray | None = None
        self.members: np.ndarray | None = None
        self.result: TrainResult | None = None

    def _build(self, n_features: int, n_labels: int, n_clusters: int) -> XMCNetwork:
        cfg = self.config
        encoder = ENCODERS[cfg.family](n_features, cfg.dim, cfg.dropout)
        return XMCNetwork(encoder, cfg.dim, n_labels, n_clusters)

    def fit(self, texts: list[str], Y: sp.csr_matrix, label_texts: list[str],
            valid: tuple[list[str], sp.csr_matrix, np.ndarray] | None = None, example_weights: np.ndarray | None = None,
            checkpoint_dir: str | Path | None = None, resume: bool = False, progress: bool = True) -> NeuralXMC:
        """Train on ``texts`` with (soft) targets ``Y``; ``valid`` = (texts, Y, inverse propensities)."""
        cfg = self.config
        torch.manual_seed(cfg.train.seed)
        self.featurizer = TextFeaturizer().fit(list(texts) + list(label_texts))
        X = self.featurizer.transform(texts)
        Z = self.featurizer.transform(label_texts)
        reps = label_representations(X, Y, Z, cfg.cluster_dim, cfg.train.seed)
        self.assign = balanced_clusters(reps, cfg.max_cluster_size, cfg.train.seed)
        self.members, _ = cluster_members(self.assign)
        self.network = self._build(self.featurizer.n_features, len(label_texts), self.members.shape[0])
        v = None if valid is None else (self.featurizer.transform(valid[0]), valid[1], valid[2])
        self.result = fit(self.network, X, Y, self.assign, self.members, v, cfg.train, checkpoint_dir, resume,
                          example_weights, progress)
        return self

    def predict(self, texts: list[str], k: int = 100, progress: bool = False) -> sp.csr_matrix:
        if self.network is None or self.featurizer is None or self.members is None:
            raise RuntimeError("fit or load the model first")
        return predict(self.network, self.featurizer.transform(texts), self.members, k,
                       self.config.train.predict_clusters, progress=progress)

    def save(self, directory: str | Path) -> None:
        """Write config, features, clusters and weights into ``directory``."""
        assert self.network is not None and self.featurizer is not None and self.assign is not None
        d = Path(directory)
        d.mkdir(parents=True, exist_ok=True)
        (d / "model.json").write_text(json.dumps({"model": asdict(self.config), "n_labels": int(self.assign.size),
                                                  "result": asdict(self.result) if self.result else None}, indent=1))
        self.featurizer.save(d)
        np.save(d / "clusters.npy", self.assign)
        torch.save(self.network.state_dict(), d / "weights.pt")

    @classmethod
    def load(cls, directory: str | Path) -> NeuralXMC:
        d = Path(directory)
        spec = json.loads((d / "model.json").read_text())
        m = spec["model"]
        config = ModelConfig(**{**m, "train": TrainConfig(**m["train"])})
        model = cls(config)
        model.featurizer = TextFeaturizer.load(d)
        model.assign = np.load(d / "clusters.npy")
        model.members, _ = cluster_members(model.assign)
        model.network = model._build(model.featurizer.n_features, int(spec["n_labels"]), model.members.shape[0])
        model.network.load_state_dict(torch.load(d / "weights.pt", weights_only=True))
        model.network.eval()
        return model
