"""What benchmarks/suite.py records as validation's choices, read from models trained as gandalf train trains them."""

from __future__ import annotations

import importlib.util
import json
import platform
import sys
from pathlib import Path
from types import SimpleNamespace

from gandalf_xmc.augment import AugmentConfig, training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.metrics import evaluate, inverse_propensity
from gandalf_xmc.models.registry import build_model, model_config
from gandalf_xmc.workflow.fitting import fit_model
from gandalf_xmc.workflow.pipeline import train_model
from gandalf_xmc.workflow.validation import carve_validation

from helpers import write_fruit_dataset

BENCHMARKS = Path(__file__).parents[2] / "benchmarks"
sys.path.insert(0, str(BENCHMARKS))
spec = importlib.util.spec_from_file_location("suite", BENCHMARKS / "suite.py")
suite = importlib.util.module_from_spec(spec)
spec.loader.exec_module(suite)


def test_the_blend_s_weights_and_auto_s_choice_are_named_as_the_saved_model_has_them(tmp_path):
    ds = load_dataset(write_fruit_dataset(tmp_path / "d"))
    trained = train_model(
        ds, tmp_path / "m", model_config("linear-knn", seed=0), AugmentConfig("none"), valid_fraction=0.25, progress=False
    )
    specs = (json.loads(f.read_text()) for f in (tmp_path / "m").rglob("model.json") if "checkpoints" not in f.parts)
    saved = next(s for s in specs if "knn_weight" in s)  # the final model's weights as written to disk
    assert suite.validation_chose(trained) == f"knn weight {saved['knn_weight']:g}, text weight {saved['text_weight']:g}"
    plain = train_model(
        ds, tmp_path / "p", model_config("linear", seed=0), AugmentConfig("none"), valid_fraction=0.25, progress=False
    )
    assert suite.validation_chose(plain) is None  # nothing chosen: no augmentation searched, no weights


def test_the_encoder_precision_is_read_from_the_model_or_from_its_ngame_part():
    minilm, bag = SimpleNamespace(inputs="minilm"), SimpleNamespace(inputs="words")
    ngame = SimpleNamespace(family=minilm, config=SimpleNamespace(encoder_precision="bfloat16"))
    assert suite.encoder_precision(ngame) == "bfloat16"
    assert suite.encoder_precision(SimpleNamespace(ngame=ngame, config=SimpleNamespace())) == "bfloat16"  # linear-ngame
    assert suite.encoder_precision(SimpleNamespace(ngame=None, config=SimpleNamespace())) is None  # its blend alone
    astec = SimpleNamespace(family=bag, config=SimpleNamespace(encoder_precision="float32"))
    assert suite.encoder_precision(astec) is None  # no sentence encoder: the field does not apply


def test_the_table_marks_an_auto_row_whose_budget_left_candidates_untried():
    metrics = {m: 10.0 for m in suite.METRICS}
    row = {
        "dataset": "d",
        "split": "valid",
        "n_eval": 5,
        "model": "linear",
        "augment": "auto",
        "settings": {},
        "train_seconds": 1.0,
    }
    cut = {**row, **metrics, "chosen": "none", "auto_skipped": ["identity", "gandalf"]}
    whole = {**row, **metrics, "chosen": "identity", "auto_skipped": []}
    assert "| linear | auto (chose none [budget: 2 untried], identity) |" in suite.table([cut, whole])
    assert "| linear | auto (chose identity) |" in suite.table([whole])


def test_a_row_names_its_cpu_as_linux_gives_it_else_as_platform_does(tmp_path):
    info = tmp_path / "cpuinfo"
    info.write_text("processor\t: 0\nvendor_id\t: AuthenticAMD\nmodel name\t: AMD EPYC 7B13\nflags\t\t: avx avx2\n")
    assert suite.cpu_model(info) == "AMD EPYC 7B13"
    info.write_text("processor\t: 0\nmodel name\t:   \n")  # a blank name is no name
    assert suite.cpu_model(info) == (platform.processor() or platform.machine())
    assert suite.cpu_model(tmp_path / "missing") == (platform.processor() or platform.machine())


def test_a_validated_row_carries_its_validation_run_as_scored_apart(tmp_path):
    ds = load_dataset(write_fruit_dataset(tmp_path / "d"))
    config = model_config("linear", seed=0)
    trained = train_model(ds, tmp_path / "m", config, AugmentConfig("none"), valid_fraction=0.25, progress=False)
    run = suite.validation_run(trained)
    rest, valid = carve_validation(ds, 0.25, 0, "random")  # the share train_model carves for seed 0
    apart = fit_model(build_model(config), training_set(rest, AugmentConfig("none")), rest.label_texts, progress=False)
    inv = inverse_propensity(rest.original_train_Y(), *ds.propensity_constants())
    scored = evaluate(apart.predict(valid.texts, k=10), valid.Y, inv, (1, 3, 5), valid.filter_pairs)
    assert (run["n_train"], run["n_valid"]) == (len(rest.train), len(valid))
    assert run["metrics"]["P@1"] == scored["P@1"] and run["metrics"]["PSP@5"] == scored["PSP@5"]
    assert suite.validation_run(SimpleNamespace(info={})) is None  # trained once: nothing validated
