"""Label graphs whose rows are the soft targets of Gandalf's label points. The kernels (numba) are
imported when a graph is built, so that the command line can list the kinds at start-up."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

import numpy as np

from ..errors import ConfigError

if TYPE_CHECKING:  # scipy is imported where a graph is built: listing the kinds stays cheap
    import scipy.sparse as sp


@dataclass
class RandomWalkConfig:
    """ECLARE's random-walk graph (:func:`.random_walk.random_walk_graph`).

    Attributes:
        walk_length: steps of each label's walk.
        restart_prob: probability of returning to the start label at each step.
        neighbours: most neighbours a label keeps.
        head_threshold: labels with more positives than this get self-annotation only.
        seed: random seed of the walks (an augmentation sets it to its own seed).
    """

    walk_length: int = 400
    restart_prob: float = 0.8
    neighbours: int = 10
    head_threshold: int = 500
    seed: int = 0


@dataclass
class GraphConfig:
    """How to build the label graph.

    Attributes:
        kind: ``cooccurrence`` (P[i | j], paper eq. 6), ``random-walk`` (ECLARE's graph,
            row-normalised by its diagonal), ``glas`` (sigmoid of GLaS's symmetrised
            conditionals, on the stored entries only) or ``identity`` (self-annotation only).
        delta: entries must be strictly greater than this to be kept.
        top_k: optional cap on the non-self entries of a row.
        shrinkage: ``alpha`` in ``G_ji / (G_jj + alpha)`` (co-occurrence only; 0 = the paper).
        point_weights: how much each training point counts in G: ``none`` (the paper) or
            ``inverse-size`` (1 / number of labels of the point).
        co_label_scale: factor on every non-self entry after thresholding (1 = the paper; below 1
            the label's own target dominates its co-labels').
        self_scale: factor on each row's self entry (1 = the paper; 0 drops it, so a label's point
            teaches its co-labels but not "the label's own text -> the label", and a label without
            co-labels gets no point's worth of targets: an all-negative point).
        walk: the random-walk graph's own settings (ignored by the other kinds).
    """

    kind: str = "cooccurrence"
    delta: float = 0.1
    top_k: int | None = None
    shrinkage: float = 0.0
    point_weights: str = "none"
    co_label_scale: float = 1.0
    self_scale: float = 1.0
    walk: RandomWalkConfig = field(default_factory=RandomWalkConfig)

    def validate(self) -> None:
        if self.kind not in GRAPH_BUILDERS:
            raise ConfigError(f"unknown graph kind {self.kind!r}; choose one of {', '.join(GRAPH_KINDS)}")
        if not 0.0 <= self.delta < 1.0:
            raise ConfigError(f"delta must be in [0, 1), got {self.delta}")
        if self.top_k is not None and self.top_k < 0:
            raise ConfigError("top_k must be >= 0")
        if self.shrinkage < 0:
            raise ConfigError("shrinkage must be >= 0")
        if self.point_weights not in ("none", "inverse-size"):
            raise ConfigError("point_weights must be 'none' or 'inverse-size'")
        if not 0.0 <= self.co_label_scale <= 1.0:
            raise ConfigError(f"co_label_scale must be in [0, 1], got {self.co_label_scale}")
        if not 0.0 <= self.self_scale <= 1.0:
            raise ConfigError(f"self_scale must be in [0, 1], got {self.self_scale}")
        if self.kind == "random-walk":
            unused = [
                name
                for name, value, default in (
                    ("top_k", self.top_k, None),
                    ("shrinkage", self.shrinkage, 0.0),
                    ("point_weights", self.point_weights, "none"),
                )
                if value != default
            ]
            if unused:
                raise ConfigError(f"{', '.join(unused)}: for the co-occurrence graphs only, not random-walk")


def point_weights(Y: sp.csr_matrix, scheme: str) -> np.ndarray | None:
    """Per-point weights for co-occurrence counting (``None`` means all ones)."""
    if scheme == "none":
        return None
    import scipy.sparse as sp

    sizes = np.diff(sp.csr_matrix(Y).indptr).astype(np.float64)
    return 1.0 / np.maximum(sizes, 1.0)


def label_graph(Y: sp.spmatrix, config: GraphConfig | None = None, client=None) -> sp.csr_matrix:
    """Soft targets of every label's label point: row j holds ``y_j`` (``L x L`` float32 CSR).

    ``Y`` must be the ORIGINAL training labels (``N x L``). The self entry of each row is 1
    (``sigmoid(1)`` for ``glas``, whose S has 1 on the diagonal). With a ``distributed.Client``,
    the co-occurrence kinds are computed on its Dask cluster (:mod:`.distributed`; the same result).
    The kind's row of :data:`GRAPH_BUILDERS` builds it.
    """
    import scipy.sparse as sp

    config = config or GraphConfig()
    config.validate()
    G = GRAPH_BUILDERS[config.kind](sp.csr_matrix(Y), config, client)
    if config.co_label_scale != 1.0 or config.self_scale != 1.0:
        G = scale_entries(G, co_labels=config.co_label_scale, self_entry=config.self_scale)
    return G


def _cooccurrence(Y: sp.csr_matrix, config: GraphConfig, client, symmetric: bool = False) -> sp.csr_matrix:
    shrinkage = 0.0 if symmetric else config.shrinkage
    weights = point_weights(Y, config.point_weights)
    if client is not None:
        from .distributed import dask_conditional_graph

        return dask_conditional_graph(
            Y, client, delta=config.delta, top_k=config.top_k, shrinkage=shrinkage, point_weights=weights, symmetric=symmetric
        )
    from .cooccurrence import conditional_graph

    return conditional_graph(
        Y, delta=config.delta, top_k=config.top_k, shrinkage=shrinkage, point_weights=weights, symmetric=symmetric
    )


def _glas(Y: sp.csr_matrix, config: GraphConfig, client) -> sp.csr_matrix:
    G = _cooccurrence(Y, config, client, symmetric=True)
    G.data = (1.0 / (1.0 + np.exp(-G.data.astype(np.float64)))).astype(np.float32)
    return G


def _random_walk(Y: sp.csr_matrix, config: GraphConfig, client) -> sp.csr_matrix:
    if client is not None:
        raise ConfigError("the random-walk graph runs on one machine only; drop --dask or choose another graph")
    from .random_walk import random_walk_graph

    walk = config.walk
    return random_walk_graph(
        Y,
        delta=config.delta,
        walk_length=walk.walk_length,
        restart_prob=walk.restart_prob,
        neighbours=walk.neighbours,
        head_threshold=walk.head_threshold,
        seed=walk.seed,
    )


def _identity(Y: sp.csr_matrix, config: GraphConfig, client) -> sp.csr_matrix:
    import scipy.sparse as sp

    return sp.identity(Y.shape[1], dtype=np.float32, format="csr")


GRAPH_BUILDERS = {"cooccurrence": _cooccurrence, "random-walk": _random_walk, "glas": _glas, "identity": _identity}
"""Graph kind -> ``build(Y, config, client) -> L x L CSR``: adding a kind is one function and one entry."""
GRAPH_KINDS = tuple(GRAPH_BUILDERS)


def scale_entries(G: sp.csr_matrix, co_labels: float = 1.0, self_entry: float = 1.0) -> sp.csr_matrix:
    """``G`` with its off-diagonal entries multiplied by ``co_labels`` and its diagonal by
    ``self_entry``; entries that become 0 are dropped."""
    import scipy.sparse as sp

    G = sp.csr_matrix(G, copy=True)
    rows = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
    on = G.indices == rows
    G.data[~on] *= np.float32(co_labels)
    G.data[on] *= np.float32(self_entry)
    G.eliminate_zeros()
    return G


_KERNELS = {"conditional_graph": "cooccurrence", "random_walk_graph": "random_walk", "random_walk_counts": "random_walk"}


def __getattr__(name: str):
    if name in _KERNELS:
        import importlib

        return getattr(importlib.import_module(f".{_KERNELS[name]}", __name__), name)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


__all__ = [
    "GRAPH_KINDS",
    "GRAPH_BUILDERS",
    "GraphConfig",
    "RandomWalkConfig",
    "label_graph",
    "conditional_graph",
    "random_walk_graph",
    "random_walk_counts",
    "point_weights",
    "scale_entries",
]
