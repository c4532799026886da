"""One-vs-rest L2-regularised classifiers of a tree level, by dual coordinate descent, each
trained only on its parent's active instances: squared hinge (LIBLINEAR's L2R_L2LOSS_SVC_DUAL, the
default) or logistic loss (L2R_LR_DUAL, Yu, Huang and Lin 2011: each dual variable lies inside
``(0, cost)`` and its one-variable problem is solved by a few Newton steps).

A soft target ``t`` of instance i makes it a positive of cost ``Cp C t w_i`` and a negative of
cost ``C (1 - t) w_i`` (``w_i`` its instance weight, ``Cp`` the positive cost factor), so the
minimiser of the two squared hinges puts its margin at ``(Cp t - (1 - t)) / (Cp t + 1 - t)``
(``2 t - 1`` for ``Cp = 1``): soft targets are learnt, not rounded (with the logistic loss the
two entries are the cross-entropy of the target ``t``, whose margin is ``log(Cp t / (1 - t))``).
Weights at or below
``threshold`` in absolute value are dropped, so every classifier is a sparse vector.

Siblings are trained side by side: the children of one parent share its instances, so they visit
them in one shared random order, and a feature's weights of all the children are one contiguous
row of a dense ``features x children`` block. A visit reads the instance's features once and
updates every child's dual variables from one pass over those rows (each child's descent is
LIBLINEAR's, in the shared order, without shrinking; a child stops when its projected gradient's
spread is below ``eps``). At the top of a tree this turns millions of scattered reads of one
child's weights into one cache line for all the children; at the leaves, hundreds of passes over
the same rows into one. A feature only one of the parent's rows uses gets no row of the block: its
weights are that row's dual variables times its value (most of a large leaf parent's block rows).

A big parent's arrays are read at random places every visit, so they sit on huge pages
(:mod:`.huge_pages`), and its setup and output avoid random reads where a pass over memory does.

Work is split over threads by parent (a lone parent's children in ``MIN_UNITS`` groups; numba
releases the GIL), handed out as threads free up; each unit's order is seeded by ``(seed, level,
first child)``, so the result does not depend on the thread count.
"""

from __future__ import annotations

import math
import os
import sys
import threading
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple

import numba
import numpy as np
import scipy.sparse as sp

from ..data.atomic import interrupts_deferred
from ..errors import ConfigError
from ..settings import check_ranges
from .huge_pages import huge_empty, huge_full
from .level_store import UnitBlocks, assemble_level
from .prefetch import prefetch

# prefetch distances in rows, and the weight-block size (about a last-level cache) below which
# prefetching weight rows only costs time (docs/decisions.md, "The linear model (XR-Linear)")
PREFETCH_FAR = 24
PREFETCH_MID = 16
PREFETCH_NEAR = 8
WEIGHT_PREFETCH_BYTES = 32 << 20
FLOATS_PER_LINE = 16  # float32 values in a 64-byte cache line: one prefetch each
# a thread's finished weights held in memory at most, when the caller gives a directory for more
SPILL_BYTES = 256 << 20
LOSSES = ("squared-hinge", "logistic")
# the logistic loss's dual variables start at this share of their cost (at most LOGISTIC_START):
# inside (0, cost), where its entropy terms are finite (LIBLINEAR's start)
LOGISTIC_START_SHARE = 1e-3
LOGISTIC_START = 1e-8
LOGISTIC_NEWTON_STEPS = 20  # at most, a variable a visit
LOGISTIC_INNER_EPS = 1e-3  # a variable's derivative below this (or below eps): it is left where it is


class LevelData(NamedTuple):
    """What every work unit of a level reads: each parent's active instances and their targets of it
    (CSC lists of ``active``), the node targets (CSC lists), the instances' features (CSR) and
    their loss weights and factors on their positives' cost."""

    act_ptr: np.ndarray
    act_idx: np.ndarray
    act_val: np.ndarray
    t_ptr: np.ndarray
    t_idx: np.ndarray
    t_val: np.ndarray
    x_indptr: np.ndarray
    x_indices: np.ndarray
    x_data: np.ndarray
    inst_weight: np.ndarray
    inst_positive: np.ndarray


class SolverParams(NamedTuple):
    """:class:`SolverConfig`'s numbers as the kernels take them."""

    C: float
    positive_cost: float
    min_parent_target: float
    eps: float
    max_iter: int
    threshold: float
    logistic: bool


class Workspace(NamedTuple):
    """A thread's scratch arrays, reused by every unit it trains: each feature's local id
    (``loc``) and a bit a feature (``seen``), each instance's local row (``row_at``, -1 outside
    the unit), the weights kept of each node (``counts``, filled as units finish), and the level's
    stop flag (``stop``, shared by the threads: non-zero, a unit's passes end and its result is
    not used)."""

    loc: np.ndarray
    seen: np.ndarray
    row_at: np.ndarray
    counts: np.ndarray
    stop: np.ndarray


class SiblingSolution(NamedTuple):
    """:func:`_train_siblings`' result: the shared features' weights (local features x children),
    each local feature's global id and block row (-1: private), a private feature's row and value,
    and the dual variables with the positives' layout (from which private weights follow)."""

    W: np.ndarray
    fs: np.ndarray
    slot: np.ndarray
    owner: np.ndarray
    owner_val: np.ndarray
    alpha_neg: np.ndarray
    alpha_pos: np.ndarray
    pos_ptr: np.ndarray
    pos_child: np.ndarray


def kernels_cached() -> bool:
    """Whether numba's cache already holds this module's kernels for the running Python (an index
    file under ``NUMBA_CACHE_DIR`` where it is set, else beside the module or in the user's numba
    cache). When it does
    not, the first training compiles the kernels: about a minute, which callers announce."""
    tag = f".py{sys.version_info.major}{sys.version_info.minor}.nbi"
    places = [Path(__file__).parent / "__pycache__", Path.home() / ".cache" / "numba"]
    if os.environ.get("NUMBA_CACHE_DIR"):  # numba then caches there alone
        places = [Path(os.environ["NUMBA_CACHE_DIR"])]
    return any(next(place.rglob(f"linear_solver.*{tag}"), None) is not None for place in places if place.is_dir())


@dataclass(frozen=True)
class SolverConfig:
    """``C``: cost of the loss against the L2 penalty; ``eps``: stop when the projected
    gradient's spread is below it; ``max_iter``: passes over a node's instances; ``threshold``:
    weights at or below it (in absolute value) are pruned; ``positive_cost``: factor on the cost of
    a positive entry (PECOS's ``Cp / Cn``: a label's few positives against its many negatives);
    ``min_parent_target``: an instance is a negative of a parent's children only where its target
    of the parent reaches it (a child's own positives always train it), so a label point is not a
    negative throughout the clusters of its weak co-labels (hard targets are 1: no effect on them);
    ``loss``: ``squared-hinge`` or ``logistic`` (one of ``LOSSES``; a model trained with the
    logistic loss scores a node by the sigmoid of its margin, see :mod:`.beam_search`)."""

    C: float = 1.0
    eps: float = 0.1
    max_iter: int = 20
    threshold: float = 0.1
    min_parent_target: float = 0.5
    positive_cost: float = 2.0
    loss: str = "squared-hinge"

    def __post_init__(self) -> None:
        if self.loss not in LOSSES:
            raise ConfigError(f"solver.loss must be one of {', '.join(LOSSES)}, got {self.loss!r}")
        check_ranges(
            self,
            positive=("C", "eps", "max_iter", "positive_cost"),
            non_negative=("threshold",),
            at_most_one=("min_parent_target",),
        )


@numba.njit(cache=True, nogil=True)
def _local_rows(rows, x_indptr, x_indices, x_data, loc, seen):
    """The rows ``rows`` of X as a small CSR over local feature ids 0..F-1, given to the parent's
    features in ascending global order (so the children's weight block has a row per feature the
    parent's instances use, not per feature of X). ``seen`` is a zeroed bitmap over X's features
    (zeroed again on return): marking a bit is a cache hit where a table of ids would miss, and
    scanning it yields the features in ascending order without a sort. ``loc`` is scratch (one
    entry a feature of X; only the parent's entries are written, then read). Returns (indptr,
    indices, data, squared norms, global id of each local feature)."""
    n_f = 0
    for r in rows:
        for pp in range(x_indptr[r], x_indptr[r + 1]):
            j = x_indices[pp]
            bit = np.uint64(1) << np.uint64(j & 63)
            if not seen[j >> 6] & bit:
                seen[j >> 6] |= bit
                n_f += 1
    fs = np.empty(n_f, dtype=np.int64)
    i = 0
    for w in range(seen.size):
        word = seen[w]
        if word:
            seen[w] = 0
            for b in range(64):
                if word & (np.uint64(1) << np.uint64(b)):
                    fs[i] = w * 64 + b
                    loc[w * 64 + b] = i
                    i += 1
    indptr = huge_full(rows.size + 1, 0, np.int64)
    for a in range(rows.size):
        indptr[a + 1] = indptr[a] + x_indptr[rows[a] + 1] - x_indptr[rows[a]]
    indices = huge_empty(indptr[-1], np.int32)
    data = huge_empty(indptr[-1], np.float32)
    sqnorm = huge_full(rows.size, 0.0, np.float64)
    for a in range(rows.size):
        r = rows[a]
        at = indptr[a]
        for pp in range(x_indptr[r], x_indptr[r + 1]):
            indices[at] = loc[x_indices[pp]]
            data[at] = x_data[pp]
            sqnorm[a] += np.float64(x_data[pp]) * np.float64(x_data[pp])
            at += 1
    return indptr, indices, data, sqnorm, fs


@numba.njit(cache=True, nogil=True)
def _shuffle(a, state):
    """Fisher-Yates shuffle of ``a`` in place from a 64-bit LCG (numba's np.random costs a fifth of
    the solver's time); returns the generator's new state."""
    n = a.size
    for s in range(n):
        state = state * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
        j = s + np.int64((state >> np.uint64(33)) % np.uint64(n - s))
        a[s], a[j] = a[j], a[s]
    return state


@numba.njit(cache=True, nogil=True)
def _train_siblings(k_lo, k_hi, rows, parent_t, level, work, params, seed):
    """The classifiers of nodes ``k_lo:k_hi`` (one parent's children) on the parent's ``rows``,
    trained side by side: one shared coordinate order, so a row's features and the children's
    weights of a feature (one contiguous row of ``W``) are read once for all the children, and
    a row's hard negatives of all the children are updated in one branch-free pass. ``rows``: the
    parent's active instances, ``parent_t`` their targets of it; ``level`` a :class:`LevelData`,
    ``work`` the thread's :class:`Workspace`, ``params`` :class:`SolverParams`. Returns a
    :class:`SiblingSolution`."""
    t_ptr, t_idx, t_val = level.t_ptr, level.t_idx, level.t_val
    x_indptr, x_indices, x_data, inst_weight = level.x_indptr, level.x_indices, level.x_data, level.inst_weight
    loc, seen, row_at = work.loc, work.seen, work.row_at
    C, positive_cost, min_parent_target, eps = params.C, params.positive_cost, params.min_parent_target, params.eps
    max_iter, logistic = params.max_iter, params.logistic
    tol = min(LOGISTIC_INNER_EPS, eps)  # the logistic loss's one-variable problems stop there
    m, n_k = rows.size, k_hi - k_lo
    # the rows are laid out in the first pass's random order (see the passes below)
    state = np.uint64(seed) * np.uint64(6364136223846793005) + np.uint64(1442695040888963407)
    perm = np.arange(m)
    state = _shuffle(perm, state)
    place = np.empty(m, dtype=np.int64)  # place[a]: the local row of the parent's a-th (ascending) row
    place[perm] = np.arange(m)
    l_indptr, l_indices, l_data, l_sqnorm, fs = _local_rows(rows[perm], x_indptr, x_indices, x_data, loc, seen)
    slot, owner, owner_val, private_sq, n_shared = _split_private(l_indptr, l_indices, l_data, fs.size)
    # each local row's positives (child, soft target) as CSR; rows and each child's targets are ascending
    q_lo, q_hi = t_ptr[k_lo], t_ptr[k_hi]
    for a in range(m):
        row_at[rows[a]] = place[a]
    at_row = np.full(q_hi - q_lo, -1, dtype=np.int64)  # each target entry's local row (-1: not a row here)
    pos_ptr = huge_full(m + 1, 0, np.int64)
    for q in range(q_lo, q_hi):
        a = row_at[t_idx[q]]
        if a >= 0:
            at_row[q - q_lo] = a
            pos_ptr[a + 1] += 1
    for a in range(m):
        row_at[rows[a]] = -1
    for a in range(m):
        pos_ptr[a + 1] += pos_ptr[a]
    fill = pos_ptr[:-1].copy()
    pos_child = huge_empty(pos_ptr[m], np.int64)
    pos_t = huge_empty(pos_ptr[m], np.float32)
    for k in range(n_k):
        for q in range(t_ptr[k_lo + k], t_ptr[k_lo + k + 1]):
            a = at_row[q - q_lo]
            if a >= 0:
                pos_child[fill[a]] = k
                pos_t[fill[a]] = t_val[q]
                fill[a] += 1
    cost = huge_empty(m, np.float64)
    pcost = huge_empty(m, np.float64)  # a row's factor on its positives' cost
    strong = huge_empty(m, np.bool_)
    for a in range(m):
        strong[place[a]] = parent_t[a] >= min_parent_target
        cost[place[a]] = C * inst_weight[rows[a]]
        pcost[place[a]] = positive_cost * level.inst_positive[rows[a]]
    # dual variables in float32, like the weights they build: at the leaves one parent's rows x
    # children reach hundreds of millions
    alpha_pos = huge_full(pos_ptr[m], 0.0, np.float32)  # one a positive entry
    alpha_neg = huge_full(m * n_k, 0.0, np.float32).reshape((m, n_k))  # one an entry (a weak row's hard negatives stay 0)
    W = huge_full(n_shared * n_k, 0.0, np.float32).reshape((n_shared, n_k))  # rows of the features two or more rows use
    if logistic:
        _start_logistic(l_indptr, l_indices, l_data, pos_ptr, pos_child, pos_t, cost, strong, pcost, alpha_pos, alpha_neg, W)
    dots = np.zeros(n_k, dtype=np.float32)
    steps = np.zeros(n_k, dtype=np.float32)
    negative = np.zeros(n_k, dtype=np.bool_)  # the row's hard negatives of running children
    pg_max = np.empty(n_k, dtype=np.float64)
    pg_min = np.empty(n_k, dtype=np.float64)
    done = np.zeros(n_k, dtype=np.bool_)
    n_done = 0
    # each pass visits the rows in a fresh random order (the first in memory order: the rows were laid
    # out at random); a row's arrays, and at scale its weight rows, are prefetched a few rows ahead
    order = np.arange(m)
    prefetch_weights = W.nbytes > WEIGHT_PREFETCH_BYTES
    for it in range(max_iter):
        if work.stop[0]:  # the level was interrupted: the unit is abandoned within one pass
            break
        pg_max[:] = 0.0  # entries at rest count as 0 (LIBLINEAR's projected gradient)
        pg_min[:] = 0.0
        if it > 0:
            state = _shuffle(order, state)
        for i in range(m):
            if i + PREFETCH_FAR < m:  # three stages: a later row's pointers, then what they point to, then its weights
                r = order[i + PREFETCH_FAR]
                prefetch(l_indptr, r)
                prefetch(pos_ptr, r)
                prefetch(l_sqnorm, r)
                prefetch(private_sq, r)
                prefetch(cost, r)
                prefetch(pcost, r)
                prefetch(strong, r)
                for k in range(0, n_k, FLOATS_PER_LINE):
                    prefetch(alpha_neg, r * n_k + k)
            if i + PREFETCH_MID < m:
                r = order[i + PREFETCH_MID]
                prefetch(l_indices, l_indptr[r])
                prefetch(l_data, l_indptr[r])
                prefetch(pos_child, pos_ptr[r])
                prefetch(pos_t, pos_ptr[r])
                prefetch(alpha_pos, pos_ptr[r])
            if prefetch_weights and i + PREFETCH_NEAR < m:
                r = order[i + PREFETCH_NEAR]
                if strong[r]:
                    for pp in range(l_indptr[r], l_indptr[r + 1]):
                        first = np.int64(l_indices[pp]) * n_k
                        for k in range(0, n_k, FLOATS_PER_LINE):
                            prefetch(W, first + k)
                else:  # a weak row reads only its positives' weights
                    for q in range(pos_ptr[r], pos_ptr[r + 1]):
                        k = pos_child[q]
                        for pp in range(l_indptr[r], l_indptr[r + 1]):
                            prefetch(W, np.int64(l_indices[pp]) * n_k + k)
            a = order[i]
            lo, hi = l_indptr[a], l_indptr[a + 1]
            sq, cw = l_sqnorm[a], cost[a]
            if not strong[a]:  # a weak row trains only the children it is a positive of, one by one
                for q in range(pos_ptr[a], pos_ptr[a + 1]):
                    k = pos_child[q]
                    if done[k]:
                        continue
                    d = private_sq[a] * (np.float64(alpha_pos[q]) - alpha_neg[a, k])
                    for pp in range(lo, hi):
                        d += W[l_indices[pp], k] * l_data[pp]
                    step = _positive_step(
                        q, a, k, d, pos_t[q], sq, cw, pcost[a], logistic, tol, alpha_pos, alpha_neg, pg_max, pg_min
                    )
                    if step != 0.0:
                        for pp in range(lo, hi):
                            W[l_indices[pp], k] += np.float32(step) * l_data[pp]
                continue
            dots[:] = 0.0
            for pp in range(lo, hi):
                f, v = l_indices[pp], l_data[pp]
                for k in range(n_k):
                    dots[k] += W[f, k] * v
            ps = np.float32(private_sq[a])
            if ps > 0.0:  # the row's own features: their weights are its dual variables times x
                for k in range(n_k):
                    dots[k] -= ps * alpha_neg[a, k]
                for q in range(pos_ptr[a], pos_ptr[a + 1]):
                    dots[pos_child[q]] += ps * alpha_pos[q]
            for k in range(n_k):
                negative[k] = not done[k]
            for q in range(pos_ptr[a], pos_ptr[a + 1]):
                negative[pos_child[q]] = False
            moved = 0
            if logistic:  # each hard negative by its own Newton steps
                for k in range(n_k):
                    steps[k] = 0.0
                    if negative[k]:
                        old = alpha_neg[a, k]
                        new, g = _logistic_variable(old, -dots[k], sq, cw, tol)
                        pg_max[k] = max(pg_max[k], g)
                        pg_min[k] = min(pg_min[k], g)
                        alpha_neg[a, k] = new
                        steps[k] = old - new
                        moved += new != old
            else:  # every hard negative at once, without branches (an entry at rest gets a zero step)
                diag = 0.5 / cw
                inv = 1.0 / (sq + diag)
                for k in range(n_k):
                    old = alpha_neg[a, k]
                    g = -dots[k] - 1.0 + diag * old
                    pg = g if old > 0.0 else min(g, 0.0)
                    pg = pg if negative[k] else 0.0
                    pg_max[k] = max(pg_max[k], pg)
                    pg_min[k] = min(pg_min[k], pg)
                    new = np.float32(max(old - g * inv, 0.0)) if abs(pg) > 1e-12 else old
                    alpha_neg[a, k] = new
                    steps[k] = old - new
                    moved += new != old
            for q in range(pos_ptr[a], pos_ptr[a + 1]):
                k = pos_child[q]
                if done[k]:
                    continue
                step = _positive_step(
                    q, a, k, dots[k], pos_t[q], sq, cw, pcost[a], logistic, tol, alpha_pos, alpha_neg, pg_max, pg_min
                )
                steps[k] = np.float32(step)
                moved += step != 0.0
            if moved:
                for pp in range(lo, hi):
                    f, v = l_indices[pp], l_data[pp]
                    for k in range(n_k):
                        W[f, k] += steps[k] * v
        for k in range(n_k):
            if not done[k] and pg_max[k] - pg_min[k] <= eps:
                done[k] = True
                n_done += 1
        if n_done == n_k:
            break
    return SiblingSolution(W, fs, slot, owner, owner_val, alpha_neg, alpha_pos, pos_ptr, pos_child)


@numba.njit(cache=True, nogil=True)
def _split_private(l_indptr, l_indices, l_data, n_f):
    """Takes the features only one row of the parent uses out of the rows (in place): such a
    feature's weight of a child is that row's signed dual variable times its value, so it needs no
    row of the weight block and adds ``value**2`` times the dual variable to the row's score.
    Returns (each local feature's row of the block, or -1 if private; a private feature's row and
    value; each row's private squared norm; the number of shared features), the rows' entries
    now only the shared ones, as block rows (``l_indptr`` rewritten)."""
    uses = np.zeros(n_f, dtype=np.int32)
    for pp in range(l_indptr[-1]):
        uses[l_indices[pp]] += 1
    slot = np.full(n_f, -1, dtype=np.int64)
    n_shared = 0
    for f in range(n_f):
        if uses[f] > 1:
            slot[f] = n_shared
            n_shared += 1
    m = l_indptr.size - 1
    owner = np.full(n_f, -1, dtype=np.int64)
    owner_val = np.zeros(n_f, dtype=np.float32)
    private_sq = huge_full(m, 0.0, np.float64)
    at = 0
    for a in range(m):
        lo, hi = l_indptr[a], l_indptr[a + 1]
        l_indptr[a] = at
        for pp in range(lo, hi):
            f, v = l_indices[pp], l_data[pp]
            if slot[f] >= 0:
                l_indices[at] = slot[f]
                l_data[at] = v
                at += 1
            else:
                owner[f] = a
                owner_val[f] = v
                private_sq[a] += np.float64(v) * np.float64(v)
    l_indptr[m] = at
    return slot, owner, owner_val, private_sq, n_shared


@numba.njit(cache=True, nogil=True)
def _private_lists(owner, owner_val, alpha_neg, alpha_pos, pos_ptr, pos_child, threshold):
    """For every row owning private features, the children whose weight of such a feature can pass
    ``threshold``: a private feature's weight of child k is the row's signed dual variable
    (positive minus negative entry) times its value, so only children with a signed variable of
    at least ``threshold`` over the row's largest private value can keep one (with a margin for
    float32 rounding). Returns CSR over rows: (pointers, children, signed variables)."""
    m, n_k = alpha_neg.shape
    v_max = np.zeros(m, dtype=np.float64)
    for f in range(owner.size):
        if owner[f] >= 0:
            v_max[owner[f]] = max(v_max[owner[f]], abs(np.float64(owner_val[f])))
    signed = np.empty(n_k, dtype=np.float64)
    ptr = np.zeros(m + 1, dtype=np.int64)
    for step in range(2):  # count, then fill
        if step == 1:
            for a in range(m):
                ptr[a + 1] += ptr[a]
            child = np.empty(ptr[m], dtype=np.int64)
            value = np.empty(ptr[m], dtype=np.float64)
        for a in range(m):
            if v_max[a] == 0.0:
                continue
            for k in range(n_k):
                signed[k] = -np.float64(alpha_neg[a, k])
            for q in range(pos_ptr[a], pos_ptr[a + 1]):
                signed[pos_child[q]] = np.float64(alpha_pos[q]) - alpha_neg[a, pos_child[q]]
            at = ptr[a]
            for k in range(n_k):
                if signed[k] != 0.0 and abs(signed[k]) * v_max[a] * (1.0 + 1e-6) > threshold:
                    if step == 0:
                        ptr[a + 1] += 1
                    else:
                        child[at] = k
                        value[at] = signed[k]
                        at += 1
    return ptr, child, value


@numba.njit(cache=True, nogil=True)
def _start_logistic(l_indptr, l_indices, l_data, pos_ptr, pos_child, pos_t, cost, strong, pcost, alpha_pos, alpha_neg, W):
    """The logistic loss's starting point (``pcost``: each row's factor on its positives' cost):
    every entry's dual variable at ``LOGISTIC_START_SHARE`` of its cost (at most
    ``LOGISTIC_START``; the hard negatives of a strong row too, an entry of cost 0 stays 0), and
    the shared weights ``W`` their signed sum, as the descent keeps them."""
    m, n_k = alpha_neg.shape
    signed = np.zeros(n_k, dtype=np.float32)
    for a in range(m):
        cw = cost[a]
        for k in range(n_k):
            if strong[a]:
                alpha_neg[a, k] = np.float32(min(LOGISTIC_START_SHARE * cw, LOGISTIC_START))
            signed[k] = -alpha_neg[a, k]
        for q in range(pos_ptr[a], pos_ptr[a + 1]):
            k, t = pos_child[q], np.float64(pos_t[q])
            alpha_pos[q] = np.float32(min(LOGISTIC_START_SHARE * pcost[a] * cw * t, LOGISTIC_START))
            negative_cost = cw * (1.0 - t)
            alpha_neg[a, k] = np.float32(min(LOGISTIC_START_SHARE * negative_cost, LOGISTIC_START)) if t < 1.0 else 0.0
            signed[k] = alpha_pos[q] - alpha_neg[a, k]
        for pp in range(l_indptr[a], l_indptr[a + 1]):
            f, v = l_indices[pp], l_data[pp]
            if strong[a]:
                for k in range(n_k):
                    W[f, k] += signed[k] * v
            else:  # a weak row has entries for its positives only
                for q in range(pos_ptr[a], pos_ptr[a + 1]):
                    W[f, pos_child[q]] += signed[pos_child[q]] * v


@numba.njit(cache=True, nogil=True, inline="always")
def _logistic_variable(old, b, sq, c, tol):
    """One dual variable of the logistic loss, of cost ``c``, moved to the minimum over ``(0, c)``
    of ``sq (a - old)^2 / 2 + b (a - old) + a log a + (c - a) log(c - a)`` (``b``: the entry's sign
    times the child's score; ``sq``: the row's squared norm). Solved for ``a`` or for ``c - a``,
    whichever the minimum puts below ``c / 2``, by Newton steps that halve towards 0 at most
    tenfold when a step would leave it (Yu, Huang and Lin 2011, section 3). Returns (the new
    value in float32, the derivative at ``old``: 0 at the optimum, the stopping rule's gradient);
    a derivative below ``tol`` in size ends the steps."""
    if c <= 0.0:
        return old, 0.0
    edge = c * 1e-12  # a float32 variable next to 0 or c, kept inside where the logarithms are finite
    here = min(max(np.float64(old), edge), c - edge)
    g = b + math.log(here / (c - here))
    if abs(g) < tol:
        return old, g
    flip = sq * (0.5 * c - here) + b < 0.0  # the derivative at c / 2 is negative: the minimum is above it
    start, slope = (c - here, -b) if flip else (here, b)
    z = 0.1 * start if start > 0.5 * c else start
    for _ in range(LOGISTIC_NEWTON_STEPS):
        gp = sq * (z - start) + slope + math.log(z / (c - z))
        if abs(gp) < tol:
            break
        nz = z - gp / (sq + c / (z * (c - z)))
        z = nz if 0.0 < nz < c else (0.1 * z if nz <= 0.0 else 0.5 * (z + c))
    return np.float32(c - z if flip else z), g


@numba.njit(cache=True, nogil=True, inline="always")
def _positive_step(q, a, k, d, t, sq, cw, positive_cost, logistic, tol, alpha_pos, alpha_neg, pg_max, pg_min):
    """The coordinate steps on a positive entry (cost Cp C t w) and, for a soft target, its
    negative entry (cost C (1 - t) w), given the child's score ``d``; returns the weight step."""
    if logistic:
        return _logistic_positive_step(q, a, k, d, t, sq, cw, positive_cost, tol, alpha_pos, alpha_neg, pg_max, pg_min)
    step = 0.0
    diag = 0.5 / (positive_cost * cw * t)
    old = alpha_pos[q]
    g = d - 1.0 + diag * old
    pg = g if old > 0.0 else min(g, 0.0)
    pg_max[k] = max(pg_max[k], pg)
    pg_min[k] = min(pg_min[k], pg)
    if abs(pg) > 1e-12:
        new = np.float32(max(old - g / (sq + diag), 0.0))
        alpha_pos[q] = new
        step += new - old
        d += (new - old) * sq
    if t < 1.0:
        diag = 0.5 / (cw * (1.0 - t))
        old = alpha_neg[a, k]
        g = -d - 1.0 + diag * old
        pg = g if old > 0.0 else min(g, 0.0)
        pg_max[k] = max(pg_max[k], pg)
        pg_min[k] = min(pg_min[k], pg)
        if abs(pg) > 1e-12:
            new = np.float32(max(old - g / (sq + diag), 0.0))
            alpha_neg[a, k] = new
            step -= new - old
    return step


@numba.njit(cache=True, nogil=True, inline="always")
def _logistic_positive_step(q, a, k, d, t, sq, cw, positive_cost, tol, alpha_pos, alpha_neg, pg_max, pg_min):
    """:func:`_positive_step` for the logistic loss."""
    old = alpha_pos[q]
    new, g = _logistic_variable(old, d, sq, positive_cost * cw * t, tol)
    pg_max[k] = max(pg_max[k], g)
    pg_min[k] = min(pg_min[k], g)
    alpha_pos[q] = new
    step = np.float64(new) - old
    if t < 1.0:
        d += step * sq
        old = alpha_neg[a, k]
        new, g = _logistic_variable(old, -d, sq, cw * (1.0 - t), tol)
        pg_max[k] = max(pg_max[k], g)
        pg_min[k] = min(pg_min[k], g)
        alpha_neg[a, k] = new
        step -= np.float64(new) - old
    return step


@numba.njit(cache=True, nogil=True)
def _train_unit(p, k_lo, k_hi, level, work, params, seed):
    """The classifiers of parent ``p``'s children ``k_lo:k_hi``, their kept weights as consecutive
    CSR rows: fills ``work.counts`` (weights of each node) and returns (feature ids, weights)."""
    a_lo, a_hi = level.act_ptr[p], level.act_ptr[p + 1]
    if a_hi == a_lo or k_hi == k_lo:
        return np.empty(0, dtype=np.int32), np.empty(0, dtype=np.float32)
    solved = _train_siblings(k_lo, k_hi, level.act_idx[a_lo:a_hi], level.act_val[a_lo:a_hi], level, work, params, seed + k_lo)
    W, fs, slot, owner, owner_val = solved.W, solved.fs, solved.slot, solved.owner, solved.owner_val
    counts, threshold = work.counts, params.threshold
    n_k = k_hi - k_lo
    at = np.zeros(n_k + 1, dtype=np.int64)  # each child's first position, from a counting pass
    nz_ptr, nz_child, nz_signed = _private_lists(
        owner, owner_val, solved.alpha_neg, solved.alpha_pos, solved.pos_ptr, solved.pos_child, threshold
    )
    for i in range(fs.size):
        if slot[i] >= 0:
            row = W[slot[i]]
            for k in range(n_k):
                if abs(row[k]) > threshold:
                    at[k + 1] += 1
        else:
            v = np.float64(owner_val[i])
            for e in range(nz_ptr[owner[i]], nz_ptr[owner[i] + 1]):
                if abs(np.float32(nz_signed[e] * v)) > threshold:
                    at[nz_child[e] + 1] += 1
    for k in range(n_k):
        counts[k_lo + k] = at[k + 1]
        at[k + 1] += at[k]
    out_feat = np.empty(at[n_k], dtype=np.int32)  # sized before the scan: growing inside it slows numba's loop
    out_val = np.empty(at[n_k], dtype=np.float32)
    for i in range(fs.size):  # the local features in order: each child's features come out ascending
        if slot[i] >= 0:
            row = W[slot[i]]
            for k in range(n_k):
                if abs(row[k]) > threshold:
                    out_feat[at[k]] = fs[i]
                    out_val[at[k]] = row[k]
                    at[k] += 1
        else:
            v = np.float64(owner_val[i])
            for e in range(nz_ptr[owner[i]], nz_ptr[owner[i] + 1]):
                w = np.float32(nz_signed[e] * v)
                if abs(w) > threshold:
                    k = nz_child[e]
                    out_feat[at[k]] = fs[i]
                    out_val[at[k]] = w
                    at[k] += 1
    return out_feat, out_val


# A level with fewer parents than this splits each parent's children into groups (this many units
# in all), so a top level with one parent still keeps two threads busy; more groups would share
# less of the rows' work (docs/decisions.md, "The linear model (XR-Linear)")
MIN_UNITS = 2


def _work_units(child_ptr: np.ndarray) -> np.ndarray:
    """``(parent, first child, end child)`` rows: one a parent, or with fewer than ``MIN_UNITS``
    parents each parent's children in up to ``MIN_UNITS // parents`` equal groups (the same
    whatever the thread count, so the weights are too)."""
    n_parents = child_ptr.size - 1
    groups = max(1, MIN_UNITS // max(n_parents, 1))
    units: list[tuple[int, int, int]] = []
    for p in range(n_parents):
        lo, hi = int(child_ptr[p]), int(child_ptr[p + 1])
        cuts = np.unique(np.linspace(lo, hi, min(groups, max(hi - lo, 1)) + 1).round().astype(np.int64))
        units.extend((p, a, b) for a, b in zip(cuts[:-1], cuts[1:]))
    return np.array(units, dtype=np.int64).reshape(-1, 3)


class _UnitQueue:
    """Work units handed out one at a time from either end (thread-safe)."""

    def __init__(self, units: np.ndarray):
        self.units = units
        self.front, self.back = 0, len(units)
        self.lock = threading.Lock()
        self.stop = np.zeros(1, dtype=np.uint8)  # the solver's passes read it (Workspace.stop)

    def take(self, from_front: bool) -> np.ndarray | None:
        with self.lock:
            if self.front >= self.back:
                return None
            if from_front:
                self.front += 1
                return self.units[self.front - 1]
            self.back -= 1
            return self.units[self.back]

    def close(self) -> None:
        """Hand out no more units, and end the units being trained within a pass (their results are
        not to be used): the level has failed or was interrupted."""
        with self.lock:
            self.front = self.back
            self.stop[0] = 1


def _csc_lists(M: sp.spmatrix) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Column pointers, row ids (int32 where they fit: targets are the largest input at scale) and float32 values."""
    C = M if sp.isspmatrix_csc(M) and M.dtype == np.float32 else sp.csc_matrix(M, dtype=np.float32)  # no copy of a CSC
    if not C.has_sorted_indices:
        C = C.sorted_indices()
    rows = C.indices.astype(np.int32 if M.shape[0] < 2**31 else np.int64, copy=False)
    return C.indptr.astype(np.int64), rows, C.data


def train_level(
    X: sp.csr_matrix,
    targets: sp.csr_matrix,
    active: sp.csr_matrix,
    parent_of: np.ndarray,
    instance_weights: np.ndarray,
    config: SolverConfig,
    seed: int = 0,
    threads: int = 1,
    spill_dir: Path | None = None,
    spill_bytes: int | None = None,
    on_progress: Callable[[float], None] | None = None,
    positive_weights: np.ndarray | None = None,
) -> sp.csr_matrix:
    """The classifiers of one level as a ``K x D`` CSR matrix (row k = node k's weights).

    Args:
        X: ``N x D`` instance features (a bias column included, if wanted).
        targets: ``N x K`` (soft) targets of the level's nodes.
        active: ``N x P``: each instance's target of each parent (its largest target among the
            parent's labels); an instance trains a parent's children where this is at least
            ``config.min_parent_target`` (and the children it is a positive of wherever it is stored).
        parent_of: the parent (column of ``active``) of each of the K nodes.
        instance_weights: ``N`` loss weights.
        spill_dir: an existing empty directory: once a thread's finished weights pass
            ``spill_bytes`` they go to files there, and the level comes back mapped from
            ``spill_dir/{indptr,indices,data}.npy`` (:mod:`.level_store`); None: all in memory.
        spill_bytes: that budget (default ``SPILL_BYTES``).
        on_progress: called after each work unit with the share of the level's work done so far
            (by the units' cost: active instances x children), from the worker threads.
        positive_weights: ``N`` factors on the cost of each instance's positive entries, on top
            of ``config.positive_cost`` (None: 1 for every instance).
    """
    spill_bytes = SPILL_BYTES if spill_bytes is None else spill_bytes
    X = sp.csr_matrix(X, dtype=np.float32)
    X.sort_indices()
    n_nodes = targets.shape[1]
    weights = np.asarray(instance_weights, dtype=np.float64)
    if not np.all(weights > 0):  # an instance of weight 0 has no loss: it trains no node (its dual step would divide by 0)
        active = sp.csr_matrix(sp.diags((weights > 0).astype(np.float32)) @ active)
        active.eliminate_zeros()
    act_ptr, act_idx, act_val = _csc_lists(active)
    t_ptr, t_idx, t_val = _csc_lists(targets)
    # X's own int32 ids and float32 values: an int64/float64 copy would cost 12 bytes an entry
    xi, xx, xd = X.indptr.astype(np.int64, copy=False), X.indices, X.data
    parent_of = np.asarray(parent_of, dtype=np.int64)
    if np.any(np.diff(parent_of) < 0):
        raise ValueError("a parent's children must be consecutive nodes")
    n_parents = active.shape[1]
    child_ptr = np.zeros(n_parents + 1, dtype=np.int64)
    np.cumsum(np.bincount(parent_of, minlength=n_parents), out=child_ptr[1:])
    units = _work_units(child_ptr)
    # units largest first by their work (the parent's active instances times the children); even
    # threads take them from the front, odd ones from the back, each the next one as it frees up:
    # the largest working sets (a parent's rows x children of dual variables, features x children
    # of weights) meet small ones, and the threads finish within one unit of each other
    active_rows = np.diff(act_ptr)
    cost = active_rows[units[:, 0]].astype(np.float64) * (units[:, 2] - units[:, 1]) + 1.0
    queue = _UnitQueue(units[np.argsort(-cost, kind="stable")])
    lanes = max(1, min(threads, len(units)))
    total_cost, done = float(cost.sum()), [0.0]
    done_lock = threading.Lock()

    def unit_done(parent: int, lo: int, hi: int) -> None:
        with done_lock:
            done[0] += float(active_rows[parent]) * (hi - lo) + 1.0
            share = done[0] / total_cost
        on_progress(min(share, 1.0))

    positives = np.ones(len(weights)) if positive_weights is None else np.asarray(positive_weights, dtype=np.float64)
    if positives.shape != weights.shape or not np.all(np.isfinite(positives) & (positives > 0)):
        raise ValueError(f"positive_weights must be {len(weights):,} finite numbers > 0, one an instance")
    level = LevelData(act_ptr, act_idx, act_val, t_ptr, t_idx, t_val, xi, xx, xd, weights, positives)
    params = SolverParams(
        float(config.C),
        float(config.positive_cost),
        float(config.min_parent_target),
        float(config.eps),
        int(config.max_iter),
        float(config.threshold),
        config.loss == "logistic",
    )

    def work(i):
        workspace = Workspace(
            np.empty(X.shape[1], dtype=np.int32),
            np.zeros((X.shape[1] + 63) // 64, dtype=np.uint64),
            np.full(X.shape[0], -1, dtype=np.int64),
            np.zeros(n_nodes, dtype=np.int64),
            queue.stop,
        )
        blocks = UnitBlocks(spill_dir, i, spill_bytes)
        try:
            while (unit := queue.take(from_front=i % 2 == 0)) is not None:
                parent, lo, hi = (int(v) for v in unit)
                feat, val = _train_unit(parent, lo, hi, level, workspace, params, seed)
                blocks.add(lo, hi, feat, val)
                if on_progress is not None:
                    unit_done(parent, lo, hi)
        except BaseException:
            queue.close()  # the other lanes stop within a pass: the level has failed
            raise
        return workspace.counts, blocks

    if lanes == 1:
        parts = [work(0)]
    else:
        with ThreadPoolExecutor(lanes) as pool:
            try:
                with interrupts_deferred():  # every lane started is one the pool joins (lanes write spill files)
                    running = pool.map(work, range(lanes))
                parts = list(running)
            except BaseException:
                queue.close()  # interrupted: the pool joins each lane within a pass, not after the level
                raise
    counts = sum(part[0] for part in parts)
    # every node is in one unit and a unit's nodes are consecutive: its weights are one block of W
    return assemble_level([part[1] for part in parts], counts, X.shape[1], spill_dir)
