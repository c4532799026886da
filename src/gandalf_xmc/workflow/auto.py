"""``--augment auto``: pick the augmentation for the model at hand on the validation split.

Every candidate is trained on the same training part and scored on the same validation split
(carved from the original training points; the test split is never seen). The rule favours the
tail without giving up the head: among the candidates whose validation P@1 is at least the
un-augmented model's (less ``p1_tolerance``, 0 by default), the one with the highest PSP@5 wins
("none" is always a candidate, so the choice can be "no augmentation"). Candidates run in order
until the time budget would be exceeded; the search returns the winner's trained model (the
pipeline then trains the final model again on every training point).

Each finished trial is saved under ``checkpoints/auto/<name>`` with its metrics in
``checkpoints/auto/trials.json``, so an interrupted search resumes where it stopped.

For a deployment that meets new items (:class:`NamesakeCheck`), the trials validate on held-out
items as if they did not exist yet, each candidate trains a second time for the namesakes' part,
and the rule reads the forecast of :mod:`.forecast`: a candidate is admissible only where the
forecast's lowest value (two standard errors down, at either end of the share of namesakes) is
above ``-p1_tolerance``.
"""

from __future__ import annotations

import json
import shutil
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

import numpy as np

from ..augment import TEMPERED_GRAPH, AugmentConfig, preset
from ..data.atomic import atomic_path
from ..engine.records import holds_checkpoints
from ..models.registry import ModelEntry
from .fitting import label_point_refusal
from .forecast import forecast_from_hits

# Candidates, most promising first (the budget may cut the list short); docs/decisions.md
# ("Augmentation with the linear model") gives the validation figures behind the list and its
# order. "gandalf-tempered" is the preset of that name; "-targets-only" candidates (models trained
# in epochs) give a label point no shortlist negatives ("Label points without shortlist negatives
# for the neural models" there), "-floors-" ones make its soft targets floors ("Soft targets as
# floors": first for those models, whose candidates they are alone; the linear list is unchanged).
AUTO_CANDIDATES: dict[str, AugmentConfig] = {
    "none": AugmentConfig("none"),
    "gandalf-tempered-floors-targets-only": AugmentConfig(
        "gandalf", TEMPERED_GRAPH, label_point_negatives=False, label_point_floors=True
    ),
    "gandalf-tempered-firm-floors-targets-only": preset(
        "gandalf-tempered-firm", label_point_negatives=False, label_point_floors=True
    ),
    "gandalf-tempered": preset("gandalf-tempered"),
    "gandalf-tempered-firm": preset("gandalf-tempered-firm"),
    "identity": AugmentConfig("identity"),
    "gandalf": AugmentConfig("gandalf"),
    "identity-half-weight": AugmentConfig("identity", label_point_weight=0.5),
    "gandalf-tempered-full-weight": AugmentConfig("gandalf", TEMPERED_GRAPH),
    "identity-targets-only": AugmentConfig("identity", label_point_negatives=False),
    "gandalf-tempered-targets-only": AugmentConfig("gandalf", TEMPERED_GRAPH, label_point_negatives=False),
    "gandalf-tempered-firm-targets-only": replace(preset("gandalf-tempered-firm"), label_point_negatives=False),
    "gandalf-targets-only": AugmentConfig("gandalf", label_point_negatives=False),
}


def gain_interval(base_hits: np.ndarray, hits: np.ndarray, seed: int = 0, n_boot: int = 1000, level: float = 0.9) -> dict:
    """P@1 gain of ``hits`` over ``base_hits`` (the same validation points, in points of P@1) with a
    paired bootstrap interval: how sure the search is that a candidate beats no augmentation."""
    diff = hits.astype(np.float64) - base_hits.astype(np.float64)
    if not diff.size:
        return {"gain": 0.0, "interval": [0.0, 0.0], "level": level}
    rng = np.random.default_rng(seed)
    means = np.array([diff[rng.integers(0, diff.size, diff.size)].mean() for _ in range(n_boot)])
    lo, hi = np.quantile(means, [(1 - level) / 2, (1 + level) / 2])
    return {
        "gain": round(100 * float(diff.mean()), 2),
        "interval": [round(100 * float(lo), 2), round(100 * float(hi), 2)],
        "level": level,
    }


def _pack(hits: np.ndarray) -> dict:
    hits = np.asarray(hits, dtype=bool)
    return {"n": int(hits.size), "bits": np.packbits(hits).tobytes().hex()}


def _unpack(trial: dict, key: str = "p1_hits") -> np.ndarray:
    bits = np.frombuffer(bytes.fromhex(trial[key]["bits"]), dtype=np.uint8)
    return np.unpackbits(bits)[: trial[key]["n"]].astype(bool)


@dataclass
class NamesakeCheck:
    """The namesakes' part of a new-items forecast: ``fit(augment, checkpoint_dir, resume)`` trains a
    candidate on the catalogue's validation carving, where held-out items keep their own labels;
    ``hits(model)`` says for each held-out item that is a label whether its top label, unfiltered,
    is right (its own label, a wrong namesake now, is a miss). ``share`` and ``interval``: the share
    of the deployment's queries that are namesakes (``None``: no sample) and its interval;
    ``items``: how many held-out items are labels; ``texts`` and ``truth``: those items' texts and
    targets less their own label (what a setting's namesakes' part scores, :class:`WeightGrid`)."""

    fit: Callable[[AugmentConfig, Path, bool], Any]
    hits: Callable[[Any], np.ndarray]
    share: float | None
    interval: tuple[float, float]
    items: int = 0
    texts: list[str] = field(default_factory=list)
    truth: Any = None

    @property
    def needed(self) -> bool:
        """Whether the namesakes weigh anything (a sample without one: s is 0 throughout)."""
        return self.interval[1] > 0


@dataclass
class WeightGrid:
    """A model's own choice on validation (a blend's weights) made by the forecast, for new items:
    ``future(model)`` gives the settings it tries (the first the smallest), each one's top-1 hits
    (an array a setting) and validation metrics on the held-out points; ``namesakes(model)`` each
    one's top-1 hits on the namesakes, unfiltered (the model trained for the namesakes' part)."""

    future: Callable[[Any], tuple[list[dict], np.ndarray, list[dict]]]
    namesakes: Callable[[Any], np.ndarray]


def choose_setting(
    future_hits: np.ndarray, namesake_hits: np.ndarray | None, interval: tuple[float, float], p1_tolerance: float
) -> tuple[int, list[dict]]:
    """The setting (row of the hits) whose forecast P@1 gain on new items over the first setting's is
    highest (the mean of its two ends) among those it cannot see losing more than ``p1_tolerance``
    (two standard errors down, at either end of the share); on a tie the earlier. Returns it and
    every setting's forecast."""
    forecasts = [
        forecast_from_hits(
            future_hits[c],
            future_hits[0],
            None if namesake_hits is None else namesake_hits[c],
            None if namesake_hits is None else namesake_hits[0],
            interval,
        )
        for c in range(len(future_hits))
    ]
    admissible = [c for c, f in enumerate(forecasts) if c == 0 or f["lowest"] >= -p1_tolerance]
    best = max(admissible, key=lambda c: (float(np.mean(forecasts[c]["at_share_ends"])), -c))
    return best, forecasts


def new_items_forecasts(trials: list[dict], interval: tuple[float, float]) -> dict[str, dict]:
    """Each candidate's :func:`.forecast.new_items_forecast` against the "none" trial (by the
    trials' hits on the future validation and, where recorded, on the namesakes)."""
    base = next((t for t in trials if t["name"] == "none"), None)
    if base is None or "p1_hits" not in base:
        return {}
    out = {}
    for t in trials:
        if t["name"] == "none" or "p1_hits" not in t:
            continue
        both = "namesake_hits" in t and "namesake_hits" in base
        out[t["name"]] = forecast_from_hits(
            _unpack(t),
            _unpack(base),
            _unpack(t, "namesake_hits") if both else None,
            _unpack(base, "namesake_hits") if both else None,
            interval,
        )
    return out


def choose_for_new_items(trials: list[dict], forecasts: dict[str, dict], p1_tolerance: float) -> str:
    """The highest validation PSP@5 among "none" and the candidates whose forecast cannot lose more
    than ``p1_tolerance`` P@1 on new items (``lowest`` at least ``-p1_tolerance``)."""
    admissible = [
        t for t in trials if t["name"] == "none" or forecasts.get(t["name"], {}).get("lowest", -np.inf) >= -p1_tolerance
    ]
    if not admissible:
        raise ValueError("no 'none' trial to fall back on")
    return max(admissible, key=lambda t: (t["valid"]["PSP@5"], t["valid"]["P@1"]))["name"]


def decided_for_new_items(winner: str, forecasts: dict[str, dict], n_valid: int, share: float | None) -> dict:
    """Whether the forecast could tell: it could not where a candidate lost only to the noise of
    validation (its forecast positive at both ends of the share's interval) or to the share (its
    forecast changing sign inside that interval); ``why`` says which, in a line."""
    if n_valid < MIN_VALID_POINTS:
        return decided(winner, None, n_valid, 0.0)
    if winner != "none":
        return {"sure": True, "why": ""}
    by_share = [n for n, f in forecasts.items() if min(f["at_share_ends"]) < 0 < max(f["at_share_ends"])]
    by_noise = [n for n, f in forecasts.items() if min(f["at_share_ends"]) > 0 and f["lowest"] < 0]
    if by_share:
        sample = "no sample of the queries was given (--query-sample)" if share is None else "the sample of queries is small"
        return {
            "sure": False,
            "why": f"the share of queries whose text is a label's decides whether {', '.join(by_share)} helps new items, "
            f"and {sample}; none was chosen",
        }
    if by_noise:
        return {
            "sure": False,
            "why": f"validation ({n_valid:,} points) is too small to tell whether {', '.join(by_noise)} helps new items "
            "(forecast above zero, within two standard errors of it); none was chosen",
        }
    return {"sure": True, "why": ""}


def candidates_for(row: ModelEntry) -> tuple[str, ...]:
    """The candidates the model of ``row`` can train on (``fitting.label_point_refusal``: the
    targets-only candidates are for the models trained in epochs, the firm one for every model
    trained with a loss)."""
    return tuple(name for name, c in AUTO_CANDIDATES.items() if label_point_refusal(row, c) is None)


@dataclass
class AutoConfig:
    """Settings of the search."""

    budget_seconds: float = 3600.0
    # validation P@1 points a candidate may lose against "none": none (docs/decisions.md, "auto
    # admits no loss of validation P@1")
    p1_tolerance: float = 0.0
    candidates: tuple[str, ...] | None = None  # None: every candidate the model can train on
    # validation shares in all while the winner's P@1 gain is undecided (docs/decisions.md, "auto
    # validates on more shares while undecided")
    max_folds: int = 5


@dataclass
class ExtraFolds:
    """More validation shares, disjoint from the first, for a choice the first cannot decide:
    ``available`` shares in all (the first included); ``fold(f)`` carves the f-th and returns
    ``(fit_one, point_hits)`` on it, as :func:`search` takes them for the first."""

    available: int
    fold: Callable[[int], tuple[Callable[[AugmentConfig, Path, bool], Any], Callable[[Any], np.ndarray]]]


def choose(trials: list[dict], p1_tolerance: float) -> str:
    """The winning trial's name: the highest PSP@5 among trials whose P@1 is within
    ``p1_tolerance`` of the "none" trial's (all trials are admissible without a "none" trial)."""
    if not trials:
        raise ValueError("no trials to choose from")
    base = next((t for t in trials if t["name"] == "none"), None)
    floor = -float("inf") if base is None else base["valid"]["P@1"] - p1_tolerance
    admissible = [t for t in trials if t["valid"]["P@1"] >= floor]
    return max(admissible, key=lambda t: (t["valid"]["PSP@5"], t["valid"]["P@1"]))["name"]


MIN_VALID_POINTS = 200  # below this a 90% interval of a P@1 gain spans several points whatever the data


def decided(winner: str, gain: dict | None, n_valid: int, p1_tolerance: float) -> dict:
    """Whether validation was large enough to stand behind the choice: the winner's 90% interval of
    its P@1 gain over "none" lies above ``-p1_tolerance`` (the loss the rule allows), on at least
    :data:`MIN_VALID_POINTS` points. ``why`` says it in a line when not."""
    if n_valid < MIN_VALID_POINTS:
        points = f"{n_valid:,} point{'s' if n_valid != 1 else ''}"
        return {
            "sure": False,
            "why": f"validation has {points}, too few to decide (at least {MIN_VALID_POINTS}: "
            f"raise --valid-fraction or give --valid-split); {winner} was chosen on them",
        }
    if winner == "none" or gain is None:
        return {"sure": True, "why": ""}
    lo, hi = gain["interval"]
    if lo >= -p1_tolerance:
        return {"sure": True, "why": ""}
    return {
        "sure": False,
        "why": f"validation ({n_valid:,} points) is too small to decide on P@1: {winner}'s gain over "
        f"none lies in {lo:+.2f} to {hi:+.2f} ({100 * gain['level']:.0f}% interval), which allows a larger loss "
        f"than the rule's tolerance ({p1_tolerance:g}); it won on PSP@5. More validation points (--valid-fraction, "
        "--valid-split), or none, are the safer choice where P@1 matters most",
    }


def search(
    fit_one: Callable[[AugmentConfig, Path, bool], Any],
    save: Callable[[Any, Path], None],
    load: Callable[[Path], Any],
    work_dir: Path,
    config: AutoConfig,
    seed: int = 0,
    resume: bool = False,
    log: Callable[[str], None] = print,
    point_hits: Callable[[Any], np.ndarray] | None = None,
    namesake_check: NamesakeCheck | None = None,
    weight_grid: WeightGrid | None = None,
    extra_folds: ExtraFolds | None = None,
) -> tuple[object, AugmentConfig, dict]:
    """Run the trials and return ``(winning model, its AugmentConfig, record of the search)``.

    ``fit_one(augment, checkpoint_dir, resume)`` trains one model and returns it (its
    ``result.history[result.best_epoch]`` holds the validation metrics); ``save``/``load`` write and
    read a trained model directory. ``point_hits(model)``, when given, says for each validation
    point whether the model's top label is right; the record then gives each trial's P@1 gain over
    "none" with a paired bootstrap interval over the validation points (:func:`gain_interval`).
    With ``namesake_check`` (new items; ``point_hits`` then required) each candidate also trains
    for the namesakes' part, and the choice is :func:`choose_for_new_items`'s; with ``weight_grid``
    too, each trial's own setting (a blend's weights) is :func:`choose_setting`'s, and its hits and
    metrics are that setting's. With ``extra_folds`` (catalogue queries; ``point_hits`` then
    required), while the winner's gain is undecided (:func:`decided`) the candidates that the
    first share cannot rule out train on one more share, up to ``config.max_folds`` shares, and the
    choice reads them pooled (:func:`more_folds`).
    """
    if weight_grid is not None and namesake_check is None:
        raise ValueError("a setting chosen by the forecast needs the new-items forecast (namesake_check)")
    if namesake_check is not None and point_hits is None:
        raise ValueError("a new-items forecast needs each trial's validation hits (point_hits)")
    candidates = config.candidates if config.candidates is not None else tuple(AUTO_CANDIDATES)
    unknown = [c for c in candidates if c not in AUTO_CANDIDATES]
    if unknown:
        raise ValueError(f"unknown auto candidates {unknown}; choose from {', '.join(AUTO_CANDIDATES)}")
    work_dir.mkdir(parents=True, exist_ok=True)
    record_path = work_dir / "trials.json"
    trials: list[dict] = json.loads(record_path.read_text()) if resume and record_path.exists() else []
    done = {t["name"] for t in trials if not t.get("fold")}
    started = time.perf_counter()
    spent, n_ran = 0.0, 0  # training seconds and count of the trials run in this call
    skipped: list[str] = []  # the candidates the budget left untried
    for at, name in enumerate(candidates):
        if name in done:
            continue
        estimate = spent / n_ran if n_ran else 0.0
        if trials and time.perf_counter() - started + estimate > config.budget_seconds:  # the first always runs
            skipped = [n for n in candidates[at:] if n not in done]
            log(f"auto: budget of {config.budget_seconds:.0f} s reached; skipping {', '.join(skipped)}")
            break
        augment = replace(AUTO_CANDIDATES[name], seed=seed)
        t0 = time.perf_counter()
        trial_dir = work_dir / name
        model = fit_one(augment, trial_dir / "checkpoints", resume and holds_checkpoints(trial_dir / "checkpoints"))
        seconds = time.perf_counter() - t0
        spent += seconds
        n_ran += 1
        save(model, trial_dir / "model")
        trial = _trial_record(name, augment, seconds, model)
        grid = weight_grid.future(model) if weight_grid is not None else None  # its hits replace the model's own
        if point_hits is not None and grid is None:
            trial["p1_hits"] = _pack(point_hits(model))
        namesake_grid = None
        if namesake_check is not None and namesake_check.needed:
            model = None  # the first model's memory is free before the second trains
            ckpt = trial_dir / "namesake-checkpoints"
            t1 = time.perf_counter()
            other = namesake_check.fit(augment, ckpt, resume and holds_checkpoints(ckpt))
            if weight_grid is not None:
                namesake_grid = weight_grid.namesakes(other)
            else:
                trial["namesake_hits"] = _pack(namesake_check.hits(other))
            trial["seconds"] += time.perf_counter() - t1
            spent += time.perf_counter() - t1
        if grid is not None and namesake_check is not None:
            settings, hits, metrics = grid
            c, by_setting = choose_setting(hits, namesake_grid, namesake_check.interval, config.p1_tolerance)
            trial.update(setting=settings[c], valid=metrics[c], p1_hits=_pack(hits[c]))
            if namesake_grid is not None:
                trial["namesake_hits"] = _pack(namesake_grid[c])
            trial["settings_forecast"] = [
                {**settings[i], "at_share_ends": f["at_share_ends"], "lowest": f["lowest"]} for i, f in enumerate(by_setting)
            ]
        trials.append(trial)
        setting = f" with {trial['setting']}" if "setting" in trial else ""
        scores = trial["valid"]
        log(f"auto: {name}{setting}: valid P@1 {scores['P@1']:.2f}, PSP@5 {scores['PSP@5']:.2f} ({trial['seconds']:.0f} s)")
        with atomic_path(record_path) as tmp:
            tmp.write_text(json.dumps(trials, indent=1) + "\n")
    scored, folds = [t for t in trials if not t.get("fold")], 1  # what the rule reads: the first share's trials
    if extra_folds is not None and namesake_check is None and point_hits is not None:
        scored, folds = more_folds(trials, extra_folds, config, seed, started, record_path, work_dir, resume, log)
    forecasts: dict[str, dict] = {}
    if namesake_check is not None:
        forecasts = new_items_forecasts(trials, namesake_check.interval)
        winner = choose_for_new_items(trials, forecasts, config.p1_tolerance)
        rule = (
            "highest valid PSP@5 among none and the trials whose forecast P@1 gain on new items, two standard errors "
            f"down at either end of the share of namesakes, is >= -{config.p1_tolerance}"
        )
    else:
        winner = choose(scored, config.p1_tolerance)
        rule = f"highest valid PSP@5 among trials with valid P@1 >= P@1(none) - {config.p1_tolerance:g}"
    chosen = next(t for t in scored if t["name"] == winner)
    model = load(work_dir / winner / "model")
    record: dict[str, Any] = {
        "rule": rule,
        "chosen": winner,
        "budget_seconds": config.budget_seconds,
        "skipped": skipped,
        "trials": trials,
    }
    if folds > 1:
        record["folds"] = folds
        record["pooled"] = {t["name"]: t["valid"] for t in scored}  # what the rule read, on every share
        record["pooled_points"] = scored[0]["p1_hits"]["n"]
    if "setting" in chosen:  # the winner's own setting, chosen by the forecast: the final model takes it
        record["setting"] = chosen["setting"]
    base = next((t for t in scored if t["name"] == "none" and "p1_hits" in t), None)
    if namesake_check is not None:
        record["new_items"] = {
            "share": namesake_check.share,
            "share_interval": list(namesake_check.interval),
            "namesake_items": namesake_check.items,
            "forecast": forecasts,
        }
        n_valid = base["p1_hits"]["n"] if base is not None else 0
        record["decided"] = decided_for_new_items(winner, forecasts, n_valid, namesake_check.share)
    if base is not None:
        record["p1_gain_over_none"] = {
            t["name"]: gain_interval(_unpack(base), _unpack(t), seed) for t in scored if "p1_hits" in t and t["name"] != "none"
        }
        if namesake_check is None:
            record["decided"] = decided(
                winner, record["p1_gain_over_none"].get(winner), base["p1_hits"]["n"], config.p1_tolerance
            )
    if skipped and sum(not t.get("fold") for t in trials) == 1:  # nothing to compare the winner with
        why = f"{skipped_note(skipped, config.budget_seconds)}; {winner} was kept without a comparison"
        record["decided"] = {"sure": False, "why": why}
    for t in trials:  # only the winner's model is worth keeping
        if t["name"] != winner and not t.get("fold"):
            shutil.rmtree(work_dir / t["name"] / "model", ignore_errors=True)
    return model, AugmentConfig.from_dict(chosen["augment"]), record


def skipped_note(skipped: list[str], budget_seconds: float) -> str:
    """The line that says which candidates a search's budget left untried (``record["skipped"]``)."""
    return (
        f"the budget of {budget_seconds / 60:g} min ran out before {', '.join(skipped)} "
        "(not tried: raise --auto-budget to try them)"
    )


def _trial_record(name: str, augment: AugmentConfig, seconds: float, model) -> dict:
    """A finished trial's record: its candidate, time, and the validation metrics of its best epoch."""
    best = model.result.history[model.result.best_epoch]
    return {
        "name": name,
        "augment": asdict(augment),
        "seconds": seconds,
        "best_epoch": model.result.best_epoch,
        "valid": {k: best[k] for k in ("P@1", "P@5", "PSP@1", "PSP@5")},
    }


def pooled_trials(trials: list[dict], names: list[str], folds: int) -> list[dict]:
    """Each of ``names``'s trials on shares ``0 .. folds - 1`` as one trial on all their points:
    the hits joined, each metric the mean of the shares' weighted by their points (the first
    share's trial where ``folds`` is 1)."""
    out = []
    for name in names:
        parts = [next(t for t in trials if t["name"] == name and t.get("fold", 0) == f) for f in range(folds)]
        if folds == 1:
            out.append(parts[0])
            continue
        sizes = np.array([p["p1_hits"]["n"] for p in parts], dtype=np.float64)
        valid = {k: float(sizes @ np.array([p["valid"][k] for p in parts]) / sizes.sum()) for k in parts[0]["valid"]}
        hits = np.concatenate([_unpack(p) for p in parts])
        out.append({**parts[0], "valid": valid, "p1_hits": _pack(hits), "folds": folds})
    return out


def more_folds(
    trials: list[dict],
    extra: ExtraFolds,
    config: AutoConfig,
    seed: int,
    started: float,
    record_path: Path,
    work_dir: Path,
    resume: bool,
    log: Callable[[str], None],
) -> tuple[list[dict], int]:
    """While the winner's P@1 gain over "none" is undecided on the shares so far (:func:`decided`),
    train "none" and the candidates whose first-share interval reaches ``-p1_tolerance`` (the others
    cannot be admitted) on one more share, within the budget and ``config.max_folds``. Returns the
    trials the rule reads (pooled over every complete share, :func:`pooled_trials`) and how many
    shares they cover. New trials are appended to ``trials`` (``fold`` f) and saved with them."""
    first = [t for t in trials if not t.get("fold") and "p1_hits" in t]
    base = next((t for t in first if t["name"] == "none"), None)
    if base is None:
        return [t for t in trials if not t.get("fold")], 1
    names = ["none"] + [
        t["name"]
        for t in first
        if t["name"] != "none" and gain_interval(_unpack(base), _unpack(t), seed)["interval"][1] >= -config.p1_tolerance
    ]
    scored, folds = pooled_trials(trials, names, 1), 1
    seconds = {t["name"]: t["seconds"] for t in first}
    while folds < min(config.max_folds, extra.available):
        winner = choose(scored, config.p1_tolerance)
        pooled_base = next(t for t in scored if t["name"] == "none")
        gain = None
        if winner != "none":
            gain = gain_interval(_unpack(pooled_base), _unpack(next(t for t in scored if t["name"] == winner)), seed)
        n_valid = pooled_base["p1_hits"]["n"]
        if decided(winner, gain, n_valid, config.p1_tolerance)["sure"]:
            break
        todo = [n for n in names if not any(t["name"] == n and t.get("fold") == folds for t in trials)]
        if time.perf_counter() - started + sum(seconds[n] for n in todo) > config.budget_seconds:
            log(f"auto: budget of {config.budget_seconds:.0f} s reached; no validation share {folds + 1}")
            break
        log(
            f"auto: {winner} is undecided on {n_valid:,} validation points; "
            f"share {folds + 1} of at most {min(config.max_folds, extra.available)} for {', '.join(names)}"
        )
        fit_one, point_hits = extra.fold(folds)
        for name in todo:
            augment = replace(AUTO_CANDIDATES[name], seed=seed)
            trial_dir = work_dir / f"fold-{folds}" / name
            t0 = time.perf_counter()
            model = fit_one(augment, trial_dir / "checkpoints", resume and holds_checkpoints(trial_dir / "checkpoints"))
            trial = _trial_record(name, augment, time.perf_counter() - t0, model)
            trials.append({**trial, "fold": folds, "p1_hits": _pack(point_hits(model))})
            with atomic_path(record_path) as tmp:
                tmp.write_text(json.dumps(trials, indent=1) + "\n")
            shutil.rmtree(trial_dir, ignore_errors=True)  # its record holds what the choice reads
            log(f"auto: {name} on share {folds + 1}: valid P@1 {trials[-1]['valid']['P@1']:.2f}")
        folds += 1
        scored = pooled_trials(trials, names, folds)
    return scored, folds
