"""Synthetic LF-style datasets with the statistics of the paper's benchmarks (Table 1).

Generated, never committed. Each label gets a popularity from a Zipf law over a random order of
labels, so label frequencies have a long tail; a point draws a "topic" label by popularity and
then its labels from the topic's neighbourhood (so that labels co-occur as in real data) mixed
with popularity draws. Texts come from a Zipf-distributed vocabulary: a label's text is a few
words, a point's text mixes its topic label's words with random words.

    python benchmarks/synthetic.py --preset LF-AmazonTitles-1.3M --out /tmp/amazon13m
    python benchmarks/synthetic.py --points 100000 --labels 50000 --labels-per-point 5 --out /tmp/s
    python benchmarks/synthetic.py --preset LF-AmazonTitles-1.3M --unrelated --out /tmp/worst   # texts say nothing
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

import numpy as np
import orjson

from gandalf_xmc.data.atomic import atomic_writer
from gandalf_xmc.data.presets import PRESETS


def _zipf_weights(n: int, exponent: float, rng: np.random.Generator, offset: float = 0.0) -> np.ndarray:
    w = np.power(np.arange(1, n + 1, dtype=np.float64) + offset, -exponent)
    return (w / w.sum())[rng.permutation(n)]


def _write_json_gz(path: Path, lines) -> None:
    with atomic_writer(path) as fh:  # atomic, and a gzip header without name or time: same seed, same bytes
        buf = []
        for line in lines:
            buf.append(line)
            if len(buf) >= 50_000:
                fh.write(b"\n".join(buf) + b"\n")
                buf = []
        if buf:
            fh.write(b"\n".join(buf) + b"\n")


def generate(
    out_dir: str | Path,
    n_points: int,
    n_labels: int,
    labels_per_point: float,
    words_per_point: float,
    n_test: int | None = None,
    label_zipf: float = 1.2,
    vocab_size: int = 100_000,
    neighbourhood: int = 64,
    seed: int = 0,
    unrelated: bool = False,
) -> dict:
    """Write ``trn.json.gz``, ``tst.json.gz``, ``lbl.json.gz`` into ``out_dir``; return their statistics.
    ``unrelated``: a point's text is Zipf words alone, none drawn from its labels' texts (the worst
    case: nothing in a text predicts its labels, so no weight is pruned for being useless)."""
    out = Path(out_dir)
    out.mkdir(parents=True, exist_ok=True)
    rng = np.random.default_rng(seed)
    n_test = n_test if n_test is not None else min(n_points // 3, 100_000)
    # a Zipf-Mandelbrot law: the offset keeps the very head from dominating every point
    popularity = _zipf_weights(n_labels, label_zipf, rng, offset=50.0)
    by_rank = np.argsort(-popularity, kind="stable")  # label ids from most to least popular
    rank_of = np.empty(n_labels, dtype=np.int64)
    rank_of[by_rank] = np.arange(n_labels)
    word_p = _zipf_weights(vocab_size, 1.0, rng)
    vocab = np.array([f"w{i}" for i in range(vocab_size)])
    label_len = np.maximum(1, rng.poisson(words_per_point - 1, size=n_labels) + 1)
    label_words = rng.choice(vocab_size, size=int(label_len.sum()), p=word_p)
    label_off = np.concatenate([[0], np.cumsum(label_len)])
    label_texts = [" ".join(vocab[label_words[label_off[j] : label_off[j + 1]]]) for j in range(n_labels)]
    _write_json_gz(out / "lbl.json.gz", (orjson.dumps({"uid": f"L{j}", "title": t}) for j, t in enumerate(label_texts)))

    def points(n: int, prefix: str):
        block = 100_000
        for start in range(0, n, block):
            m = min(block, n - start)
            sizes = np.maximum(1, rng.poisson(labels_per_point - 1, size=m) + 1)
            topics = rng.choice(n_labels, size=m, p=popularity)
            total = int(sizes.sum())
            owner = np.repeat(np.arange(m), sizes)
            # half the labels near the topic in popularity order (co-occurrence structure that keeps
            # the Zipf tail), half by popularity
            near_rank = np.abs(rank_of[topics[owner]] + rng.integers(-neighbourhood, neighbourhood + 1, size=total))
            near = by_rank[np.minimum(near_rank, n_labels - 1)]
            popular = rng.choice(n_labels, size=total, p=popularity)
            labels = np.where(rng.random(total) < 0.5, near, popular)
            labels[np.concatenate([[0], np.cumsum(sizes)[:-1]])] = topics  # the topic itself
            offs = np.concatenate([[0], np.cumsum(sizes)])
            n_words = np.maximum(1, rng.poisson(words_per_point if unrelated else words_per_point / 2, size=m))
            extra = rng.choice(vocab_size, size=int(n_words.sum()), p=word_p)
            w_off = np.concatenate([[0], np.cumsum(n_words)])
            for i in range(m):
                lab = np.unique(labels[offs[i] : offs[i + 1]])
                t = topics[i]
                words = (
                    []
                    if unrelated
                    else list(vocab[label_words[label_off[t] : label_off[t + 1]]][: max(1, int(words_per_point) // 2)])
                )
                words += list(vocab[extra[w_off[i] : w_off[i + 1]]])
                yield orjson.dumps({"uid": f"{prefix}{start + i}", "title": " ".join(words), "target_ind": lab.tolist()})

    _write_json_gz(out / "trn.json.gz", points(n_points, "T"))
    _write_json_gz(out / "tst.json.gz", points(n_test, "S"))
    return {
        "n_points": n_points,
        "n_test": n_test,
        "n_labels": n_labels,
        "labels_per_point": labels_per_point,
        "words_per_point": words_per_point,
        "label_zipf": label_zipf,
        "seed": seed,
        "unrelated": unrelated,
    }


def preset_arguments(name: str) -> dict:
    """Generator arguments that match a paper dataset's Table 1 statistics."""
    p = PRESETS[name]
    return {
        "n_points": p.n_train,
        "n_labels": p.n_labels,
        "labels_per_point": p.avg_labels_per_point,
        "words_per_point": p.avg_words_per_point,
    }


def main(argv: list[str] | None = None) -> None:
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", required=True, type=Path)
    ap.add_argument("--preset", choices=sorted(PRESETS))
    ap.add_argument("--points", type=int)
    ap.add_argument("--labels", type=int)
    ap.add_argument("--labels-per-point", type=float)
    ap.add_argument("--words-per-point", type=float, default=7.0)
    ap.add_argument("--scale", type=float, default=1.0, help="Multiply points and labels (for smaller versions of a preset).")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--unrelated", action="store_true", help="Texts of random words unrelated to the labels (a worst case).")
    args = ap.parse_args(argv)
    kw = preset_arguments(args.preset) if args.preset else {}
    for key, value in (("n_points", args.points), ("n_labels", args.labels), ("labels_per_point", args.labels_per_point)):
        if value is not None:
            kw[key] = value
    kw.setdefault("words_per_point", args.words_per_point)
    if not {"n_points", "n_labels", "labels_per_point"} <= kw.keys():
        ap.error("give --preset or --points, --labels and --labels-per-point")
    kw["n_points"] = int(kw["n_points"] * args.scale)
    kw["n_labels"] = int(kw["n_labels"] * args.scale)
    t0 = time.perf_counter()
    info = generate(args.out, seed=args.seed, unrelated=args.unrelated, **kw)
    print(f"wrote {args.out} in {time.perf_counter() - t0:.0f} s: {info}", file=sys.stderr)


if __name__ == "__main__":
    main()
