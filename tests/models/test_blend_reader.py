"""The numpy-only readers of a saved knn model and linear-knn blend (without the label-text
similarity) give the full models' answers, the neighbours' scores and vote bit for bit, load
without scipy, scikit-learn, numba or torch, and name a damaged index file."""

from __future__ import annotations

import shutil
import subprocess
import sys

import numpy as np
import pytest

from gandalf_xmc.data import load_dataset
from gandalf_xmc.errors import DataFormatError
from gandalf_xmc.models.blend import BlendConfig, LinearKnnBlend
from gandalf_xmc.models.blend_reader import BlendReader, KnnReader, can_read
from gandalf_xmc.models.registry import model_config
from gandalf_xmc.predictor import load_predictor


@pytest.fixture(scope="module", params=[0.35, 0.0], ids=["vote 0.35", "vote 0"])
def saved(tmp_path_factory, request):
    ds = load_dataset("jargon")
    config = BlendConfig(**{**model_config("linear-knn", seed=0, threads=1).__dict__, "knn_weight": request.param})
    model = LinearKnnBlend(config).fit(ds.train.texts, ds.train.Y, ds.label_texts, progress=False)
    d = tmp_path_factory.mktemp("m") / "model"
    model.save(d)
    return d, model, ds


def test_answers_equal_the_full_models(saved):
    d, model, ds = saved
    reader = BlendReader(d)
    texts = ds.test.texts[:300] + ["", "zzzz qqqq"]
    for k in (5, 100):
        light = reader.predict(texts, k=k)
        for i, text in enumerate(texts):
            full = model.predict([text], k=k)
            got = light.indices[light.indptr[i] : light.indptr[i + 1]], light.data[light.indptr[i] : light.indptr[i + 1]]
            np.testing.assert_allclose(got[1], full.data, rtol=1e-5)
            # labels agree except where scores tie to float precision
            differ = got[0] != full.indices
            assert np.all(np.abs(got[1][differ] - full.data[differ]) <= 1e-6 * full.data[differ])
    assert reader.predict_labels(texts[:20], 3) == model.predict_labels(texts[:20], 3)
    assert reader.known_queries(texts) == model.known_queries(texts)


def test_the_neighbours_scores_and_vote_are_the_full_models_bit_for_bit(saved):
    d, model, ds = saved
    reader = KnnReader(d / "knn")  # the blend's part, saved as a knn model of its own
    texts = ds.test.texts[:200] + ["", "zzzz qqqq"]
    light = reader.predict(texts, k=100)
    for i, text in enumerate(texts):
        want = model.knn.predict([text, ""], k=100)[0]  # the batch path: scipy's products
        assert np.array_equal(light.indices[light.indptr[i] : light.indptr[i + 1]], want.indices)
        assert np.array_equal(light.data[light.indptr[i] : light.indptr[i + 1]], want.data)
        labels, votes = reader.scores(text, 100, share=True)
        want = model.knn.vote([text, ""], k=100)[0]
        assert np.array_equal(labels, want.indices) and np.array_equal(votes, want.data)
    assert reader.known_queries(texts) == model.knn.known_queries(texts)
    assert reader.predict_labels(texts[:20], 3) == model.knn.predict_labels(texts[:20], 3)
    assert (BlendReader(d).knn is None) == (model.knn_weight == 0)  # a blend without the vote reads no index


@pytest.mark.parametrize("part", ["", "knn"])
def test_the_readers_import_numpy_only(saved, part):
    d, _, _ = saved
    code = (
        "import sys; from gandalf_xmc.predictor import load_predictor; "
        f"p = load_predictor({str(d / part)!r}, light=True); p.predict_labels(['hack'], 3); "
        "print(sorted(m for m in ('scipy', 'sklearn', 'numba', 'torch') if m in sys.modules), type(p.model).__name__)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout.strip()
    assert out == ("[] KnnReader" if part else "[] BlendReader")


def test_a_blend_with_the_text_part_is_left_to_the_full_loader():
    assert can_read({"kind": "linear-knn", "text_weight": 0.0}) and can_read({"kind": "linear-knn"}) and can_read({"kind": "knn"})
    assert not can_read({"kind": "linear-knn", "text_weight": 0.2}) and not can_read({"kind": "linear"})


@pytest.mark.parametrize("damage", ["a column out of range", "offsets out of order", "labels of another model"])
def test_a_damaged_index_is_named_in_one_line(saved, tmp_path, damage):
    d, model, _ = saved
    if not model.knn_weight:
        pytest.skip("a blend without the vote reads no index")
    copy = tmp_path / "model"
    shutil.copytree(d, copy)
    name = "knn_targets.npz" if damage == "labels of another model" else "knn_points.npz"
    with np.load(copy / "knn" / name) as f:
        arrays = {key: f[key] for key in f.files}
    if damage == "a column out of range":
        arrays["indices"] = arrays["indices"].copy()
        arrays["indices"][-1] = arrays["shape"][1] + 5
    elif damage == "offsets out of order":
        arrays["indptr"] = arrays["indptr"][::-1].copy()
    else:
        arrays["shape"] = arrays["shape"] + np.array([0, 1])
    np.savez(copy / "knn" / name, **arrays)
    for model_dir in (copy, copy / "knn"):  # the blend, and its part as a knn model
        with pytest.raises(DataFormatError, match=name):
            load_predictor(model_dir, light=True)
