"""Dataset statistics: the paper's Table 1 columns plus tail figures."""

from __future__ import annotations

import numpy as np

from .dataset import XMCDataset


def dataset_stats(ds: XMCDataset) -> dict[str, float | int]:
    """Table 1 statistics of the original training split (and the test split if loaded).

    N: training points; L: labels; APpL: average training points per label (over all L labels);
    ALpP: average labels per training point; AWpP: average whitespace-separated words per
    training point; plus the share of labels with <= 5 and with 0 training positives.
    """
    Y = ds.original_train_Y()
    n = Y.shape[0]
    texts = ds.train.texts[:n]
    freq = ds.label_frequencies()
    nnz = int((Y.data > 0).sum())
    out: dict[str, float | int] = {
        "N": n,
        "L": ds.n_labels,
        "APpL": nnz / ds.n_labels,
        "ALpP": nnz / n,
        "AWpP": float(np.mean([len(t.split()) for t in texts])),
        "labels_le5_pct": 100.0 * float(np.mean(freq <= 5)),
        "labels_0_pct": 100.0 * float(np.mean(freq == 0)),
        "max_label_freq": int(freq.max()) if freq.size else 0,
    }
    if "tst" in ds.splits:
        Yt = ds.test.Y
        out["N_test"] = Yt.shape[0]
        out["ALpP_test"] = float((Yt.data > 0).sum() / max(Yt.shape[0], 1))
    return out


def frequency_bins(freq: np.ndarray, n_bins: int = 5) -> np.ndarray:
    """Cut labels into ``n_bins`` bins of (nearly) equal total training frequency.

    Labels are sorted by frequency, most frequent first (ties by label id); bin 0 holds the
    head labels that make up the first 1/n_bins of all positives, ..., bin ``n_bins - 1`` the
    tail (including every label with zero training positives). Returns the bin of each label.
    """
    freq = np.asarray(freq, dtype=np.float64)
    order = np.lexsort((np.arange(freq.size), -freq))
    total = freq.sum()
    bins = np.full(freq.size, n_bins - 1, dtype=np.int64)
    if total <= 0:
        return bins
    before = np.cumsum(freq[order]) - freq[order]  # positives of more frequent labels
    # a label belongs to the bin in which its first positive falls
    bins[order] = np.minimum((before * n_bins / total).astype(np.int64), n_bins - 1)
    return bins
