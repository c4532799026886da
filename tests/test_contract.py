"""Contracts that every row of the project's tables and every package keeps (the first of issue
39's contract suite): each package's ``__all__`` names exist, a lazily exporting package names what
its module exports, and the command line offers every graph kind and model of the tables."""

from __future__ import annotations

import importlib
import pkgutil

import pytest

import gandalf_xmc

PACKAGES = sorted({name for _, name, is_package in pkgutil.walk_packages(gandalf_xmc.__path__, "gandalf_xmc.")
                   if is_package} | {"gandalf_xmc"})
# packages whose names need an extra that the core environment lacks
EXTRA_ONLY = {"torch", "sentence_transformers", "transformers", "starlette", "uvicorn", "distributed", "dask",
              "matplotlib"}


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


def test_the_command_line_offers_every_graph_kind_and_model():
    from gandalf_xmc import cli
    from gandalf_xmc.graph import GRAPH_KINDS
    from gandalf_xmc.models.registry import MODELS

    assert [k.value for k in cli.GraphKind] == list(GRAPH_KINDS)
    assert [m.value for m in cli.TrainableModel] == list(MODELS)
