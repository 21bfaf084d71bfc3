"""SIGKILL mid-step while a caller streams it (``ctx.emit`` / ``ask_stream``) on a real
SQLite file: asking again with the same ``message_id`` streams the resumed run, whose
replayed events repeat what the first caller saw, then its new events, then the reply
(docs/streaming.md)."""

from __future__ import annotations

import json
import subprocess
import sys
import time
from pathlib import Path

ROOT = Path(__file__).parent.parent.parent


def _worker(db: Path, marks: Path, flag: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "tests.durability.stream_worker",
            str(db),
            str(marks),
            str(flag),
            mode,
        ],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def test_sigkill_mid_step_then_ask_stream_again_gets_the_resumed_run(tmp_path: Path) -> None:
    db, marks, flag = tmp_path / "s.db", tmp_path / "marks", tmp_path / "flag"
    first = _worker(db, marks, flag, "first")
    assert first.stdout is not None
    seen = [json.loads(first.stdout.readline()) for _ in range(2)]
    deadline = time.monotonic() + 60
    while "slow" not in (marks.read_text() if marks.exists() else ""):
        assert first.poll() is None and time.monotonic() < deadline, first.stderr
        time.sleep(0.01)
    first.kill()  # SIGKILL, inside the slow tool: its intent is durable, no result
    first.communicate(timeout=20)
    assert seen == [
        {"number": 1, "data": "a", "replayed": False},
        {"number": 2, "data": "b about x", "replayed": False},
    ]

    again = _worker(db, marks, flag, "again")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    *events, reply = out.splitlines()
    assert [json.loads(line) for line in events] == [
        {"number": 1, "data": "a", "replayed": True},  # what the first caller saw, again
        {"number": 2, "data": "b about x", "replayed": True},
        {"number": 3, "data": "c slow x", "replayed": False},  # the resumed run's new work
    ]
    assert reply == "reply resumed"
    assert marks.read_text().split() == ["slow", "slow"]  # the in-doubt read ran again
