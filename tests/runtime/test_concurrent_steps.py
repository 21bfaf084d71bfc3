"""Durable structured concurrency inside a step (issue 25; FORMAT.md [F18]).

Effects started by concurrent tasks of one step are identified by (task path, number within
the task), not by their global position, so a replay matches them whichever task finished
first; a real process SIGKILLed at every tool start resumes with no NonDeterminismError and
no completed call run again.
"""

from __future__ import annotations

import json
import os
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest
from actorlog import ActorSystem

from tests.conftest import StoreFactory
from tests.runtime.concurrent_agents import LEDGER, Fan, FanOut, expected

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.anyio
async def test_fan_out_replays_after_restart(make_store: StoreFactory) -> None:
    """The issue's example live, then replayed by a new system on the same store."""
    LEDGER.update(path=None, kill_at=0, starts=0)
    async with ActorSystem(make_store(), actors=[FanOut]) as system:
        ref = await system.spawn(FanOut, "fan")
        assert await ref.ask(Fan(4), message_id="q") == expected()
    starts = LEDGER["starts"]
    async with ActorSystem(make_store(), actors=[FanOut]) as system:
        ref = await system.spawn(FanOut, "fan")  # replays the step from the log
        assert await ref.ask(Fan(4), message_id="q") == expected()
        state = await ref.query(lambda s: list(s.got))
    assert state == expected()
    assert LEDGER["starts"] == starts  # replay ran no tool


def _run(db: Path, ledger: Path, backend: str, kill_at: int) -> subprocess.CompletedProcess[str]:
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [str(db), str(ledger), backend, str(kill_at)]
    return subprocess.run(
        [sys.executable, "-m", "tests.runtime.concurrent_worker", *args],
        env=env,
        cwd=ROOT,
        capture_output=True,
        text=True,
        timeout=120,
    )


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
@pytest.mark.parametrize("kill_at", range(1, 9))
def test_fan_out_sigkilled_at_each_tool_start_resumes(
    tmp_path: Path, backend: str, kill_at: int
) -> None:
    """4 tasks x 2 dependent calls, the process SIGKILLed at the Nth tool start (after its
    intent is durable): the restarted runtime finishes the step, redoes no completed call,
    and reruns an in-doubt one with the same key."""
    db, ledger = tmp_path / "agents.db", tmp_path / "ledger.txt"
    first = _run(db, ledger, backend, kill_at)
    assert first.returncode == -9, first.stdout + first.stderr
    before = [line.split() for line in ledger.read_text().splitlines()]
    results = _results(db)  # the calls whose result is durable: never run again
    second = _run(db, ledger, backend, 0)
    assert second.returncode == 0, second.stdout + second.stderr
    assert json.loads(second.stdout.strip().splitlines()[-1]) == {"reply": expected()}
    lines = [line.split() for line in ledger.read_text().splitlines()]
    keys: dict[str, str] = {}
    for _, arg, key in lines:
        assert keys.setdefault(arg, key) == key, f"{arg} ran again under another key"
    for what, arg, _ in lines[len(before) :]:
        assert what == "done" or arg not in results, f"{arg} ran again after its result"
    assert len(set(keys.values())) == 8  # one key per call, distinct per task


def _results(db: Path) -> set[str]:
    conn = sqlite3.connect(db)
    try:
        rows = conn.execute(
            "SELECT i.payload FROM entries i JOIN entries r ON r.actor_id = i.actor_id "
            "AND r.ref = i.seq AND r.kind = 'result' WHERE i.kind = 'intent'"
        ).fetchall()
    finally:
        conn.close()
    return {str(json.loads(payload)["args"][0]) for (payload,) in rows}
