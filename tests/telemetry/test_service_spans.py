"""Spans survive a normal server stop: uvicorn, stopped by SIGTERM, ends its process by
raising the signal again after its graceful shutdown, so the SDK's exit hook (which flushes a
BatchSpanProcessor) never runs; the ActorSystem's exit flushes the application's provider
(docs/service.md, docs/tracing.md)."""

from __future__ import annotations

import json
import os
import re
import signal
import subprocess
import sys
from pathlib import Path

import httpx

ROOT = Path(__file__).resolve().parents[2]


def _spans(text: str) -> list[dict[str, object]]:
    """The JSON objects the console exporter wrote, one after another."""
    decoder, found, i = json.JSONDecoder(), [], 0
    while (i := text.find("{", i)) != -1:
        span, i = decoder.raw_decode(text, i)
        found.append(span)
    return found


def test_spans_are_exported_when_uvicorn_is_stopped_by_sigterm(tmp_path: Path) -> None:
    spans_file = tmp_path / "spans.json"
    env = dict(os.environ, ACTORLOG_EXAMPLE_DIR=str(tmp_path), SPANS_FILE=str(spans_file))
    cmd = [sys.executable, "-m", "uvicorn", "tests.telemetry.service_app:app", "--port", "0"]
    proc = subprocess.Popen(cmd, cwd=ROOT, env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert proc.stderr is not None
        log = []
        for line in proc.stderr:
            log.append(line)
            if found := re.search(r"Uvicorn running on (http://\S+)", line):
                url = found.group(1)
                break
        else:
            raise AssertionError("the server did not start:\n" + "".join(log))
        r = httpx.post(
            f"{url}/conversations/c1/messages",
            json={"text": "hotels in Lisbon"},
            headers={"Idempotency-Key": "k-1"},
            timeout=60,
        )
        assert r.status_code == 200, r.text
        assert r.json()["reply"] == "the best answer to 'hotels in Lisbon'"
        proc.send_signal(signal.SIGTERM)
        rest = proc.communicate(timeout=60)[1]
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
    # uvicorn ends by raising SIGTERM again: the process never reaches atexit
    assert proc.returncode == -signal.SIGTERM, "".join(log) + rest
    assert "Application shutdown complete" in rest
    names = [s["name"] for s in _spans(spans_file.read_text())]
    assert names.count("actorlog.step") == 1, names
    assert names.count("actorlog.tool_call") == 2, names  # search and send_email
