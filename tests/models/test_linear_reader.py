"""The numpy-only reader of a saved linear model (of words, or of words and character n-grams; of
the squared hinge, or of the logistic loss whose levels score by the sigmoid) gives the full model's predictions, and loads without scipy, scikit-learn, numba or torch."""

from __future__ import annotations

import subprocess
import sys

import numpy as np
import pytest

from gandalf_xmc.data import load_dataset
from gandalf_xmc.engine.linear_solver import SolverConfig
from gandalf_xmc.models.linear import LinearConfig, XRLinear
from gandalf_xmc.models.linear_reader import LinearReader


@pytest.fixture(
    scope="module",
    params=[(None, "squared-hinge"), ((3, 5), "squared-hinge"), (None, "logistic")],
    ids=["words", "words and characters", "logistic loss"],
)
def saved(tmp_path_factory, request):
    ds = load_dataset("jargon")
    chars, loss = request.param
    config = LinearConfig(threads=1, leaf_size=20, branching=4, char_ngrams=chars, solver=SolverConfig(loss=loss))
    model = XRLinear(config).fit(ds.train.texts, ds.train.Y, ds.label_texts, progress=False)
    d = tmp_path_factory.mktemp("m") / "model"
    model.save(d)
    return d, model, ds


def test_features_equal_scikit_learns(saved):
    d, model, ds = saved
    reader = LinearReader(d)
    texts = ds.test.texts[:200] + ["", "!!!", "Élan vital résumé", "a a a a b"]
    full = model.features(texts)
    for i, text in enumerate(texts):
        ids, values = reader.features(text)
        row = full[i]
        assert ids.tolist() == row.indices.tolist()
        np.testing.assert_allclose(values, row.data, rtol=1e-6, atol=1e-7)


def test_predictions_equal_the_full_models(saved):
    d, model, ds = saved
    reader = LinearReader(d)
    texts = ds.test.texts[:300]
    full = model.predict(texts, k=10)
    light = reader.predict(texts, k=10)
    for i in range(len(texts)):
        lo, hi = full.indptr[i], full.indptr[i + 1]
        want = sorted(zip(full.data[lo:hi].tolist(), full.indices[lo:hi].tolist()), key=lambda x: (-x[0], x[1]))
        got = list(
            zip(
                light.data[light.indptr[i] : light.indptr[i + 1]].tolist(),
                light.indices[light.indptr[i] : light.indptr[i + 1]].tolist(),
            )
        )
        np.testing.assert_allclose([s for s, _ in got], [s for s, _ in want], rtol=1e-5)
        # labels agree except where scores tie to float precision
        for (sg, lg), (sw, lw) in zip(got, want):
            assert (
                lg == lw or abs(sg - sw) < 1e-6 * max(sw, 1e-12) or any(abs(s - sg) <= 1e-6 * sg for s, lab in want if lab == lg)
            )
    assert reader.predict_labels(texts[:5], 3) == model.predict_labels(texts[:5], 3)
    assert (XRLinear.load(d).predict(texts, k=10) != full).nnz == 0  # the full loader scores as trained


def test_the_reader_imports_numpy_only(saved):
    d, _, _ = saved
    code = (
        "import sys; from gandalf_xmc.predictor import load_predictor; "
        f"p = load_predictor({str(d)!r}, light=True); p.predict_labels(['hack'], 3); "
        "print(sorted(m for m in ('scipy', 'sklearn', 'numba', 'torch') if m in sys.modules), type(p.model).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == "[] LinearReader"


def test_a_damaged_character_idf_is_named(saved, tmp_path):
    import shutil

    from gandalf_xmc.errors import DataFormatError

    d, model, _ = saved
    if model.config.char_ngrams is None:
        pytest.skip("a model of words has no character idf")
    copy = tmp_path / "model"
    shutil.copytree(d, copy)
    np.save(copy / "features_char_idf.npy", np.ones(3))
    with pytest.raises(DataFormatError, match="features_char_idf.npy"):
        LinearReader(copy)


def test_levels_kept_as_their_layout_alone_are_read_with_numpy_too(spilled_model, tmp_path):
    """Levels trained to files keep their search layout alone (float16 weights, no CSR): the
    reader searches the layout as the full model does, in the same order of sums, and refuses a
    damaged entry with the full model's line."""
    from gandalf_xmc.errors import DataFormatError
    from gandalf_xmc.predictor import load_predictor

    assert not list(spilled_model.glob("weights_level*/indices.npy"))
    reader, full = LinearReader(spilled_model), XRLinear.load(spilled_model)
    assert load_predictor(spilled_model, light=True).model.__class__ is LinearReader
    texts = ["fresh red apple", "green", "apple banana cherry", "nothing known here"]
    want = full.predict(texts, k=3)
    got = reader.predict(texts, k=3)
    for i in range(len(texts)):
        row = slice(want.indptr[i], want.indptr[i + 1])
        assert list(got.indices[got.indptr[i] : got.indptr[i + 1]]) == list(want.indices[row])
        np.testing.assert_array_equal(got.data[got.indptr[i] : got.indptr[i + 1]], want.data[row])
    leaves = max(spilled_model.glob("weights_level*"), key=lambda p: int(p.name.removeprefix("weights_level")))
    child = np.load(leaves / "chunk_child.npy")
    child[:] = 250
    (leaves / "chunk_child.npy").unlink()
    np.save(leaves / "chunk_child.npy", child)
    with pytest.raises(DataFormatError, match="the search layout is damaged"):
        LinearReader(spilled_model).predict(texts, k=3)
