"""Second reliability round, the server: a real ``gandalf serve`` on localhost that survives its
model's files being truncated in place, closes slow clients, caps connections and bodies, answers
hostile JSON with 400, logs a client that leaves mid-body in one line, and refuses a port in use."""

from __future__ import annotations

import json
import re
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest

from helpers import run_cli

pytestmark = pytest.mark.serve


class Server:
    def __init__(self, directory, *extra):
        self.proc = subprocess.Popen(
            [sys.executable, "-m", "gandalf_xmc.cli", "serve", str(directory), "--port", "0", *extra],
            stderr=subprocess.PIPE,
            stdout=subprocess.DEVNULL,
            text=True,
        )
        self.lines: list[str] = []
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.proc.stderr.readline()
            self.lines.append(line)
            m = re.search(r"running on http://127\.0\.0\.1:(\d+)", line)
            if m:
                self.port = int(m.group(1))
                self.url = f"http://127.0.0.1:{self.port}"
                return
            if self.proc.poll() is not None:
                break
        self.proc.kill()
        raise AssertionError("server did not start: " + "".join(self.lines))

    def call(self, body=None, path="/predict"):
        data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
        req = urllib.request.Request(self.url + path, data=data, method="POST" if data is not None else "GET")
        try:
            with urllib.request.urlopen(req, timeout=30) as resp:
                return resp.status, json.loads(resp.read())
        except urllib.error.HTTPError as err:
            raw = err.read()
            try:
                return err.code, json.loads(raw)
            except ValueError:  # uvicorn's own plain-text answers (503)
                return err.code, raw.decode()

    def stop(self) -> str:
        self.proc.terminate()
        _, err = self.proc.communicate(timeout=30)
        return "".join(self.lines) + err


def _truncate_every_weight_file(directory):
    for path in directory.glob("weights_level*/*.npy"):
        with open(path, "w"):  # what `cp -r new/* MODEL/` does to a file it copies over: truncated in place
            pass


def test_a_served_model_truncated_in_place_does_not_kill_the_server(spilled_model):
    server = Server(spilled_model)
    try:
        status, before = server.call({"text": "fresh red apple", "k": 2})
        assert status == 200
        _truncate_every_weight_file(spilled_model)
        assert server.call({"text": "fresh red apple", "k": 2}) == (200, before)  # answered from what it loaded
        assert server.proc.poll() is None
    finally:
        log = server.stop()
    assert "Traceback" not in log


def test_a_mapping_server_fails_the_request_not_the_process(spilled_model):
    server = Server(spilled_model, "--weights", "mapped")
    try:
        assert server.call({"text": "fresh red apple", "k": 2})[0] == 200
        _truncate_every_weight_file(spilled_model)
        status, answer = server.call({"text": "fresh red apple", "k": 2})
        assert status == 500 and "changed in place while the server maps it" in answer["error"]
        assert server.call(path="/health")[0] == 200 and server.proc.poll() is None
    finally:
        log = server.stop()
    assert "mapped from files: replace this model by renaming" in log
    assert re.search(r"ERROR: .*request failed: .*changed in place", log) and "Traceback" not in log


def test_slow_clients_are_closed_and_connections_capped(spilled_model):
    server = Server(spilled_model, "--read-timeout", "1", "--max-connections", "3")
    try:
        slow = [socket.create_connection(("127.0.0.1", server.port)) for _ in range(3)]
        for s in slow:
            s.sendall(b"POST /predict HTTP/1.1\r\nHost: x\r\n")  # and then nothing more
        assert server.call({"text": "apple"}) == (503, "Service Unavailable")  # three open connections, a fourth request
        time.sleep(2.5)
        for s in slow:  # closed by the server after the read timeout
            s.settimeout(5)
            assert s.recv(100) == b""
            s.close()
        assert server.call({"text": "apple"})[0] == 200
    finally:
        log = server.stop()
    assert log.count("no whole request within 1 s") >= 3 and "Traceback" not in log


def test_hostile_bodies_and_half_closed_clients(spilled_model):
    server = Server(spilled_model, "--max-body-bytes", "150000")
    try:
        status, answer = server.call(b'{"text": ' + b"[" * 100_000 + b"]" * 100_000 + b"}")
        assert (status, answer) == (413, {"error": "request body over 150,000 bytes"})
        status, answer = server.call(b'{"texts": ' + b"[" * 50_000 + b"]" * 50_000 + b"}")
        assert (status, answer) == (400, {"error": "the body is not JSON: malformed JSON (nested too deeply)"})
        status, answer = server.call(b'{"text": "a", "k": ' + b"1" * 5000 + b"}")
        assert status == 400 and answer["error"].startswith("the body is not JSON: malformed JSON (Exceeds the limit")
        s = socket.create_connection(("127.0.0.1", server.port))
        s.sendall(b'POST /predict HTTP/1.1\r\nHost: x\r\nContent-Length: 100\r\n\r\n{"te')
        s.shutdown(socket.SHUT_WR)
        s.settimeout(10)
        s.recv(100)
        s.close()
        time.sleep(0.5)
        assert server.call({"text": "apple"})[0] == 200
    finally:
        log = server.stop()
    assert "client 127.0.0.1 disconnected before its request body ended" in log and "Traceback" not in log


def test_a_port_in_use_is_one_line(spilled_model, capsys):
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen(1)
    port = taken.getsockname()[1]
    try:
        code, _, err = run_cli(["serve", str(spilled_model), "--port", str(port)], capsys)
    finally:
        taken.close()
    assert code == 2 and err.strip() == f"error: cannot listen on 127.0.0.1:{port} (Address already in use)"


def test_a_level_too_large_to_check_at_load_is_checked_as_the_server_copies_it(spilled_model, monkeypatch):
    import numpy as np

    from gandalf_xmc.engine import layout_format, level_store
    from gandalf_xmc.errors import DataFormatError
    from gandalf_xmc.serve import prepare

    leaves = max(spilled_model.glob("weights_level*"), key=lambda p: int(p.name.removeprefix("weights_level")))
    value = np.load(leaves / "chunk_value.npy")
    value[0] = np.nan
    (leaves / "chunk_value.npy").unlink()
    np.save(leaves / "chunk_value.npy", value)
    original = level_store.finite_problem
    as_if_large = lambda values, check_entries=0: original(values, check_entries=0)  # noqa: E731  (nothing checked)
    monkeypatch.setattr(level_store, "finite_problem", as_if_large)
    monkeypatch.setattr(layout_format, "finite_problem", as_if_large)
    with pytest.raises(DataFormatError, match=f"^{leaves}: damaged model: a weight is not a finite number$"):
        prepare(spilled_model, "memory")


def test_the_listening_socket_turns_nagle_off():
    """asyncio sets TCP_NODELAY only on accepted sockets whose protocol says TCP: a socket made with
    protocol 0 delayed every small answer by the peer's delayed ACK (40 ms a request, measured with
    benchmarks/serve_load.py)."""
    from gandalf_xmc.serve import _listen

    sock = _listen("127.0.0.1", 0)
    try:
        assert sock.proto == socket.IPPROTO_TCP
        assert sock.getsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY) == 1
    finally:
        sock.close()
