"""The search layout of a level (parent by parent, feature by feature): built in memory or
streamed to files in groups, read back mapped, and refused or reported when damaged."""

from __future__ import annotations

import re

import numpy as np
import pytest
import scipy.sparse as sp

from gandalf_xmc.engine.beam_search import TreeWeights
from gandalf_xmc.engine.layout_format import CHUNK_FILES, has_chunks
from gandalf_xmc.engine.level_chunks import lay_out, map_chunks, to_csr, write_chunks
from gandalf_xmc.engine.level_store import LaidOutLevel, drop_csr, open_level, read_level, write_level
from gandalf_xmc.errors import DataFormatError


def _level(seed: int, rows: int, d: int, density: float) -> sp.csr_matrix:
    rng = np.random.default_rng(seed)
    dense = np.where(rng.random((rows, d)) < density, rng.normal(size=(rows, d)), 0.0).astype(np.float32)
    return sp.csr_matrix(dense)


def _halved(W: sp.csr_matrix) -> sp.csr_matrix:
    """``W`` with its weights rounded to float16, as a layout in files holds them."""
    return sp.csr_matrix((W.data.astype(np.float16).astype(np.float32), W.indices, W.indptr), shape=W.shape)


def _from_layout(chunks, child_ptr: np.ndarray, d: int) -> np.ndarray:
    """The dense level rebuilt entry by entry from a layout, reading it as documented."""
    out = np.zeros((child_ptr[-1], d), dtype=np.float32)
    n_parents = child_ptr.size - 1
    blocks = (chunks.feat_lo.size - 1) // n_parents
    assert blocks == -(-d // 65536)
    largest = int(np.diff(child_ptr).max())
    stride = max(1, 65535 // largest)
    assert chunks.stride == stride and chunks.end_mark.size == -(-chunks.feat.size // stride)

    def end(a):
        exact = chunks.end_mark[a // stride]
        assert a % stride != 0 or chunks.feat_end[a] == exact % 65536
        return exact + (int(chunks.feat_end[a]) - exact) % 65536

    for p in range(n_parents):
        first, last = chunks.feat_lo[p * blocks], chunks.feat_lo[(p + 1) * blocks]
        prev_end = chunks.entry_lo[p]
        for b in range(blocks):
            lo, hi = chunks.feat_lo[p * blocks + b], chunks.feat_lo[p * blocks + b + 1]
            assert np.all(np.diff(chunks.feat[lo:hi].astype(int)) > 0)  # distinct and ascending within a block
            for a in range(lo, hi):
                for e in range(prev_end, end(a)):
                    out[child_ptr[p] + chunks.child[e], b * 65536 + int(chunks.feat[a])] = chunks.value[e]
                prev_end = end(a)
        assert first <= last and prev_end == chunks.entry_lo[p + 1]
    return out


CHILD_PTR = np.array([0, 3, 3, 10, 11, 30, 34])  # a parent without children, one with 19


def test_layout_holds_every_weight_once_in_memory_and_in_files(tmp_path):
    W = _level(1, 34, 50, 0.3)
    held = lay_out(W, CHILD_PTR)
    np.testing.assert_array_equal(_from_layout(held, CHILD_PTR, 50), W.toarray())
    assert held.child.dtype == np.uint8 and held.value.size == W.nnz
    # groups of at most 40 weights: several parents a group, and parents alone past it
    for group, threads in ((40, 1), (1, 1), (10**9, 1), (40, 2), (1, 3)):
        folder = tmp_path / f"{group}-{threads}"
        folder.mkdir()
        write_chunks(W, CHILD_PTR, folder, threads=threads, group_entries=group)
        assert has_chunks(folder) and not list(folder.glob("*.part"))
        mapped = map_chunks(folder, CHILD_PTR, 50)
        for a, b in zip(held.arrays[:-1], mapped.arrays[:-1]):
            assert a.dtype == b.dtype and np.array_equal(a, b)
        assert mapped.value.dtype == np.float16 and np.array_equal(mapped.value, held.value.astype(np.float16))
        assert not mapped.value.flags.writeable
        rebuilt = to_csr(mapped, CHILD_PTR, 50)  # the level's CSR again, from the layout alone
        assert (rebuilt != _halved(W)).nnz == 0 and np.array_equal(rebuilt.indptr, W.indptr)
    # from a level that is itself mapped from files, as training's levels beyond memory are
    write_level(W, tmp_path / "csr")
    source = read_level(tmp_path / "csr", W.shape[1])
    assert not source.data.flags.writeable
    write_chunks(source, CHILD_PTR, tmp_path / "csr", group_entries=40)
    for a, b in zip(lay_out(_halved(W), CHILD_PTR).arrays, map_chunks(tmp_path / "csr", CHILD_PTR, 50).arrays):
        assert np.array_equal(a, b)


def test_a_weight_beyond_float16_keeps_the_level_in_float32(tmp_path):
    W = _level(7, 34, 50, 0.3)
    W.data[5] = 70_000.0  # float16's largest is 65,504
    write_chunks(W, CHILD_PTR, tmp_path)
    mapped = map_chunks(tmp_path, CHILD_PTR, 50)
    assert mapped.value.dtype == np.float32
    np.testing.assert_array_equal(_from_layout(mapped, CHILD_PTR, 50), W.toarray())


def test_a_level_kept_as_its_layout_alone_is_read_as_one(tmp_path):
    W = _level(8, 34, 50, 0.3)
    write_level(W, tmp_path / "level")
    write_chunks(read_level(tmp_path / "level", 50), CHILD_PTR, tmp_path / "level")
    drop_csr(tmp_path / "level")
    level = open_level(tmp_path / "level", 50, 34)
    assert isinstance(level, LaidOutLevel) and level.shape == (34, 50) and level.nnz == W.nnz
    top = sp.csr_matrix(np.ones((6, 50), dtype=np.float32))
    weights = TreeWeights([top, level], [CHILD_PTR], chunk_dirs=[None, tmp_path / "level"])
    in_memory = TreeWeights([top, _halved(W)], [CHILD_PTR])
    Q = _level(9, 5, 50, 0.2)
    assert all(np.array_equal(a, b) for a, b in zip(weights.search(Q, 2, 4), in_memory.search(Q, 2, 4)))
    write_level(level, tmp_path / "saved", source=tmp_path / "level")  # saving links the layout
    assert sorted(f.name for f in (tmp_path / "saved").iterdir()) == sorted(
        ["indptr.npy", *(f"chunk_{name}.npy" for name in CHUNK_FILES)]
    )
    with pytest.raises(ValueError, match="saved from its files"):
        write_level(level, tmp_path / "elsewhere")
    with pytest.raises(ValueError, match="level: neither weights nor a search layout"):
        TreeWeights([top, level], [CHILD_PTR], chunk_dirs=[None, tmp_path / "saved" / "level"])
    (tmp_path / "saved" / "chunk_value.npy").unlink()
    with pytest.raises(ValueError, match="saved: neither weights nor a search layout"):
        TreeWeights([top, level], [CHILD_PTR], chunk_dirs=[None, tmp_path / "saved"])
    with pytest.raises(ValueError, match="inconsistent weight arrays"):
        open_level(tmp_path / "level", 50, 33)  # rows that do not match the tree


def test_search_in_mapped_files_equals_search_in_memory(tmp_path):
    D = 60
    levels = [_level(2, 6, D, 0.5), _level(3, 34, D, 0.3), _level(4, 200, D, 0.2)]
    children = [CHILD_PTR, np.linspace(0, 200, 35).astype(np.int64)]  # level 1's 34 nodes' children
    dirs = []
    for t, W in enumerate(levels):
        folder = tmp_path / f"level{t}"
        folder.mkdir()
        write_chunks(W, np.array([0, W.shape[0]]) if t == 0 else children[t - 1], folder, group_entries=25)
        dirs.append(folder)
    memory = TreeWeights([_halved(W) for W in levels], children)  # the files' weights, held as float32
    files = TreeWeights(levels, children, chunk_dirs=dirs)
    assert [c.name for c in files.chunks] == [str(d) for d in dirs]
    Q = sp.vstack([_level(5, 40, D, 0.15), sp.csr_matrix((1, D), dtype=np.float32)], format="csr")
    for beam, k in ((1, 4), (3, 10)):
        a, b = memory.search(Q, beam, k), files.search(Q, beam, k)
        assert np.array_equal(a[0], b[0]) and np.array_equal(a[1], b[1])
        for i in range(Q.shape[0]):  # one query at a time takes the single-query kernel: the same rows
            one = files.search(Q[i], beam, k)
            assert np.array_equal(one[0][0], a[0][i]) and np.array_equal(one[1][0], a[1][i])
    assert len(files.mapped_arrays()) == len(CHUNK_FILES) * len(levels)


def _damage(folder, name, change):
    path = folder / f"chunk_{name}.npy"
    array = np.load(path)
    change(array)
    path.unlink()  # a fresh file: the mapped one stays as it was
    np.save(path, array)


@pytest.mark.parametrize(
    "name, change",
    [
        ("child", lambda a: a.__setitem__(slice(None), 250)),  # children past the family
        ("feat_end", lambda a: a.__setitem__(slice(None), 65535)),  # entries past the chunk's
        ("end_mark", lambda a: a.__setitem__(slice(None), 10**12)),  # likewise, from the marks
    ],
)
def test_a_damaged_entry_is_an_error_not_a_stray_access(tmp_path, name, change):
    W = _level(6, 34, 50, 0.4)
    top = sp.csr_matrix(np.ones((6, 50), dtype=np.float32))
    for t, level in enumerate((top, W)):
        (tmp_path / str(t)).mkdir()
        write_chunks(level, np.array([0, 6]) if t == 0 else CHILD_PTR, tmp_path / str(t))
    _damage(tmp_path / "1", name, change)
    weights = TreeWeights([top, W], [CHILD_PTR], chunk_dirs=[tmp_path / "0", tmp_path / "1"])
    for n_queries in (3, 1):  # the batch kernel and the single-query one
        with pytest.raises(DataFormatError, match=re.escape(f"{tmp_path / '1'}: the search layout is damaged")):
            weights.search(sp.csr_matrix(np.ones((n_queries, 50), dtype=np.float32)), beam=6, k=5)


@pytest.mark.parametrize(
    "name, change",
    [
        ("feat_lo", lambda a: a.__setitem__(-1, a[-1] + 1)),
        ("entry_lo", lambda a: a.__setitem__(2, a[-1] + 5)),
    ],
)
def test_pointers_that_disagree_are_refused_when_mapping(tmp_path, name, change):
    W = _level(7, 34, 50, 0.4)
    write_chunks(W, CHILD_PTR, tmp_path)
    _damage(tmp_path, name, change)
    with pytest.raises(ValueError, match=f"chunk_{name}"):
        map_chunks(tmp_path, CHILD_PTR, 50)
    with pytest.raises(ValueError, match="does not match the tree"):
        map_chunks(tmp_path, np.array([0, 34]), 50)  # another tree


def test_marks_missing_or_other_features_are_refused_when_mapping(tmp_path):
    W = _level(7, 34, 50, 0.4)
    write_chunks(W, CHILD_PTR, tmp_path)
    with pytest.raises(ValueError, match="chunk_feat_lo.npy does not match"):
        map_chunks(tmp_path, CHILD_PTR, 70_000)  # two blocks of features, where the layout has one
    _damage(tmp_path, "end_mark", lambda a: None)
    (tmp_path / "chunk_end_mark.npy").unlink()
    np.save(tmp_path / "chunk_end_mark.npy", np.zeros(0, dtype=np.int64))
    with pytest.raises(ValueError, match="differ in length"):
        map_chunks(tmp_path, CHILD_PTR, 50)


def test_a_chunk_past_65536_entries_and_features_past_one_block_are_searched_exactly(tmp_path):
    """The 16-bit ends wrap within a chunk of 300 children x about 400 weights, and features of
    three blocks: the layout, in memory and in files, gives every weight back and the search the
    same nodes and scores as the search in the CSR rows (an independent path)."""
    rng = np.random.default_rng(11)
    d, rows = 140_000, 310
    dense_band = np.arange(300)  # shared by every row: pairs of up to 300 entries
    cols = [np.unique(np.concatenate([dense_band, rng.choice(d, 100, replace=False)])) for _ in range(rows)]
    indptr = np.concatenate([[0], np.cumsum([c.size for c in cols])])
    W = sp.csr_matrix((rng.normal(size=indptr[-1]).astype(np.float32), np.concatenate(cols), indptr), shape=(rows, d))
    child_ptr = np.array([0, 300, 310])
    top = sp.csr_matrix(rng.normal(size=(2, d)).astype(np.float32) * (rng.random((2, d)) < 0.01))
    assert W[:300].nnz > 65536
    held = lay_out(W, child_ptr)
    assert held.stride == 65535 // 300 and held.feat_lo.size == 2 * 3 + 1
    np.testing.assert_array_equal(_from_layout(held, child_ptr, d), W.toarray())
    for t, level in enumerate((top, W)):
        (tmp_path / str(t)).mkdir()
        write_chunks(level, np.array([0, 2]) if t == 0 else child_ptr, tmp_path / str(t), group_entries=5000)
    assert (to_csr(map_chunks(tmp_path / "1", child_ptr, d), child_ptr, d) != _halved(W)).nnz == 0
    Q = sp.hstack([sp.csr_matrix(rng.random((20, 300)).astype(np.float32)), _level(12, 20, d - 300, 0.001)], format="csr")
    rows_only = TreeWeights([top, W], [child_ptr], chunk_entries=0)
    assert rows_only.chunks == [None, None]
    in_memory = TreeWeights([top, W], [child_ptr])
    a, b = rows_only.search(Q, 2, 10), in_memory.search(Q, 2, 10)
    assert np.array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], rtol=1e-6)  # sums in another order
    halved_rows = TreeWeights([_halved(top), _halved(W)], [child_ptr], chunk_entries=0)
    files = TreeWeights([top, W], [child_ptr], chunk_dirs=[tmp_path / "0", tmp_path / "1"])
    a, b = halved_rows.search(Q, 2, 10), files.search(Q, 2, 10)
    assert np.array_equal(a[0], b[0])
    np.testing.assert_allclose(a[1], b[1], rtol=1e-6)


def test_an_unfinished_layout_is_not_read(tmp_path):
    W = _level(8, 34, 50, 0.4)
    write_chunks(W, CHILD_PTR, tmp_path)
    (tmp_path / "chunk_feat_lo.npy").unlink()  # written last: the others may be whole
    assert not has_chunks(tmp_path)
    assert set(CHUNK_FILES) - {"feat_lo"} == {p.name[6:-4] for p in tmp_path.glob("chunk_*.npy")}


def test_a_layout_of_the_earlier_encoding_is_left_for_the_level_s_csr(tmp_path):
    """Models saved before the 4-byte pairs have a layout without marks beside their CSR: the
    layout is not read (it would be misread), the level is laid out again from its CSR."""
    W = _level(13, 34, 50, 0.3)
    top = sp.csr_matrix(np.ones((6, 50), dtype=np.float32))
    write_level(W, tmp_path / "old")
    write_chunks(W, CHILD_PTR, tmp_path / "old")
    (tmp_path / "old" / "chunk_end_mark.npy").unlink()
    level = open_level(tmp_path / "old", 50, 34)
    weights = TreeWeights([top, level], [CHILD_PTR], chunk_dirs=[None, tmp_path / "old"])
    assert weights.chunks[1].name == "in memory" and weights.chunks[1].value.dtype == np.float32
    Q = _level(14, 5, 50, 0.2)
    want = TreeWeights([top, W], [CHILD_PTR]).search(Q, 2, 4)
    assert all(np.array_equal(a, b) for a, b in zip(weights.search(Q, 2, 4), want))
