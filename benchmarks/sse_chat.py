"""The SSE example (examples/sse_chat): the latency of one token from ``ctx.emit`` to the
browser's EventSource and to an HTTP client.

    python -m benchmarks sse_chat [--tokens 300] [--delay 0.01] [--quick] [--write-docs]

The example runs as its own process on a SQLite file (as ``python examples/sse_chat/app.py``
does), its scripted model swapped for one whose tokens carry the wall-clock time
(``time.time_ns()``) at which the model hands them over; the tool emits each at once. Two
readers each ask a question and record the wall-clock time at which
each token arrives: an httpx client reading the response's lines, and Chromium (Playwright)
running an ``EventSource`` whose ``message`` listener reads ``performance.timeOrigin +
performance.now()``. Same machine, same clock. The latency includes the emit, the caller's
buffer, the SSE encoding, uvicorn, the loopback socket and the reader's parsing; no commit
waits per token (a model call's events go out at once: its intent is durable before it runs).
Compare the in-process latency in [streaming.md](streaming.md) (``paced``). Chromium is
optional (skipped when ``chromium`` is not on PATH).
"""

from __future__ import annotations

import argparse
import json
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import threading
import time
from collections.abc import AsyncIterator
from pathlib import Path
from typing import Any

from ._common import (
    Table,
    bench_parser,
    configure_output,
    loadavg,
    machine_info,
    quick,
    scratch_dir,
    write_report,
)

EXAMPLE = Path(__file__).resolve().parents[1] / "examples" / "sse_chat" / "app.py"


def serve(db: str, port: str, tokens: int, pause: float) -> None:
    """The example in this process, its model replaced by a timestamping one."""
    import importlib.util

    import anyio

    spec = importlib.util.spec_from_file_location("sse_chat_app", EXAMPLE)
    assert spec is not None and spec.loader is not None
    app: Any = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = app
    spec.loader.exec_module(app)

    class Timed:
        delay = 0.0  # (the example sets it from --delay)

        async def stream(self, prompt: str) -> AsyncIterator[str]:
            for _ in range(tokens if prompt.startswith("answer") else 1):
                await anyio.sleep(pause)
                yield f"{time.time_ns()} "

    app.MODEL = Timed()
    sys.argv = [str(EXAMPLE), "--db", db, "--port", port]
    app.main()


def _http(base: str, q: str, out: list[float]) -> None:
    import httpx

    with httpx.stream("GET", f"{base}/chat/c-b/ask?q={q}&text=x", timeout=120) as r:
        for line in r.iter_lines():
            now = time.time_ns()
            if line.startswith("data: {"):
                token = json.loads(line[6:]).get("token")
                if token:
                    out.append((now - int(token)) / 1000)


def _browser(base: str, q: str) -> list[float]:
    from playwright import sync_api

    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    if chromium is None:
        return []
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=chromium, args=["--no-sandbox"])
        page = b.new_page()
        page.goto(base + "/")
        got: list[float] = page.evaluate(
            """(url) => new Promise((done) => {
              const lat = [], es = new EventSource(url);
              es.onmessage = (e) => {
                const t = (performance.timeOrigin + performance.now()) * 1000;  // µs
                const tok = JSON.parse(e.data).token;
                if (tok) lat.push(t - Number(tok) / 1000);
              };
              es.addEventListener("reply", () => { es.close(); done(lat); });
            })""",
            f"{base}/chat/c-b/ask?q={q}&text=x",
        )
        b.close()
    return got


def main() -> int:
    parser = bench_parser(__doc__, quick_help="--tokens 30", writes=True)
    parser.add_argument("--tokens", type=int, default=300, help="tokens per answer")
    parser.add_argument("--delay", type=float, default=0.01, help="seconds between tokens")
    parser.add_argument("--serve", nargs=2, help=argparse.SUPPRESS)
    args = parser.parse_args()
    quick(args, parser, tokens=30)
    if args.serve:
        db, port = args.serve
        serve(db, port, args.tokens, args.delay)
        return 0
    configure_output(args)
    with scratch_dir() as work:
        info = machine_info(work)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = str(s.getsockname()[1])
        cmd = [sys.executable, "-m", "benchmarks.sse_chat", "--serve", f"{work}/b.db", port]
        cmd += ["--tokens", str(args.tokens), "--delay", str(args.delay)]
        out = subprocess.DEVNULL
        proc = subprocess.Popen(cmd, stdout=out, stderr=subprocess.PIPE, text=True)
        assert proc.stderr is not None
        for line in proc.stderr:
            if "Uvicorn running on" in line:
                break
        threading.Thread(target=proc.stderr.read, daemon=True).start()
        base = f"http://127.0.0.1:{port}"
        try:
            http: list[float] = []
            _http(base, "h", http)
            browser = _browser(base, "b")
        finally:
            proc.send_signal(signal.SIGTERM)
            proc.wait(timeout=30)
            proc.stderr.close()
        info["load average (1, 5, 15 min) at end"] = loadavg()
    table = Table(["reader", "tokens", "p50 (µs)", "p99 (µs)", "max (µs)"])
    for reader, lat in [("httpx (HTTP client)", http), ("Chromium EventSource", browser)]:
        if lat:
            q = statistics.quantiles(lat, n=100, method="inclusive")
            table.add(reader, len(lat), round(q[49]), round(q[98]), round(max(lat)))
    print(f"{args.tokens} answer tokens (and 1 of the plan), {args.delay} s apart")
    print(table.text())
    body = "\n\n".join([__doc__.split("\n\n", 1)[1].strip(), table.markdown()])
    title = "The SSE example: latency per token (ctx.emit to the browser)"
    print(f"wrote {write_report('sse_chat', title, body, info=info)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
