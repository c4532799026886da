"""What an augmentation does, per label-frequency bin: the soft targets of its label points and
its effect on P@k / PSP@k (``gandalf analyze``).

The statistics explain the effect. A label seen once has ``P[i | j] = 1`` for every co-label i of
its one training point, so its label point carries as many hard 1.0 targets as that point has
labels; on data with many labels a point, tail labels' label points then teach the model to put
head labels on tail-like texts.
"""

from __future__ import annotations

import numpy as np
import scipy.sparse as sp

from ..data.stats import frequency_bins
from ..metrics import bin_contributions, evaluate

N_BINS = 5


def soft_target_stats(graph: sp.csr_matrix, freq: np.ndarray, n_bins: int = N_BINS) -> list[dict]:
    """Per label-frequency bin (0 = head), statistics of its labels' label points.

    ``graph`` row j holds label j's label point's targets (self entry included). Reports the
    number of labels, their mean training frequency, the share seen once, the mean number of
    co-label targets (non-self entries), the share of co-label targets equal to 1.0 and their
    mean value.
    """
    G = sp.csr_matrix(graph)
    bins = frequency_bins(freq, n_bins)
    rows = np.repeat(np.arange(G.shape[0]), np.diff(G.indptr))
    off = G.indices != rows
    co_rows, co_vals = rows[off], G.data[off].astype(np.float64)
    per_label = np.bincount(co_rows, minlength=G.shape[0])
    ones = np.bincount(co_rows, weights=(co_vals >= 1.0 - 1e-6).astype(np.float64), minlength=G.shape[0])
    sums = np.bincount(co_rows, weights=co_vals, minlength=G.shape[0])
    out = []
    for b in range(n_bins):
        members = bins == b
        n_co = per_label[members].sum()
        out.append(
            {
                "bin": b + 1,
                "labels": int(members.sum()),
                "mean_frequency": float(freq[members].mean()) if members.any() else 0.0,
                "seen_once_pct": 100.0 * float((freq[members] == 1).mean()) if members.any() else 0.0,
                "co_labels_per_point": float(per_label[members].mean()) if members.any() else 0.0,
                "co_label_ones_pct": 100.0 * float(ones[members].sum() / n_co) if n_co else 0.0,
                "co_label_mean": float(sums[members].sum() / n_co) if n_co else 0.0,
            }
        )
    return out


def augmentation_effect(
    baseline: sp.spmatrix,
    augmented: sp.spmatrix,
    truth: sp.spmatrix,
    freq: np.ndarray,
    inv_propensity: np.ndarray,
    filter_pairs: np.ndarray | None = None,
    k: int = 5,
    n_bins: int = N_BINS,
) -> dict:
    """Per bin, the contributions to P@k and PSP@k of the two predictions and their difference,
    plus the overall P@1, P@k, PSP@k of each."""
    bins = frequency_bins(freq, n_bins)
    per_bin = []
    cols = {}
    for name, pred in (("baseline", baseline), ("augmented", augmented)):
        cols[name] = (
            bin_contributions(pred, truth, bins, k, filter_pairs, n_bins),
            bin_contributions(pred, truth, bins, k, filter_pairs, n_bins, inv_propensity),
        )
    for b in range(n_bins):
        row: dict[str, float] = {"bin": b + 1}
        for name in cols:
            row[f"{name}_P@{k}"] = float(cols[name][0][b])
            row[f"{name}_PSP@{k}"] = float(cols[name][1][b])
        row[f"delta_P@{k}"] = row[f"augmented_P@{k}"] - row[f"baseline_P@{k}"]
        row[f"delta_PSP@{k}"] = row[f"augmented_PSP@{k}"] - row[f"baseline_PSP@{k}"]
        per_bin.append(row)
    overall = {}
    for name, pred in (("baseline", baseline), ("augmented", augmented)):
        m = evaluate(pred, truth, inv_propensity, (1, k), filter_pairs)
        overall[name] = {key: m[key] for key in ("P@1", f"P@{k}", f"PSP@{k}")}
    return {"per_bin": per_bin, "overall": overall}
