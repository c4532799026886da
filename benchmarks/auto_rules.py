"""Replay rules by which ``--augment auto`` could choose, on suite rows (issue 35).

    python benchmarks/suite.py --split valid --models linear \\
        --augments auto none gandalf-tempered gandalf-tempered-firm identity gandalf \\
        identity-half-weight gandalf-tempered-full-weight --out rows.json
    python benchmarks/auto_rules.py rows.json [more.json ...]

An ``auto`` row carries the search's trials (``auto_trials``: each candidate's P@1 and PSP@5 on
auto's own validation carving, and its P@1 gain over none with a 90% paired bootstrap interval).
The rows of the fixed candidates, trained on the same training part with the same seed, give each
candidate's score on the split the suite scored (a split auto never saw). Each rule picks a
candidate from the trials alone; the table gives, per dataset and seed, its pick and that pick's
P@1 and PSP@5 on the scored split against none's.

The rules are ranked by :func:`rank`, as auto's own aim reads: fewest picks whose scored P@1 is
below none's, then the highest mean PSP@5 change, then the highest mean P@1 gain. Then each dataset is left out in turn:
the rule ranked first on the other datasets, and its result on the one left out. Writes
``benchmarks/results/auto-rules.json``.
"""

from __future__ import annotations

import argparse
import json
from collections.abc import Callable
from pathlib import Path

import numpy as np

from gandalf_xmc.workflow.auto import choose

HERE = Path(__file__).resolve().parent
TOLERANCE = 0.2  # the P@1 loss auto's rule allowed until 2026-11-27 (now 0: "gain-nonnegative")
Z50_OVER_Z90 = 0.6745 / 1.6449  # a 50% interval's half-width from a 90% one's, for a normal spread


def _as_trials(trials: dict) -> list[dict]:
    return [{"name": n, "valid": {"P@1": t["P@1"], "PSP@5": t["PSP@5"]}} for n, t in trials.items()]


def _best_psp(trials: dict, admissible: Callable[[dict], bool]) -> str:
    """Auto's own pick (the best PSP@5, then P@1) among none and the trials ``admissible`` admits."""
    kept = {n: t for n, t in trials.items() if n == "none" or admissible(t)}
    return choose(_as_trials(kept), float("inf"))


def _low_end(t: dict, scale: float = 1.0) -> float:
    """The interval's lower end, its half-width scaled by ``scale`` around the gain."""
    lo, hi = t["interval"]
    return t["gain"] - scale * (hi - lo) / 2


RULES: dict[str, Callable[[dict], str]] = {
    # auto's rule until 2026-11-27: P@1 within the tolerance of none's, then the best PSP@5
    "within-tolerance": lambda trials: choose(_as_trials(trials), TOLERANCE),
    # the same, but the whole 90% interval of the P@1 gain must lie above -tolerance
    "interval-90": lambda trials: _best_psp(trials, lambda t: _low_end(t) >= -TOLERANCE),
    # the same with a 50% interval (its half-width from the 90% one's, as for a normal spread)
    "interval-50": lambda trials: _best_psp(trials, lambda t: _low_end(t, Z50_OVER_Z90) >= -TOLERANCE),
    # no loss of P@1 at all on validation (auto's rule since then)
    "gain-nonnegative": lambda trials: choose(_as_trials(trials), 0.0),
    # the best validation P@1 (ties: the earlier candidate)
    "best-p1": lambda trials: max(trials, key=lambda n: trials[n]["P@1"]),
}


def replay(rows: list[dict]) -> list[dict]:
    """One record per auto row: each rule's pick and the pick's scored P@1 and PSP@5 against none's."""
    scored = {(r["dataset"], r["model"], r["seed"], r["augment"]): r for r in rows if r["augment"] != "auto"}
    out = []
    for row in rows:
        if row["augment"] != "auto" or not row.get("auto_trials"):
            continue
        key = (row["dataset"], row["model"], row["seed"])
        trials = {n: t for n, t in row["auto_trials"].items() if (*key, n) in scored}
        if "none" not in trials:
            continue
        none = scored[(*key, "none")]
        record = {"dataset": key[0], "model": key[1], "seed": key[2], "n_valid": trials["none"].get("n_valid")}
        for rule, pick in RULES.items():
            name = pick(trials)
            chosen = scored[(*key, name)]
            record[rule] = {
                "chosen": name,
                "P@1 gain": chosen["P@1"] - none["P@1"],
                "PSP@5 ratio": chosen["PSP@5"] / none["PSP@5"] if none["PSP@5"] else float("nan"),
            }
        out.append(record)
    return out


def rank(records: list[dict], rule: str) -> tuple[int, float, float]:
    """A rule's standing on ``records`` (smaller is better): its picks below none's P@1, then its
    mean PSP@5 change and mean P@1 gain, both negated."""
    gains = np.array([r[rule]["P@1 gain"] for r in records])
    ratios = np.array([r[rule]["PSP@5 ratio"] for r in records])
    return int((gains < 0).sum()), -float(np.nanmean(ratios)), -float(gains.mean())


def left_out(records: list[dict]) -> list[dict]:
    """For each dataset: the rule ranked first on the others (ties: the earlier in ``RULES``) and
    its picks' mean P@1 gain and PSP@5 change on the one left out."""
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in records):
        others = [r for r in records if r["dataset"] != dataset]
        mine = [r for r in records if r["dataset"] == dataset]
        rule = min(RULES, key=lambda name: rank(others, name))
        out.append(
            {
                "left_out": dataset,
                "rule": rule,
                "P@1 gain": float(np.mean([r[rule]["P@1 gain"] for r in mine])),
                "PSP@5 change": float(100 * (np.nanmean([r[rule]["PSP@5 ratio"] for r in mine]) - 1)),
            }
        )
    return out


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("rows", nargs="+", type=Path, help="JSON files written by benchmarks/suite.py --out")
    ap.add_argument("--out", type=Path, default=HERE / "results" / "auto-rules.json")
    args = ap.parse_args()
    rows = [r for path in args.rows for r in json.loads(path.read_text())]
    records = replay(rows)
    print("| dataset | seed | validation points | " + " | ".join(RULES) + " |")
    print("| --- | --- | --- | " + " | ".join("---" for _ in RULES) + " |")
    for r in records:
        cells = [f"{r[rule]['chosen']} {r[rule]['P@1 gain']:+.2f} / {100 * (r[rule]['PSP@5 ratio'] - 1):+.0f}%" for rule in RULES]
        print(f"| {r['dataset']} | {r['seed']} | {r['n_valid']} | " + " | ".join(cells) + " |")
    print()
    if not records:
        raise SystemExit("no auto row with its trials and every candidate's own row")
    print("| rule | below none's P@1 | mean P@1 gain | lowest | mean PSP@5 change |")
    print("| --- | --- | --- | --- | --- |")
    for rule in sorted(RULES, key=lambda name: rank(records, name)):
        gains = np.array([r[rule]["P@1 gain"] for r in records])
        below, psp, _ = rank(records, rule)
        print(f"| {rule} | {below} of {gains.size} | {gains.mean():+.2f} | {gains.min():+.2f} | {-100 * (psp + 1):+.1f}% |")
    loo = left_out(records)
    print()
    print("| left out | rule chosen on the others | its P@1 gain there | its PSP@5 change there |")
    print("| --- | --- | --- | --- |")
    for r in loo:
        print(f"| {r['left_out']} | {r['rule']} | {r['P@1 gain']:+.2f} | {r['PSP@5 change']:+.1f}% |")
    args.out.parent.mkdir(parents=True, exist_ok=True)
    args.out.write_text(json.dumps({"records": records, "left_out": loo}, indent=1) + "\n")


if __name__ == "__main__":
    main()
