"""``gandalf serve``: a trained model over HTTP (Starlette on uvicorn).

* ``GET /health`` -> ``{"status": "ok", "model": kind, "labels": L}``
* ``GET /info`` -> the model's kind, settings, training data, validation metrics, size on disk and
  the server's limits (:func:`.predictor.model_info`)
* ``POST /predict`` with ``{"text": "...", "k": 5}`` -> ``{"labels": [{"id", "text", "score"}, ...]}``, or
  with ``{"texts": [...], "k": 5}`` -> ``{"results": [[...], ...]}``, labels best first. A query that is
  itself an item of the catalogue may give its own id (``"uid"``, or ``"uids"`` beside ``"texts"``):
  the label with that id is left out of its answer.

Bad requests get a 4xx status and ``{"error": "..."}``: 400 for malformed JSON or fields, 413 for
a body or batch over the limits, 422 for a ``k`` out of range. Predictions run on a worker
thread, so the event loop keeps accepting connections.

Limits against slow or greedy clients (:class:`ServeLimits`): a connection must deliver a whole
request within ``read_timeout`` seconds of opening (or of its last answer) or it is closed; past
``max_connections`` open connections a request is answered 503; bodies and batches are capped.
The weights are copied into the server's own memory when they fit (``weights="auto"``), so that
nothing done to the model directory afterwards reaches a running server; a server that maps them
checks before every request that the files were not changed in place, and answers 500 if they were.
"""

from __future__ import annotations

import logging
import os
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from .errors import DataFormatError, GandalfError
from .inputs import available_memory
from .jsonio import JSONProblem, loads
from .predictor import Predictor, load_predictor

MAX_BODY_BYTES = 1 << 20
log = logging.getLogger("gandalf.serve")


@dataclass(frozen=True)
class ServeLimits:
    """What one request and all clients together may ask of a server."""

    max_batch: int = 1024  # texts a request
    max_k: int = 100
    max_body_bytes: int = MAX_BODY_BYTES
    read_timeout: float = 10.0  # seconds for a connection to deliver a whole request
    max_connections: int = 256  # open connections before requests are answered 503


class FileGuard:
    """The size, inode and change time of the files a model maps, as loaded: :meth:`check`
    raises DataFormatError when one was changed in place (a mapped page past a truncated file's end
    would kill the process with SIGBUS; a file replaced by a rename is harmless, the old one stays
    mapped)."""

    def __init__(self, files: list[str]):
        self.files = {path: self._identity(path) for path in files}

    @staticmethod
    def _identity(path: str) -> tuple | None:
        try:
            st = os.stat(path)
        except OSError:
            return None
        return st.st_ino, st.st_size, st.st_mtime_ns

    def check(self) -> None:
        for path, identity in self.files.items():
            now = self._identity(path)
            if now is not None and now[0] == identity[0] and now != identity:
                raise DataFormatError(
                    path,
                    None,
                    "changed in place while the server maps it: restart the server "
                    "(replace a served model by renaming a new directory into place)",
                )


def create_app(
    predictor: Predictor,
    max_batch: int = 1024,
    max_k: int = 100,
    max_body_bytes: int = MAX_BODY_BYTES,
    guard: FileGuard | None = None,
    info: dict | None = None,
):
    """The ASGI application answering for ``predictor`` (``guard``: the mapped files to check
    before each prediction; ``info``: what ``GET /info`` answers, by default
    :func:`.predictor.model_info` of the predictor's directory)."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import ClientDisconnect, Request
    from starlette.responses import JSONResponse, Response
    from starlette.routing import Route

    kind = getattr(predictor.model, "kind", "model")

    def ranked(
        texts: list[str], k: int, uids: list | None = None, drop_namesakes: bool = False
    ) -> tuple[list[list[dict]], list[bool]]:
        if guard is not None:
            guard.check()
        return predictor.rank_labels(texts, k, uids, drop_namesakes)

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    if info is None:
        from .predictor import model_info

        info = model_info(predictor.directory) if predictor.directory is not None else {"kind": kind}
    info = {**info, "limits": {"max_batch": max_batch, "max_k": max_k, "max_body_bytes": max_body_bytes}}

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "model": kind, "labels": predictor.n_labels})

    async def describe(request: Request) -> JSONResponse:
        return JSONResponse(info)

    async def predict(request: Request) -> Response:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > max_body_bytes):
            return error(413, f"request body over {max_body_bytes:,} bytes")
        body = b""
        try:
            async for chunk in request.stream():
                body += chunk
                if len(body) > max_body_bytes:
                    return error(413, f"request body over {max_body_bytes:,} bytes")
        except ClientDisconnect:
            client = request.client
            log.warning("client %s disconnected before its request body ended", client.host if client else "?")
            return Response(status_code=400)  # nobody reads it
        try:
            payload = loads(body)
        except JSONProblem as exc:
            return error(400, f"the body is not JSON: {exc}")
        if not isinstance(payload, dict):
            return error(400, 'expected a JSON object: {"text": "..."} or {"texts": [...]}, optional "k"')
        unknown = set(payload) - {"text", "texts", "k", "uid", "uids", "drop_namesakes"}
        if unknown:
            return error(400, f"unknown field(s): {', '.join(sorted(unknown))}")
        k = payload.get("k", min(5, max_k))
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= max_k:
            return error(422, f"k must be an integer from 1 to {max_k}")
        if ("text" in payload) == ("texts" in payload):
            return error(400, 'give exactly one of "text" (a string) and "texts" (a list of strings)')
        drop_namesakes = payload.get("drop_namesakes", False)
        if not isinstance(drop_namesakes, bool):
            return error(400, '"drop_namesakes" must be true or false')
        if "text" in payload:
            if not isinstance(payload["text"], str):
                return error(400, '"text" must be a string')
            if "uids" in payload or not isinstance(payload.get("uid", ""), str):
                return error(400, '"uid" (the query\'s own id, a string) goes with "text", "uids" with "texts"')
            uid = payload.get("uid")
            answer, known = await run_in_threadpool(ranked, [payload["text"]], k, None if uid is None else [uid], drop_namesakes)
            return JSONResponse({"labels": answer[0], **({} if known[0] else {"out_of_vocabulary": True})})
        texts = payload["texts"]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return error(400, '"texts" must be a list of strings')
        if len(texts) > max_batch:
            return error(413, f"at most {max_batch} texts a request, got {len(texts)}")
        uids = payload.get("uids")
        if "uid" in payload or (
            uids is not None
            and not (isinstance(uids, list) and len(uids) == len(texts) and all(u is None or isinstance(u, str) for u in uids))
        ):
            return error(400, '"uids" goes with "texts": a list as long as it, of strings or null')
        results, known = await run_in_threadpool(ranked, texts, k, uids, drop_namesakes) if texts else ([], [])
        out_of_vocabulary = [i for i, knows in enumerate(known) if not knows]
        return JSONResponse({"results": results, **({"out_of_vocabulary": out_of_vocabulary} if out_of_vocabulary else {})})

    async def not_found(request: Request, exc) -> JSONResponse:
        return error(404, "no such endpoint: GET /health, GET /info, POST /predict")

    async def not_allowed(request: Request, exc) -> JSONResponse:
        return error(405, f"{request.method} is not allowed here")

    async def damaged(request: Request, exc: Exception) -> JSONResponse:
        log.error("request failed: %s", exc)  # a model file damaged where loading could not see, or changed
        return error(500, str(exc))

    return Starlette(
        routes=[
            Route("/health", health, methods=["GET"]),
            Route("/info", describe, methods=["GET"]),
            Route("/predict", predict, methods=["POST"]),
        ],
        exception_handlers={404: not_found, 405: not_allowed, DataFormatError: damaged},
    )


def _listen(host: str, port: int):
    """A listening socket, bound here so that a port in use is one clear line before anything
    starts (uvicorn would report it after "startup complete")."""
    import socket

    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    # the protocol named: asyncio turns Nagle off only on sockets that say TCP (docs/benchmarks.md, "Serving")
    sock = socket.socket(family, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        raise GandalfError(f"cannot listen on {host}:{port} ({exc.strerror or exc})") from None
    sock.listen(2048)
    sock.set_inheritable(True)
    return sock


def _timed_protocol(read_timeout: float):
    """uvicorn's h11 protocol with a deadline: a connection that has not delivered a whole request
    ``read_timeout`` seconds after it opened (or after its last answer) is closed, so slow clients
    cannot hold connections open (uvicorn's own keep-alive timer starts only after an answer)."""
    import h11
    from uvicorn.protocols.http.h11_impl import H11Protocol

    class TimedH11Protocol(H11Protocol):
        deadline = None

        def _arm(self) -> None:
            self._disarm()
            self.deadline = self.loop.call_later(read_timeout, self._too_slow)

        def _disarm(self) -> None:
            if self.deadline is not None:
                self.deadline.cancel()
                self.deadline = None

        def connection_made(self, transport) -> None:
            super().connection_made(transport)
            self._arm()

        def connection_lost(self, exc) -> None:
            self._disarm()
            super().connection_lost(exc)

        def handle_events(self) -> None:
            super().handle_events()
            if self.conn.their_state in (h11.DONE, h11.MUST_CLOSE, h11.CLOSED):
                self._disarm()  # the request is in: the model's time does not count

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing():
                self._arm()

        def _too_slow(self) -> None:
            self.deadline = None
            if not self.transport.is_closing():
                client = "%s:%d" % self.client if self.client else "a client"
                log.warning("closed the connection of %s: no whole request within %g s", client, read_timeout)
                self.transport.close()

    return TimedH11Protocol


def prepare(model_dir: str | Path, weights: str = "auto") -> tuple[Predictor, FileGuard | None]:
    """Load a model for serving: its mapped weights copied into memory (``weights`` "memory", or
    "auto" when they take at most half the memory available now) or kept mapped and read in
    ("mapped", or "auto" otherwise), with a guard on the mapped files; then a warm-up query."""
    if weights not in ("auto", "memory", "mapped"):
        raise GandalfError(f"--weights must be auto, memory or mapped, got {weights!r}")
    predictor = load_predictor(model_dir)
    started = time.perf_counter()
    files = predictor.model.mapped_files()
    size = sum(os.path.getsize(f) for f in files)
    hold = weights == "memory" or (weights == "auto" and size <= available_memory() // 2)
    if hold:
        moved = predictor.model.hold_in_memory()
        what = f"copied {moved / 2**30:.1f} GiB of weights into memory"
    else:
        moved = predictor.model.page_in()  # read them in before the first request
        what = f"read {moved / 2**30:.1f} GiB of mapped weights into the page cache"
    if time.perf_counter() - started > 1.0:
        print(f"{what} in {time.perf_counter() - started:.1f} s", file=sys.stderr, flush=True)
    still_mapped = predictor.model.mapped_files()
    guard = FileGuard(still_mapped) if still_mapped else None
    if guard is not None:
        print(
            "serving weights mapped from files: replace this model by renaming a new directory into place, "
            "never by copying over its files",
            file=sys.stderr,
            flush=True,
        )
    predictor.predict_labels(["warm up"], 1)  # and compile
    return predictor, guard


def run_server(
    model_dir: str | Path,
    host: str = "127.0.0.1",
    port: int = 8000,
    max_batch: int = 1024,
    max_k: int = 100,
    limits: ServeLimits | None = None,
    weights: str = "auto",
    access_log: bool = True,
) -> None:
    """Load the model, then serve until interrupted; ``access_log``: a line a request on stderr."""
    import copy

    import uvicorn
    from uvicorn.config import LOGGING_CONFIG

    limits = limits or ServeLimits(max_batch=max_batch, max_k=max_k)
    sock = _listen(host, port)
    predictor, guard = prepare(model_dir, weights)
    app = create_app(predictor, limits.max_batch, limits.max_k, limits.max_body_bytes, guard)
    log_config = copy.deepcopy(LOGGING_CONFIG)  # the access log on stderr with every other line, not stdout
    log_config["handlers"]["access"]["stream"] = "ext://sys.stderr"
    config = uvicorn.Config(
        app,
        host=host,
        port=sock.getsockname()[1],
        log_level="info",
        access_log=access_log,
        log_config=log_config,
        http=_timed_protocol(limits.read_timeout),
        limit_concurrency=limits.max_connections,
        timeout_keep_alive=5,
    )
    logging.getLogger("gandalf.serve").setLevel(logging.INFO)
    if not logging.getLogger("gandalf.serve").handlers:
        handler = logging.StreamHandler(sys.stderr)
        handler.setFormatter(logging.Formatter("%(levelname)s:     %(message)s"))
        logging.getLogger("gandalf.serve").addHandler(handler)
    shown = f"[{host}]" if ":" in host else host
    print(
        f"INFO:     gandalf serve running on http://{shown}:{sock.getsockname()[1]} (Press CTRL+C to quit): "
        f"{getattr(predictor.model, 'kind', 'model')} model, {predictor.n_labels:,} labels, from {model_dir}",
        file=sys.stderr,
        flush=True,
    )
    uvicorn.Server(config).run(sockets=[sock])
