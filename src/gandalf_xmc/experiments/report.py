"""The report of ``gandalf reproduce``: markdown tables, PNG figures and ``results.json``.

Numbers are the mean +- sample standard deviation over seeds. A difference between two settings
counts only when it exceeds their seed spread: ``|mean_a - mean_b| >= std_a + std_b``; otherwise
the report says "within spread" instead of declaring a winner. With one seed there is no spread
and every difference is reported as such ("1 seed").
"""

from __future__ import annotations

import json
import statistics
from pathlib import Path
from typing import Any

import numpy as np

from ..data.atomic import atomic_path
from ..data.dataset import XMCDataset
from ..data.presets import PRESETS
from ..data.stats import dataset_stats, frequency_bins
from . import paper
from .plan import ABLATION_SETTINGS, SUBSAMPLING_PERCENT, TABLE3_SETTINGS, ReproduceConfig, Run, describe

PRECISION = ("P@1", "P@3", "P@5", "PSP@1", "PSP@3", "PSP@5")
HEADLINE = ("P@1", "PSP@5")
N_QUALITATIVE = 6


class Results:
    """Runs grouped by (model, setting), with means, spreads and comparisons."""

    def __init__(self, runs: list[dict]):
        self.groups: dict[tuple[str, str], list[dict]] = {}
        for r in sorted(runs, key=lambda r: r["seed"]):
            self.groups.setdefault((r["model"], r["setting"]), []).append(r)

    def has(self, model: str, setting: str) -> bool:
        return (model, setting) in self.groups

    def values(self, model: str, setting: str, metric: str) -> list[float]:
        return [r["metrics"][metric] for r in self.groups[(model, setting)]]

    def mean(self, model: str, setting: str, metric: str) -> float:
        return statistics.fmean(self.values(model, setting, metric))

    def std(self, model: str, setting: str, metric: str) -> float:
        v = self.values(model, setting, metric)
        return statistics.stdev(v) if len(v) > 1 else 0.0

    def n_seeds(self, model: str, setting: str) -> int:
        return len(self.groups[(model, setting)])

    def cell(self, model: str, setting: str, metric: str) -> str:
        if self.n_seeds(model, setting) == 1:
            return f"{self.mean(model, setting, metric):.2f}"
        return f"{self.mean(model, setting, metric):.2f} ± {self.std(model, setting, metric):.2f}"

    def compare(self, model: str, setting: str, base: str, metric: str) -> tuple[float, str]:
        """(difference of means, verdict) of ``setting`` against ``base``: "better", "worse",
        "within spread" or "1 seed"."""
        diff = self.mean(model, setting, metric) - self.mean(model, base, metric)
        if min(self.n_seeds(model, setting), self.n_seeds(model, base)) < 2:
            return diff, "1 seed"
        if abs(diff) < self.std(model, setting, metric) + self.std(model, base, metric):
            return diff, "within spread"
        return diff, "better" if diff > 0 else "worse"

    def marked(self, model: str, setting: str, base: str, metric: str) -> str:
        """A table cell: the value, then the difference to ``base`` with ▲/▼ (beyond spread) or ≈."""
        text = self.cell(model, setting, metric)
        if setting == base:
            return text
        diff, verdict = self.compare(model, setting, base, metric)
        sign = {"better": "▲", "worse": "▼", "within spread": "≈", "1 seed": ""}[verdict]
        return f"{text} ({diff:+.2f}{sign})"


def md_table(headers: list[str], rows: list[list[str]]) -> str:
    lines = ["| " + " | ".join(headers) + " |", "|" + "|".join(" --- " for _ in headers) + "|"]
    lines += ["| " + " | ".join(str(c) for c in row) + " |" for row in rows]
    return "\n".join(lines)


def _metric_table(
    res: Results,
    model: str,
    settings: list[str],
    base: str = "none",
    metrics: tuple[str, ...] = PRECISION,
    extra: dict | None = None,
) -> str:
    rows = []
    for s in settings:
        if not res.has(model, s):
            continue
        row = [f"{describe(s)} `{s}`"] + [res.marked(model, s, base, m) for m in metrics]
        if extra:
            row += [fn(s) for fn in extra.values()]
        rows.append(row)
    return md_table(["training data", *metrics, *(extra or {})], rows)


def _paper_table(block: dict, metrics: tuple[str, ...] = PRECISION, base: str = "none") -> str:
    rows = []
    for s, vals in block["rows"].items():
        cells = []
        for m in metrics:
            v = vals.get(m)
            if v is None:
                cells.append("-")
            elif s != base and base in block["rows"] and m in block["rows"][base]:
                cells.append(f"{v:.2f} ({v - block['rows'][base][m]:+.2f})")
            else:
                cells.append(f"{v:.2f}")
        rows.append([f"{describe(s)} `{s}`", *cells])
    return md_table(["training data", *metrics], rows)


def _transfer(res: Results, model: str, settings: list[str], paper_rows: dict, base: str = "none", prefix: str = "") -> str:
    """One line per setting: the paper's change against its baseline next to ours, and whether the
    direction transfers."""
    lines = []
    for s in settings:
        if s == base or not res.has(model, s) or not res.has(model, base) or s not in paper_rows or base not in paper_rows:
            continue
        parts, verdicts = [], []
        for m in HEADLINE:
            theirs = paper_rows[s][m] - paper_rows[base][m]
            diff, verdict = res.compare(model, s, base, m)
            parts.append(f"{m} paper {theirs:+.2f}, ours {diff:+.2f} ({verdict})")
            if verdict in ("within spread", "1 seed"):
                verdicts.append("inconclusive" if verdict == "within spread" else ("same" if diff * theirs > 0 else "opposite"))
            else:
                verdicts.append("same" if diff * theirs > 0 else "opposite")
        if all(v == "same" for v in verdicts):
            word = "transfers"
        elif any(v == "opposite" for v in verdicts):
            word = "does not transfer (" + ", ".join(m for m, v in zip(HEADLINE, verdicts) if v == "opposite") + ")"
        else:
            word = "inconclusive here (within seed spread)"
        lines.append(f"- {prefix}`{s}` against `{base}`: {'; '.join(parts)}: **{word}**.")
    return "\n".join(lines)


def _stats_section(ds: XMCDataset, name: str) -> str:
    st = dataset_stats(ds)
    rows = [
        [
            f"{name} (this run)",
            f"{st['N']:,}",
            f"{st['L']:,}",
            f"{st['APpL']:.2f}",
            f"{st['ALpP']:.2f}",
            f"{st['AWpP']:.2f}",
            f"{st.get('N_test', 0):,}",
            f"{st['labels_le5_pct']:.1f}",
        ]
    ]
    for p in PRESETS.values():
        if p.name == "debian-bookworm" or p.n_train is None:
            continue
        rows.append(
            [
                f"{p.name} (paper)",
                f"{p.n_train:,}",
                f"{p.n_labels:,}",
                f"{p.avg_points_per_label:.2f}",
                f"{p.avg_labels_per_point:.2f}",
                f"{p.avg_words_per_point:.2f}",
                "",
                "",
            ]
        )
    return md_table(["dataset", "N", "L", "APpL", "ALpP", "AWpP", "test points", "labels <= 5 positives (%)"], rows)


def _qualitative(ds: XMCDataset, runs_dir: Path, model: str, seed: int) -> tuple[str, list[dict]]:
    """Table 5: top-5 predictions without and with Gandalf for a few test points (drawn with a
    fixed seed among those whose top 5 differ), correct labels in bold."""
    a = np.load(runs_dir / f"{Run(model, 'none', seed).key}.top5.npy")
    b = np.load(runs_dir / f"{Run(model, 'gandalf', seed).key}.top5.npy")
    differ = np.flatnonzero((np.sort(a, axis=1) != np.sort(b, axis=1)).any(axis=1))
    rng = np.random.default_rng(0)
    picks: Any = np.sort(rng.choice(differ, size=min(N_QUALITATIVE, differ.size), replace=False)) if differ.size else []
    Y = ds.test.Y
    rows, records = [], []
    for i in picks:
        truth = set(Y.indices[Y.indptr[i] : Y.indptr[i + 1]].tolist())

        hits_a = int(sum(j in truth for j in a[i]))
        hits_b = int(sum(j in truth for j in b[i]))
        rows.append(
            [
                ds.test.texts[i],
                "; ".join(ds.label_texts[j] for j in sorted(truth))[:300],
                f"{_show(ds, a[i], truth)} ({hits_a}/5)",
                f"{_show(ds, b[i], truth)} ({hits_b}/5)",
            ]
        )
        records.append(
            {"point": int(i), "text": ds.test.texts[i], "truth": sorted(truth), "none": a[i].tolist(), "gandalf": b[i].tolist()}
        )
    return md_table(["test point", "true labels", "D: top 5", "G = D u Z: top 5"], rows), records


def _two_panels():
    """A figure with two side-by-side axes, drawn without a display."""
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt.subplots(1, 2, figsize=(12, 4.5))


def _show(ds: XMCDataset, top: np.ndarray, truth: set) -> str:
    return ", ".join(f"**{ds.label_texts[j]}** ✓" if j in truth else ds.label_texts[j] for j in top if j >= 0)


def _figure_bins(res: Results, model: str, freq: np.ndarray, path: Path) -> dict:
    bins = frequency_bins(freq)
    n_labels = np.bincount(bins, minlength=5)
    mean_freq = [freq[bins == b].mean() if n_labels[b] else 0.0 for b in range(5)]
    settings = [s for s in ABLATION_SETTINGS["figure2"] if res.has(model, s)]
    fig, axes = _two_panels()
    width = 0.8 / max(1, len(settings))
    out: dict[str, Any] = {}
    for ax, key, title in ((axes[0], "bins_P@5", "contribution to P@5"), (axes[1], "bins_PSP@5", "contribution to PSP@5")):
        for i, s in enumerate(settings):
            arr = np.array([r[key] for r in res.groups[(model, s)]])
            mean, std = arr.mean(0), (arr.std(0, ddof=1) if arr.shape[0] > 1 else np.zeros(5))
            ax.bar(np.arange(5) + (i - (len(settings) - 1) / 2) * width, mean, width, yerr=std, capsize=3, label=describe(s))
            out.setdefault(s, {})[key] = mean.tolist()
        ax.set_xticks(np.arange(5))
        ax.set_xticklabels([f"bin {b + 1}\n{n_labels[b]:,} labels\n{mean_freq[b]:.3g} pos. each" for b in range(5)], fontsize=8)
        ax.set_xlabel("label-frequency bin (1 = head, 5 = tail)")
        ax.set_ylabel(f"{title} (%)")
        ax.set_title(f"{model}: {title}, per bin (test)")
        ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    return out


def _figure_training(res: Results, model: str, path: Path) -> dict:
    fig, axes = _two_panels()
    out: dict[str, Any] = {}
    for s in ("none", "gandalf"):
        if not res.has(model, s):
            continue
        curves = [r for r in res.groups[(model, s)] if r["history"]]
        if not curves:
            continue
        n = min(len(r["history"]) for r in curves)
        its = np.cumsum([h["examples"] for h in curves[0]["history"][:n]]) / curves[0]["batch_size"]
        for ax, metric in zip(axes, HEADLINE):
            vals = np.array([[h[metric] for h in r["history"][:n]] for r in curves])
            ax.plot(its, vals.mean(0), marker="o", label=describe(s))
            if vals.shape[0] > 1:
                ax.fill_between(its, vals.min(0), vals.max(0), alpha=0.2)
            out.setdefault(s, {})[metric] = vals.mean(0).tolist()
            out[s]["iterations"] = its.tolist()
    for ax, metric in zip(axes, HEADLINE):
        ax.set_xlabel("training iterations (batches)")
        ax.set_ylabel(f"validation {metric} (%)")
        ax.set_title(f"{model}: validation {metric} during training")
        if out:
            ax.legend(fontsize=8)
        else:  # a legend of nothing warns; say why the panel is empty
            ax.text(0.5, 0.5, "no run recorded a training history", ha="center", transform=ax.transAxes)
    fig.tight_layout()
    _save(fig, path)
    return out


def _figure_subsampling(res: Results, model: str, path: Path) -> dict:
    fig, axes = _two_panels()
    out: dict[str, Any] = {}
    for how in ("random", "tail"):
        points = [(0, "none"), *((p, f"sub-{how}-{p}") for p in SUBSAMPLING_PERCENT), (100, "gandalf")]
        points = [(p, s) for p, s in points if res.has(model, s)]
        if not points:
            continue
        for ax, metric in zip(axes, HEADLINE):
            xs = [p for p, _ in points]
            ys = [res.mean(model, s, metric) for _, s in points]
            err = [res.std(model, s, metric) for _, s in points]
            ax.errorbar(xs, ys, yerr=err, marker="o", capsize=3, label=f"{how} labels")
            out.setdefault(how, {})[metric] = dict(zip(map(str, xs), ys))
    for ax, metric in zip(axes, HEADLINE):
        ax.set_xlabel("labels used as label points (%)")
        ax.set_ylabel(f"test {metric} (%)")
        ax.set_title(f"{model}: label subsampling, test {metric}")
        ax.set_xticks([0, *SUBSAMPLING_PERCENT, 100])
        ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)
    return out


def comparison_figure(path: Path, names: list[str], scores: list[dict], ks: tuple[int, ...], bin_labels: np.ndarray) -> None:
    """``gandalf evaluate --plot``: three panels for the prediction files compared: P@k and PSP@k at
    every cut-off, then each label-frequency bin's contribution to P@k and to PSP@k at the largest k
    (``scores[i]`` holds ``bins_P`` and ``bins_PSP``, five values each). Written atomically.

    Args:
        path: the PNG to write.
        names: one legend entry a file.
        scores: ``evaluate``'s metrics of each file (percent), with the bins' contributions.
        ks: the cut-offs.
        bin_labels: the number of labels in each bin (for the tick labels).
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    fig, axes = plt.subplots(1, 3, figsize=(16, 4.5))
    width = 0.8 / max(1, len(names))
    metrics = [f"{m}@{k}" for m in ("P", "PSP") for k in ks]
    for i, (name, sc) in enumerate(zip(names, scores)):
        offset = (i - (len(names) - 1) / 2) * width
        axes[0].bar(np.arange(len(metrics)) + offset, [sc[m] for m in metrics], width, label=name)
        for ax, key in ((axes[1], "bins_P"), (axes[2], "bins_PSP")):
            ax.bar(np.arange(5) + offset, sc[key], width, label=name)
    axes[0].set_xticks(np.arange(len(metrics)))
    axes[0].set_xticklabels(metrics)
    axes[0].set_ylabel("percent")
    axes[0].set_title("P@k and PSP@k")
    k = max(ks)
    for ax, metric in ((axes[1], f"P@{k}"), (axes[2], f"PSP@{k}")):
        ax.set_xticks(np.arange(5))
        ax.set_xticklabels([f"bin {b + 1}\n{bin_labels[b]:,} labels" for b in range(5)], fontsize=8)
        ax.set_xlabel("label-frequency bin (1 = head, 5 = tail)")
        ax.set_ylabel(f"contribution to {metric} (percent)")
        ax.set_title(f"{metric} by label-frequency bin (the bins add up to it)")
    for ax in axes:
        ax.legend(fontsize=8)
    fig.tight_layout()
    _save(fig, path)


def _save(fig, path: Path) -> None:
    import matplotlib.pyplot as plt

    with atomic_path(path) as tmp:
        fig.savefig(tmp, dpi=110, format="png")
    plt.close(fig)


def write_report(
    ds: XMCDataset, runs: list[Run], runs_dir: Path, out: Path, config: ReproduceConfig, *, source_name: str, seconds: float
) -> dict:
    """Write ``report.md``, ``fig2_bins.png``, ``fig3_training.png``, ``fig3_subsampling.png`` and
    ``results.json`` into ``out`` from the runs in ``runs_dir``; returns the results."""
    raw = [json.loads((runs_dir / f"{r.key}.json").read_text()) for r in runs]
    res = Results(raw)
    abl = config.ablation_model
    results: dict = {
        "dataset": ds.name,
        "source": source_name,
        "config": {
            "models": list(config.models),
            "ablation_model": abl,
            "seeds": list(config.seeds),
            "epochs": config.epochs,
            "quick": config.quick,
            "parallel": config.parallel,
        },
        "seconds": seconds,
        "runs": raw,
    }
    md = _preamble(ds, raw, config, source_name, seconds)
    md += ["## Table 1: dataset statistics", "", _stats_section(ds, ds.name), ""]
    results["table1"] = dataset_stats(ds)
    md += _table2(res, abl) + _table3(res, config.models) + _table4(res, abl)
    seed0 = config.seeds[0]
    if res.has(abl, "none") and res.has(abl, "gandalf"):
        table5, results["table5"] = _table5(ds, runs_dir, abl, seed0)
        md += table5
    md += _table6(res, abl) + _table7(res, abl)
    if res.has(abl, "none"):
        figures, drawn = _figures(res, abl, ds.label_frequencies(), out)
        md += figures
        results.update(drawn)
    results["summary"] = (
        {
            f"{m}/{s}": {metric: [res.mean(m, s, metric), res.std(m, s, metric)] for metric in raw[0]["metrics"]}
            for (m, s) in res.groups
        }
        if raw
        else {}
    )
    with atomic_path(out / "report.md") as tmp:
        tmp.write_text("\n".join(md) + "\n")
    with atomic_path(out / "results.json") as tmp:
        tmp.write_text(json.dumps(results, indent=1) + "\n")
    return results


def _preamble(ds: XMCDataset, raw: list[dict], config: ReproduceConfig, source_name: str, seconds: float) -> list[str]:
    """The report's title and how to read its numbers."""
    seeds = ", ".join(map(str, config.seeds))
    epochs = f"{config.epochs} epochs" if config.epochs else "each model's default epochs and early stopping"
    sample = (
        (f" (a sample of {source_name}: {len(ds.train):,} training and {len(ds.test):,} test points, `--quick`)")
        if config.quick
        else ""
    )
    return [
        f"# Gandalf: the paper's experiments on {ds.name}{sample}",
        "",
        f"Ablation model: `{config.ablation_model}` (the paper used InceptionXML). Table 3 models: "
        f"{', '.join(f'`{m}`' for m in config.models)}. Seeds: {seeds}; {epochs}. Every number is on the test "
        f"split with filter pairs removed, mean ± sample standard deviation over the seeds; the training curves "
        f"are on the validation split carved from the training points. In parentheses: the difference to the "
        f"row without augmentation, ▲/▼ when it exceeds the two rows' seed spread (|Δ| ≥ std_a + std_b), ≈ "
        f"when it does not (no winner declared). The paper's numbers are LF-AmazonTitles-131K. "
        f"{len(raw)} runs taking {sum(r['seconds'] for r in raw) / 60:.1f} minutes summed, {config.parallel} at a "
        f"time; this call took {seconds / 60:.1f} minutes (runs finished by an earlier call are reused).",
        "",
    ]


def _table2(res: Results, abl: str) -> list[str]:
    return [
        "## Table 2: training sets built from label features",
        "",
        _metric_table(
            res, abl, ABLATION_SETTINGS["table2"], extra={"points": lambda s: f"{res.groups[(abl, s)][0]['n_train']:,}"}
        ),
        "",
        f"Paper ({paper.TABLE2['model']}, {paper.DATASET}):",
        "",
        _paper_table(paper.TABLE2),
        "",
        _transfer(res, abl, ABLATION_SETTINGS["table2"], paper.TABLE2["rows"]),
        "",
    ]


def _table3(res: Results, models) -> list[str]:
    md = ["## Table 3: every model without and with Gandalf (and LabelMix)", ""]
    for m in models:
        md += [f"### `{m}`", "", _metric_table(res, m, TABLE3_SETTINGS), ""]
        if m in paper.TABLE3:
            block = paper.TABLE3[m]
            md += [
                f"Paper ({block['paper_model']}, {paper.DATASET}):",
                "",
                _paper_table(block),
                "",
                _transfer(res, m, TABLE3_SETTINGS, block["rows"]),
                "",
            ]
        else:
            md += ["The paper has no model of this family.", ""]
    return md


def _table4(res: Results, abl: str) -> list[str]:
    return [
        "## Table 4: coverage",
        "",
        _metric_table(res, abl, ABLATION_SETTINGS["table4"], metrics=("C@1", "C@3", "C@5")),
        "",
        f"Paper ({paper.TABLE4['model']} + Gandalf, {paper.DATASET}): C@1/3/5 = "
        + " / ".join(f"{v:.2f}" for v in paper.TABLE4["rows"]["gandalf"].values())
        + " (its baseline row is not legible in our copy of the paper).",
        "",
    ]


def _table5(ds: XMCDataset, runs_dir: Path, abl: str, seed0: int) -> tuple[list[str], list[dict]]:
    table5, records = _qualitative(ds, runs_dir, abl, seed0)
    md = [
        f"## Table 5: top-5 predictions of `{abl}` (seed {seed0}), without and with Gandalf",
        "",
        f"{N_QUALITATIVE} test points drawn at random (fixed seed) among those whose top 5 differ; correct "
        f"labels in bold with ✓.",
        "",
        table5,
        "",
    ]
    return md, records


def _table6(res: Results, abl: str) -> list[str]:
    return [
        "## Table 6: Gandalf against conventional augmentation",
        "",
        _metric_table(res, abl, ABLATION_SETTINGS["table6"]),
        "",
        "Synonym replacement: a point (p 0.4 a batch) has each word (p 0.3) replaced by one of its 5 nearest "
        "words by all-MiniLM-L6-v2 embedding (cosine >= 0.6). MixUp: 0.4 N points interpolating two training "
        "points' inputs (TF-IDF rows for `linear`) and targets, lam = max(u, 1-u), u ~ Beta(0.4, 0.4). "
        "Label-MixUp: 0.4 N points interpolating a point's input with one of its labels' text input "
        "(tail-skewed choice), target lam y + (1 - lam) e_label.",
        "",
        f"Paper ({paper.TABLE6['model']}, {paper.DATASET}):",
        "",
        _paper_table(paper.TABLE6),
        "",
        _transfer(res, abl, ABLATION_SETTINGS["table6"], paper.TABLE6["rows"]),
        "",
    ]


def _table7(res: Results, abl: str) -> list[str]:
    md = [
        "## Table 7: sensitivity to delta, and the random-walk graph",
        "",
        _metric_table(res, abl, ABLATION_SETTINGS["table7"]),
        "",
        f"Paper, graph ({paper.TABLE7['graph']['model']}) and delta ({paper.TABLE7['delta']['model']}), {paper.DATASET}:",
        "",
        _paper_table(paper.TABLE7["graph"]),
        "",
        _paper_table(paper.TABLE7["delta"]),
        "",
        _transfer(
            res,
            abl,
            ["gandalf", "random-walk"],
            paper.TABLE7["graph"]["rows"],
            prefix=f"graph (paper: {paper.TABLE7['graph']['model']}): ",
        ),
        _transfer(
            res,
            abl,
            ["delta-0", "gandalf", "delta-0.2"],
            paper.TABLE7["delta"]["rows"],
            prefix=f"delta (paper: {paper.TABLE7['delta']['model']}): ",
        ),
        "",
    ]
    if all(res.has(abl, s) for s in ("delta-0", "gandalf", "delta-0.2")):
        best = max(("delta-0", "gandalf", "delta-0.2"), key=lambda s: res.mean(abl, s, "P@1"))
        md += [
            f"Best delta by test P@1 here: `{best}` (the paper: 0.1, `gandalf`). Against delta 0.1: "
            + "; ".join(
                f"`{s}` P@1 {res.compare(abl, s, 'gandalf', 'P@1')[0]:+.2f} ({res.compare(abl, s, 'gandalf', 'P@1')[1]})"
                for s in ("delta-0", "delta-0.2")
            )
            + ".",
            "",
        ]
    return md


def _figures(res: Results, abl: str, freq: np.ndarray, out: Path) -> tuple[list[str], dict]:
    """Figures 2 and 3, drawn into ``out``, with their tables."""
    md: list[str] = []
    results: dict = {}
    fig2 = _figure_bins(res, abl, freq, out / "fig2_bins.png")
    rows = []
    for s in fig2:
        if s == "none":
            continue
        rows.append([describe(s)] + [f"{d:+.2f}" for d in np.subtract(fig2[s]["bins_P@5"], fig2["none"]["bins_P@5"])])
    md += [
        "## Figure 2: each label-frequency bin's contribution to P@5",
        "",
        "![bins](fig2_bins.png)",
        "",
        "Change of each bin's contribution to P@5 against D (bin 1 = head, 5 = tail):",
        "",
        md_table(["training data", "bin 1", "bin 2", "bin 3", "bin 4", "bin 5"], rows),
        "",
        f"Paper: {paper.FIGURE2}",
        "",
    ]
    results["figure2"] = fig2
    fig3a = _figure_training(res, abl, out / "fig3_training.png")
    md += [
        "## Figure 3 (a, b): validation P@1 and PSP@5 against training iterations",
        "",
        "![training](fig3_training.png)",
        "",
        f"Paper: {paper.FIGURE3_TRAINING}",
        "",
    ]
    results["figure3_training"] = fig3a
    fig3b = _figure_subsampling(res, abl, out / "fig3_subsampling.png")
    rows = []
    for how in ("random", "tail"):
        for p in SUBSAMPLING_PERCENT:
            s = f"sub-{how}-{p}"
            if res.has(abl, s):
                rows.append([f"{p}% ({how})", res.marked(abl, s, "none", "P@1"), res.marked(abl, s, "none", "PSP@5")])
    md += [
        "## Figure 3 (c, d): label subsampling",
        "",
        "![subsampling](fig3_subsampling.png)",
        "",
        "0% is D, 100% is G; tail sampling fills the budget from the tail bin towards the head.",
        "",
        md_table(["labels as points", "P@1", "PSP@5"], rows),
        "",
        f"Paper: {paper.FIGURE3_SUBSAMPLING}",
        "",
    ]
    results["figure3_subsampling"] = fig3b
    return md, results
