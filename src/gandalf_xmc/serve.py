"""``gandalf serve``: a trained model over HTTP (Starlette on uvicorn).

* ``GET /health`` -> ``{"status": "ok", "model": kind, "labels": L}``
* ``POST /predict`` with ``{"text": "...", "k": 5}`` -> ``{"labels": [{"id", "text", "score"}, ...]}``, or
  with ``{"texts": [...], "k": 5}`` -> ``{"results": [[...], ...]}``, labels best first.

Bad requests get a 4xx status and ``{"error": "..."}``: 400 for malformed JSON or fields, 413 for
a body or batch over the limits, 422 for a ``k`` out of range. Predictions run on a worker
thread, so the event loop keeps accepting connections.
"""

from __future__ import annotations

import json
import sys
import time
from pathlib import Path

from .errors import DataFormatError
from .predictor import Predictor, load_predictor

MAX_BODY_BYTES = 1 << 20


def create_app(predictor: Predictor, max_batch: int = 1024, max_k: int = 100, max_body_bytes: int = MAX_BODY_BYTES):
    """The ASGI application answering for ``predictor``."""
    from starlette.applications import Starlette
    from starlette.concurrency import run_in_threadpool
    from starlette.requests import Request
    from starlette.responses import JSONResponse
    from starlette.routing import Route

    kind = getattr(predictor.model, "kind", "model")

    def error(status: int, message: str) -> JSONResponse:
        return JSONResponse({"error": message}, status_code=status)

    async def health(request: Request) -> JSONResponse:
        return JSONResponse({"status": "ok", "model": kind, "labels": predictor.n_labels})

    async def predict(request: Request) -> JSONResponse:
        declared = request.headers.get("content-length")
        if declared is not None and (not declared.isdigit() or int(declared) > max_body_bytes):
            return error(413, f"request body over {max_body_bytes:,} bytes")
        body = b""
        async for chunk in request.stream():
            body += chunk
            if len(body) > max_body_bytes:
                return error(413, f"request body over {max_body_bytes:,} bytes")
        try:
            payload = json.loads(body)
        except (json.JSONDecodeError, UnicodeDecodeError):
            return error(400, "the body is not JSON")
        if not isinstance(payload, dict):
            return error(400, 'expected a JSON object: {"text": "..."} or {"texts": [...]}, optional "k"')
        unknown = set(payload) - {"text", "texts", "k"}
        if unknown:
            return error(400, f"unknown field(s): {', '.join(sorted(unknown))}")
        k = payload.get("k", min(5, max_k))
        if not isinstance(k, int) or isinstance(k, bool) or not 1 <= k <= max_k:
            return error(422, f"k must be an integer from 1 to {max_k}")
        if ("text" in payload) == ("texts" in payload):
            return error(400, 'give exactly one of "text" (a string) and "texts" (a list of strings)')
        if "text" in payload:
            if not isinstance(payload["text"], str):
                return error(400, '"text" must be a string')
            ranked = await run_in_threadpool(predictor.predict_labels, [payload["text"]], k)
            return JSONResponse({"labels": ranked[0]})
        texts = payload["texts"]
        if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
            return error(400, '"texts" must be a list of strings')
        if len(texts) > max_batch:
            return error(413, f"at most {max_batch} texts a request, got {len(texts)}")
        results = await run_in_threadpool(predictor.predict_labels, texts, k) if texts else []
        return JSONResponse({"results": results})

    async def not_found(request: Request, exc) -> JSONResponse:
        return error(404, "no such endpoint: GET /health, POST /predict")

    async def not_allowed(request: Request, exc) -> JSONResponse:
        return error(405, f"{request.method} is not allowed here")

    async def damaged(request: Request, exc: DataFormatError) -> JSONResponse:
        return error(500, str(exc))  # a model file damaged where loading could not see

    return Starlette(routes=[Route("/health", health, methods=["GET"]), Route("/predict", predict, methods=["POST"])],
                     exception_handlers={404: not_found, 405: not_allowed, DataFormatError: damaged})


def run_server(model_dir: str | Path, host: str = "127.0.0.1", port: int = 8000, max_batch: int = 1024,
               max_k: int = 100) -> None:
    """Load the model, then serve until interrupted (uvicorn prints the address it listens on)."""
    import uvicorn

    predictor = load_predictor(model_dir)
    started = time.perf_counter()
    read = predictor.model.page_in()  # a large model's weights are files: read them in before the first request
    if time.perf_counter() - started > 1.0:
        print(f"read {read / 2**30:.1f} GiB of weights into memory in {time.perf_counter() - started:.1f} s",
              file=sys.stderr, flush=True)
    predictor.predict_labels(["warm up"], 1)  # and compile
    uvicorn.run(create_app(predictor, max_batch, max_k), host=host, port=port, log_level="info", access_log=False)
