"""A bounded load test of ``gandalf serve``: requests/s and latency percentiles at several
concurrency levels, over held-out queries.

    python benchmarks/serve_load.py MODEL_DIR [--data debian-bookworm] [--concurrency 1 4 16]
                                    [--requests 2000] [--k 5] [--no-access-log]

Starts ``gandalf serve MODEL_DIR --port 0`` in its own process, then for each concurrency level c
runs c client threads, each on its own keep-alive connection, sending ``POST /predict`` with one
test-split text each (``--requests`` in all per level, after 100 warm-up requests). Latency is
timed per request at the client (send to full answer). The clients share the machine with the
server: on 2 cores the figures are a floor for a server with a machine of its own. Writes
``benchmarks/results/serve-load.json`` (or ``--out``).
"""

from __future__ import annotations

import argparse
import http.client
import json
import re
import subprocess
import sys
import threading
import time
from pathlib import Path

import numpy as np

RESULTS = Path(__file__).resolve().parent / "results"


def start_server(model_dir: Path, extra: tuple[str, ...] = ()) -> tuple[subprocess.Popen, str, int]:
    proc = subprocess.Popen(
        [sys.executable, "-m", "gandalf_xmc.cli", "serve", str(model_dir), "--port", "0", *extra],
        stderr=subprocess.PIPE,
        stdout=subprocess.DEVNULL,
        text=True,
    )
    deadline = time.time() + 300
    while time.time() < deadline:
        line = proc.stderr.readline()
        m = re.search(r"running on http://([\d.]+):(\d+)", line)
        if m:  # from here on its log (an access line a request) is read and dropped, so the pipe never fills
            threading.Thread(target=lambda: all(proc.stderr), daemon=True).start()
            return proc, m.group(1), int(m.group(2))
        if proc.poll() is not None:
            break
    proc.kill()
    raise SystemExit("the server did not start")


def run_level(host: str, port: int, texts: list[str], concurrency: int, n_requests: int, k: int) -> dict:
    """``n_requests`` requests from ``concurrency`` threads; latencies in ms."""
    latencies: list[float] = []
    errors = [0]
    lock = threading.Lock()
    counter = iter(range(n_requests))

    def client() -> None:
        conn = http.client.HTTPConnection(host, port, timeout=60)
        mine = []
        while True:
            with lock:
                i = next(counter, None)
            if i is None:
                break
            body = json.dumps({"text": texts[i % len(texts)], "k": k})
            t0 = time.perf_counter()
            conn.request("POST", "/predict", body, {"Content-Type": "application/json"})
            resp = conn.getresponse()
            resp.read()
            mine.append(1000.0 * (time.perf_counter() - t0))
            if resp.status != 200:
                with lock:
                    errors[0] += 1
        conn.close()
        with lock:
            latencies.extend(mine)

    threads = [threading.Thread(target=client) for _ in range(concurrency)]
    t0 = time.perf_counter()
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    seconds = time.perf_counter() - t0
    lat = np.array(latencies)
    p50, p90, p99 = np.percentile(lat, [50, 90, 99])
    return {
        "concurrency": concurrency,
        "requests": int(lat.size),
        "errors": errors[0],
        "requests_per_second": lat.size / seconds,
        "p50_ms": float(p50),
        "p90_ms": float(p90),
        "p99_ms": float(p99),
        "max_ms": float(lat.max()),
    }


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--data", default="debian-bookworm", help="whose test split gives the queries")
    ap.add_argument("--concurrency", nargs="+", type=int, default=[1, 4, 16])
    ap.add_argument("--requests", type=int, default=2000, help="requests per concurrency level")
    ap.add_argument("--k", type=int, default=5)
    ap.add_argument("--no-access-log", action="store_true", help="serve without the access log")
    ap.add_argument("--out", type=Path, default=None)
    args = ap.parse_args()

    from gandalf_xmc.data import load_dataset

    texts = load_dataset(args.data).test.texts
    proc, host, port = start_server(args.model_dir, ("--no-access-log",) if args.no_access_log else ())
    try:
        run_level(host, port, texts[-100:], 1, 100, args.k)  # warm-up, on other queries than the timed ones
        rows = [run_level(host, port, texts, c, args.requests, args.k) for c in args.concurrency]
    finally:
        proc.terminate()
        proc.wait(timeout=30)
    print(f"gandalf serve {args.model_dir}: POST /predict, one {args.data} test text a request, k={args.k}\n")
    print("| concurrency | requests | errors | requests/s | p50 ms | p90 ms | p99 ms | max ms |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for r in rows:
        print(
            f"| {r['concurrency']} | {r['requests']:,} | {r['errors']} | {r['requests_per_second']:,.0f} | "
            f"{r['p50_ms']:.2f} | {r['p90_ms']:.2f} | {r['p99_ms']:.2f} | {r['max_ms']:.1f} |"
        )
    out = args.out or RESULTS / "serve-load.json"
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(
        json.dumps({"model_dir": str(args.model_dir), "data": args.data, "k": args.k, "levels": rows}, indent=1) + "\n"
    )


if __name__ == "__main__":
    main()
