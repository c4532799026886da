"""Contracts that every row of the project's tables and every package keeps (the first of issue
39's contract suite): each package's ``__all__`` names exist, a lazily exporting package names what
its module exports, and the command line offers every graph kind and model of the tables."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import gandalf_xmc

PACKAGES = sorted(
    {name for _, name, is_package in pkgutil.walk_packages(gandalf_xmc.__path__, "gandalf_xmc.") if is_package} | {"gandalf_xmc"}
)
# packages whose names need an extra that the core environment lacks
EXTRA_ONLY = {"torch", "sentence_transformers", "transformers", "starlette", "uvicorn", "distributed", "dask", "matplotlib"}


@pytest.mark.parametrize("package", PACKAGES)
def test_every_name_a_package_exports_exists(package):
    module = importlib.import_module(package)
    for name in getattr(module, "__all__", ()):
        try:
            getattr(module, name)
        except ModuleNotFoundError as exc:  # a name of an extra the core environment does not have
            assert exc.name.split(".")[0] in EXTRA_ONLY, (package, name, exc)


def test_star_import_of_every_package():
    for package in PACKAGES:
        namespace: dict = {}
        try:
            exec(f"from {package} import *", namespace)  # noqa: S102 - our own package names
        except ModuleNotFoundError as exc:
            assert exc.name.split(".")[0] in EXTRA_ONLY, (package, exc)


def test_the_lazy_augment_package_names_what_its_module_exports():
    from gandalf_xmc import augment
    from gandalf_xmc.augment import training_sets

    assert sorted(augment.__all__) == sorted(training_sets.__all__)


def test_the_command_line_offers_every_graph_kind_model_and_augmentation():
    from gandalf_xmc import cli
    from gandalf_xmc.augment import AUGMENTATIONS
    from gandalf_xmc.graph import GRAPH_KINDS
    from gandalf_xmc.models.registry import MODELS

    assert [k.value for k in cli.GraphKind] == list(GRAPH_KINDS)
    assert [m.value for m in cli.ModelName] == list(MODELS)
    assert [a.value for a in cli.AugmentName] == list(AUGMENTATIONS)
    assert [a.value for a in cli.WrittenAugmentName] == [n for n, row in AUGMENTATIONS.items() if row.writes_files]


def _augmentation_rows():
    from gandalf_xmc.augment import AUGMENTATIONS

    # auto is a search over the others (tests/workflow); synonym embeds every word with MiniLM (tests/augment)
    return [name for name in AUGMENTATIONS if name not in ("auto", "synonym")]


def _fruit(tmp_path):
    from gandalf_xmc.data import load_dataset

    from helpers import write_tiny_dataset

    words = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "peach"]
    train = [
        (f"{size} {w} and {words[(j + 1) % 8]}", [j, (j + 1) % 8])
        for j, w in enumerate(words)
        for size in ("small", "big", "ripe", "sweet")
    ]
    return load_dataset(
        write_tiny_dataset(
            tmp_path / "d",
            train=train,
            labels=[f"{w} fruit" for w in words],
            test=[(f"fresh {w}", [j]) for j, w in enumerate(words)],
            filters=None,
        )
    )


@pytest.mark.parametrize("augmentation", _augmentation_rows())
def test_every_augmentation_builds_on_a_tiny_dataset(augmentation, tmp_path):
    """Each row of the augmentation table (a preset through its settings) builds a training set
    with the original points first, label points where the row says it has them, and the
    preset's settings carried in its config."""
    from gandalf_xmc.augment import AUGMENTATIONS, build_training_set, preset

    ds = _fruit(tmp_path)
    row = AUGMENTATIONS[augmentation]
    config = preset(augmentation, seed=0)
    assert config.augmentation == (row.preset_of or augmentation)
    for field, value in (row.preset_settings() if row.preset_settings else {}).items():
        assert getattr(config, field) == value
    built = build_training_set(ds, config)
    assert len(built) > 0 and built.is_label_point.shape == (len(built),)
    assert bool(built.is_label_point.any()) == row.has_label_points
    if augmentation not in ("z-only", "uniform"):
        assert built.texts[: ds.n_original] == ds.original_train().texts


def _model_by_augmentation():
    from gandalf_xmc.models.registry import MODELS

    return [
        pytest.param(model, augmentation, marks=[getattr(pytest.mark, row.extra)] if row.extra else [])
        for model, row in MODELS.items()
        for augmentation in _augmentation_rows()
    ]


@pytest.mark.parametrize(("model", "augmentation"), _model_by_augmentation())
def test_every_model_trains_on_every_augmentation_or_refuses_it(model, augmentation, tmp_path):
    """The workflow hands every model every training set: it trains (and predicts finite scores)
    or is refused with one ConfigError before training, exactly where the model's row does not
    declare what the training set needs."""
    import numpy as np

    from gandalf_xmc.augment import build_training_set, preset
    from gandalf_xmc.errors import ConfigError
    from gandalf_xmc.models.registry import CAPABILITIES, MODELS, build_model, model_config
    from gandalf_xmc.workflow.fitting import fit_model

    ds = _fruit(tmp_path)
    row = MODELS[model]
    built = build_training_set(ds, preset(augmentation, seed=0))
    mix = built.batch_transform is not None and built.batch_transform.acts_on == "features"
    refused = (mix and "feature_mix" not in row.takes) or (
        built.positive_weight is not None and "positive_weight" not in row.takes
    )
    fitted = build_model(model_config(model, seed=0, epochs=1 if row.in_epochs else None))
    assert set(row.takes) <= set(CAPABILITIES)
    if refused:
        with pytest.raises(ConfigError):
            fit_model(fitted, built, ds.label_texts, progress=False)
        return
    fit_model(fitted, built, ds.label_texts, progress=False)
    assert np.all(np.isfinite(fitted.predict(ds.test.texts, k=3).data))


# ------------------------------------------------------------------------------------- model rows


def _rows():
    from gandalf_xmc.models.registry import MODELS

    return [
        pytest.param(name, marks=getattr(pytest.mark, entry.extra)) if entry.extra else name for name, entry in MODELS.items()
    ]


@pytest.mark.parametrize("name", _rows())
def test_every_model_trains_saves_loads_and_predicts_alike(name, tmp_path):
    """Each row of the model table: trained through the workflow (validation, then the final model
    on every point), saved, read back by ``load_trained`` as the same kind with the same
    predictions, trained again to the same predictions, and ranked with ids."""
    import json

    import numpy as np

    from gandalf_xmc.augment import AugmentConfig
    from gandalf_xmc.models.registry import MODELS, load_trained, model_config
    from gandalf_xmc.workflow.pipeline import train_model

    ds = _fruit(tmp_path)
    config = model_config(name, seed=0, epochs=2 if MODELS[name].in_epochs else None)
    first = train_model(ds, tmp_path / "a", config, AugmentConfig("identity", seed=0), valid_fraction=0.25, progress=False)
    again = train_model(ds, tmp_path / "b", config, AugmentConfig("identity", seed=0), valid_fraction=0.25, progress=False)
    loaded = load_trained(tmp_path / "a")
    assert type(loaded) is type(first.model)
    assert json.loads((tmp_path / "a" / "model.json").read_text())["kind"] == name
    texts = ds.test.texts
    want = first.model.predict(texts, k=5).toarray()
    np.testing.assert_allclose(loaded.predict(texts, k=5).toarray(), want, rtol=1e-6, atol=1e-7)
    np.testing.assert_allclose(again.model.predict(texts, k=5).toarray(), want, rtol=1e-4, atol=1e-6)
    assert first.info["n_train"] == 32 + 8 and first.info["validation_run"]["n_valid"] == 8
    ranked = loaded.predict_labels(texts, k=3)
    assert all(len(r) == 3 and {x["id"] for x in r} <= set(ds.label_uids) for r in ranked)


@pytest.mark.parametrize("name", _rows())
def test_every_model_class_has_every_member_of_the_written_contract(name):
    """Each row's class has every method of ``XMCModel``, taking at least the contract's
    arguments by the same names, and an untrained model has its attributes."""
    import inspect

    from gandalf_xmc.models.registry import MODELS, XMCModel, build_model, model_config

    cls = MODELS[name].model_class()
    methods = [n for n, v in vars(XMCModel).items() if not n.startswith("_") and (callable(v) or isinstance(v, classmethod))]
    assert {"fit", "predict", "save", "load", "predict_labels", "page_in"} <= set(methods)
    for method in methods:
        want = [p for p in inspect.signature(getattr(XMCModel, method)).parameters if p not in ("self", "cls")]
        have = inspect.signature(getattr(cls, method)).parameters
        assert set(want) <= set(have), (name, method, set(want) - set(have))
    assert isinstance(inspect.getattr_static(cls, "load"), classmethod)
    model = build_model(model_config(name, seed=0))
    for attribute in XMCModel.__annotations__:
        assert hasattr(model, attribute), (name, attribute)
    assert model.kind == name and model.result is None
    # its settings name its row and carry the seed: build_model and the refit find them
    from gandalf_xmc.models.registry import config_seed, model_name

    assert model_name(model.config) == name and config_seed(model_config(name, seed=7)) == 7
    # its row says whether it chooses on validation exactly where its module fixes a choice for the refit
    from gandalf_xmc.models.registry import chooses_on_validation

    row = MODELS[name]
    assert chooses_on_validation(name) == (row.in_epochs or hasattr(row.load_module(), "refit_config")), name
    # fit takes exactly the capabilities its row declares, beyond the contract's arguments
    fit_parameters = set(inspect.signature(cls.fit).parameters)
    assert set(MODELS[name].takes) <= fit_parameters, (name, set(MODELS[name].takes) - fit_parameters)


# ----------------------------------------------------------------------------------------- layers

# Each top-level module or package of gandalf_xmc and its layer: a unit imports only from lower
# layers (docs/architecture.md). A new unit must be given its layer here.
LAYERS = {
    "errors": 0,
    "row_ops": 0,
    "jsonio": 1,
    "inputs": 1,
    "paths": 1,
    "settings": 1,
    "text": 1,
    "sparse_ops": 1,
    "metrics": 1,
    "data": 2,
    "graph": 3,
    "engine": 3,
    "sentence": 3,
    "features": 4,
    "augment": 5,
    "models": 6,
    "workflow": 7,
    "predictor": 7,
    "experiments": 8,
    "serve": 8,
    "cli": 9,
}


def _imported_units(path, package_parts):
    """The gandalf_xmc units that the module at ``path`` imports (relative and absolute imports)."""
    import ast

    units = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.ImportFrom) and node.level:
            base = list(package_parts[: len(package_parts) - node.level + 1])
            target = base + [part for part in (node.module or "").split(".") if part]
            units |= {target[0]} if target else {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and (node.module or "").startswith("gandalf_xmc."):
            units.add(node.module.split(".")[1])
        elif isinstance(node, ast.Import):
            units |= {alias.name.split(".")[1] for alias in node.names if alias.name.startswith("gandalf_xmc.")}
    return units


def test_layers_only_look_down():
    from pathlib import Path

    root = Path(gandalf_xmc.__file__).parent
    unranked, upward = set(), []
    for path in sorted(root.rglob("*.py")):
        parts = path.relative_to(root).with_suffix("").parts
        if parts == ("__init__",) or parts == ("__main__",):
            continue  # the package's own entry points sit above everything
        unit = parts[0]
        if unit not in LAYERS:
            unranked.add(unit)
            continue
        for other in _imported_units(path, parts[:-1]) - {unit, "__version__"}:
            if other not in LAYERS:
                unranked.add(other)
            elif LAYERS[other] >= LAYERS[unit]:
                upward.append(f"{'/'.join(parts)}.py imports {other} (layer {LAYERS[other]} >= {LAYERS[unit]})")
    assert not unranked, f"give these units a layer in LAYERS: {sorted(unranked)}"
    assert not upward, "\n".join(upward)


def test_no_module_imports_one_that_imports_it_back():
    """Import cycles between files of gandalf_xmc, lazy imports inside functions counted: none
    (``graphlib`` raises CycleError naming the cycle)."""
    import ast
    import graphlib
    from pathlib import Path

    root = Path(gandalf_xmc.__file__).parent
    modules = {}
    for path in root.rglob("*.py"):
        parts = list(path.relative_to(root).with_suffix("").parts)
        modules[".".join(parts[:-1] if parts[-1] == "__init__" else parts)] = path
    graph = {}
    for name, path in modules.items():
        here = name.split(".") if name else []
        package = here if path.name == "__init__.py" else here[:-1]
        imported = set()
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith("gandalf_xmc")):
                module = (node.module or "").split(".") if node.module else []
                parts = package[: len(package) - node.level + 1] + module if node.level else module[1:]
                target = ".".join(parts)
                imported |= {target} | {f"{target}.{alias.name}".lstrip(".") for alias in node.names}
            elif isinstance(node, ast.Import):
                imported |= {alias.name.split(".", 1)[1] for alias in node.names if alias.name.startswith("gandalf_xmc.")}
        graph[name] = {m for m in imported if m in modules and m != name}
    assert sum(len(v) for v in graph.values()) > 100  # the resolution finds the imports
    graphlib.TopologicalSorter(graph).prepare()
