"""examples/service.py (docs/service.md), as a test: a real uvicorn server owning one actor per
conversation on SQLite, 20 conversations at once over HTTP (httpx), the server SIGKILLed while
20 requests wait on their e-mails, then restarted: each interrupted e-mail is sent again with
the same idempotency key, each retried request gets its reply, and a retry of an answered
request gets the recorded reply without running anything again. Last, a SIGTERM while a
request waits on its e-mail: the step finishes and the request gets its reply."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

EXAMPLE = Path(__file__).resolve().parents[2] / "examples" / "service.py"


def test_service_killed_mid_request_resends_with_the_same_key_and_replays_replies(
    tmp_path: Path,
) -> None:
    env = dict(os.environ, ACTORLOG_EXAMPLE_DIR=str(tmp_path))
    out = subprocess.run(
        [sys.executable, str(EXAMPLE)], env=env, capture_output=True, text=True, timeout=200
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert "round 1: 20 of 20 replied" in out.stdout
    assert "SIGKILL (exit code -9)" in out.stdout
    assert "round 2: 20 of 20 requests interrupted" in out.stdout
    assert "retried round 2 requests that got their reply: 20 of 20" in out.stdout
    assert "retried round 1 requests that got the recorded reply: 20 of 20" in out.stdout
    assert "SIGTERM during a request: replied: the best answer to 'ferries'" in out.stdout
    # 41 e-mails once each; the 20 in doubt at the kill were sent twice with the same key
    assert "e-mails at the provider: 41, attempts: 61 (20 re-sent, same key)" in out.stdout
    assert "searches run: 41" in out.stdout
    assert "OK:" in out.stdout


def _uvicorn(tmp_path: Path, *args: str) -> list[str]:
    return [
        sys.executable,
        "-m",
        "uvicorn",
        "--app-dir",
        str(EXAMPLE.parent),
        "service:app",
        "--port",
        "0",
        *args,
    ]


def test_uvicorn_workers_share_no_sqlite_file_the_holder_is_named(tmp_path: Path) -> None:
    """docs/service.md: with ``--workers 2`` one worker opens the store, the other fails its
    start-up with StoreLockedError naming the first, and uvicorn stops the server."""
    env = dict(os.environ, ACTORLOG_EXAMPLE_DIR=str(tmp_path))
    out = subprocess.run(
        _uvicorn(tmp_path, "--workers", "2"), env=env, capture_output=True, text=True, timeout=120
    )
    log = out.stdout + out.stderr
    workers = re.findall(r"Started server process \[(\d+)\]", log)
    assert len(workers) == 2, log
    holder = re.search(
        r"StoreLockedError: SQLite store .* in use by another writer \(pid (\d+)", log
    )
    assert holder is not None, log
    assert holder.group(1) in workers
    assert "Application startup failed" in log
    assert "Stopping parent process" in log


def test_a_second_server_on_the_same_file_fails_naming_the_first(tmp_path: Path) -> None:
    env = dict(os.environ, ACTORLOG_EXAMPLE_DIR=str(tmp_path))
    first = subprocess.Popen(_uvicorn(tmp_path), env=env, stderr=subprocess.PIPE, text=True)
    try:
        assert first.stderr is not None
        for line in first.stderr:
            if "Uvicorn running on" in line:
                break
        second = subprocess.run(
            _uvicorn(tmp_path), env=env, capture_output=True, text=True, timeout=120
        )
        assert second.returncode != 0
        assert f"in use by another writer (pid {first.pid} " in second.stderr, second.stderr
        assert first.poll() is None  # the first one serves on
    finally:
        first.terminate()
        first.communicate(timeout=60)
