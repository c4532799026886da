"""Control of the augmentation's influence (issue 6): co-label scale, extra-point loss weight and
epoch share, and the ``auto`` search. Expectations are computed by hand."""

from __future__ import annotations

import json
from dataclasses import replace
from unittest import mock

import numpy as np
import pytest

torch = pytest.importorskip("torch")  # the [neural] extra
import scipy.sparse as sp

from gandalf_xmc.augment import AugmentConfig, TrainingSet, build_training_set
from gandalf_xmc.data import load_dataset
from gandalf_xmc.engine.records import LabelPoints, TrainConfig, TrainResult
from gandalf_xmc.errors import ConfigError
from gandalf_xmc.graph import GraphConfig, label_graph
from gandalf_xmc.models.neural_xmc import ModelConfig, NeuralXMC
from gandalf_xmc.models.registry import MODELS
from gandalf_xmc.workflow import auto
from gandalf_xmc.workflow.pipeline import carve_validation, train_model
from gandalf_xmc.workflow.validation import folds_available

from helpers import Y_HAND, run_cli, snapshot, write_tiny_dataset


def test_co_label_scale_multiplies_only_co_labels():
    got = label_graph(Y_HAND, GraphConfig(delta=0.1, co_label_scale=0.5)).toarray()
    want = np.array([[1, 1 / 3, 1 / 6, 0], [0.5, 1, 1 / 4, 0], [1 / 4, 1 / 4, 1, 0], [0, 0, 0, 1]])
    np.testing.assert_allclose(got, want, rtol=1e-6)
    # the threshold applies before scaling: 1/3 * 0.5 < 0.2 is still kept at delta 0.2
    kept = label_graph(Y_HAND, GraphConfig(delta=0.2, co_label_scale=0.5)).toarray()
    assert kept[0, 1] == pytest.approx(1 / 3) and kept[0, 2] == pytest.approx(1 / 6)
    with pytest.raises(ConfigError):
        GraphConfig(co_label_scale=1.5).validate()


def test_label_points_epoch_order_and_weights(tiny_dir):
    mask = np.array([False, False, False, True, True, True, True])
    ep = LabelPoints(mask, share=0.5)
    orders = [ep.epoch_order(np.random.default_rng([3, e])) for e in range(4)]
    for order in orders:
        assert order.size == 3 + 2 and len(set(order.tolist())) == 5
        assert {0, 1, 2} <= set(order.tolist())  # every original point, every epoch
    assert len({tuple(sorted(o.tolist())) for o in orders}) > 1  # a fresh draw of label points
    again = ep.epoch_order(np.random.default_rng([3, 0]))
    assert np.array_equal(again, orders[0])  # seeded
    split = load_dataset(tiny_dir).original_train()
    four = np.array([False, False, True, True])
    weighted = TrainingSet(split, four, label_point_weight=0.25)
    np.testing.assert_allclose(weighted.sample_weight, [1, 1, 0.25, 0.25])
    assert TrainingSet(split, four).sample_weight is None  # every point weighs 1
    assert TrainingSet(split, np.zeros(4, bool), label_point_weight=0.25).sample_weight is None
    assert LabelPoints(mask).epoch_order(np.random.default_rng(0)).size == 7
    with pytest.raises(ValueError):
        LabelPoints(mask, share=0.0)


@pytest.mark.parametrize("weight", [1.0, 0.5])
def test_label_point_weight_sets_the_optimum(weight):
    # An original point says label 0 is relevant (1), an extra point with the same text says it is
    # not (0). Minimising BCE(s, 1) + w BCE(s, 0) over the shared score gives sigmoid(s) = 1 / (1 + w).
    texts = ["alpha beta", "alpha beta", "gamma delta"]
    Y = sp.csr_matrix(np.array([[1, 0, 0], [0, 0, 1], [0, 1, 0]], dtype=np.float32))
    weights = np.array([1.0, weight, 1.0])
    config = ModelConfig(
        dim=16,
        dropout=0.0,
        max_cluster_size=1,
        cluster_dim=2,
        train=TrainConfig(epochs=300, batch_size=3, lr=0.05, dense_lr=0.01, train_clusters=3, predict_clusters=3, seed=0),
    )
    model = NeuralXMC(config).fit(texts, Y, ["alpha", "gamma", "omega"], progress=False, sample_weight=weights)
    p = model.predict(["alpha beta"], k=3).toarray()[0]
    assert p[0] == pytest.approx(1 / (1 + weight), abs=0.03)


def test_label_point_share_limits_each_epoch(tiny_dir):
    ds = load_dataset(tiny_dir)
    assert build_training_set(ds, AugmentConfig("identity")).is_label_point.tolist() == [False] * 4 + [True] * 4
    from gandalf_xmc.models.registry import model_config
    from gandalf_xmc.workflow.pipeline import fit_augmented

    rest, valid = carve_validation(ds, 0.0, 0)
    config = model_config("astec", epochs=2, seed=0)
    config = replace(config, train=replace(config.train, batch_size=2))
    model, n = fit_augmented(rest, valid, None, config, AugmentConfig("identity", label_point_share=0.5), None, progress=False)
    assert n == 8
    assert [h["examples"] for h in model.result.history] == [4 + 2, 4 + 2]


def test_label_point_negatives_off_reach_the_neural_loop_and_are_refused_by_linear(tiny_dir, tmp_path, capsys, monkeypatch):
    from gandalf_xmc.models.registry import model_config
    from gandalf_xmc.workflow.pipeline import fit_augmented

    ds = load_dataset(tiny_dir)
    rest, valid = carve_validation(ds, 0.0, 0)
    aug = AugmentConfig("identity", label_point_negatives=False)
    seen = {}
    import gandalf_xmc.models.neural_training as loop

    real = loop.NetworkObjective.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        seen["targets_only"] = self.targets_only.tolist()

    monkeypatch.setattr(loop.NetworkObjective, "__init__", spy)
    fit_augmented(rest, valid, None, model_config("astec", epochs=1, seed=0), aug, None, progress=False)
    assert seen["targets_only"] == [False] * 4 + [True] * 4  # the label points, and only they
    code, out, err = run_cli(
        [
            "train",
            "--model",
            "linear",
            "--data",
            str(tiny_dir),
            "--augment",
            "identity",
            "--no-extra-negatives",
            "--out",
            str(tmp_path / "m"),
        ],
        capsys,
    )
    assert code == 2 and "models trained in epochs" in out + err


def test_label_point_floors_reach_the_neural_loss_and_are_refused_by_linear(tiny_dir, tmp_path, capsys, monkeypatch):
    import gandalf_xmc.models.neural_training as loop

    seen = []
    real = loop.NetworkObjective.__init__

    def spy(self, *args, **kwargs):
        real(self, *args, **kwargs)
        seen.append(None if self.floors is None else self.floors.tolist())

    monkeypatch.setattr(loop.NetworkObjective, "__init__", spy)
    args = ["train", "--data", str(tiny_dir), "--augment", "identity", "--valid-fraction", "0", "--epochs", "1"]
    code, _, err = run_cli([*args, "--model", "astec", "--label-point-floors", "--out", str(tmp_path / "a")], capsys)
    assert code == 0, err
    assert json.loads((tmp_path / "a" / "training.json").read_text())["augment"]["label_point_floors"] is True
    assert seen == [[False] * 4 + [True] * 4]  # the label points, and only they
    seen.clear()
    assert run_cli([*args, "--model", "astec", "--out", str(tmp_path / "b")], capsys)[0] == 0
    assert seen == [None]  # off by default: the loss as before
    before = snapshot(tmp_path)
    code, out, err = run_cli([*args[:-2], "--model", "linear", "--label-point-floors", "--out", str(tmp_path / "c")], capsys)
    assert code == 2 and "--label-point-floors applies to the models trained in epochs" in out + err
    assert snapshot(tmp_path) == before
    # auto trains its candidates' own recipes: an option for the label points would be ignored, so it is refused
    auto_args = [*args[:4], "auto", "--model", "astec", "--out", str(tmp_path / "d")]
    for option, shown in (
        (["--label-point-floors"], "--label-point-floors"),
        (["--no-label-point-negatives", "--delta", "0.2"], "--delta, --no-label-point-negatives"),
    ):
        code, out, err = run_cli([*auto_args, *option], capsys)
        assert code == 2 and f"{shown}: --augment auto trains its own candidates' recipes" in out + err
        assert snapshot(tmp_path) == before


def _trial(p1, psp5, name="x"):
    return {"name": name, "valid": {"P@1": p1, "PSP@5": psp5, "P@5": 0.0, "PSP@1": 0.0}}


def test_auto_rule_by_hand():
    trials = [_trial(40.0, 20.0, "none"), _trial(39.9, 25.0, "a"), _trial(39.7, 30.0, "b"), _trial(41.0, 22.0, "c")]
    assert auto.choose(trials, p1_tolerance=0.2) == "a"  # b loses 0.3 P@1: not admissible
    assert auto.choose(trials, p1_tolerance=0.5) == "b"
    assert auto.choose(trials[:1], 0.2) == "none"
    assert auto.choose(trials[1:], 0.2) == "b"  # no baseline: every trial is admissible


def test_auto_admits_no_validation_loss_of_p1_by_default():
    # a and b lose 0.1 and 0.3 P@1 for more PSP@5: out; c gains P@1; d ties none's P@1 exactly (admitted)
    default = auto.AutoConfig().p1_tolerance
    trials = [_trial(40.0, 20.0, "none"), _trial(39.9, 25.0, "a"), _trial(39.7, 30.0, "b"), _trial(41.0, 22.0, "c")]
    assert auto.choose(trials, default) == "c"
    assert auto.choose([*trials, _trial(40.0, 23.0, "d")], default) == "d"
    assert auto.choose(trials[:3], default) == "none"


class _FakeModel:
    def __init__(self, name: str, p1: float, psp5: float):
        self.name = name
        self.result = TrainResult(0, p1, [{"epoch": 0, "P@1": p1, "P@5": 0.0, "PSP@1": 0.0, "PSP@5": psp5}])


def _fakes(scores, fitted):
    def fit_one(augment, ckpt, resume):
        name = next(n for n, a in auto.AUTO_CANDIDATES.items() if a == augment)
        fitted.append(name)
        return _FakeModel(name, *scores[name])

    def save(model, d):
        d.mkdir(parents=True)
        (d / "name").write_text(model.name)

    def load(d):
        name = (d / "name").read_text()
        return _FakeModel(name, *scores[name])

    return fit_one, save, load


def test_auto_search_budget_resume_and_cleanup(tmp_path):
    scores = {"none": (40.0, 20.0), "identity": (40.5, 28.0), "gandalf-tempered": (39.0, 35.0), "gandalf": (40.1, 29.0)}
    names = tuple(scores)
    fitted: list[str] = []
    fit_one, save, load = _fakes(scores, fitted)
    # a budget of 0 s: the first trial runs (nothing to estimate from), the rest are skipped
    model, chosen, record = auto.search(fit_one, save, load, tmp_path / "a", auto.AutoConfig(0.0, 0.2, names), log=lambda _: None)
    assert fitted == ["none"] and record["chosen"] == "none" and chosen.augmentation == "none"
    # none was kept without a comparison: the record says so rather than passing it off as validation's choice
    assert record["skipped"] == ["identity", "gandalf-tempered", "gandalf"]
    assert record["decided"] == {
        "sure": False,
        "why": "the budget of 0 min ran out before identity, gandalf-tempered, gandalf "
        "(not tried: raise --auto-budget to try them); none was kept without a comparison",
    }
    # resuming with a larger budget runs only the missing trials
    fitted.clear()
    model, chosen, record = auto.search(
        fit_one, save, load, tmp_path / "a", auto.AutoConfig(1e6, 0.2, names), resume=True, log=lambda _: None
    )
    assert fitted == ["identity", "gandalf-tempered", "gandalf"]
    assert model.name == "gandalf" and record["chosen"] == "gandalf" and chosen == auto.AUTO_CANDIDATES["gandalf"]
    assert [t["name"] for t in json.loads((tmp_path / "a" / "trials.json").read_text())] == list(names)
    assert record["skipped"] == [] and "decided" not in record  # every candidate tried (no hits: no interval to judge)
    # a budget that ends after two trials: a real choice between them, the untried two named
    fitted.clear()
    clock = iter([0.0, 0.0, 10.0, 10.0, 20.0, 25.0, 25.0, 25.0])  # perf_counter's readings, in the search's order
    with mock.patch.object(auto.time, "perf_counter", lambda: next(clock)):
        _, _, record = auto.search(fit_one, save, load, tmp_path / "b", auto.AutoConfig(24.0, 0.2, names), log=lambda _: None)
    assert fitted == ["none", "identity"] and record["chosen"] == "identity"
    assert record["skipped"] == ["gandalf-tempered", "gandalf"] and "decided" not in record
    kept = sorted(p.parent.name for p in (tmp_path / "a").glob("*/model"))
    assert kept == ["gandalf"]  # only the winner's model stays


class _HitsModel:
    def __init__(self, hits: list[int], psp5: float):
        self.hits = np.array(hits, dtype=bool)
        self.result = TrainResult(0, 0.0, [{"epoch": 0, "P@1": 100 * self.hits.mean(), "P@5": 0.0, "PSP@1": 0.0, "PSP@5": psp5}])


def _by_name(augment) -> str:
    return next(n for n, a in auto.AUTO_CANDIDATES.items() if a == augment)


def _fold_search(tmp_path, hits_by_fold: list[dict], fitted: list, resume: bool = False, max_folds: int = 5):
    """auto.search over fake trials: ``hits_by_fold[f][name]`` is a candidate's top-1 hits on share f
    (its P@1 their mean); PSP@5 ranks gandalf-tempered above none above gandalf."""
    psp5 = {"none": 20.0, "gandalf-tempered": 30.0, "gandalf": 10.0}

    def fitter(f):
        def fit_one(augment, ckpt, resume_trial):
            fitted.append((f, _by_name(augment)))
            return _HitsModel(hits_by_fold[f][_by_name(augment)], psp5[_by_name(augment)])

        return fit_one, lambda model: model.hits

    def save(model, d):
        d.mkdir(parents=True)
        (d / "hits").write_text(json.dumps(model.hits.astype(int).tolist()))

    def load(d):
        return _HitsModel(json.loads((d / "hits").read_text()), 0.0)

    fit_first, hits_first = fitter(0)
    return auto.search(
        fit_first,
        save,
        load,
        tmp_path / "auto",
        auto.AutoConfig(candidates=("none", "gandalf-tempered", "gandalf"), max_folds=max_folds),
        resume=resume,
        log=lambda _: None,
        point_hits=hits_first,
        extra_folds=auto.ExtraFolds(len(hits_by_fold), fitter),
    )


def test_auto_validates_on_more_shares_while_undecided_and_pools_them(tmp_path):
    none = [1] * 40 + [0] * 60  # P@1 40 on each share of 100 points
    first = {
        "none": none,
        "gandalf-tempered": [0] * 20 + [1] * 41 + [0] * 39,  # 41: +1 P@1, 41 points differ: undecided
        "gandalf": [1] * 20 + [0] * 80,  # 20: its interval lies wholly below 0, so it is not validated again
    }
    second = {"none": none, "gandalf-tempered": [0] * 24 + [1] * 36 + [0] * 40}  # 36
    third = {"none": none, "gandalf-tempered": [1] * 100}
    fitted: list = []
    model, chosen, record = _fold_search(tmp_path, [first, second, third], fitted)
    # pooled over two shares: gandalf-tempered 77 of 200 against none's 80: out; none needs no more evidence
    assert fitted == [(0, "none"), (0, "gandalf-tempered"), (0, "gandalf"), (1, "none"), (1, "gandalf-tempered")]
    assert record["chosen"] == "none" and chosen.augmentation == "none" and record["folds"] == 2
    assert record["pooled"]["gandalf-tempered"]["P@1"] == pytest.approx(38.5)
    assert record["pooled"]["none"]["P@1"] == pytest.approx(40.0) and "gandalf" not in record["pooled"]
    assert record["p1_gain_over_none"]["gandalf-tempered"]["gain"] == -1.5
    assert record["decided"]["sure"] and model.hits.sum() == 40  # the first share's model of the winner
    assert [(t["name"], t.get("fold", 0)) for t in record["trials"]] == [(n, f) for f, n in fitted]
    assert not list((tmp_path / "auto").glob("fold-*/*"))  # the extra shares keep no model
    # resumed: every trial is on record, nothing trains again, the same choice
    fitted.clear()
    _, _, again = _fold_search(tmp_path, [first, second, third], fitted, resume=True)
    assert fitted == [] and again["chosen"] == "none" and again["folds"] == 2
    # the second share confirms the gain instead: chosen on two shares (+15.5 P@1, its interval above 0)
    fitted.clear()
    second["gandalf-tempered"] = [1] * 70 + [0] * 30
    _, _, record = _fold_search(tmp_path / "b", [first, second, third], fitted)
    assert record["chosen"] == "gandalf-tempered" and record["folds"] == 2 and record["decided"]["sure"]
    assert record["p1_gain_over_none"]["gandalf-tempered"]["gain"] == 15.5
    # max_folds 1: the first share decides alone, as before
    fitted.clear()
    _, _, record = _fold_search(tmp_path / "c", [first, second, third], fitted, max_folds=1)
    assert len(fitted) == 3 and record["chosen"] == "gandalf-tempered" and "folds" not in record
    assert not record["decided"]["sure"]


def test_auto_needs_no_more_shares_for_a_clear_choice(tmp_path):
    none = [1] * 80 + [0] * 120  # 200 points: enough (auto.MIN_VALID_POINTS)
    first = {"none": none, "gandalf-tempered": [1] * 120 + [0] * 80, "gandalf": none}
    fitted: list = []
    _, _, record = _fold_search(tmp_path, [first, {}], fitted)
    assert [f for f, _ in fitted] == [0, 0, 0] and record["chosen"] == "gandalf-tempered" and "folds" not in record


def test_train_auto_writes_its_choice(tiny_dir, tmp_path):
    ds = load_dataset(tiny_dir)
    from gandalf_xmc.models.registry import model_config

    config = model_config("linear", seed=0)
    model = train_model(
        ds,
        tmp_path / "m",
        config,
        AugmentConfig("auto"),
        valid_fraction=0.25,
        progress=False,
        auto_config=auto.AutoConfig(candidates=("none", "identity")),
    )
    record = json.loads((tmp_path / "m" / "auto.json").read_text())
    # one validation point a share is too few to decide: every share of the training points validates
    folds = folds_available(ds.n_original, 0.25)
    assert folds == 4 and record["folds"] == folds
    assert [(t["name"], t.get("fold", 0)) for t in record["trials"]] == [
        (n, f) for f in range(folds) for n in ("none", "identity")
    ]
    info = json.loads((tmp_path / "m" / "training.json").read_text())
    assert info["augment"]["augmentation"] == record["chosen"]
    assert model.result is not None and model.result.history
    # the gain from the per-point hits agrees with the trials' own validation P@1, pooled over the shares
    for name in ("none", "identity"):
        own = [t["valid"]["P@1"] for t in record["trials"] if t["name"] == name]
        assert record["pooled"][name]["P@1"] == pytest.approx(np.mean(own))
    by_name = {name: record["pooled"][name]["P@1"] for name in ("none", "identity")}
    gain = record["p1_gain_over_none"]["identity"]
    assert gain["gain"] == pytest.approx(by_name["identity"] - by_name["none"], abs=0.01)
    assert gain["interval"][0] <= gain["gain"] <= gain["interval"][1]


def test_gain_interval_by_hand():
    base = np.array([1, 0, 0, 1, 0, 1, 0, 0, 1, 0] * 30, dtype=bool)
    same = auto.gain_interval(base, base)
    assert same == {"gain": 0.0, "interval": [0.0, 0.0], "level": 0.9}
    better = base.copy()
    better[1::10] = True  # one point in ten turned right: +10 P@1
    got = auto.gain_interval(base, better, seed=1)
    assert got["gain"] == 10.0 and 0.0 < got["interval"][0] < 10.0 < got["interval"][1] < 20.0
    # a constant difference has no spread
    assert auto.gain_interval(np.zeros(50, bool), np.ones(50, bool))["interval"] == [100.0, 100.0]


def test_cli_says_when_the_budget_left_auto_nothing_to_compare(tiny_dir, tmp_path, capsys):
    args = ["train", "--data", str(tiny_dir), "--augment", "auto", "--valid-fraction", "0.25"]
    code, out, err = run_cli([*args, "--auto-budget", "0", "--out", str(tmp_path / "m")], capsys)
    assert code == 0, err
    record = json.loads((tmp_path / "m" / "auto.json").read_text())
    untried = list(auto.candidates_for(MODELS["linear"]))[1:]
    assert record["chosen"] == "none" and record["skipped"] == untried
    assert f"auto chose none (search recorded in {tmp_path / 'm' / 'auto.json'})" in out
    assert f"note: the budget of 0 min ran out before {', '.join(untried)} (not tried: raise --auto-budget" in out
    assert "none was kept without a comparison" in out


def test_cli_prints_an_undecided_choice_and_the_untried_candidates_both(tmp_path, capsys):
    from gandalf_xmc.cli import _say_auto_choice

    record = {
        "chosen": "identity",
        "budget_seconds": 600.0,
        "skipped": ["gandalf"],
        "decided": {"sure": False, "why": "identity's valid P@1 gain is within noise"},
    }
    _say_auto_choice(record, tmp_path)
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")]
    assert notes == [
        "note: identity's valid P@1 gain is within noise",
        "note: the budget of 10 min ran out before gandalf (not tried: raise --auto-budget to try them)",
    ]
    # where the undecided note is the budget's own, it is not said twice
    record["decided"]["why"] = f"{auto.skipped_note(['gandalf'], 600.0)}; identity was kept without a comparison"
    _say_auto_choice(record, tmp_path)
    notes = [line for line in capsys.readouterr().out.splitlines() if line.startswith("note: ")]
    assert notes == [f"note: {record['decided']['why']}"]


def test_cli_train_auto_and_extra_options(tiny_dir, tmp_path, capsys):
    code, out, err = run_cli(
        [
            "train",
            "--data",
            str(tiny_dir),
            "--augment",
            "auto",
            "--auto-budget",
            "10",
            "--valid-fraction",
            "0.25",
            "--out",
            str(tmp_path / "m"),
        ],
        capsys,
    )
    assert code == 0, err
    record = json.loads((tmp_path / "m" / "auto.json").read_text())
    assert [t["name"] for t in record["trials"] if not t.get("fold")] == list(auto.candidates_for(MODELS["linear"]))
    pooled = [{"name": name, "valid": scores} for name, scores in record["pooled"].items()]  # one point a share
    assert record["chosen"] == auto.choose(pooled, auto.AutoConfig().p1_tolerance)
    assert f"auto chose {record['chosen']}" in out
    code, out, err = run_cli(
        [
            "train",
            "--data",
            str(tiny_dir),
            "--augment",
            "gandalf",
            "--shrinkage",
            "1",
            "--point-weights",
            "inverse-size",
            "--co-label-scale",
            "0.5",
            "--top-k",
            "1",
            "--self-scale",
            "0.25",
            "--extra-weight",
            "0.5",
            "--extra-share",
            "0.5",
            "--epochs",
            "1",
            "--model",
            "astec",
            "--out",
            str(tmp_path / "g"),
        ],
        capsys,
    )
    assert code == 0, err
    aug = json.loads((tmp_path / "g" / "training.json").read_text())["augment"]
    assert aug["label_point_weight"] == 0.5 and aug["label_point_share"] == 0.5
    assert aug["graph"] == {
        **aug["graph"],
        "shrinkage": 1.0,
        "point_weights": "inverse-size",
        "co_label_scale": 0.5,
        "top_k": 1,
        "self_scale": 0.25,
    }
    code, _, err = run_cli(
        ["train", "--data", str(tiny_dir), "--augment", "gandalf", "--point-weights", "bogus", "--out", str(tmp_path / "bad")],
        capsys,
    )
    assert code == 2 and "--point-weights" in err and "bogus" in err


def test_label_point_positive_cost_from_the_firm_preset_or_the_option(tiny_dir, tmp_path, capsys):
    from gandalf_xmc.augment import TEMPERED_GRAPH

    for name, option, expected in (
        ("gandalf-tempered-firm", [], 8.0),
        ("gandalf-tempered", ["--label-point-positive-cost", "4"], 4.0),
    ):
        out = tmp_path / name
        args = ["train", "--data", str(tiny_dir), "--augment", name, *option, "--valid-fraction", "0", "--out", str(out)]
        code, _, err = run_cli(args, capsys)
        assert code == 0, err
        aug = json.loads((out / "training.json").read_text())["augment"]
        assert aug["label_point_positive_cost"] == expected and aug["label_point_weight"] == 0.5
        assert aug["graph"] == {**aug["graph"], "shrinkage": TEMPERED_GRAPH.shrinkage, "top_k": TEMPERED_GRAPH.top_k}


def test_soft_target_stats_by_hand():
    from gandalf_xmc.experiments.analysis import soft_target_stats

    # Y_HAND: frequencies 3, 2, 2, 0 (7 positives). A label's bin is where its first positive falls
    # in the frequency-sorted order: label 0 at 0/7, label 1 at 3/7 -> head; labels 2 (5/7) and 3 -> tail
    G = label_graph(Y_HAND, GraphConfig(delta=0.1))
    freq = np.asarray(Y_HAND.sum(axis=0)).ravel()
    head, tail = soft_target_stats(G, freq, n_bins=2)
    # head rows: label 0 -> (2/3, 1/3), label 1 -> (1, 1/2)
    assert head["labels"] == 2 and head["co_labels_per_point"] == 2 and head["mean_frequency"] == 2.5
    assert head["co_label_ones_pct"] == pytest.approx(25.0)
    assert head["co_label_mean"] == pytest.approx((2 / 3 + 1 / 3 + 1 + 1 / 2) / 4)
    # tail rows: label 2 -> (1/2, 1/2), label 3 (no positives) -> none
    assert tail["labels"] == 2 and tail["co_labels_per_point"] == 1 and tail["co_label_ones_pct"] == 0
    assert tail["co_label_mean"] == pytest.approx(0.5) and tail["seen_once_pct"] == 0


def test_cli_analyze(tiny_dir, tmp_path, capsys):
    from gandalf_xmc.data import write_sparse_text

    base = sp.csr_matrix(np.array([[0.9, 0.1, 0, 0], [0, 0.2, 0.8, 0], [0.3, 0, 0, 0.6]], dtype=np.float32))
    aug = sp.csr_matrix(np.array([[0.9, 0, 0, 0.8], [0, 0.2, 0.8, 0], [0.3, 0, 0, 0.6]], dtype=np.float32))
    write_sparse_text(tmp_path / "base.txt", base)
    write_sparse_text(tmp_path / "aug.txt", aug)
    code, out, err = run_cli(
        [
            "analyze",
            "--data",
            str(tiny_dir),
            "--baseline",
            str(tmp_path / "base.txt"),
            "--augmented",
            str(tmp_path / "aug.txt"),
            "-k",
            "2",
            "--json",
        ],
        capsys,
    )
    assert code == 0, err
    got = json.loads(out)
    assert len(got["soft_targets"]) == 5
    eff = got["effect"]
    # point 2's only label 3 is removed by the filter pair "2 3", leaving 2 points. Baseline: all 4
    # top-2 labels correct (P@2 100). Augmented: point 0 (truth {0, 1}) swaps label 1 for label 3,
    # losing 1 hit of 4 -> P@2 75, all of it in label 1's bin.
    assert eff["overall"]["baseline"]["P@2"] == pytest.approx(100.0)
    assert eff["overall"]["augmented"]["P@2"] == pytest.approx(75.0)
    deltas = [r["delta_P@2"] for r in eff["per_bin"]]
    assert sum(deltas) == pytest.approx(-25.0) and min(deltas) == pytest.approx(-25.0)
    code, _, err = run_cli(["analyze", "--data", str(tiny_dir), "--baseline", str(tmp_path / "base.txt")], capsys)
    assert code == 2


def test_auto_candidates_for_each_model_kind():
    linear, neural = auto.candidates_for(MODELS["linear"]), auto.candidates_for(MODELS["astec"])
    targets_only = [n for n, c in auto.AUTO_CANDIDATES.items() if not c.label_point_negatives]
    firm = [n for n, c in auto.AUTO_CANDIDATES.items() if c.label_point_positive_cost != 1.0]
    floors = [n for n, c in auto.AUTO_CANDIDATES.items() if c.label_point_floors]
    assert targets_only == [
        "gandalf-tempered-floors-targets-only",
        "gandalf-tempered-firm-floors-targets-only",
        "identity-targets-only",
        "gandalf-tempered-targets-only",
        "gandalf-tempered-firm-targets-only",
        "gandalf-targets-only",
    ]
    assert floors == targets_only[:2] and list(auto.candidates_for(MODELS["astec"]))[1:3] == floors  # tried first
    assert firm == ["gandalf-tempered-firm-floors-targets-only", "gandalf-tempered-firm", "gandalf-tempered-firm-targets-only"]
    firm_targets_only = auto.AUTO_CANDIDATES["gandalf-tempered-firm-targets-only"]
    assert replace(firm_targets_only, label_point_negatives=True) == auto.AUTO_CANDIDATES["gandalf-tempered-firm"]
    assert (
        replace(firm_targets_only, label_point_floors=True) == auto.AUTO_CANDIDATES["gandalf-tempered-firm-floors-targets-only"]
    )
    tempered_targets_only = auto.AUTO_CANDIDATES["gandalf-tempered-targets-only"]
    assert replace(tempered_targets_only, label_point_floors=True) == auto.AUTO_CANDIDATES["gandalf-tempered-floors-targets-only"]
    assert linear == (
        "none",
        "gandalf-tempered",
        "gandalf-tempered-firm",
        "identity",
        "gandalf",
        "identity-half-weight",
        "gandalf-tempered-full-weight",
    )
    assert auto.candidates_for(MODELS["linear-knn"]) == linear and "none" in linear
    assert auto.candidates_for(MODELS["knn"]) == tuple(n for n in linear if n not in firm)  # no loss to weigh them
    assert set(neural) == set(auto.AUTO_CANDIDATES)  # their loss takes the firm factor too
    assert set(neural) - set(linear) == set(targets_only) and set(linear) <= set(neural)


def test_recorded_gains_equal_the_validation_p1_difference_when_top_labels_are_filtered(tmp_path):
    """Every point is itself a label (its namesake, a filtered pair) and also carries a co-label:
    trained on identity label points, a model ranks the namesake first, so the per-point hits
    must look past a filtered top label exactly as the validation P@1 does."""
    words = ["apple", "pear", "plum", "fig", "kiwi", "lime", "date", "peach", "melon", "grape"]
    labels = [f"{w} fruit" for w in words]
    train = [(labels[j], [j, (j + 1) % len(words)]) for j in range(len(words)) for _ in range(4)]
    data = write_tiny_dataset(tmp_path / "d", train=train, labels=labels, test=[("apple", [0])], filters=None)
    ds = load_dataset(data)
    assert len(ds.train.filter_pairs) == len(train)  # derived: each point is its namesake label
    from gandalf_xmc.models.registry import model_config

    train_model(
        ds,
        tmp_path / "m",
        model_config("linear", seed=0),
        AugmentConfig("auto"),
        valid_fraction=0.5,
        progress=False,
        auto_config=auto.AutoConfig(candidates=("none", "identity")),
    )
    record = json.loads((tmp_path / "m" / "auto.json").read_text())
    by_name = {t["name"]: t["valid"]["P@1"] for t in record["trials"]}
    gain = record["p1_gain_over_none"]["identity"]
    assert gain["gain"] == pytest.approx(by_name["identity"] - by_name["none"], abs=0.01)
    hits = {t["name"]: auto._unpack(t) for t in record["trials"]}
    assert 100 * hits["identity"].mean() == pytest.approx(by_name["identity"], abs=0.01)
    assert 100 * hits["none"].mean() == pytest.approx(by_name["none"], abs=0.01)


def test_auto_says_when_validation_is_too_small_to_decide():
    gain = {"gain": 1.5, "interval": [-0.9, 3.8], "level": 0.9}
    unsure = auto.decided("identity", gain, 1200, 0.2)
    assert not unsure["sure"] and "-0.90 to +3.80" in unsure["why"] and "1,200 points" in unsure["why"]
    assert auto.decided("identity", {**gain, "interval": [-0.1, 3.8]}, 1200, 0.2)["sure"]
    assert auto.decided("none", None, 1200, 0.2)["sure"]  # keeping the data as it is needs no evidence
    few = auto.decided("none", None, auto.MIN_VALID_POINTS - 1, 0.2)
    assert not few["sure"] and "too few" in few["why"]


def test_train_auto_records_whether_it_decided(tiny_dir, tmp_path, capsys):
    code, out, err = run_cli(
        [
            "train",
            "--data",
            str(tiny_dir),
            "--augment",
            "auto",
            "--valid-fraction",
            "0.25",
            "--out",
            str(tmp_path / "m"),
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0, err
    record = json.loads((tmp_path / "m" / "auto.json").read_text())
    assert record["decided"]["sure"] is False  # one validation point a share, four shares pooled
    assert record["folds"] == 4 and "note: validation has 4 points, too few to decide" in out
    assert "over none on 4 validation shares, 90% interval" in out


def test_a_neural_model_for_new_items_chooses_its_epochs_on_the_future_share(tiny_dir, tmp_path, capsys):
    out = tmp_path / "m"
    args = ["train", "--data", str(tiny_dir), "--model", "astec", "--epochs", "3", "--augment", "none", "--seed", "0"]
    code, _, err = run_cli([*args, "--queries", "new-items", "--valid-fraction", "0.5", "--out", str(out)], capsys)
    assert code == 0, err
    info = json.loads((out / "training.json").read_text())
    assert info["valid_protocol"] == "future" and info["queries"] == "new items" and info["refit"]
    _, valid = carve_validation(load_dataset(tiny_dir), 0.5, 0, "future")
    assert info["n_valid"] == len(valid)
    # the final model trains for the epoch count the future share chose
    assert info["final_run"]["epochs"] == info["validation_run"]["best_epoch"] + 1 <= 3
