"""Readers and writers: round trips and hand-checked parses."""

from __future__ import annotations

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.data import (
    load_dataset,
    read_bow,
    read_filter_pairs,
    read_lf_json,
    read_sparse_text,
    write_bow,
    write_filter_pairs,
    write_lf_json,
    write_sparse_text,
)
from gandalf_xmc.data.dataset import embedded_dataset_path
from gandalf_xmc.errors import DataFormatError

from helpers import write_json_lines


def test_lf_json_targets_and_relevance(tmp_path):
    p = write_json_lines(
        tmp_path / "trn.json.gz",
        [
            {"uid": "a", "title": "x y", "target_ind": [2, 0], "target_rel": [0.5, 1.0]},
            {"uid": "b", "title": "z", "target_ind": []},
            {"uid": "c", "title": "w", "target_ind": [1]},
        ],
    )
    rec = read_lf_json(p, 3)
    assert rec.uids == ["a", "b", "c"] and rec.texts == ["x y", "z", "w"]
    assert rec.Y.dtype == np.float32
    np.testing.assert_allclose(rec.Y.toarray(), [[1.0, 0, 0.5], [0, 0, 0], [0, 1.0, 0]])


def test_lf_json_round_trip_plain_and_gzip(tmp_path):
    Y = sp.csr_matrix(np.array([[0, 0.25, 1], [1, 0, 0]], dtype=np.float32))
    for name in ("out.json", "out.json.gz"):
        write_lf_json(tmp_path / name, ["u1", "u2"], ["t one", "t two"], Y)
        rec = read_lf_json(tmp_path / name, 3)
        assert rec.texts == ["t one", "t two"]
        np.testing.assert_allclose(rec.Y.toarray(), Y.toarray())


def test_sparse_text_round_trip_and_empty_rows(tmp_path):
    p = tmp_path / "m.txt"
    p.write_text("3 5\n0:1 4:0.5\n\n2:0.25\n")
    M = read_sparse_text(p, relevance=True)
    np.testing.assert_allclose(M.toarray(), [[1, 0, 0, 0, 0.5], [0] * 5, [0, 0, 0.25, 0, 0]])
    write_sparse_text(tmp_path / "n.txt", M)
    assert (tmp_path / "n.txt").read_text() == "3 5\n0:1 4:0.5\n\n2:0.25\n"


def test_sparse_text_scores_may_be_any_real(tmp_path):
    p = tmp_path / "pred.txt"
    p.write_text("1 3\n0:-2.5 2:7\n")
    np.testing.assert_allclose(read_sparse_text(p).toarray(), [[-2.5, 0, 7]])


def test_bow_round_trip(tmp_path):
    p = tmp_path / "bow.txt"
    p.write_text("3 4 5\n0,4 1:0.5 3:2\n 0:1\n2\n")
    X, Y = read_bow(p)
    np.testing.assert_allclose(X.toarray(), [[0, 0.5, 0, 2], [1, 0, 0, 0], [0, 0, 0, 0]])
    np.testing.assert_allclose(Y.toarray(), [[1, 0, 0, 0, 1], [0] * 5, [0, 0, 1, 0, 0]])
    write_bow(tmp_path / "bow2.txt", X, Y)
    X2, Y2 = read_bow(tmp_path / "bow2.txt")
    assert (X2 != X).nnz == 0 and (Y2 != Y).nnz == 0


def test_filter_pairs_round_trip(tmp_path):
    write_filter_pairs(tmp_path / "f.txt", np.array([[0, 3], [2, 1]]))
    np.testing.assert_array_equal(read_filter_pairs(tmp_path / "f.txt", 3, 4), [[0, 3], [2, 1]])


def test_text_layout_dataset(tmp_path):
    d = tmp_path / "textds"
    d.mkdir()
    (d / "lbl_X.txt").write_text("l zero\nl one\n")
    (d / "trn_X.txt").write_text("a b\nc\n")
    (d / "trn_X_Y.txt").write_text("2 2\n0:1\n1:1 0:1\n")
    (d / "tst_X.txt").write_text("q\n")
    (d / "tst_X_Y.txt").write_text("1 2\n1:1\n")
    ds = load_dataset(d)
    assert ds.label_texts == ["l zero", "l one"] and ds.train.texts == ["a b", "c"]
    np.testing.assert_allclose(ds.train.Y.toarray(), [[1, 0], [1, 1]])
    assert ds.test.Y.shape == (1, 2)


def test_a_text_layout_of_unequal_lengths_names_both_files(tmp_path):
    from gandalf_xmc.errors import DataFormatError

    d = tmp_path / "textds"
    d.mkdir()
    (d / "lbl_X.txt").write_text("l zero\nl one\n")
    (d / "trn_X.txt").write_text("a b\n")  # one text short of its targets
    (d / "trn_X_Y.txt").write_text("2 2\n0:1\n1:1 0:1\n")
    with pytest.raises(DataFormatError) as err:
        load_dataset(d, splits=("trn",))
    assert (
        str(err.value)
        == f"{d / 'trn_X.txt'}: 1 texts (lines) but trn_X_Y.txt has 2 rows: the two files need one line for each point"
    )


def test_embedded_dataset_matches_its_readme():
    ds = load_dataset()
    assert ds.name == "debian-bookworm"
    assert ds.path == embedded_dataset_path()
    assert ds.train.Y.shape == (34_759, 42_200) and ds.test.Y.shape == (14_898, 42_200)
    assert ds.test.filter_pairs.shape == (10_066, 2)
    assert ds.propensity_constants() == (0.55, 1.5)


@pytest.mark.parametrize(
    "content,problem",
    [
        ('{"title": "a", "target_ind": [0]}\n{"title": "b", "target_ind": [0, 3]}\n', "line 2"),
    ],
)
def test_error_names_file_and_line(tmp_path, content, problem):
    p = tmp_path / "trn.json"
    p.write_text(content)
    with pytest.raises(DataFormatError) as info:
        read_lf_json(p, 3)
    assert info.value.line == 2 and str(p) in str(info.value) and "out of range" in str(info.value)


def test_fast_renderer_matches_plain_formatting(tmp_path):
    rng = np.random.default_rng(0)
    M = sp.random(50, 1000, density=0.05, random_state=rng, format="csr", dtype=np.float32)
    M.data = np.round(M.data * 3, 3) - 1.0  # negatives, zeros-free mix of values
    M.data[M.data == 0] = 0.5
    write_sparse_text(tmp_path / "m.txt", M)
    lines = [f"{M.shape[0]} {M.shape[1]}"]
    for i in range(M.shape[0]):
        lo, hi = M.indptr[i], M.indptr[i + 1]
        lines.append(" ".join(f"{j}:{v:.6g}" for j, v in zip(M.indices[lo:hi].tolist(), M.data[lo:hi].tolist())))
    assert (tmp_path / "m.txt").read_text() == "\n".join(lines) + "\n"


def test_lf_json_writes_rel_only_when_needed(tmp_path):
    Y = sp.csr_matrix(np.array([[1, 1, 0], [0, 0.5, 1], [0, 0, 0]], dtype=np.float32))
    write_lf_json(tmp_path / "a.json", ["a", "b", "c"], ['x "quoted"', "y\\n", "z"], Y, binary_rel=True)
    lines = (tmp_path / "a.json").read_text().splitlines()
    assert lines[0] == '{"uid":"a","title":"x \\"quoted\\"","target_ind":[0,1]}'
    assert lines[1] == '{"uid":"b","title":"y\\\\n","target_ind":[1,2],"target_rel":[0.5,1]}'
    assert lines[2] == '{"uid":"c","title":"z","target_ind":[]}'
    rec = read_lf_json(tmp_path / "a.json", 3)
    assert rec.texts[0] == 'x "quoted"'


def test_predictions_stream_to_the_same_file_and_leave_nothing_on_failure(tmp_path):
    from gandalf_xmc.data.formats import read_sparse_text, write_sparse_text
    from gandalf_xmc.workflow.pipeline import write_predictions

    full = sp.random(23, 9, density=0.3, random_state=4, format="csr", dtype=np.float32)
    texts = [f"t{i}" for i in range(23)]

    class Rows:
        calls = []

        def predict(self, batch, k):
            self.calls.append(len(batch))
            if any(t == "boom" for t in batch):
                raise RuntimeError("model failed")
            return full[[int(t[1:]) for t in batch]]

    model = Rows()
    write_predictions(model, texts, 9, tmp_path / "stream.txt", batch_size=5, progress=False)
    write_sparse_text(tmp_path / "whole.txt", full)
    assert model.calls == [5, 5, 5, 5, 3]  # never more than one batch at a time
    assert (tmp_path / "stream.txt").read_text() == (tmp_path / "whole.txt").read_text()
    np.testing.assert_allclose(read_sparse_text(tmp_path / "stream.txt").toarray(), full.toarray(), rtol=1e-4)
    with pytest.raises(RuntimeError):
        write_predictions(model, texts[:7] + ["boom"], 9, tmp_path / "bad.txt", batch_size=5, progress=False)
    assert not (tmp_path / "bad.txt").exists() and not list(tmp_path.glob("bad.txt*"))


def test_row_blocks_cover_rows_once_within_their_limits():
    from gandalf_xmc.data.render import row_blocks

    M = sp.random(50, 30, density=0.3, format="csr", random_state=0)
    blocks = list(row_blocks(M, 7, max_entries=20))
    assert blocks[0][0] == 0 and blocks[-1][1] == 50
    assert all(a[1] == b[0] for a, b in zip(blocks, blocks[1:]))
    for start, stop in blocks:
        assert stop - start <= 7
        # a block only goes over the entry budget when it is a single row
        assert M.indptr[stop] - M.indptr[start] <= 20 or stop == start + 1
    assert list(row_blocks(sp.csr_matrix((5, 3)), 2)) == [(0, 2), (2, 4), (4, 5)]


def test_gzip_outputs_are_byte_identical_and_carry_no_name(tmp_path):
    import time

    from gandalf_xmc.data import write_lf_json

    Y = sp.csr_matrix(np.array([[1, 0], [0, 0.5]], dtype=np.float32))
    write_lf_json(tmp_path / "a.json.gz", ["a", "b"], ["x", "y"], Y)
    time.sleep(1.1)  # a header with a time stamp would now differ
    write_lf_json(tmp_path / "b.json.gz", ["a", "b"], ["x", "y"], Y)
    a, b = (tmp_path / "a.json.gz").read_bytes(), (tmp_path / "b.json.gz").read_bytes()
    assert a == b
    flags, mtime = a[3], int.from_bytes(a[4:8], "little")
    assert flags & 0x08 == 0 and mtime == 0  # FNAME bit unset: no file name stored
