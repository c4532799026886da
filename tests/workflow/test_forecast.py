"""auto for a deployment that meets new items (issue 35): the forecast of workflow/forecast.py and
the search that reads it, with figures worked out by hand and a model retrained apart."""

from __future__ import annotations

import json

import numpy as np
import pytest

from gandalf_xmc.augment import AugmentConfig
from gandalf_xmc.data import load_dataset
from gandalf_xmc.engine.records import TrainResult
from gandalf_xmc.metrics import inverse_propensity
from gandalf_xmc.models.registry import model_config, new_items_config
from gandalf_xmc.workflow import auto, forecast
from gandalf_xmc.workflow.forecast import NewItems, QuerySample
from gandalf_xmc.workflow.pipeline import fit_augmented, train_model
from gandalf_xmc.workflow.validation import carve_validation

from helpers import assert_clean_failure, run_cli, write_json_lines, write_tiny_dataset


def test_paired_gain_and_its_standard_error():
    a, b = np.array([1.0, 1.0, 0.0, 0.0]), np.array([0.0, 1.0, 0.0, 1.0])
    # differences 1, 0, 0, -1: mean 0; sample sd sqrt(2/3), over sqrt(4) items, in points
    gain, se = forecast.paired_gain(a, b)
    assert gain == 0.0 and se == pytest.approx(100 * np.sqrt(2 / 3) / 2)
    assert forecast.paired_gain(a[:1], b[:1]) == (100.0, 0.0)
    assert forecast.paired_gain(a[:0], b[:0]) == (0.0, 0.0)


def test_the_shares_interval_resamples_whole_families():
    labels = ["a tool"]
    # family f: 4 namesakes; families g, h, i: one text each, none a namesake
    texts, groups = ["a tool"] * 4 + ["x", "y", "z"], ["f"] * 4 + ["g", "h", "i"]
    low, high = forecast.namesake_share_interval(texts, groups, labels, seed=1)
    # a draw of the 4 families holds f k times, k ~ Binomial(4, 1/4), share 4k / (3k + 4):
    # P(k = 0) = 0.32 puts the 5th percentile at 0; P(k >= 2) = 0.26 and P(k >= 3) = 0.051 put the
    # 95th between k = 2 (0.8) and k = 3 (0.923)
    assert low == 0.0 and 0.8 <= high <= 12 / 13
    items = forecast.namesake_share_interval(texts, None, labels, seed=1)  # without families: each text its own
    # m of 7 texts, m ~ Binomial(7, 4/7): P(m <= 1) = 0.028, P(m <= 2) = 0.098, P(m = 7) = 0.020
    assert 1 / 7 <= items[0] <= 2 / 7 and 6 / 7 <= items[1] <= 1.0
    assert forecast.namesake_share_interval([], None, labels) == (0.0, 0.0)


def test_namesake_share_folds_case_and_spacing_and_no_sample_allows_any_share():
    assert forecast.namesake_share(["A  tool", "other", "a Tool", "x"], ["a tool", "y"]) == 0.5
    assert forecast.namesake_share([], ["a"]) == 0.0
    assert forecast.deployment_share(None, ["a"]) == (None, (0.0, 1.0))
    share, (low, high) = forecast.deployment_share(QuerySample(["a", "a", "b", "c"]), ["a"])
    assert share == 0.5 and 0.0 <= low <= 0.5 <= high <= 1.0


def test_new_items_forecast_by_hand():
    f = forecast.new_items_forecast((6.0, 2.0), (-20.0, 4.0), (0.2, 0.35))
    # at s = 0.2: 0.8 x 6 - 0.2 x 20 = 0.8, SE hypot(1.6, 0.8); at s = 0.35: 0.65 x 6 - 0.35 x 20 = -3.1, SE hypot(1.3, 1.4)
    assert f["at_share_ends"] == [0.8, -3.1]
    assert f["two_se"] == [round(2 * np.hypot(1.6, 0.8), 2), round(2 * np.hypot(1.3, 1.4), 2)]
    assert f["lowest"] == round(-3.1 - 2 * np.hypot(1.3, 1.4), 2)
    assert f["highest"] == round(0.8 + 2 * np.hypot(1.6, 0.8), 2)
    only_future = forecast.new_items_forecast((3.0, 1.0), (-30.0, 5.0), (0.0, 0.0))
    assert only_future["at_share_ends"] == [3.0, 3.0] and only_future["lowest"] == 1.0


def _trial(name, psp5, p1=40.0):
    return {"name": name, "valid": {"P@1": p1, "PSP@5": psp5, "P@5": 0.0, "PSP@1": 0.0}}


def test_new_items_rule_admits_only_what_the_forecast_cannot_see_losing():
    trials = [_trial("none", 20.0), _trial("a", 30.0), _trial("b", 40.0)]
    forecasts = {"a": {"lowest": -0.1}, "b": {"lowest": -3.0}}
    assert auto.choose_for_new_items(trials, forecasts, 0.2) == "a"  # b might lose 3 points
    assert auto.choose_for_new_items(trials, forecasts, 5.0) == "b"
    assert auto.choose_for_new_items(trials, {}, 5.0) == "none"  # no forecast: not admissible
    with pytest.raises(ValueError):
        auto.choose_for_new_items(trials[1:], {}, 0.2)  # nothing admissible, not even none


def test_new_items_search_says_why_it_could_not_tell():
    share_turns = {"identity": {"at_share_ends": [1.2, -0.3], "lowest": -2.0}}
    why = auto.decided_for_new_items("none", share_turns, 1000, None)
    assert not why["sure"] and "identity" in why["why"] and "--query-sample" in why["why"]
    assert "small" in auto.decided_for_new_items("none", share_turns, 1000, 0.2)["why"]
    noise = {"gandalf": {"at_share_ends": [1.0, 0.5], "lowest": -0.8}}
    why = auto.decided_for_new_items("none", noise, 1000, 0.1)
    assert not why["sure"] and "too small to tell whether gandalf" in why["why"]
    losing = {"gandalf": {"at_share_ends": [-1.0, -2.0], "lowest": -3.0}}
    assert auto.decided_for_new_items("none", losing, 1000, 0.1)["sure"]  # a forecast loss decides
    assert auto.decided_for_new_items("identity", share_turns, 1000, 0.1)["sure"]
    assert not auto.decided_for_new_items("none", {}, auto.MIN_VALID_POINTS - 1, 0.1)["sure"]


class _Fake:
    def __init__(self, name):
        self.name = name
        self.result = TrainResult(
            0, 0.0, [{"epoch": 0, "P@1": 0.0, "P@5": 0.0, "PSP@1": 0.0, "PSP@5": {"none": 10.0, "identity": 30.0}[name]}]
        )


def _search(tmp_path, interval, future_hits, namesake_hits):
    calls = {"future": [], "namesake": []}

    def name_of(augment):
        return next(n for n, a in auto.AUTO_CANDIDATES.items() if a == augment)

    def fit_one(augment, ckpt, resume):
        calls["future"].append((name_of(augment), ckpt.name))
        return _Fake(name_of(augment))

    def fit_namesake(augment, ckpt, resume):
        calls["namesake"].append((name_of(augment), ckpt.name))
        return _Fake(name_of(augment))

    def save(model, d):
        d.mkdir(parents=True)
        (d / "name").write_text(model.name)

    check = auto.NamesakeCheck(fit_namesake, lambda m: namesake_hits[m.name], 0.3, interval, items=len(namesake_hits["none"]))
    _, chosen, record = auto.search(
        fit_one,
        save,
        lambda d: _Fake((d / "name").read_text()),
        tmp_path,
        auto.AutoConfig(1e6, 0.2, ("none", "identity")),
        log=lambda _: None,
        point_hits=lambda m: future_hits[m.name],
        namesake_check=check,
    )
    return chosen, record, calls


def test_search_for_new_items_trains_each_candidate_twice_and_forecasts_from_the_hits(tmp_path):
    future = {"none": np.array([1, 0, 0, 0] * 50, bool), "identity": np.array([1, 1, 0, 0] * 50, bool)}  # +25 points
    namesake = {"none": np.array([1, 1, 0, 0] * 10, bool), "identity": np.array([0, 0, 0, 0] * 10, bool)}  # -50 points
    chosen, record, calls = _search(tmp_path / "a", (0.1, 0.2), future, namesake)
    assert calls["future"] == [("none", "checkpoints"), ("identity", "checkpoints")]
    assert calls["namesake"] == [("none", "namesake-checkpoints"), ("identity", "namesake-checkpoints")]
    f = record["new_items"]["forecast"]["identity"]
    assert f["future_gain"] == 25.0 and f["namesake_gain"] == -50.0
    # at s = 0.1: 0.9 x 25 - 0.1 x 50 = 17.5; at s = 0.2: 0.8 x 25 - 0.2 x 50 = 10
    assert f["at_share_ends"] == [17.5, 10.0]
    se_future = 100 * np.std(np.array([0, 1, 0, 0] * 50, float), ddof=1) / np.sqrt(200)
    se_namesake = 100 * np.std(np.array([-1, -1, 0, 0] * 10, float), ddof=1) / np.sqrt(40)
    assert f["lowest"] == pytest.approx(10.0 - 2 * np.hypot(0.8 * se_future, 0.2 * se_namesake), abs=0.01)
    assert record["chosen"] == "identity" and chosen.augmentation == "identity" and record["decided"]["sure"]
    assert record["new_items"]["share_interval"] == [0.1, 0.2] and record["new_items"]["namesake_items"] == 40
    # where half the queries may be namesakes the loss is foreseen: 0.5 x 25 - 0.5 x 50 < 0
    chosen, record, _ = _search(tmp_path / "b", (0.1, 0.5), future, namesake)
    assert record["chosen"] == "none" and not record["decided"]["sure"] and "share" in record["decided"]["why"]
    # a sample without namesakes: the namesakes' part is not trained, the forecast is the future gain
    chosen, record, calls = _search(tmp_path / "c", (0.0, 0.0), future, namesake)
    assert calls["namesake"] == [] and record["new_items"]["forecast"]["identity"]["at_share_ends"] == [25.0, 25.0]
    assert not any("namesake_hits" in t for t in record["trials"])


LABEL_WORDS = [
    "apple", "pear", "plum", "fig", "kiwi", "lime", "date", "peach", "melon", "grape", "lemon", "mango",
    "olive", "guava", "papaya", "quince", "cherry", "berry", "orange", "banana",
]  # fmt: skip


def _catalogue(directory):
    """Every label is also an item (same uid, same text) with a co-label, plus points that are not
    labels: in a random validation split an item's own label is filtered, for new items it is not."""
    n = len(LABEL_WORDS)
    labels = [f"{w} fruit" for w in LABEL_WORDS]
    directory.mkdir(parents=True)
    write_json_lines(directory / "lbl.json.gz", [{"uid": f"L{j}", "title": t} for j, t in enumerate(labels)])
    points = [{"uid": f"L{j}", "title": labels[j], "target_ind": [j, (j + 1) % n]} for j in range(n)]
    points += [
        {"uid": f"P{j}-{r}", "title": f"{LABEL_WORDS[j]} {word}", "target_ind": [j, (j + 1) % n]}
        for j in range(n)
        for r, word in enumerate(("juice", "jam", "pie"))
    ]
    write_json_lines(directory / "trn.json.gz", points)
    write_json_lines(directory / "tst.json.gz", [{"uid": "S0", "title": "apple juice", "target_ind": [0]}])
    return directory, labels


def _trained_for_new_items(tmp_path, config):
    """``train_model`` with auto for new items on :func:`_catalogue`, none and identity its
    candidates, half the query sample a label's text: the dataset, its labels' texts, the trained
    model and its ``auto.json``."""
    data, labels = _catalogue(tmp_path / "d")
    ds = load_dataset(data)
    trained = train_model(
        ds,
        tmp_path / "m",
        config,
        AugmentConfig("auto"),
        valid_fraction=0.3,
        progress=False,
        auto_config=auto.AutoConfig(candidates=("none", "identity")),
        new_items=NewItems(QuerySample([labels[0], "dried fig snack"])),
    )
    return ds, labels, trained, json.loads((tmp_path / "m" / "auto.json").read_text())


def test_train_for_new_items_scores_namesakes_unfiltered_and_keeps_every_point(tmp_path):
    config = model_config("linear", seed=0)
    ds, labels, trained, record = _trained_for_new_items(tmp_path, config)
    info = json.loads((tmp_path / "m" / "training.json").read_text())
    assert info["valid_protocol"] == "future" and info["queries"] == "new items"
    assert info["refit"] and info["n_train"] == len(ds.train) + (len(labels) if record["chosen"] == "identity" else 0)
    assert record["new_items"]["share"] == 0.5
    # the namesakes' hits, recomputed apart: the catalogue's carving, the candidate trained on it,
    # each held-out item that is a label ranked with its own label left in (it counts as a miss)
    rest, valid = carve_validation(ds, 0.3, 0, "random")
    own = {int(i) for i in np.asarray(valid.filter_pairs).reshape(-1, 2)[:, 0]}
    assert record["new_items"]["namesake_items"] == len(own) > 0
    for trial in record["trials"]:
        model, _ = fit_augmented(rest, None, None, config, AugmentConfig.from_dict(trial["augment"]), None, progress=False)
        top = model.predict([valid.texts[i] for i in sorted(own)], k=1)
        expected = []
        for row, i in enumerate(sorted(own)):
            truth = set(valid.Y[i].indices) - {j for p, j in np.asarray(valid.filter_pairs).reshape(-1, 2) if p == i}
            if truth:
                expected.append(int(top[row].indices[np.argmax(top[row].data)]) in truth)
        assert auto._unpack(trial, "namesake_hits").tolist() == expected
    # identity's label point "text of X -> X" puts the namesake first: a miss for every such item
    assert not auto._unpack(next(t for t in record["trials"] if t["name"] == "identity"), "namesake_hits").any()
    assert trained.model.predict(["apple juice"], k=1).shape == (1, len(labels))


def _cli_data(tmp_path):
    return str(write_tiny_dataset(tmp_path / "tiny"))


def test_cli_new_items_refusals_are_one_line_and_write_nothing(tmp_path, capsys):
    data = _cli_data(tmp_path)
    out = tmp_path / "m"
    sample = tmp_path / "queries.txt"
    sample.write_text('{"title": "a", "group": "g"}\n{"title": "b"}\n')
    cases = [
        (["--augment", "none", "--queries", "new-items"], "give --augment auto"),
        (["--augment", "auto", "--query-sample", str(sample)], "--queries new-items only"),
        (["--augment", "auto", "--queries", "new-items", "--valid-split", "tst"], "--valid-split"),
        (["--augment", "auto", "--queries", "new-items", "--valid-protocol", "new-items"], "--valid-protocol random"),
        (["--augment", "auto", "--queries", "new-items", "--no-refit"], "--refit"),
        (["--augment", "auto", "--queries", "new-items", "--query-sample", str(sample)], "'group' on every line"),
        (["--augment", "auto", "--queries", "new-items", "--query-sample", str(tmp_path / "none.txt")], "none.txt"),
    ]
    for extra, needle in cases:
        code, _, err = run_cli(["train", "--data", data, "--out", str(out), "--no-progress", *extra], capsys)
        assert_clean_failure(code, err, needle)
        assert not out.exists()


def test_cli_new_items_reads_the_query_sample(tmp_path, capsys):
    data = _cli_data(tmp_path)
    sample = tmp_path / "queries.txt"
    sample.write_text("a new query\nanother one\n")
    code, out, err = run_cli(
        [
            "train",
            "--data",
            data,
            "--augment",
            "auto",
            "--queries",
            "new-items",
            "--query-sample",
            str(sample),
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
    assert "new_items" in record and "forecast" in record["new_items"]
    assert "auto chose" in out and "new items" in out and "of queries" in out


def test_a_setting_is_chosen_by_its_forecast_over_the_first_setting():
    base = np.array([1, 0, 0, 0] * 50, bool)  # 50 hits of 200
    more = base.copy()
    more[np.flatnonzero(~base)[:40]] = True  # 40 more hits: +20 points
    future = np.array([base, np.array([1, 1, 0, 0] * 50, bool), more])  # +0, +25, +20
    # namesakes: setting 1 loses half of them, setting 2 none
    names = np.array([np.array([1, 1, 0, 0] * 10, bool), np.zeros(40, bool), np.array([1, 1, 0, 0] * 10, bool)])
    # at s in (0.1, 0.2): setting 1 0.9 x 25 - 0.1 x 50 = 17.5 and 10 (mean 13.75), setting 2 18 and 16 (mean 17)
    best, forecasts = auto.choose_setting(future, names, (0.1, 0.2), 0.2)
    assert best == 2 and forecasts[1]["at_share_ends"] == [17.5, 10.0] and forecasts[2]["at_share_ends"] == [18.0, 16.0]
    assert forecasts[0]["at_share_ends"] == [0.0, 0.0] and forecasts[0]["lowest"] == 0.0
    # without the namesakes' part (s = 0) the larger future gain wins
    best, _ = auto.choose_setting(future, None, (0.0, 0.0), 0.2)
    assert best == 1
    # where a setting may lose, the first stays: half the queries namesakes, setting 2 made to lose them too
    names[2] = np.zeros(40, bool)
    best, forecasts = auto.choose_setting(future, names, (0.1, 0.9), 0.2)
    assert best == 0 and all(f["lowest"] < -0.2 for f in forecasts[1:])


def test_train_for_new_items_fixes_the_blends_weights_the_forecast_chose(tmp_path, monkeypatch):

    rule = auto.choose_setting

    def last_setting(*args):  # a choice that differs from the blend's own (the largest vote weight)
        _, forecasts = rule(*args)
        return len(forecasts) - 1, forecasts

    monkeypatch.setattr(auto, "choose_setting", last_setting)

    config = model_config("linear-knn", seed=0)  # for new items its label-text similarity is left out
    _, _, _, record = _trained_for_new_items(tmp_path, config)
    chosen = next(t for t in record["trials"] if t["name"] == record["chosen"])
    for trial in record["trials"]:
        forecast_of = trial["settings_forecast"]
        assert [f["knn_weight"] for f in forecast_of] == sorted(config.weights)
        assert forecast_of[0]["at_share_ends"] == [0.0, 0.0]
        assert trial["setting"] == {"knn_weight": max(config.weights), "text_weight": 0.0}
    assert record["setting"] == chosen["setting"]
    spec = json.loads((tmp_path / "m" / "model.json").read_text())
    assert spec["knn_weight"] == max(config.weights)  # the final model trained with it
    assert spec["model"]["text_weights"] == [0.0] and spec["text_weight"] == 0.0


def test_a_fixed_augmentation_for_new_items_chooses_the_blends_weight_on_the_future_share(tmp_path):
    data, _ = _catalogue(tmp_path / "d")
    ds = load_dataset(data)
    config = model_config("linear-knn", seed=0)
    trained = train_model(
        ds, tmp_path / "m", config, AugmentConfig("none"), valid_fraction=0.3, progress=False, new_items=NewItems(None)
    )
    info = json.loads((tmp_path / "m" / "training.json").read_text())
    assert info["valid_protocol"] == "future" and info["queries"] == "new items" and info["refit"]
    assert trained.search is None and not (tmp_path / "m" / "auto.json").exists()
    # the same validation apart: the future share (its items' own labels out of the label space),
    # the blend without its label-text similarity, trained on the rest and scored there
    rest, valid = carve_validation(ds, 0.3, 0, "future")
    assert info["n_valid"] == len(valid) and info["validation_run"]["n_train"] == len(rest.train) < len(ds.train)
    inv = inverse_propensity(rest.original_train_Y(), *ds.propensity_constants())
    apart, _ = fit_augmented(rest, valid, inv, new_items_config(config), AugmentConfig("none"), None, progress=False)
    chosen = apart.result.history[apart.result.best_epoch]["knn_weight"]
    spec = json.loads((tmp_path / "m" / "model.json").read_text())
    assert spec["knn_weight"] == chosen and spec["text_weight"] == 0.0  # the final model, on every point, kept it
    assert info["n_train"] == len(ds.train)


def test_new_items_refuse_a_fixed_augmentation_where_the_model_chooses_nothing(tmp_path):
    from gandalf_xmc.errors import ConfigError

    data, _ = _catalogue(tmp_path / "d")
    with pytest.raises(ConfigError, match="chooses nothing there; give --augment auto, or one of .*linear-knn"):
        train_model(
            load_dataset(data),
            tmp_path / "m",
            model_config("linear", seed=0),
            AugmentConfig("gandalf"),
            valid_fraction=0.3,
            progress=False,
            new_items=NewItems(None),
        )
    assert not (tmp_path / "m").exists()


def test_new_items_leave_the_blends_label_text_similarity_out_unless_its_weight_is_fixed():
    from dataclasses import replace

    blend = model_config("linear-knn", seed=0)
    assert new_items_config(blend) == replace(blend, text_weights=(0.0,))
    fixed = replace(blend, text_weight=0.5)
    assert new_items_config(fixed) == fixed
    assert new_items_config(model_config("linear", seed=0)) == model_config("linear", seed=0)


def _declared_new_items(tmp_path, test_split="new-items"):
    """The tiny dataset, saying in its dataset.json that its test split holds new items, with a
    ``val`` split of two new items (one the text of a label)."""
    data = write_tiny_dataset(tmp_path / "declared")
    (data / "dataset.json").write_text(json.dumps({"name": "declared", "test_split": test_split}))
    labels = [json.loads(line)["title"] for line in _lines(data / "lbl.json.gz")]
    write_json_lines(
        data / "val.json.gz",
        [{"uid": "V0", "title": labels[0], "target_ind": [1]}, {"uid": "V1", "title": "a new thing", "target_ind": [0]}],
    )
    return data


def _lines(path):
    import gzip

    return gzip.open(path, "rt").read().splitlines()


def test_a_dataset_that_says_its_queries_are_new_items_trains_auto_for_them(tmp_path, capsys, monkeypatch):
    data = _declared_new_items(tmp_path)
    assert load_dataset(data, splits=("trn",)).test_split == "new-items"
    args = ["train", "--data", str(data), "--no-progress", "--out", str(tmp_path / "m")]
    code, out, err = run_cli([*args, "--augment", "auto", "--valid-fraction", "0.25"], capsys)
    assert code == 0, err
    assert "queries: new items (the dataset's dataset.json says" in out and "the val split's 2 texts" in out
    assert "new_items" in json.loads((tmp_path / "m" / "auto.json").read_text())

    from gandalf_xmc.workflow import pipeline

    seen = {}

    def handed_over(dataset, out, config, augment, *args, **kwargs):  # what train would have been given
        seen.update(kwargs)
        raise SystemExit(0)

    monkeypatch.setattr(pipeline, "train_model", handed_over)
    code, _, err = run_cli([*args, "--augment", "auto", "--force"], capsys)
    assert code == 0, err
    # the val split's texts, not their targets, each its own family (a directory outside the suite)
    assert seen["new_items"].sample == QuerySample(["red apple", "a new thing"], None)
    assert seen["valid_protocol"] == "random"
    # said otherwise on the command line, the line wins; a fixed augmentation or a labelled split
    # to validate on forecasts nothing, so nothing is applied (nor refused)
    for extra in (
        ["--augment", "auto", "--queries", "catalogue"],
        ["--augment", "none"],
        ["--augment", "auto", "--valid-split", "val"],
    ):
        seen.clear()
        code, out, err = run_cli([*args, *extra, "--force"], capsys)
        assert code == 0, err
        assert seen["new_items"] is None and "queries: new items" not in out, extra
    # where dataset.json says a group names a family, the sample and the validation go by family
    card = json.loads((data / "dataset.json").read_text())
    (data / "dataset.json").write_text(json.dumps({**card, "groups_are_families": True}))
    rows = [
        {"uid": "V0", "title": "red apple", "target_ind": [1], "group": "f"},
        {"uid": "V1", "title": "x", "target_ind": [0], "group": "g"},
    ]
    write_json_lines(data / "val.json.gz", rows)
    code, out, err = run_cli([*args, "--augment", "auto", "--force"], capsys)
    assert code == 0, err
    assert seen["new_items"].sample == QuerySample(["red apple", "x"], ["f", "g"]) and seen["valid_protocol"] == "group"
    assert "the val split's 2 texts, by family" in out
    # a sample file given wins over the val split
    sample = tmp_path / "queries.txt"
    sample.write_text("blue whale\n")
    code, out, err = run_cli([*args, "--augment", "auto", "--query-sample", str(sample), "--force"], capsys)
    assert code == 0, err
    assert seen["new_items"].sample == QuerySample(["blue whale"], None) and "val split" not in out


def test_a_dataset_json_with_an_unknown_test_split_is_one_line(tmp_path, capsys):
    data = _declared_new_items(tmp_path, test_split="future")
    code, _, err = run_cli(["train", "--data", str(data), "--out", str(tmp_path / "m"), "--no-progress"], capsys)
    assert_clean_failure(code, err, "dataset.json", "test_split must be one of random, new-items, got 'future'")
    assert not (tmp_path / "m").exists()
    (data / "dataset.json").write_text(json.dumps({"test_split": "new-items", "groups_are_families": "yes"}))
    code, _, err = run_cli(["train", "--data", str(data), "--out", str(tmp_path / "m"), "--no-progress"], capsys)
    assert_clean_failure(code, err, "dataset.json", "groups_are_families must be true or false, got 'yes'")
    assert not (tmp_path / "m").exists()


def test_a_split_samples_queries_by_family_only_where_groups_are_families():
    from gandalf_xmc.data.dataset import Split
    from gandalf_xmc.data.suite import groups_are_families

    split = Split(["a", "b"], ["one", "two"], load_dataset("jargon", splits=("trn",)).train.Y[:2], groups=["f", "g"])
    assert forecast.split_sample(split, True) == QuerySample(["one", "two"], ["f", "g"])
    assert forecast.split_sample(split, False) == QuerySample(["one", "two"], None)
    assert groups_are_families("debian-new-packages") and not groups_are_families("gene-ontology-new-terms")
    assert not groups_are_families("a directory of someone else's")
