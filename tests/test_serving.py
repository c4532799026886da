"""Serving a model: ranked labels from Python, a directory saved from Python read by the CLI, the
HTTP server over localhost (answers and 4xx errors), and predict --input."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import time
import urllib.error
import urllib.request

import numpy as np
import pytest

from gandalf_xmc.data import load_dataset
from gandalf_xmc.models.linear import LinearConfig, XRLinear

from helpers import run_cli, write_tiny_dataset


@pytest.fixture
def saved_model(tiny_dir, tmp_path):
    ds = load_dataset(tiny_dir)
    model = XRLinear(LinearConfig(branching=2, leaf_size=2, threads=1))
    model.set_labels(ds.label_texts, ds.label_uids)
    model.fit(ds.train.texts, ds.train.Y, ds.label_texts, progress=False)
    model.save(tmp_path / "m")
    return tmp_path / "m", model


def test_predict_labels_are_ranked_with_ids_and_texts(saved_model):
    _, model = saved_model
    ranked = model.predict_labels(["fresh red apple", "apple pie"], k=3)
    assert len(ranked) == 2 and all(len(r) == 3 for r in ranked)
    for r in ranked:
        scores = [x["score"] for x in r]
        assert scores == sorted(scores, reverse=True)
        assert all(x["id"] in ("L0", "L1", "L2", "L3") for x in r)
        assert all(x["text"] == model.label_texts[int(x["id"][1:])] for x in r)


def test_a_model_saved_from_python_is_read_by_the_cli(saved_model, capsys):
    directory, model = saved_model
    code, out, err = run_cli(["predict", str(directory), "--text", "fresh red apple", "-k", "2", "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    assert got["labels"] == model.predict_labels(["fresh red apple"], k=2)[0]


def test_predict_input_file_writes_ranked_json_lines(saved_model, tmp_path, capsys):
    directory, model = saved_model
    queries = tmp_path / "q.txt"
    queries.write_text('red apple juice\n{"title": "apple pie recipe"}\nwhale [paperback] edition\n')
    code, out, err = run_cli(
        ["predict", str(directory), "--input", str(queries), "--out", str(tmp_path / "o.jsonl"), "-k", "2"], capsys
    )
    assert code == 0, err
    rows = [json.loads(line) for line in (tmp_path / "o.jsonl").read_text().splitlines()]
    assert [r["text"] for r in rows] == ["red apple juice", "apple pie recipe", "whale [paperback] edition"]
    assert [r["labels"] for r in rows] == model.predict_labels([r["text"] for r in rows], k=2)


def test_markup_in_queries_and_labels_is_printed_as_text(tiny_dir, tmp_path, capsys):
    from helpers import write_tiny_dataset

    data = write_tiny_dataset(tmp_path / "d", labels=["red apple [/x]", "green [b]apple[/b]", "apple pie", "blue whale"])
    code, _, err = run_cli(["train", "--data", str(data), "--out", str(tmp_path / "m")], capsys)
    assert code == 0, err
    code, out, err = run_cli(["predict", str(tmp_path / "m"), "--text", "python [/x] red apple", "-k", "4"], capsys)
    assert code == 0, err
    assert "[/x]" in out and "red apple [/x]" in out and "[b]apple[/b]" in out


def _start_server(directory, *extra):
    proc = subprocess.Popen(
        [sys.executable, "-m", "gandalf_xmc.cli", "serve", str(directory), "--port", "0", *extra],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.time() + 120
    lines = []
    while time.time() < deadline:
        line = proc.stderr.readline()
        lines.append(line)
        m = re.search(r"running on http://127\.0\.0\.1:(\d+)", line)
        if m:
            return proc, f"http://127.0.0.1:{m.group(1)}"
        if proc.poll() is not None:
            break
    proc.kill()
    raise AssertionError("server did not start: " + "".join(lines))


def _call(url, body=None, method=None):
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    req = urllib.request.Request(
        url, data=data, method=method or ("POST" if data is not None else "GET"), headers={"Content-Type": "application/json"}
    )
    try:
        with urllib.request.urlopen(req, timeout=30) as resp:
            return resp.status, json.loads(resp.read())
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read())


@pytest.mark.serve
def test_server_answers_over_http(saved_model):
    directory, model = saved_model
    proc, base = _start_server(directory, "--max-batch", "3", "--max-k", "4")
    try:
        assert _call(f"{base}/health") == (200, {"status": "ok", "model": "linear", "labels": 4})
        status, got = _call(f"{base}/predict", {"text": "fresh red apple", "k": 2})
        assert status == 200 and got["labels"] == model.predict_labels(["fresh red apple"], k=2)[0]
        status, got = _call(f"{base}/predict", {"texts": ["apple pie", "whale"]})
        assert status == 200 and got["results"] == model.predict_labels(["apple pie", "whale"], k=4)
        assert _call(f"{base}/predict", b"{not json")[0] == 400
        assert _call(f"{base}/predict", {"text": 3})[0] == 400
        assert _call(f"{base}/predict", {"text": "a", "texts": ["b"]})[0] == 400
        assert _call(f"{base}/predict", {"text": "a", "bogus": 1})[0] == 400
        assert _call(f"{base}/predict", {"text": "a", "k": 0}) == (422, {"error": "k must be an integer from 1 to 4"})
        assert _call(f"{base}/predict", {"text": "a", "k": 5})[0] == 422
        assert _call(f"{base}/predict", {"texts": ["a"] * 4})[0] == 413
        # a body declared over the limit is refused from its headers, before it is sent
        import http.client

        conn = http.client.HTTPConnection(base.removeprefix("http://"), timeout=30)
        conn.putrequest("POST", "/predict")
        conn.putheader("Content-Type", "application/json")
        conn.putheader("Content-Length", str(2 << 20))
        conn.endheaders()
        resp = conn.getresponse()
        assert resp.status == 413 and "over" in json.loads(resp.read())["error"]
        conn.close()
        assert _call(f"{base}/nothing")[0] == 404
        assert _call(f"{base}/predict")[0] == 405
    finally:
        proc.terminate()
        proc.wait(timeout=30)


@pytest.fixture
def damaged_layout_model(spilled_model):
    """A spilled model whose leaf level's search layout is then damaged: every entry names a child
    its parent does not have."""
    import numpy as np

    leaves = max(spilled_model.glob("weights_level*"), key=lambda p: int(p.name.removeprefix("weights_level")))
    child = np.load(leaves / "chunk_child.npy")
    child[:] = 250
    (leaves / "chunk_child.npy").unlink()
    np.save(leaves / "chunk_child.npy", child)
    return spilled_model, leaves


@pytest.mark.serve
def test_a_damaged_search_layout_stops_the_server_before_it_listens(damaged_layout_model, capsys):
    directory, leaves = damaged_layout_model
    code, _, err = run_cli(["serve", str(directory), "--port", "0"], capsys)
    assert code == 2 and err.strip() == f"error: {leaves}: the search layout is damaged (an entry out of its bounds)"


@pytest.mark.serve
def test_a_request_that_meets_a_damaged_layout_gets_a_500_with_the_reason(damaged_layout_model):
    """Driven through the app itself (an ASGI call, no network), as a layout damaged after the
    server's warm-up would be met."""
    import asyncio

    from gandalf_xmc.predictor import load_predictor
    from gandalf_xmc.serve import create_app

    directory, leaves = damaged_layout_model
    app = create_app(load_predictor(directory), 8, 5)
    body = json.dumps({"text": "fresh red apple", "k": 2}).encode()
    sent = []

    async def receive():
        return {"type": "http.request", "body": body, "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/predict",
        "raw_path": b"/predict",
        "root_path": "",
        "query_string": b"",
        "server": ("test", 80),
        "client": ("test", 1),
        "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())],
    }
    asyncio.run(app(scope, receive, send))
    assert sent[0]["status"] == 500
    assert json.loads(b"".join(m.get("body", b"") for m in sent[1:])) == {
        "error": f"{leaves}: the search layout is damaged (an entry out of its bounds)"
    }


def test_an_in_catalogue_query_leaves_its_own_label_out(saved_model, tmp_path, capsys):
    directory, model = saved_model
    plain = model.predict_labels(["red apple"], k=4)[0]
    own = plain[0]["id"]  # the query is that item: it must not be its own answer
    expected = [r for r in plain if r["id"] != own][:2]
    assert model.predict_labels(["red apple"], k=2, uids=[own])[0] == expected
    assert model.predict_labels(["red apple"], k=2, uids=["not-a-label"])[0] == plain[:2]
    assert model.predict_labels(["red apple", "red apple"], k=2, uids=[None, own]) == [plain[:2], expected]
    code, out, err = run_cli(["predict", str(directory), "--text", "red apple", "--uid", own, "-k", "2", "--json"], capsys)
    assert code == 0, err
    assert json.loads(out) == {"text": "red apple", "labels": expected}
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"uid": own, "title": "red apple"}) + "\n" + json.dumps({"title": "red apple"}) + "\n")
    code, out, err = run_cli(["predict", str(directory), "--input", str(queries), "-k", "2"], capsys)
    assert code == 0, err
    assert [json.loads(line) for line in out.splitlines()] == [
        {"uid": own, "title": "red apple", "text": "red apple", "labels": expected},
        {"title": "red apple", "text": "red apple", "labels": plain[:2]},
    ]


@pytest.mark.serve
def test_the_server_leaves_an_in_catalogue_querys_own_label_out(saved_model):
    directory, model = saved_model
    plain = model.predict_labels(["red apple"], k=4)[0]
    own = plain[0]["id"]
    expected = [r for r in plain if r["id"] != own][:2]
    proc, base = _start_server(directory)
    try:
        assert _call(f"{base}/predict", {"text": "red apple", "uid": own, "k": 2}) == (200, {"labels": expected})
        assert _call(f"{base}/predict", {"texts": ["red apple"] * 2, "uids": [own, None], "k": 2}) == (
            200,
            {"results": [expected, plain[:2]]},
        )
        assert _call(f"{base}/predict", {"texts": ["red apple"], "uids": [own, own]})[0] == 400
        assert _call(f"{base}/predict", {"text": "red apple", "uid": 3})[0] == 400
        new_item = [r for r in model.predict_labels(["red apple"], k=4)[0] if r["text"] != "red apple"][:2]
        assert _call(f"{base}/predict", {"text": "red apple", "k": 2, "drop_namesakes": True}) == (200, {"labels": new_item})
        assert _call(f"{base}/predict", {"texts": ["red apple"], "k": 2, "drop_namesakes": True}) == (
            200,
            {"results": [new_item]},
        )
        assert _call(f"{base}/predict", {"text": "red apple", "drop_namesakes": "yes"})[0] == 400
        # an empty or unknown query: no labels and a flag, not the labels' prior
        assert _call(f"{base}/predict", {"text": "", "k": 2}) == (200, {"labels": [], "out_of_vocabulary": True})
        code, answer = _call(f"{base}/predict", {"texts": ["red apple", "zzz qqq", " "], "k": 2})
        assert code == 200 and answer["out_of_vocabulary"] == [1, 2] and answer["results"][1:] == [[], []]
    finally:
        proc.terminate()
        proc.wait(timeout=30)


def test_info_describes_a_model_directory(model_dir, capsys):
    spec = json.loads((model_dir / "model.json").read_text())
    training = json.loads((model_dir / "training.json").read_text())
    code, out, err = run_cli(["info", str(model_dir), "--json"], capsys)
    assert code == 0, err
    got = json.loads(out)
    from gandalf_xmc import __version__

    assert got["kind"] == "linear" and got["labels"] == 4 and got["settings"] == spec["model"]
    assert got["version"] == __version__ == training["gandalf_version"]
    assert got["training"]["points"] == training["n_train"] and got["training"]["dataset"] == training["dataset"]
    files = [p for p in model_dir.rglob("*") if p.is_file()]
    assert got["files"] == len(files) and got["bytes"] == sum(p.stat().st_size for p in files)
    code, out, err = run_cli(["info", str(model_dir)], capsys)
    assert code == 0 and "linear" in out and "written by" in out


@pytest.mark.serve
def test_the_server_has_info_and_an_access_log(saved_model):
    directory, model = saved_model
    proc, base = _start_server(directory, "--max-k", "7")
    try:
        status, got = _call(f"{base}/info")
        assert status == 200 and got["kind"] == "linear" and got["labels"] == 4
        assert got["limits"] == {"max_batch": 1024, "max_k": 7, "max_body_bytes": 1 << 20}
        assert _call(f"{base}/predict", {"text": "apple"})[0] == 200
    finally:
        proc.terminate()
        _, err = proc.communicate(timeout=30)
    assert re.search(r'"POST /predict HTTP/1.1" 200', err) and re.search(r'"GET /info HTTP/1.1" 200', err), err


def test_predict_input_keeps_every_field_of_a_json_line(saved_model, tmp_path, capsys):
    directory, model = saved_model
    queries = tmp_path / "q.jsonl"
    queries.write_text(json.dumps({"uid": 7, "title": "red apple", "shop": "north", "n": [1, 2]}) + "\n" + "plain apple pie\n")
    code, out, err = run_cli(["predict", str(directory), "--input", str(queries), "-k", "1"], capsys)
    assert code == 0, err
    first, second = (json.loads(line) for line in out.splitlines())
    assert first == {
        "uid": "7",
        "title": "red apple",
        "shop": "north",
        "n": [1, 2],
        "text": "red apple",
        "labels": model.predict_labels(["red apple"], 1)[0],
    }
    assert second == {"text": "plain apple pie", "labels": model.predict_labels(["plain apple pie"], 1)[0]}


def test_a_new_items_namesakes_are_left_out(saved_model, tmp_path, capsys):
    directory, model = saved_model
    query = "  Red APPLE "  # reads as label L0's text, case and spacing aside
    plain = model.predict_labels([query], k=4)[0]
    expected = [r for r in plain if r["text"] != "red apple"][:2]
    assert len(expected) == 2 and any(r["text"] == "red apple" for r in plain[:2])  # the namesake was ranked
    assert model.predict_labels([query], k=2, drop_namesakes=True)[0] == expected
    other = model.predict_labels(["green apple juice"], k=2)
    assert len(other[0]) == 2 and model.predict_labels(["green apple juice"], k=2, drop_namesakes=True) == other
    # every label of that text goes, however many there are
    twin = XRLinear.load(directory)
    twin.set_labels(["red apple", "red apple", "apple pie", "blue whale"], model.label_uids)
    assert {r["id"] for r in twin.predict_labels([query], k=4, drop_namesakes=True)[0]} <= {"L2", "L3"}
    assert twin.namesake_pairs([query, "pie", "apple pie"]).tolist() == [[0, 0], [0, 1], [2, 2]]
    code, out, err = run_cli(["predict", str(directory), "--text", query, "-k", "2", "--json", "--drop-namesakes"], capsys)
    assert code == 0, err
    assert json.loads(out)["labels"] == expected
    queries = tmp_path / "q.txt"
    queries.write_text(query + "\n")
    code, out, err = run_cli(["predict", str(directory), "--input", str(queries), "-k", "2", "--drop-namesakes"], capsys)
    assert code == 0, err
    assert json.loads(out)["labels"] == expected


def test_a_splits_predictions_leave_out_namesakes(saved_model, tiny_dir, tmp_path, capsys):
    from gandalf_xmc.data.formats import read_sparse_text

    directory, model = saved_model
    data = write_tiny_dataset(tmp_path / "d", test=[("red apple", [1]), ("apple pie", [0, 2]), ("whale", [3])])
    code, _, err = run_cli(
        [
            "predict",
            str(directory),
            "--data",
            str(data),
            "--out",
            str(tmp_path / "p.txt"),
            "-k",
            "3",
            "--drop-namesakes",
            "--no-progress",
        ],
        capsys,
    )
    assert code == 0, err
    got = read_sparse_text(tmp_path / "p.txt").toarray()
    full = model.predict(["red apple", "apple pie", "whale"], k=4).toarray()
    for row, namesake in ((0, 0), (1, 2), (2, None)):
        kept = [j for j in np.argsort(-full[row], kind="stable") if full[row, j] > 0 and j != namesake][:3]
        assert sorted(np.flatnonzero(got[row]).tolist()) == sorted(kept)
        np.testing.assert_allclose(got[row, kept], full[row, kept], rtol=1e-5)  # the file keeps 7 digits


def test_predict_writes_each_format_for_queries_and_for_a_split(saved_model, tiny_dir, tmp_path, capsys):
    from gandalf_xmc.data.formats import read_predictions, read_sparse_text

    directory, model = saved_model
    queries = tmp_path / "q.txt"
    queries.write_text("red apple\napple pie recipe\n")
    code, out, err = run_cli(["predict", str(directory), "--input", str(queries), "--format", "txt", "-k", "2"], capsys)
    assert code == 0, err
    text_rows = tmp_path / "q-pred.txt"
    text_rows.write_text(out)
    want = model.predict(["red apple", "apple pie recipe"], k=2).toarray()
    np.testing.assert_allclose(read_sparse_text(text_rows).toarray(), want, rtol=1e-5)
    code, _, err = run_cli(
        ["predict", str(directory), "--input", str(queries), "--format", "npz", "-k", "2", "--out", str(tmp_path / "q.npz")],
        capsys,
    )
    assert code == 0, err
    np.testing.assert_allclose(read_predictions(tmp_path / "q.npz", (2, 4)).toarray(), want, rtol=1e-6)
    # a split as JSON lines: each point's uid, its text and its ranked labels
    code, _, err = run_cli(
        [
            "predict",
            str(directory),
            "--data",
            str(tiny_dir),
            "--format",
            "jsonl",
            "-k",
            "2",
            "--out",
            str(tmp_path / "split.jsonl"),
        ],
        capsys,
    )
    assert code == 0, err
    ds = load_dataset(tiny_dir)
    lines = [json.loads(line) for line in (tmp_path / "split.jsonl").read_text().splitlines()]
    assert [line["uid"] for line in lines] == ds.test.uids
    assert [line["labels"] for line in lines] == model.predict_labels(ds.test.texts, 2, ds.test.uids)
    code, _, err = run_cli(["predict", str(directory), "--input", str(queries), "--format", "npz"], capsys)
    assert code == 2 and "give --out FILE" in err
