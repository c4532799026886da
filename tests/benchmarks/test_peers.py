"""benchmarks/peers.py's paired P@1 gap between a peer and our model, worked out by hand."""

from __future__ import annotations

import importlib.util
from pathlib import Path

import numpy as np
import pytest

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
spec = importlib.util.spec_from_file_location("peers", BENCHMARKS / "peers.py")
peers = importlib.util.module_from_spec(spec)
spec.loader.exec_module(peers)


def test_a_peers_gap_to_ours_is_paired_over_the_same_items():
    rows = [{"tool": "gandalf"}, {"tool": "pecos"}]
    # pecos - ours: +1, 0, 0, -1, +1, mean 0.2; squared deviations 0.64, 0.04, 0.04, 1.44, 0.64: variance 2.8 / 4 = 0.7
    hits = {"gandalf": np.array([0, 1, 0, 1, 0.0]), "pecos": np.array([1, 1, 0, 0, 1.0])}
    peers.paired_gaps(rows, hits)
    assert "P@1_minus_ours" not in rows[0]
    assert rows[1]["P@1_minus_ours"] == pytest.approx(20.0)
    assert rows[1]["P@1_minus_ours_se"] == pytest.approx(100 * np.sqrt(0.7 / 5))
    table = peers.table(
        [
            {
                **r,
                "dataset": "d",
                "split": "test",
                "seed": 0,
                "training": "none",
                "process_seconds": 1.0,
                "train_seconds": 1.0,
                "queries_per_second": 1.0,
                **dict.fromkeys(peers.METRICS, 1.0),
            }
            for r in rows
        ]
    )
    assert f"| +20.00 ({2 * 100 * np.sqrt(0.7 / 5):.2f}) |" in table
