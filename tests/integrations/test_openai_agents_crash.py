"""OpenAI Agents SDK runs killed with SIGKILL in a worker process and started again end
with the same outputs and conversation as an uninterrupted run: no completed model call or
tool call is made again (only the one in flight at the kill), and the idempotent booking is
re-run, if at all, with the same key. Plain runs, streamed runs, and a turn with two tool
calls (``TRAVEL_PARALLEL``)."""

from __future__ import annotations

import json
import os
import re
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("agents")

from tests.integrations import openai_crash_worker, openai_travel

WORKER = Path(__file__).with_name("openai_crash_worker.py")
_INCARNATION = re.compile(r":[0-9a-f]{16}:[0-9]+:")


def _env(ledger: Path, parallel: str) -> dict[str, str]:
    """``parallel``: "" (one tool call per turn), "concurrent" (two, run as the SDK runs
    them), "sequential" (two, ``sequential_tools=True``)."""
    env = dict(os.environ, TRAVEL_LEDGER=str(ledger), TRAVEL_ECHO="1")
    env.pop("TRAVEL_PARALLEL", None)
    env.pop("TRAVEL_SEQUENTIAL", None)
    if parallel:
        env["TRAVEL_PARALLEL"] = "1"
    if parallel == "sequential":
        env["TRAVEL_SEQUENTIAL"] = "1"
    return env


def _same_keys(value: Any) -> Any:
    """``value`` with the incarnation id of every idempotency key replaced: the reference
    run is another actor log (FORMAT.md [F13]), and its seqs differ where a crash added
    entries (an in-doubt re-run's ``attempt`` decision)."""
    return json.loads(_INCARNATION.sub(":<incarnation>:<seq>:", json.dumps(value)))


def _reference(store: Path, ledger: Path, mode: str, parallel: str) -> dict[str, Any]:
    """The uninterrupted run, in this process (the SDK takes long to import)."""
    saved = dict(os.environ)
    os.environ.update(_env(ledger, parallel))
    os.environ.pop("TRAVEL_ECHO")
    for name in ("TRAVEL_PARALLEL", "TRAVEL_SEQUENTIAL"):
        if name not in _env(ledger, parallel):
            os.environ.pop(name, None)
    openai_crash_worker.streamed.sequential_tools = parallel == "sequential"
    openai_travel.durable.sequential_tools = parallel == "sequential"
    try:
        result: dict[str, Any] = anyio.run(openai_crash_worker.run, str(store), mode)
    finally:
        os.environ.clear()
        os.environ.update(saved)
        openai_crash_worker.streamed.sequential_tools = False
        openai_travel.durable.sequential_tools = False
    return result


def _run_to_end(store: Path, ledger: Path, mode: str, parallel: str) -> dict[str, Any]:
    out = subprocess.run(
        [sys.executable, str(WORKER), str(store), mode],
        env=_env(ledger, parallel),
        capture_output=True,
        text=True,
        timeout=200,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    (line,) = [x for x in out.stdout.splitlines() if x.startswith("DONE ")]
    result: dict[str, Any] = json.loads(line[5:])
    return result


def _run_and_kill(store: Path, ledger: Path, mode: str, parallel: str, at: str) -> None:
    """Start the worker and SIGKILL it when it prints the effect line ``at`` (the effect has
    started and not finished)."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(store), mode],
        env=_env(ledger, parallel),
        stdout=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None
    killed = False
    for line in proc.stdout:
        if line.strip() == at:
            proc.send_signal(signal.SIGKILL)
            killed = True
            break
    proc.stdout.close()
    proc.wait(timeout=200)
    assert killed and proc.returncode == -signal.SIGKILL, f"never reached {at!r}"


def _ledger(ledger: Path, table: str) -> list[tuple[str, str]]:
    with closing(sqlite3.connect(ledger)) as db:
        try:
            rows = db.execute(f"SELECT key, value FROM {table}").fetchall()
        except sqlite3.OperationalError:
            return []
    return [(str(k), str(v)) for k, v in rows]


@pytest.mark.parametrize(
    ("mode", "parallel", "at", "in_flight"),
    [
        # mid-booking of the second prompt: the idempotent write is re-run with its key
        ("run", "", "[effect] bookings Hotel Porto Central", 1),
        # mid-model-call of a streamed run, after the handoff: the call is made again
        ("stream", "", "[effect] model_calls 5", 1),
        # two tool calls in one turn, run concurrently: both in flight at the kill
        ("run", "concurrent", "[effect] reads weather Lisbon", 2),
        # the same, one after the other: the first finished before the second started
        ("run", "sequential", "[effect] reads weather Lisbon", 1),
    ],
    ids=["run-in-booking", "stream-in-model-call", "two-concurrent-calls", "two-sequential"],
)
def test_killed_run_resumes_without_repeating_completed_calls(
    tmp_path: Path, mode: str, parallel: str, at: str, in_flight: int
) -> None:
    ref_ledger = tmp_path / "ref-ledger.db"
    reference = _reference(tmp_path / "ref.db", ref_ledger, mode, parallel)
    assert reference["last_agent"] == "planner"

    store, ledger = tmp_path / "agents.db", tmp_path / "ledger.db"
    _run_and_kill(store, ledger, mode, parallel, at)
    final = _run_to_end(store, ledger, mode, parallel)

    assert _same_keys(final["outputs"]) == _same_keys(reference["outputs"])
    assert _same_keys(final["items"]) == _same_keys(reference["items"])
    assert final["usage"] == reference["usage"]
    assert final["last_agent"] == "planner"

    ref_calls = Counter(k for k, _ in _ledger(ref_ledger, "model_calls"))
    calls = Counter(k for k, _ in _ledger(ledger, "model_calls"))
    assert set(calls) == set(ref_calls) and set(ref_calls.values()) == {1}
    # every model call and tool run happened once, but those in flight at the kill
    assert sum(calls.values()) - len(calls) <= 1, calls
    tables = ("model_calls", "reads", "bookings")
    ref_total = sum(len(_ledger(ref_ledger, t)) for t in tables)
    total = sum(len(_ledger(ledger, t)) for t in tables)
    assert ref_total <= total <= ref_total + in_flight
    bookings = _ledger(ledger, "bookings")
    assert len({k for k, _ in bookings}) == 2, bookings  # re-run only with the same key
    assert {_same_keys(k) for k, _ in bookings} == {
        _same_keys(k) for k, _ in _ledger(ref_ledger, "bookings")
    }
