"""The label graph on Dask (a LocalCluster of worker processes) against the single-machine kernel."""

from __future__ import annotations

import gzip

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.graph import GraphConfig, label_graph, point_weights
from gandalf_xmc.graph.cooccurrence import conditional_graph
from gandalf_xmc.graph.distributed import dask_conditional_graph, finalize_rows


@pytest.fixture(scope="module")
def client():
    distributed = pytest.importorskip("distributed")
    with (
        distributed.LocalCluster(n_workers=3, threads_per_worker=1, processes=True, dashboard_address=None) as cluster,
        distributed.Client(cluster) as c,
    ):
        yield c


def random_labels(n: int, n_labels: int, seed: int) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    rows, cols = [], []
    for i in range(n):
        k = rng.integers(1, 6)
        labels = np.unique(np.minimum(rng.zipf(1.3, size=k) - 1, n_labels - 1))
        rows += [i] * labels.size
        cols += labels.tolist()
    return sp.csr_matrix((np.ones(len(rows), dtype=np.float32), (rows, cols)), shape=(n, n_labels))


def same(a: sp.csr_matrix, b: sp.csr_matrix) -> bool:
    a, b = sp.csr_matrix(a), sp.csr_matrix(b)
    return (
        np.array_equal(a.indptr, b.indptr)
        and np.array_equal(a.indices, b.indices)
        and np.array_equal(a.data, b.data)
        and a.dtype == b.dtype
    )


@pytest.mark.parametrize(
    "options",
    [
        {},
        {"delta": 0.0},
        {"delta": 0.3, "top_k": 2},
        {"shrinkage": 1.0},
        {"symmetric": True},
    ],
)
def test_dask_graph_is_identical_for_binary_labels(client, options):
    Y = random_labels(400, 60, seed=1)
    expected = conditional_graph(Y, **options)
    for parts, blocks in ((1, 1), (7, 3), (13, 60)):
        got = dask_conditional_graph(Y, client, n_partitions=parts, n_blocks=blocks, **options)
        assert same(got, expected), (options, parts, blocks)


def test_dask_graph_with_point_weights_matches_to_rounding(client):
    Y = random_labels(300, 40, seed=2)
    w = point_weights(Y, "inverse-size")
    expected = conditional_graph(Y, point_weights=w)
    got = dask_conditional_graph(Y, client, n_partitions=5, point_weights=w)
    assert np.array_equal(got.indices, expected.indices) and np.array_equal(got.indptr, expected.indptr)
    np.testing.assert_allclose(got.data, expected.data, rtol=1e-6)


def test_finalize_rows_by_hand():
    # counts of rows 1..2 of a 4-label graph; diag = (4, 2, 5, 0)
    G = sp.csr_matrix(np.array([[1.0, 2.0, 1.0, 0.0], [0.0, 1.0, 5.0, 0.0]]))
    out = finalize_rows(
        G, 1, np.array([4.0, 2.0, 5.0, 0.0]), delta=0.4, top_k=None, shrinkage=0.0, symmetric=False, self_value=1.0
    ).toarray()
    # row 1: label 0 -> 1/2 = 0.5 kept, label 2 -> 1/2 kept; row 2: label 1 -> 1/5 dropped
    np.testing.assert_allclose(out, [[0.5, 1.0, 0.5, 0.0], [0.0, 0.0, 1.0, 0.0]])
    capped = finalize_rows(
        G, 1, np.array([4.0, 2.0, 5.0, 0.0]), delta=0.4, top_k=1, shrinkage=0.0, symmetric=False, self_value=1.0
    ).toarray()
    np.testing.assert_allclose(capped[0], [0.5, 1.0, 0.0, 0.0])  # a tie at 0.5: the lower label id stays


def test_label_graph_and_augment_cli_on_dask(client, tmp_path, tiny_dir):
    from typer.testing import CliRunner

    from gandalf_xmc.cli import app

    Y = random_labels(200, 30, seed=3)
    for kind in ("cooccurrence", "glas"):
        config = GraphConfig(kind=kind, delta=0.1)
        assert same(label_graph(Y, config, client=client), label_graph(Y, config))
    runner = CliRunner()
    a = runner.invoke(app, ["augment", "--data", str(tiny_dir), "--out", str(tmp_path / "one")])
    b = runner.invoke(
        app, ["augment", "--data", str(tiny_dir), "--out", str(tmp_path / "dask"), "--dask", client.scheduler.address]
    )
    assert a.exit_code == 0 and b.exit_code == 0, b.output
    for name in ("aug.json.gz", "trn.json.gz"):
        assert gzip.decompress((tmp_path / "one" / name).read_bytes()) == gzip.decompress((tmp_path / "dask" / name).read_bytes())
    assert (tmp_path / "one" / "aug_X_Y.txt").read_text() == (tmp_path / "dask" / "aug_X_Y.txt").read_text()
