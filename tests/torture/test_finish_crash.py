"""SIGKILL around an actor's finish (``ctx.stop()``): just before the finishing step's
entries are appended, and just after they are durable but before the ``finished`` history
event. On restart the actor is finished exactly once, its tool ran once, nothing re-runs,
and ``verify`` finds the log clean."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
from actorlog.stores import SqliteStore

from tests._payload import payload_of
from tests.cli._support import cli

ROOT = Path(__file__).parent.parent.parent

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _worker(db: Path, marks: Path, mode: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.torture.finish_worker", str(db), str(marks), mode],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


@pytest.mark.parametrize("mode", ["run-before", "run-after"])
async def test_sigkill_around_finish(tmp_path: Path, mode: str) -> None:
    db, marks = tmp_path / "f.db", tmp_path / "marks"
    proc = _worker(db, marks, mode)
    assert proc.stdout is not None
    line = proc.stdout.readline().strip()
    proc.kill()
    _, err = proc.communicate(timeout=20)
    assert line == "KILLPOINT", err
    assert marks.read_text().split() == ["1"]

    again = _worker(db, marks, "restart")
    out, err = again.communicate(timeout=60)
    assert again.returncode == 0, err
    assert out.split() == ["refused", "ActorFinishedError"], (out, err)
    assert marks.read_text().split() == ["1"]  # the tool did not run again

    store = SqliteStore(str(db), read_only=True)
    await store.open()
    try:
        rows = await store.read("f")
        events = [e.kind for e in await store.read_events("f")]
    finally:
        await store.close()
    assert [r.type_tag for r in rows if r.kind == "effect"] == ["finish"]  # finished once
    steps = [payload_of(r.kind, r.payload) for r in rows if r.kind == "step"]
    assert [s["reply"] for s in steps[:2]] == [1, 2]  # Mark, then the finishing step
    # anything logged after it (a message queued behind it, maybe) was refused, not run
    assert all(s["error"]["type"] == "ActorFinishedError" for s in steps[2:])
    assert events.count("finished") == 1
    assert [a["status"] for a in cli("actors", db, "--json").json_lines()] == ["finished"]
    assert cli("verify", db).code == 0
