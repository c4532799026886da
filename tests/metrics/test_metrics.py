"""Metrics: a hand-computed case and equality with a slow brute-force implementation."""

from __future__ import annotations

import math

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.data.stats import frequency_bins
from gandalf_xmc.metrics import bin_contributions, evaluate, inverse_propensity, top_k_indices


def csr(rows, L, values=None):
    data, r, c = [], [], []
    for i, row in enumerate(rows):
        for j, lab in enumerate(row):
            r.append(i)
            c.append(lab)
            data.append(1.0 if values is None else values[i][j])
    return sp.csr_matrix((data, (r, c)), shape=(len(rows), L))


def test_hand_computed():
    truth = csr([[0, 2], [1], [], [3]], 4)
    pred = csr([[2, 1, 0, 3], [1, 0], [0], [3, 0]], 4, [[0.9, 0.8, 0.7, 0.1], [0.5, 0.5], [1.0], [1.0, 0.5]])
    w = np.array([1.0, 2.0, 3.0, 4.0])
    # row 2 has no labels; row 3 loses its only label to the filter pair (3, 3): both dropped.
    # row 1: tie between labels 0 and 1 -> the lower id (0) ranks first.
    r = evaluate(pred, truth, w, ks=(1, 3), filter_pairs=np.array([[3, 3]]))
    assert r["n_points"] == 2
    assert r["P@1"] == pytest.approx(50.0)
    assert r["P@3"] == pytest.approx(100 * (2 / 3 + 1 / 3) / 2)
    ndcg0 = (1 + 1 / math.log2(4)) / (1 + 1 / math.log2(3))
    ndcg1 = (1 / math.log2(3)) / 1
    assert r["nDCG@3"] == pytest.approx(100 * (ndcg0 + ndcg1) / 2)
    assert r["nDCG@1"] == pytest.approx(50.0)
    assert r["R@1"] == pytest.approx(25.0) and r["R@3"] == pytest.approx(100.0)
    assert r["C@1"] == pytest.approx(100 / 3) and r["C@3"] == pytest.approx(100.0)
    # PSP@1: numerator mean(3, 0) = 1.5; best: mean(3, 2) = 2.5
    assert r["PSP@1"] == pytest.approx(60.0)
    assert r["PSP@3"] == pytest.approx(100.0)
    # PSnDCG@3: row 0 gets w=3 at rank 1 and w=1 at rank 3; row 1 gets w=2 at rank 2
    num = 3 + 1 / math.log2(4) + 2 / math.log2(3)
    den = 3 + 1 / math.log2(3) + 2
    assert r["PSnDCG@3"] == pytest.approx(100 * num / den)


def test_inverse_propensity_by_hand():
    Y = sp.csr_matrix(np.array([[1, 0, 1]] * 10 + [[1, 0, 0]] * 90, dtype=np.float32))
    w = inverse_propensity(Y, a=0.55, b=1.5)
    c = (math.log(100) - 1) * 2.5**0.55
    assert w == pytest.approx([1 + c * 101.5**-0.55, 1 + c * 1.5**-0.55, 1 + c * 11.5**-0.55])


def test_top_k_pads_short_rows():
    got = top_k_indices(csr([[4, 1], []], 5, [[0.2, 0.9], []]), 3)
    np.testing.assert_array_equal(got, [[1, 4, -1], [-1, -1, -1]])


def brute_force(pred, truth, w, k, filter_pairs):
    P = pred.toarray()
    T = truth.toarray() > 0
    for r, l in filter_pairs:
        P[r, l] = 0
        T[r, l] = False
    P_stored = pred.toarray() != 0
    for r, l in filter_pairs:
        P_stored[r, l] = False
    rows = [i for i in range(T.shape[0]) if T[i].any()]
    p = nd = psp_n = psp_d = psn_n = psn_d = rec = 0.0
    covered, all_true = set(), set()
    for i in rows:
        cands = [l for l in range(P.shape[1]) if P_stored[i, l]]
        ranked = sorted(cands, key=lambda l: (-P[i, l], l))[:k]
        true = [l for l in range(T.shape[1]) if T[i, l]]
        all_true.update(true)
        hits = [l in true for l in ranked]
        p += sum(hits) / k
        dcg = sum(1 / math.log2(r + 2) for r, h in enumerate(hits) if h)
        idcg = sum(1 / math.log2(r + 2) for r in range(min(k, len(true))))
        nd += dcg / idcg
        rec += sum(hits) / len(true)
        psp_n += sum(w[l] for l, h in zip(ranked, hits) if h) / k
        best = sorted((w[l] for l in true), reverse=True)[:k]
        psp_d += sum(best) / k
        psn_n += sum(w[l] / math.log2(r + 2) for r, (l, h) in enumerate(zip(ranked, hits)) if h)
        psn_d += sum(v / math.log2(r + 2) for r, v in enumerate(best))
        covered.update(l for l, h in zip(ranked, hits) if h)
    n = len(rows)
    return {
        f"P@{k}": 100 * p / n,
        f"nDCG@{k}": 100 * nd / n,
        f"PSP@{k}": 100 * psp_n / psp_d,
        f"PSnDCG@{k}": 100 * psn_n / psn_d,
        f"R@{k}": 100 * rec / n,
        f"C@{k}": 100 * len(covered) / len(all_true),
    }


@pytest.mark.parametrize("seed", range(5))
def test_matches_brute_force(seed):
    rng = np.random.default_rng(seed)
    n, L = 40, 25
    truth = sp.random(n, L, density=0.12, random_state=rng, format="csr")
    truth.data[:] = 1
    pred = sp.random(n, L, density=0.4, random_state=rng, format="csr")
    pred.data = np.round(pred.data, 1) + 0.1  # create ties (and no stored zeros)
    train = sp.random(200, L, density=0.1, random_state=rng, format="csr")
    train.data[:] = 1
    w = inverse_propensity(train, 0.55, 1.5)
    filters = np.array([[i, int(rng.integers(L))] for i in range(0, n, 3)])
    res = evaluate(pred, truth, w, ks=(1, 3, 5), filter_pairs=filters)
    for k in (1, 3, 5):
        want = brute_force(pred, truth, w, k, filters)
        for key, value in want.items():
            assert res[key] == pytest.approx(value, rel=1e-9), key


def test_frequency_bins_by_hand():
    # total 20: label 0 (10) fills bins 0-2 -> bin 0; label 1 (5) starts at 10 -> bin 2 (of 4 bins: 5 each)
    freq = np.array([10, 5, 3, 2, 0])
    np.testing.assert_array_equal(frequency_bins(freq, 4), [0, 2, 3, 3, 3])


def test_bin_contributions_sum_to_precision():
    rng = np.random.default_rng(0)
    truth = sp.random(50, 30, density=0.15, random_state=rng, format="csr")
    truth.data[:] = 1
    pred = sp.random(50, 30, density=0.5, random_state=rng, format="csr")
    bins = frequency_bins(rng.integers(0, 20, size=30))
    contrib = bin_contributions(pred, truth, bins, k=5)
    assert contrib.shape == (5,)
    assert contrib.sum() == pytest.approx(evaluate(pred, truth, None, ks=(5,))["P@5"])
    w = rng.uniform(1, 5, size=30)
    ps = bin_contributions(pred, truth, bins, k=5, inv_propensity=w)
    assert ps.sum() == pytest.approx(evaluate(pred, truth, w, ks=(5,))["PSP@5"])


def test_psp_bin_contributions_by_hand():
    # point 0: truth {0, 1}, top-2 [0, 2] -> label 0 correct (w 1); point 1: truth {1}, top-2 [1, 0] -> label 1 (w 3)
    truth = csr([[0, 1], [1]], 3)
    pred = csr([[0, 2], [1, 0]], 3, [[0.9, 0.5], [0.9, 0.5]])
    w = np.array([1.0, 3.0, 2.0])
    bins = np.array([0, 1, 1])
    # ideal: point 0 -> 3 + 1, point 1 -> 3; total 7
    np.testing.assert_allclose(bin_contributions(pred, truth, bins, k=2, inv_propensity=w), [100 / 7, 300 / 7])


def test_bootstrap_intervals_resample_points_as_evaluate_scores_them():
    """An independent route: draw the same resamples (same seed, same generator calls), score each
    resample with ``evaluate`` on the resampled rows, and take the percentiles by hand."""
    from gandalf_xmc.metrics import bootstrap_intervals

    rng = np.random.default_rng(3)
    truth = sp.random(40, 12, density=0.2, random_state=rng, format="csr")
    truth.data[:] = 1
    truth = truth[np.diff(truth.indptr) > 0]  # evaluate drops label-less points; keep the rows aligned
    a = sp.random(truth.shape[0], 12, density=0.5, random_state=rng, format="csr")
    b = sp.random(truth.shape[0], 12, density=0.5, random_state=rng, format="csr")
    w = rng.uniform(1, 4, size=12)
    got = bootstrap_intervals([a, b], truth, w, ks=(1, 3), n_boot=200, seed=7)
    draws = np.random.default_rng(7)
    draws = [draws.integers(0, truth.shape[0], truth.shape[0]) for _ in range(200)]
    by_hand = {name: {m: [] for m in ("P@1", "P@3", "PSP@1", "PSP@3")} for name in "ab"}
    for idx in draws:
        for name, P in (("a", a), ("b", b)):
            res = evaluate(P[idx], truth[idx], w, ks=(1, 3))
            for m in by_hand[name]:
                by_hand[name][m].append(res[m])
    for m in ("P@1", "P@3", "PSP@1", "PSP@3"):
        assert got[0][m] == pytest.approx(np.percentile(by_hand["a"][m], [5, 95]).tolist())
        assert got[1][m] == pytest.approx(np.percentile(by_hand["b"][m], [5, 95]).tolist())
        diff = np.array(by_hand["b"][m]) - np.array(by_hand["a"][m])
        assert got[1][f"{m} - first"] == pytest.approx(np.percentile(diff, [5, 95]).tolist())
    assert "P@1 - first" not in got[0]
