"""Our linear model beside PECOS XR-Linear and napkinXC PLT, in one run, on the same files, the
same TF-IDF features and the same metrics: one table per dataset.

    python benchmarks/peers.py                              # every suite dataset, its test split
    python benchmarks/peers.py --split valid --seeds 0 1 2  # validation splits (what tuning looks at)
    python benchmarks/peers.py --datasets jargon --training none gandalf
    python benchmarks/peers.py --split valid --training none --tools gandalf pecos pecos-lr napkinxc napkinxc-l2

The peers pin numpy < 2, so they live in their own virtual environment, made on first use in
``$GANDALF_CACHE/peers-venv`` (libpecos without its deep-learning dependencies, napkinxc). Each tool
runs as its own processes, reading the same dataset directory:

``--tools`` may add ``gandalf-knn``, our knn model (``gandalf train --model knn``), and the
peers' other losses.

* training: the whole process is timed from outside (start-up, imports, reading, TF-IDF, training),
  ``--repeats`` times with the tools taking turns, and the median kept (a one-second process varies
  by a third from run to run); ``train s`` is the part after the features, timed inside. Our
  package is byte-compiled first, as pip leaves an installed package (the peers' are);
* prediction: a second process loads the model and the queries; ``q/s`` times the prediction of
  every query (top 10) inside it.

TF-IDF for the peers is scikit-learn's vectorizer with our settings (word uni- and bi-grams,
sublinear tf, n-grams of at least two texts, fitted on training and label texts; beside them the
character 3-5-grams within word boundaries that our model uses on a corpus of its size, each block
l2-normalised, then the row), so every tool learns from the same features; ``--peer-features
words`` gives the peers words alone, as they are usually run.
``--training gandalf`` trains on the directory ``gandalf augment`` writes (the paper's Gandalf,
delta 0.1): PECOS gets the soft targets as its relevance matrix R (and their support as Y);
napkinXC has no soft targets and gets every target as a positive. Scores are ours
(:func:`gandalf_xmc.metrics.evaluate`, filter pairs removed). Writes ``benchmarks/results/peers-<split>.json``.
"""

from __future__ import annotations

import argparse
import compileall
import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import scipy.sparse as sp

HERE = Path(__file__).resolve().parent
PEER_PACKAGES = ["numpy>=1.26,<2", "scipy>=1.10,<1.14", "scikit-learn>=1.3", "napkinxc==0.7.2"]
PECOS = "libpecos==1.2.8"  # without its dependencies: XR-Linear needs only numpy, scipy and scikit-learn
METRICS = ("P@1", "P@5", "PSP@1", "PSP@5")
# the peers with their other loss: PECOS with the logistic loss (its l3-hinge scores kept), napkinXC with the squared hinge
TOOLS = ("gandalf", "pecos", "napkinxc", "pecos-lr", "napkinxc-l2", "gandalf-knn")
OURS = {"gandalf": "linear", "gandalf-knn": "knn"}  # our tools: the model `gandalf train --model` trains

PEER_CHILD = r"""
import gzip, json, sys, time
import numpy as np, scipy.sparse as sp
from sklearn.feature_extraction.text import TfidfVectorizer
from sklearn.preprocessing import normalize
tool, data, work, stage, chars = sys.argv[1:6]
chars = None if chars == "none" else tuple(int(n) for n in chars.split(","))

def read(path):
    rows = [json.loads(line) for line in gzip.open(path, "rt", encoding="utf-8")]
    return [r["title"] for r in rows], rows

def vectorizers(spec=None):
    words = TfidfVectorizer(ngram_range=(1, 2), sublinear_tf=True, token_pattern=r"(?u)\b\w+\b", dtype=np.float32,
                            min_df=2, vocabulary=None if spec is None else {t: i for i, t in enumerate(spec["vocabulary"])})
    if chars is None:
        return [words]
    return [words, TfidfVectorizer(analyzer="char_wb", ngram_range=chars, sublinear_tf=True, dtype=np.float32, min_df=2,
                                   vocabulary=None if spec is None else {t: i for i, t in enumerate(spec["char_vocabulary"])})]

def features(vecs, texts):
    X = vecs[0].transform(texts)
    if len(vecs) > 1:  # each block l2-normalised, then the row, as our featurizer does
        X = normalize(sp.hstack([X, vecs[1].transform(texts)], format="csr"))
    X = sp.csr_matrix(X, dtype=np.float32)
    X.sort_indices()
    return X

if stage == "train":
    texts, rows = read(f"{data}/trn.json.gz")
    label_texts, _ = read(f"{data}/lbl.json.gz")
    L = len(label_texts)
    ind = [r["target_ind"] for r in rows]
    rel = [r.get("target_rel", [1.0] * len(r["target_ind"])) for r in rows]
    indptr = np.cumsum([0] + [len(i) for i in ind])
    R = sp.csr_matrix((np.concatenate(rel).astype(np.float32), np.concatenate(ind).astype(np.int64), indptr),
                      shape=(len(rows), L))
    vecs = [v.fit(texts + label_texts) for v in vectorizers()]
    X = features(vecs, texts)
    t0 = time.perf_counter()
    if tool.startswith("pecos"):
        from pecos.xmc import Indexer, LabelEmbeddingFactory
        from pecos.xmc.xlinear.model import XLinearModel
        Y = R.copy(); Y.data[:] = 1.0
        soft = bool((R.data != 1.0).any())
        C = Indexer.gen(LabelEmbeddingFactory.create(Y, X, method="pifa"), indexer_type="hierarchicalkmeans")
        loss = {"solver_type": "L2R_LR_DUAL"} if tool == "pecos-lr" else {}
        model = XLinearModel.train(X, Y, C=C, R=R if soft else None, **loss)
        model.save(f"{work}/model")
    else:
        from napkinxc.models import PLT
        model = PLT(f"{work}/model", threads=2, seed=0, loss="l2" if tool == "napkinxc-l2" else "log")
        model.fit(X, [r["target_ind"] for r in rows])
    train_seconds = time.perf_counter() - t0
    spec = {"vocabulary": sorted(vecs[0].vocabulary_, key=vecs[0].vocabulary_.get), "idf": vecs[0].idf_.tolist(),
            "n_labels": L}
    if chars is not None:
        spec["char_vocabulary"] = sorted(vecs[1].vocabulary_, key=vecs[1].vocabulary_.get)
        spec["char_idf"] = vecs[1].idf_.tolist()
    json.dump(spec, open(f"{work}/features.json", "w"))
    print(json.dumps({"train_seconds": train_seconds}))
else:
    spec = json.load(open(f"{work}/features.json"))
    vecs = vectorizers(spec)
    vecs[0].idf_ = np.array(spec["idf"])
    if chars is not None:
        vecs[1].idf_ = np.array(spec["char_idf"])
    texts, _ = read(f"{data}/tst.json.gz")
    if tool.startswith("pecos"):
        from pecos.xmc.xlinear.model import XLinearModel
        model = XLinearModel.load(f"{work}/model")
    else:
        from napkinxc.models import PLT
        model = PLT(f"{work}/model")
        model.load()
    X = features(vecs, texts)
    t0 = time.perf_counter()
    if tool.startswith("pecos"):
        P = model.predict(X, only_topk=10).tocsr()
    else:
        out = model.predict_proba(X, top_k=10)
        rows = [i for i, r in enumerate(out) for _ in r]
        P = sp.csr_matrix(([s for r in out for _, s in r], (rows, [l for r in out for l, _ in r])),
                          shape=(len(texts), spec["n_labels"]))
    seconds = time.perf_counter() - t0
    sp.save_npz(f"{work}/pred.npz", P.astype(np.float32))
    print(json.dumps({"queries_per_second": len(texts) / seconds}))
"""

OUR_PREDICT = r"""
import json, sys, time
import scipy.sparse as sp
from gandalf_xmc.data import load_dataset
from gandalf_xmc.predictor import load_predictor
model = load_predictor(sys.argv[1]).model
texts = load_dataset(sys.argv[2], splits=("tst",)).test.texts
t0 = time.perf_counter()
P = model.predict(texts, k=10)
seconds = time.perf_counter() - t0
sp.save_npz(sys.argv[3], P)
print(json.dumps({"queries_per_second": len(texts) / seconds}))
"""


def peers_python() -> Path:
    """The peers' interpreter, installing their environment on first use."""
    root = Path(os.environ.get("GANDALF_CACHE") or Path.home() / ".cache" / "gandalf-xmc") / "peers-venv"
    python = root / "bin" / "python"
    stamp = root / ".installed"
    if not stamp.exists():
        print(f"making the peers' environment in {root} (once) ...", flush=True)
        subprocess.run([sys.executable, "-m", "venv", str(root)], check=True)
        pip = [str(python), "-m", "pip", "install", "--quiet", "--disable-pip-version-check"]
        subprocess.run(pip + PEER_PACKAGES, check=True)
        subprocess.run(pip + ["--no-deps", PECOS], check=True)
        stamp.touch()
    return python


def timed(cmd: list[str], env: dict | None = None) -> tuple[float, dict]:
    t0 = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env)
    seconds = time.perf_counter() - t0
    if proc.returncode != 0:
        raise RuntimeError(f"{' '.join(cmd[:4])} failed:\n{proc.stderr[-3000:]}")
    lines = [line for line in proc.stdout.splitlines() if line.startswith("{")]
    return seconds, (json.loads(lines[-1]) if lines else {})


def prepare(dataset: str, split: str, seed: int, work: Path) -> Path:
    """A dataset directory whose ``trn``/``tst`` are the training part and the points scored."""
    from gandalf_xmc.data import XMCDataset, load_dataset, write_dataset
    from gandalf_xmc.workflow.pipeline import carve_validation

    sys.path.insert(0, str(HERE))
    from suite import valid_fraction

    ds = load_dataset(dataset)
    if split == "test":
        return Path(ds.path)
    rest, valid = carve_validation(ds, valid_fraction(len(ds.train)), seed)
    out = work / f"{dataset}-valid{seed}"
    write_dataset(
        XMCDataset(
            ds.name, ds.label_uids, ds.label_texts, {"trn": rest.train, "tst": valid}, propensity=ds.propensity_constants()
        ),
        out,
    )
    card = {"name": ds.name, "propensity": dict(zip("AB", ds.propensity_constants()))}
    (out / "dataset.json").write_text(json.dumps(card) + "\n")
    return out


def score(pred: sp.csr_matrix, data_dir: Path) -> tuple[dict, np.ndarray]:
    """The metrics of ``pred`` on the test split, and each scored item's top-1 hit (0/1; the same
    items for every tool, to pair their P@1)."""
    from gandalf_xmc.data import load_dataset
    from gandalf_xmc.metrics import evaluate, inverse_propensity
    from gandalf_xmc.metrics.ranking import prepare, remove_pairs

    ds = load_dataset(data_dir)
    inv = inverse_propensity(ds.original_train_Y(), *ds.propensity_constants())
    res = evaluate(pred, ds.test.Y, inv, (1, 5), ds.test.filter_pairs)
    top1 = prepare(pred, remove_pairs(sp.csr_matrix(ds.test.Y), ds.test.filter_pairs), 1, ds.test.filter_pairs).hits[:, 0]
    return {m: res[m] for m in METRICS}, top1.astype(np.float64)


def paired_gaps(rows: list[dict], hits: dict[str, np.ndarray]) -> None:
    """Each tool's P@1 minus ours (``gandalf``) over the same test items, and the paired standard
    error of that difference, added to its row (where ours ran)."""
    from gandalf_xmc.workflow.forecast import paired_gain

    if "gandalf" not in hits:
        return
    for row in rows:
        if row["tool"] != "gandalf":
            row["P@1_minus_ours"], row["P@1_minus_ours_se"] = paired_gain(hits[row["tool"]], hits["gandalf"])


def peer_chars(train_dir: Path, peer_features: str) -> str:
    """The character n-grams the peers get, as their child's argument: those our linear model uses
    on ``train_dir`` by default (``same``), or none (``words``)."""
    from gandalf_xmc.data import load_dataset
    from gandalf_xmc.models.linear import LinearConfig, used_char_ngrams

    if peer_features == "words":
        return "none"
    ds = load_dataset(train_dir, splits=("trn",))
    chars = used_char_ngrams(LinearConfig(), len(ds.train) + ds.n_labels)
    return "none" if chars is None else f"{chars[0]},{chars[1]}"


def run_dataset(
    dataset: str,
    split: str,
    seed: int,
    trainings: list[str],
    tools: list[str],
    work: Path,
    python: Path | None,
    repeats: int = 1,
    peer_features: str = "same",
) -> list[dict]:
    data = prepare(dataset, split, seed, work)
    gandalf = [sys.executable, "-m", "gandalf_xmc.cli"]
    rows = []
    for training in trainings:
        train_dir = data
        if training == "gandalf":
            train_dir = work / f"{data.name}-gandalf"
            subprocess.run(
                gandalf + ["augment", "--data", str(data), "--out", str(train_dir), "--force"], check=True, capture_output=True
            )
        commands = {}
        chars = peer_chars(train_dir, peer_features)
        for tool in tools:
            tool_dir = work / f"{data.name}-{training}-{tool}"
            tool_dir.mkdir(parents=True, exist_ok=True)
            if tool in OURS:
                commands[tool] = gandalf + [
                    "train",
                    "--model",
                    OURS[tool],
                    "--data",
                    str(train_dir),
                    "--out",
                    str(tool_dir / "model"),
                    "--valid-fraction",
                    "0",
                    "--no-progress",
                    "--force",
                ]
            else:
                commands[tool] = [str(python), "-c", PEER_CHILD, tool, str(train_dir), str(tool_dir), "train", chars]
        # the tools take turns within each repeat, so a slow spell of the machine falls on all of them
        walls = {tool: [] for tool in tools}
        inners = {tool: [] for tool in tools}
        for _ in range(repeats):
            for tool in tools:
                wall, inner = timed(commands[tool])
                walls[tool].append(wall)
                inners[tool].append(inner)
        hits: dict[str, np.ndarray] = {}
        these: list[dict] = []
        for tool in tools:
            tool_dir = work / f"{data.name}-{training}-{tool}"
            if tool in OURS:
                model_dir = tool_dir / "model"
                spec = json.loads((model_dir / "model.json").read_text())
                train_seconds = [spec["result"]["seconds"]]  # the last training's: its model.json is the one kept
                _, pred_info = timed([sys.executable, "-c", OUR_PREDICT, str(model_dir), str(data), str(tool_dir / "pred.npz")])
            else:
                train_seconds = [inner["train_seconds"] for inner in inners[tool]]
                _, pred_info = timed([str(python), "-c", PEER_CHILD, tool, str(data), str(tool_dir), "predict", chars])
            metrics, hits[tool] = score(sp.load_npz(tool_dir / "pred.npz").tocsr(), data)
            row = {
                "dataset": dataset,
                "split": split,
                "seed": seed,
                "training": training,
                "tool": tool,
                "peer_features": "words" if chars == "none" else f"words and characters {chars}",
                "process_seconds": float(np.median(walls[tool])),
                "process_seconds_all": walls[tool],
                "train_seconds": float(np.median(train_seconds)),
                **pred_info,
                **metrics,
            }
            these.append(row)
        paired_gaps(these, hits)
        for row in these:
            print(json.dumps({k: round(v, 3) if isinstance(v, float) else v for k, v in row.items()}), flush=True)
        rows += these
    return rows


def table(rows: list[dict]) -> str:
    out = []
    for dataset in dict.fromkeys(r["dataset"] for r in rows):
        sub = [r for r in rows if r["dataset"] == dataset]
        out.append(f"\n{dataset} ({sub[0]['split']} split{'s' if len({r['seed'] for r in sub}) > 1 else ''})\n")
        out.append("| training | tool | process s | train s | q/s | " + " | ".join(METRICS) + " | P@1 - ours (2 SE) |")
        out.append("|" + " --- |" * (len(METRICS) + 6))
        for training in dict.fromkeys(r["training"] for r in sub):
            ours = [r for r in sub if r["training"] == training and r["tool"] == "gandalf"]
            for tool in dict.fromkeys(r["tool"] for r in sub):
                rs = [r for r in sub if r["training"] == training and r["tool"] == tool]
                if not rs:
                    continue

                def cell(key: str, rs=rs) -> float:
                    return float(np.mean([r[key] for r in rs]))

                ratio = (
                    f" ({cell('process_seconds') / np.mean([r['process_seconds'] for r in ours]):.2f}x ours)"
                    if ours and tool != "gandalf"
                    else ""
                )
                gap = ""
                if all("P@1_minus_ours" in r for r in rs):  # two standard errors of the mean over seeds
                    se = 2 * np.sqrt(np.sum([r["P@1_minus_ours_se"] ** 2 for r in rs])) / len(rs)
                    gap = f"{cell('P@1_minus_ours'):+.2f} ({se:.2f})"
                out.append(
                    f"| {training} | {tool} | {cell('process_seconds'):.1f}{ratio} | {cell('train_seconds'):.1f} | "
                    f"{cell('queries_per_second'):,.0f} | " + " | ".join(f"{cell(m):.2f}" for m in METRICS) + f" | {gap} |"
                )
    return "\n".join(out)


def main() -> None:
    from gandalf_xmc.data.suite import SUITE, build, is_available

    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--datasets", nargs="+", default=[d.name for d in SUITE])
    ap.add_argument("--split", choices=("valid", "test"), default="test")
    ap.add_argument("--seeds", nargs="+", type=int, default=[0], help="validation splits (with --split valid)")
    ap.add_argument("--training", nargs="+", default=["none", "gandalf"], choices=("none", "gandalf"))
    ap.add_argument("--tools", nargs="+", default=["gandalf", "pecos", "napkinxc"], choices=TOOLS)
    ap.add_argument(
        "--repeats", type=int, default=3, help="trainings of each tool (taking turns); a process time is their median"
    )
    ap.add_argument(
        "--peer-features",
        choices=("same", "words"),
        default="same",
        help="the peers' TF-IDF: the features our linear model uses (words, and character n-grams where it "
        "uses them), or words alone",
    )
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()
    python = peers_python() if set(args.tools) - set(OURS) else None
    import gandalf_xmc

    compileall.compile_dir(Path(gandalf_xmc.__file__).parent, quiet=1)  # an editable install is not compiled
    rows = []
    with tempfile.TemporaryDirectory(prefix="gandalf-peers-") as tmp:
        for dataset in args.datasets:
            if not is_available(dataset):
                build(dataset)
            for seed in args.seeds if args.split == "valid" else [0]:
                rows += run_dataset(
                    dataset, args.split, seed, args.training, args.tools, Path(tmp), python, args.repeats, args.peer_features
                )
    print(table(rows))
    out = args.out or HERE / "results" / f"peers-{args.split}.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(json.dumps(rows, indent=1) + "\n")


if __name__ == "__main__":
    main()
