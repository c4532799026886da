"""Second reliability round, inputs: tampered model directories refused by both readers with one
line, hostile JSON, propensity constants from ``dataset.json``, bounded memory on bombs, devices
and FIFOs, downloads that stop at the pinned size, texts with no words."""

from __future__ import annotations

import gzip
import json
import os
import subprocess
import sys
import threading

import numpy as np
import pytest

from helpers import copy_model, refused, run_cli, snapshot, write_json_lines, write_tiny_dataset


def _spec(d, change):
    spec = json.loads((d / "model.json").read_text())
    change(spec)
    (d / "model.json").write_text(json.dumps(spec))


def _resave(path, change):
    array = np.load(path)
    path.unlink()
    np.save(path, change(array))


# (damage, the problem the one line ends with; the line names the file at fault)
TAMPERED = [
    (
        lambda d: _resave(d / "tree_order.npy", lambda a: np.array([-5, *a[1:]])),
        "tree_order.npy",
        "not a permutation of the 4 labels (each label id once)",
    ),
    (
        lambda d: _resave(d / "tree_order.npy", lambda a: np.array([10**9, *a[1:]])),
        "tree_order.npy",
        "not a permutation of the 4 labels (each label id once)",
    ),
    (
        lambda d: _resave(d / "tree_order.npy", np.zeros_like),
        "tree_order.npy",
        "not a permutation of the 4 labels (each label id once)",
    ),
    (
        lambda d: _resave(d / "weights_level0" / "data.npy", lambda a: np.full_like(a, np.nan)),
        None,
        "damaged model directory (weights_level0: a weight is not a finite number)",
    ),
    (
        lambda d: _resave(d / "weights_level1" / "data.npy", lambda a: np.where(np.arange(a.size) == 0, np.inf, a)),
        None,
        "damaged model directory (weights_level1: a weight is not a finite number)",
    ),
    (
        lambda d: _resave(d / "features_idf.npy", lambda a: a[:-1]),
        "features_idf.npy",
        "expected 7 finite positive values (one a vocabulary term), got 6 float64 values",
    ),
    (lambda d: _spec(d, lambda s: s.update(n_levels=0)), "model.json", "'n_levels' must be a whole number of at least 1, got 0"),
    (
        lambda d: _spec(d, lambda s: s.update(n_levels=-1)),
        "model.json",
        "'n_levels' must be a whole number of at least 1, got -1",
    ),
    (
        lambda d: _spec(d, lambda s: s["model"].update(bias="abc")),
        "model.json",
        "'model.bias' must be a finite number >= 0, got 'abc'",
    ),
    (
        lambda d: _spec(d, lambda s: s["model"].update(bias=float("nan"))),
        "model.json",
        "'model.bias' must be a finite number >= 0, got nan",
    ),
    (
        lambda d: _spec(d, lambda s: s["model"].update(beam=0)),
        "model.json",
        "'model.beam' must be a whole number of at least 1, got 0",
    ),
    (lambda d: _spec(d, lambda s: s.update(model=[1])), "model.json", "'model' must be an object of settings"),
    (lambda d: (d / "model.json").write_text("[" * 100_000 + "]" * 100_000), "model.json", "malformed JSON (nested too deeply)"),
    (
        lambda d: _resave(d / "weights_level1" / "indptr.npy", lambda a: np.arange(10**6)),
        None,
        "damaged model directory (weights_level1: 999,999 rows of weights for the level's 4 nodes)",
    ),
    (
        lambda d: _resave(d / "weights_level1" / "indptr.npy", lambda a: a[::-1]),
        None,
        "damaged model directory (weights_level1: inconsistent weight arrays)",
    ),
    (
        lambda d: open(d / "weights_level1" / "indptr.npy", "ab").write(b"\0" * 64),
        None,
        "damaged model directory (indptr.npy holds 232 bytes but its header describes 168)",
    ),
    (
        lambda d: (os.remove(d / "tree_order.npy"), os.mkfifo(d / "tree_order.npy")),
        None,
        "damaged model directory (tree_order.npy is not a regular file)",
    ),
]


@pytest.mark.parametrize("reader", ["light", "full"])
@pytest.mark.parametrize("damage,at_fault,problem", TAMPERED)
def test_a_tampered_model_is_one_line_from_both_readers(model_dir, work, capsys, damage, at_fault, problem, reader):
    tmp, data = work
    d = copy_model(model_dir, tmp / "m")
    damage(d)
    args = ["--text", "red apple"] if reader == "light" else ["--data", str(data), "--out", str(tmp / "p.txt")]
    where = d / at_fault if at_fault else d
    refused(capsys, tmp, ["predict", str(d), *args], f"{where}: {problem}")


def test_the_numpy_only_reader_checks_weights_at_query_time(model_dir, tmp_path):
    """Levels too large to read whole when loading (check_entries) are checked as the search meets them."""
    from gandalf_xmc.engine import level_store
    from gandalf_xmc.errors import DataFormatError
    from gandalf_xmc.models.linear_reader import LinearReader

    d = copy_model(model_dir, tmp_path / "m")
    _resave(d / "weights_level0" / "data.npy", lambda a: np.full_like(a, np.nan))
    original = level_store.finite_problem
    try:
        level_store.finite_problem = lambda values, check_entries=0: False  # as for a level too large to check
        reader = LinearReader(d)
    finally:
        level_store.finite_problem = original
    with pytest.raises(DataFormatError, match="a weight is not a finite number"):
        reader.predict(["red apple"], 2)


# ---------------------------------------------------------------------------------------------- hostile JSON

DEEP = '{"uid": "0", "title": "a", "target_ind": ' + "[" * 100_000 + "]" * 100_000 + "}"
LONG_INT = '{"uid": "0", "title": "a", "target_ind": [' + "1" * 5000 + "]}"


@pytest.mark.parametrize("line", [DEEP, LONG_INT], ids=["deep", "long-int"])
def test_hostile_json_lines_in_a_split(work, capsys, line):
    tmp, data = work
    (data / "trn.json.gz").unlink()
    (data / "trn.json").write_text(line + "\n")
    code, _, err = run_cli(["stats", "--data", str(data)], capsys)
    assert code == 2 and err.count("\n") == 1 and "Traceback" not in err, err
    # orjson refuses both; an older orjson (the lowest version allowed) parses the deep one
    assert err.startswith(f"error: {data / 'trn.json'}:1: malformed JSON") or err == (
        f"error: {data / 'trn.json'}:1: label id a deeply nested list is not an integer\n"
    ), err


@pytest.mark.parametrize("name", ["dataset.json", "augment.json"])
def test_hostile_json_in_description_files(work, capsys, name):
    tmp, data = work
    (data / name).write_text("[" * 100_000 + "]" * 100_000)
    refused(capsys, tmp, ["stats", "--data", str(data)], f"{data / name}: malformed JSON (nested too deeply)")


def test_hostile_json_in_a_query_file(model_dir, tmp_path, capsys):
    q = tmp_path / "q.jsonl"
    q.write_text('{"text": ' + "[" * 100_000 + "]" * 100_000 + "}\n")
    refused(
        capsys,
        tmp_path,
        ["predict", str(model_dir), "--input", str(q)],
        f"{q}:1: a line starting with '{{' must be a JSON object: malformed JSON (nested too deeply)",
    )


@pytest.mark.parametrize(
    "value,problem",
    [
        ({"A": float("inf"), "B": 1.5}, "got A = inf, B = 1.5"),
        ({"A": 0.5, "B": float("nan")}, "got A = 0.5, B = nan"),
        ({"A": "x", "B": 1.5}, "got A = x, B = 1.5"),
    ],
)
def test_propensity_constants_from_the_dataset_card(work, capsys, value, problem):
    tmp, data = work
    (data / "dataset.json").write_text(json.dumps({"propensity": value}))
    refused(
        capsys,
        tmp,
        ["stats", "--data", str(data)],
        f"{data / 'dataset.json'}: 'propensity': propensity constants must be finite numbers with A > 0 and B >= 0, {problem}",
    )


# ---------------------------------------------------------------------------------------------- bounded memory


def test_devices_and_fifos_are_refused_at_once(work, capsys, model_dir):
    tmp, data = work
    (data / "trn.json.gz").unlink()
    (data / "trn.json.gz").symlink_to("/dev/zero")
    refused(
        capsys,
        tmp,
        ["stats", "--data", str(data)],
        f"{data / 'trn.json.gz'}: not a regular file (a device, pipe or socket): give a file",
    )
    fifo = tmp / "queries"
    os.mkfifo(fifo)
    refused(
        capsys,
        tmp,
        ["predict", str(model_dir), "--input", str(fifo)],
        f"{fifo}: not a regular file (a device, pipe or socket): give a file",
    )


def _limited(args: list[str], gib: float) -> subprocess.CompletedProcess:
    """A gandalf command in a subprocess whose address space is capped: a regression fails the
    test instead of the machine."""

    def cap():
        import resource

        limit = int(gib * 2**30)
        resource.setrlimit(resource.RLIMIT_AS, (limit, limit))

    return subprocess.run(
        [sys.executable, "-m", "gandalf_xmc.cli", *args],
        capture_output=True,
        text=True,
        preexec_fn=cap,
        timeout=300,
        env={**os.environ, "NUMBA_NUM_THREADS": "1"},
    )


def test_a_gzip_bomb_stops_at_the_line_limit_under_a_memory_cap(work):
    tmp, data = work
    (data / "trn.json.gz").unlink()
    with gzip.open(data / "trn.json.gz", "wb", compresslevel=9) as fh:  # one line of 2 GiB, ~2 MB on disk
        block = b"a" * (1 << 24)
        for _ in range(128):
            fh.write(block)
    assert (data / "trn.json.gz").stat().st_size < 10 << 20
    done = _limited(["stats", "--data", str(data)], gib=1.5)
    assert done.returncode == 2, done.stderr
    assert (
        done.stderr.strip() == f"error: {data / 'trn.json.gz'}:1: a line longer than 16,777,216 bytes: not a file of this format"
    )


def test_a_gzip_of_many_lines_stops_at_the_memory_available(work, monkeypatch, capsys):
    tmp, data = work
    from gandalf_xmc.data import formats

    monkeypatch.setattr(formats, "available_memory", lambda: 1000)
    rows = [{"uid": str(i), "title": "red apple", "target_ind": [0]} for i in range(40)]
    write_json_lines(data / "trn.json.gz", rows)
    inflated = np.cumsum([len(json.dumps(r)) + 1 for r in rows])
    first_over = int(np.argmax(inflated > 1000)) + 1
    refused(
        capsys,
        tmp,
        ["stats", "--data", str(data)],
        f"{data / 'trn.json.gz'}:{first_over}: inflates past 0.0 GiB, more than this machine's available memory",
    )


def test_standard_input_lines_are_bounded(model_dir, tmp_path):
    done = subprocess.run(
        [sys.executable, "-m", "gandalf_xmc.cli", "predict", str(model_dir), "--input", "-"],
        input=b"x" * (20 << 20),
        capture_output=True,
        timeout=300,
    )
    assert done.returncode == 2
    assert done.stderr.decode().strip() == "error: <stdin>:1: a line longer than 16,777,216 bytes: not a file of this format"


# ---------------------------------------------------------------------------------------------- downloads


class _Mirror:
    """A local HTTP server answering every path with ``body`` (bytes, or None: endless)."""

    def __init__(self, body: bytes | None, declared: int | None = None):
        import http.server

        outer = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self):
                self.send_response(200)
                if outer.declared is not None:
                    self.send_header("Content-Length", str(outer.declared))
                self.end_headers()
                try:
                    if outer.body is not None:
                        self.wfile.write(outer.body)
                        return
                    while True:
                        self.wfile.write(b"\0" * 65536)
                except (BrokenPipeError, ConnectionResetError):
                    pass

            def log_message(self, *args):
                pass

        self.body, self.declared = body, declared
        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}"

    def close(self):
        self.server.shutdown()


@pytest.mark.parametrize(
    "body,declared,message",
    [
        (None, None, "more than the pinned 1,000 bytes; stopped"),
        (b"x" * 10, 10, "the server announces 10 bytes, not the pinned 1,000"),
        (b"x" * 999, 1000, "ended after 999 of the pinned 1,000 bytes"),
        (b"x" * 1000, 1000, "SHA-256 "),
    ],
)
def test_downloads_are_hashed_as_they_stream_and_stop_at_the_pinned_size(tmp_path, monkeypatch, body, declared, message):
    from gandalf_xmc.data.builders import debian_archive
    from gandalf_xmc.errors import GandalfError

    monkeypatch.setenv("GANDALF_CACHE", str(tmp_path / "cache"))
    package = debian_archive.DebianPackage("p", "1", "pool/p_1_all.deb", "0" * 64, 1000)
    received = []
    real_urlopen = debian_archive.urllib.request.urlopen

    def counting_urlopen(*args, **kwargs):
        response = real_urlopen(*args, **kwargs)
        read = response.read
        response.read = lambda n=-1: received.append(len(chunk := read(n))) or chunk
        return response

    monkeypatch.setattr(debian_archive.urllib.request, "urlopen", counting_urlopen)
    mirror = _Mirror(body, declared)
    try:
        with pytest.raises(GandalfError, match="p_1_all.deb: " + message.replace("(", r"\(").replace(")", r"\)")):
            debian_archive.fetch(package, mirror.url)
    finally:
        mirror.close()
    assert sum(received) <= 1001  # an endless answer is read one byte past the pinned size, no further
    assert list((tmp_path / "cache" / "debs").iterdir()) == []  # nothing half-written left


def test_the_default_mirror_is_https():
    from gandalf_xmc.data.builders.debian_archive import DEFAULT_MIRROR

    assert DEFAULT_MIRROR.startswith("https://")


# ---------------------------------------------------------------------------------------------- texts


@pytest.mark.parametrize("model", ["linear", "knn"])
def test_texts_without_words_are_one_line(tmp_path, capsys, model):
    data = write_tiny_dataset(
        tmp_path / "d", train=[("!!!", [0]), ("...", [1]), ("?", [2]), ("-", [0])], labels=["*", "+", "#", "%"], test=[("!", [0])]
    )
    before = snapshot(tmp_path)
    code, _, err = run_cli(
        ["train", "--data", str(data), "--model", model, "--out", str(tmp_path / "m"), "--no-progress"], capsys
    )
    assert code == 2, err
    assert err.strip().splitlines()[-1] == (
        "error: the training and label texts hold no words (letters or digits): nothing to learn from"
    )
    assert snapshot(tmp_path) == before


def test_deep_values_that_a_parser_accepts_are_described_without_recursing(work, capsys, monkeypatch):
    """Older orjson (the lowest version allowed) parses 100,000-deep arrays; the checks after it
    must still give one line."""
    tmp, data = work
    import orjson

    from gandalf_xmc.data import formats

    deep: list = []
    for _ in range(100_000):
        deep = [deep]
    monkeypatch.setattr(
        formats,
        "orjson",
        type(
            "Lenient",
            (),
            {
                "loads": staticmethod(
                    lambda line: (
                        {"uid": "0", "title": "a", "target_ind": deep} if b"target_ind" in line.encode() else orjson.loads(line)
                    )
                ),
                "JSONDecodeError": orjson.JSONDecodeError,
            },
        ),
    )
    refused(
        capsys, tmp, ["stats", "--data", str(data)], f"{data / 'trn.json.gz'}:1: label id a deeply nested list is not an integer"
    )
