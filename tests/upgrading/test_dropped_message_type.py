"""A step whose handler cannot run never settles as its outcome while a call is open (issue
24, item 14; DESIGN.md section 10: a completed step never holds an unsettled intent).

v1 handles ``Q | R``; an ``R`` step is SIGKILLed inside an idempotent write (its intent is
durable, its result never will be); v2 drops ``R``. v2 leaves that step unrecorded and the
actor quarantined with a reason naming the open call, in every start, writing nothing to the
log; going back to v1 finishes the step by the write's own policy (run again with the same
idempotency key), once, and never again after."""

from __future__ import annotations

import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]


def run(mode: str, db: Path, marks: Path) -> list[str]:
    done = subprocess.run(
        [sys.executable, "-m", "tests.upgrading.qr_worker", mode, str(db), str(marks)],
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=90,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout.splitlines()


def kill_inside_the_write(db: Path, marks: Path) -> None:
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.upgrading.qr_worker", "v1-kill", str(db), str(marks)],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    try:
        line = proc.stdout.readline()
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(timeout=30)
        proc.stdout.close()
    assert line.strip() == "KILLPOINT"


def entries(db: Path) -> list[tuple[int, str, str]]:
    with sqlite3.connect(db) as conn:
        rows = conn.execute(
            "SELECT seq, kind, type_tag FROM entries WHERE actor_id = 'a' ORDER BY seq"
        ).fetchall()
    conn.close()
    return [(int(s), str(k), str(t)) for s, k, t in rows]


def writes(marks: Path) -> list[str]:
    return marks.read_text().splitlines()


@pytest.mark.parametrize("v2", ["v2", "v2-knows-r"])
def test_a_step_v2_cannot_run_stays_unsettled_and_v1_finishes_it_once(
    tmp_path: Path, v2: str
) -> None:
    """``v2``: ``R`` no longer decodes; ``v2-knows-r``: it decodes, but v2's ``receive``
    does not accept it."""
    db, marks = tmp_path / "qr.db", tmp_path / "marks.txt"
    kill_inside_the_write(db, marks)
    assert [w.split()[1] for w in writes(marks)] == ["two"]
    key = writes(marks)[0].split()[0]
    log = entries(db)
    assert log[-1][1:] == ("intent", "qr.write")  # R's write: no result
    for _ in range(2):  # every later start of v2: the same, nothing written
        out = run(v2, db, marks)
        assert out[0].startswith("refused ActorQuarantinedError"), out
        assert f"intent seq {log[-1][0]} (tool 'qr.write')" in out[0], out
        assert "Run code that handles this message" in out[0], out
        assert out[1] == "status quarantined", out
        assert entries(db) == log
        assert [w.split()[1] for w in writes(marks)] == ["two"]
    # back to v1: the step finishes by the write's policy (the same key), then Q
    out = run("v1", db, marks)
    assert out == ["ok q four after 2", "status idle"], out
    assert writes(marks) == [f"{key} two", f"{key} two"]
    kinds = [k for _, k, _ in entries(db)]
    # the re-run is marked started (an ``attempt`` decision, durable before it runs), then
    # settles; Q's message is logged while that runs, so it may land anywhere among them
    after = kinds[len(log) :]
    assert after.count("message") == 1, after
    assert [k for k in after if k != "message"] == ["decision", "result", "step", "step"]
    out = run("v1", db, marks)  # and never again
    assert out == ["ok q four after 3", "status idle"], out
    assert writes(marks) == [f"{key} two", f"{key} two"]


def test_a_send_to_the_actor_v2_quarantines_logs_nothing(tmp_path: Path) -> None:
    """The sibling of the ask: a ``send`` posted while v2 starts the actor (the quarantine
    is found by recovery, before any message is accepted) is refused, nothing logged."""
    db, marks = tmp_path / "qr.db", tmp_path / "marks.txt"
    kill_inside_the_write(db, marks)
    log = entries(db)
    out = run("v2-send", db, marks)
    assert out[0].startswith("refused ActorQuarantinedError"), out
    assert out[1] == "status quarantined", out
    assert entries(db) == log


def test_a_message_v2_refused_is_not_handled_by_v1_on_replay(tmp_path: Path) -> None:
    """v2 refuses a new ``R`` (recorded failed: its handler never ran); v1 back replays
    that step as it went (skipped, no write, no ``NonDeterminismError``)."""
    db, marks = tmp_path / "qr.db", tmp_path / "marks.txt"
    marks.write_text("")
    out = run("v2-sends-r", db, marks)
    assert out[0].startswith("refused") and "does not accept messages of type qr.r" in out[0]
    assert out[1] == "status idle", out
    out = run("v1", db, marks)
    assert out == ["ok q four after 0", "status idle"], out
    assert writes(marks) == []


def test_a_resumed_step_whose_handler_raises_before_its_open_call_is_not_recorded(
    tmp_path: Path,
) -> None:
    """The sibling: the code now raises before the call the log holds open. Recording the
    step failed would leave that call unsettled: it is non-determinism (quarantined, the
    exception named, nothing written); v1 then finishes the step."""
    db, marks = tmp_path / "qr.db", tmp_path / "marks.txt"
    kill_inside_the_write(db, marks)
    log = entries(db)
    out = run("v1-raises", db, marks)
    assert out[0].startswith("refused ActorQuarantinedError"), out
    assert "the handler raising ValueError: cannot handle two any more" in out[0], out
    assert out[1] == "status quarantined", out
    assert entries(db) == log
    out = run("v1", db, marks)
    assert out == ["ok q four after 2", "status idle"], out
    assert [w.split()[1] for w in writes(marks)] == ["two", "two"]
