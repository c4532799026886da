"""What ``gandalf reproduce`` runs: the named training sets of the paper's tables, the settings,
and the list of runs (model, training set, seed)."""

from __future__ import annotations

from dataclasses import dataclass, field, replace

from ..augment import AUGMENTATIONS, AugmentConfig, preset
from ..errors import ConfigError
from ..graph import GraphConfig

DELTA = 0.1  # the paper's delta, for every Gandalf training set unless a table varies it
SUBSAMPLING_PERCENT = (25, 50, 75)
QUICK_SIZES = (800, 200)  # training and test points of --quick's sample
QUICK_EPOCHS = 2
# The full run's epoch budget for the models trained in epochs: the same for every training set (the
# paper's Figure 3 compares training sets at equal compute), small enough for the README's 90 minutes
REPRODUCE_EPOCHS = 3
RUN_METRICS = ("P@1", "P@3", "P@5", "nDCG@1", "nDCG@3", "nDCG@5", "PSP@1", "PSP@3", "PSP@5", "C@1", "C@3", "C@5")

# Training sets by name: (AugmentConfig for a seed, description shown in the report)
_SETTINGS_DOC = {
    "none": "D (original points)",
    "z-only": "Z (label points only)",
    "gandalf": "G = D u Z (Gandalf, delta 0.1)",
    "uniform": "U(G, N)",
    "identity": "Z^1 u D (self-annotation only)",
    "glas": "G with y = sigmoid(S)",
    "labelmix": "D + LabelMix",
    "gandalf-tempered": "G, tempered targets (this library)",
    "synonym": "D + synonym replacement",
    "mixup": "D + MixUp",
    "label-mixup": "D + Label-MixUp",
    "delta-0": "G, delta = 0",
    "delta-0.2": "G, delta = 0.2",
    "random-walk": "D u Z, random-walk graph",
    **{f"sub-{how}-{p}": f"D u Z of {p}% of labels ({how})" for how in ("random", "tail") for p in SUBSAMPLING_PERCENT},
}


def setting_names() -> list[str]:
    return list(_SETTINGS_DOC)


def describe(setting: str) -> str:
    return _SETTINGS_DOC[setting]


def augment_config(setting: str, seed: int) -> AugmentConfig:
    """The :class:`AugmentConfig` of a named training set (see ``setting_names()``) for ``seed``."""
    graph = GraphConfig(delta=DELTA)
    row = AUGMENTATIONS.get(setting)
    if row is not None and row.preset_of is not None:  # a preset keeps its own graph
        return preset(setting, seed)
    if setting.startswith("delta-"):
        return AugmentConfig("gandalf", replace(graph, delta=float(setting.split("-", 1)[1])), seed=seed)
    if setting.startswith("sub-"):
        _, how, percent = setting.split("-")
        return AugmentConfig("gandalf", graph, labels_fraction=int(percent) / 100.0, labels_sampling=how, seed=seed)
    if setting not in _SETTINGS_DOC:
        raise ConfigError(f"unknown training set {setting!r}")
    return AugmentConfig(setting, graph, seed=seed)


# What each part of the report needs from the ablation model (the paper's InceptionXML role)
ABLATION_SETTINGS = {
    "table2": ["none", "z-only", "gandalf", "uniform", "identity", "glas"],
    "table4": ["none", "gandalf", "identity", "gandalf-tempered"],
    "table6": ["none", "synonym", "mixup", "label-mixup", "gandalf"],
    "table7": ["none", "delta-0", "gandalf", "delta-0.2", "random-walk"],
    "figure2": ["none", "gandalf", "gandalf-tempered"],
    "figure3": ["none", "gandalf"] + [f"sub-{how}-{p}" for how in ("random", "tail") for p in SUBSAMPLING_PERCENT],
}
TABLE3_SETTINGS = ["none", "gandalf", "labelmix", "gandalf-tempered"]


@dataclass
class ReproduceConfig:
    """What ``gandalf reproduce`` runs.

    ``ablation_model`` answers every table but Table 3 (the paper used InceptionXML); ``models``
    are Table 3's families (each without, with Gandalf, with LabelMix and with the tempered
    variant); ``epochs`` is every model's epoch budget (``REPRODUCE_EPOCHS``; None: each model's
    own default with early stopping); ``quick`` runs everything on a small sample
    (``QUICK_SIZES``) with ``QUICK_EPOCHS``; ``parallel`` runs go at a time, each in its own
    process with ``cpu count / parallel`` threads; ``device`` is where the neural models train
    (``auto``: a CUDA GPU when torch sees one).
    """

    models: tuple[str, ...] = ("linear",)
    ablation_model: str = "linear"
    seeds: tuple[int, ...] = (0, 1, 2)
    epochs: int | None = REPRODUCE_EPOCHS
    quick: bool = False
    parallel: int = 2
    device: str = "auto"
    settings: dict = field(default_factory=lambda: dict(ABLATION_SETTINGS))

    def validate(self) -> None:
        from ..models.registry import MODEL_NAMES, entry, model_config

        for m in (*self.models, self.ablation_model):
            if m not in MODEL_NAMES:
                raise ConfigError(f"unknown model {m!r}; choose from {', '.join(MODEL_NAMES)}")
            entry(m).load_module()  # a model whose extra is not installed: one line now, not in a worker
        if not self.seeds:
            raise ConfigError("give at least one seed")
        if self.parallel < 1:
            raise ConfigError("--parallel must be >= 1")
        for m in (*self.models, self.ablation_model):
            model_config(m, device=self.device)  # refuses a device a model cannot use, and a missing GPU


@dataclass(frozen=True)
class Run:
    model: str
    setting: str
    seed: int

    @property
    def key(self) -> str:
        return f"{self.model}__{self.setting}__s{self.seed}"


def plan(config: ReproduceConfig) -> list[Run]:
    """Every distinct run the report needs, the most expensive first (to balance the pool)."""
    wanted: dict[Run, None] = {}
    for seed in config.seeds:
        for part in config.settings.values():
            for s in part:
                wanted[Run(config.ablation_model, s, seed)] = None
        for m in config.models:
            for s in TABLE3_SETTINGS:
                wanted[Run(m, s, seed)] = None
    cost = {"none": 1, "uniform": 1, "labelmix": 1.4, "synonym": 1.4, "mixup": 1.4, "label-mixup": 1.4, "z-only": 1.2}
    family_cost = {"knn": 0.01, "linear": 1, "dual-encoder": 1.5, "astec": 3, "inceptionxml": 6, "inceptionxml-lf": 12}
    return sorted(wanted, key=lambda r: -(family_cost.get(r.model, 1) * cost.get(r.setting, 2.5)))
