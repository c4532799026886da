"""Training a label tree's classifiers one level at a time (PECOS's ``HierarchicalMLModel``): each
level's node targets, the instances active below each parent, a seed a level, and levels too large
for memory written as files into a scratch directory that lives as long as the model holds them.
"""

from __future__ import annotations

import shutil
import tempfile
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import scipy.sparse as sp

from .label_tree import LabelTree
from .level_chunks import write_chunks
from .level_store import LaidOutLevel, drop_csr, is_spilled
from .linear_solver import SolverConfig, train_level
from .node_targets import node_targets

# a level that trains longer than this says how far it is, this often
LEVEL_PROGRESS_SECONDS = 15.0


@dataclass(frozen=True)
class TrainedLevels:
    """Each level's classifiers (CSR, one row a node in tree order) and, for a level written to
    files because it outgrew memory, its directory (None: in memory), where its search layout is
    its only copy (a :class:`.LaidOutLevel`)."""

    levels: list[sp.csr_matrix | LaidOutLevel]
    files: list[Path | None]


def train_levels(
    Xb: sp.csr_matrix,
    Y: sp.csr_matrix,
    weights: np.ndarray,
    tree: LabelTree,
    solver: SolverConfig,
    seed: int,
    threads: int,
    scratch: Path,
    say: Callable[[str], None] = lambda message: None,
    progress: bool = False,
    positive_weights: np.ndarray | None = None,
) -> TrainedLevels:
    """Every level of ``tree``'s classifiers on inputs ``Xb`` (bias feature included), (soft)
    targets ``Y`` (``N x L``), instance weights and factors on each instance's positives' cost
    (None: 1): the cluster levels top down, then the labels.
    Level ``t``'s solver seed is drawn from ``(seed, t)``; a level that outgrows memory goes to
    ``scratch / level{t}`` with its search layout."""
    n_labels = Y.shape[1]
    position = np.empty(n_labels, dtype=np.int64)
    position[tree.order] = np.arange(n_labels)
    n_levels = len(tree.bounds) + 1  # cluster levels, then the labels
    levels: list[sp.csr_matrix | LaidOutLevel] = []
    files: list[Path | None] = []
    parent_targets: sp.csc_matrix | None = None
    for t in range(n_levels):
        if t < n_levels - 1:
            node_of_label, n_nodes = tree.node_of_label(t), tree.bounds[t].size - 1
        else:
            node_of_label, n_nodes = position, n_labels
        # the solver reads targets and parents' targets by node: held as CSC only
        T = node_targets(Y, node_of_label, n_nodes).tocsc()
        if parent_targets is None:
            active = sp.csr_matrix(np.ones((Xb.shape[0], 1), dtype=np.float32))
            parent_of = np.zeros(n_nodes, dtype=np.int64)
        else:
            active = parent_targets
            parent_of = np.repeat(np.arange(parent_targets.shape[1]), np.diff(tree.children(t - 1)))
        level_seed = int(np.random.SeedSequence([seed, t]).generate_state(1)[0] % (2**31 - 1 - n_nodes))
        spill = scratch / f"level{t}"
        spill.mkdir()
        level = f"level {t + 1}/{n_levels}"
        on_progress = every(LEVEL_PROGRESS_SECONDS, _share_line(level, say)) if progress else None
        W = train_level(
            Xb,
            T,
            active,
            parent_of,
            weights,
            solver,
            seed=level_seed,
            threads=threads,
            spill_dir=spill,
            on_progress=on_progress,
            positive_weights=positive_weights,
        )
        files.append(spill if is_spilled(spill) else None)
        if is_spilled(spill):  # a level in files keeps its search layout alone, in files
            write_chunks(W, np.array([0, n_nodes]) if t == 0 else tree.children(t - 1), spill, threads)
            W = LaidOutLevel(np.array(W.indptr), W.shape[1])
            drop_csr(spill)
        levels.append(W)
        say(f"{level}: {n_nodes:,} classifiers, {W.nnz:,} weights")
        parent_targets = T
    return TrainedLevels(levels, files)


def _share_line(level: str, say: Callable[[str], None]) -> Callable[[float], None]:
    return lambda share: say(f"{level}: {100 * share:.0f}% of its classifiers' work")


def every(seconds: float, report: Callable[[float], None]) -> Callable[[float], None]:
    """``report`` throttled: called with the latest value once ``seconds`` have passed since it
    last spoke (or since the start), never for the last value (the caller says when it is done)."""
    last = [time.perf_counter()]
    lock = threading.Lock()

    def call(share: float) -> None:
        now = time.perf_counter()
        with lock:
            if share >= 1.0 or now - last[0] < seconds:
                return
            last[0] = now
        report(share)

    return call


@dataclass(frozen=True)
class Scratch:
    """A training directory for levels that outgrow memory, and whether its parent was made for it."""

    path: Path
    made_parent: bool

    @classmethod
    def new(cls, checkpoint_dir: str | Path | None) -> Scratch:
        """A fresh directory under ``checkpoint_dir`` (beside the output, so saving links the files
        instead of copying them; an interrupted run's leftovers there are removed), else in the
        system's temporary directory."""
        if checkpoint_dir is None:
            return cls(Path(tempfile.mkdtemp(prefix="linear-levels-")), False)
        parent = Path(checkpoint_dir)
        made = not parent.exists()
        parent.mkdir(parents=True, exist_ok=True)
        for stale in parent.glob("linear-levels-*"):
            shutil.rmtree(stale, ignore_errors=True)
        return cls(Path(tempfile.mkdtemp(prefix="linear-levels-", dir=parent)), made)

    def remove(self) -> None:
        """Remove the directory, and the checkpoint directory made for it if left empty."""
        remove_scratch(self.path, self.made_parent)


def remove_scratch(path: Path, made_parent: bool) -> None:
    """:meth:`Scratch.remove` as a plain function of its fields (a finalizer must not hold the model)."""
    shutil.rmtree(path, ignore_errors=True)
    if made_parent:
        try:
            path.parent.rmdir()
        except OSError:  # not empty (or gone): someone else's now
            pass
