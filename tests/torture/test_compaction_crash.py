"""SIGKILL during compaction (issue 14.4): a real process compacting in the background
(after snapshots) and offline (``ops.compact``, a few entries per transaction) is killed at
random points; afterwards ``verify`` finds no damage (the compacted start is recorded and
checksummed), recovery works from a snapshot over the compacted log, and every message was
handled exactly once. On SQLite and on a real PostgreSQL server."""

from __future__ import annotations

import random
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem, ops
from actorlog.stores import open_store

from tests import _pg

from .compaction_worker import Big, Peek, Rolling
from .conftest import BASE_SEED, soak

ROOT = Path(__file__).resolve().parents[2]
STEPS = 120
BIG = 300


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield "sqlite:///" + str(tmp_path / "agents.db")
        return
    base = _pg.postgres_url("the compaction crash test")
    schema = _pg.new_schema("compact")
    sep = "&" if "?" in base else "?"
    yield f"{base}{sep}schema={schema}"
    anyio.run(_pg.drop_schemas, base, schema)


def _start(url: str, *args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", "tests.torture.compaction_worker", url, *args],
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.DEVNULL,
        text=True,
    )


def _kill_after(proc: subprocess.Popen[str], marker: str, delay: float, nth: int = 1) -> bool:
    """Wait for the ``nth`` line starting with ``marker``, then SIGKILL after ``delay``;
    False if the process finished first. (Counting lines, not only waiting, keeps the kill
    inside the run however fast the machine and the runtime are.)"""
    assert proc.stdout is not None
    for line in proc.stdout:
        if line.startswith(marker):
            nth -= 1
            if nth <= 0:
                time.sleep(delay)
                break
    else:
        proc.wait()
        proc.stdout.close()
        return False
    proc.send_signal(signal.SIGKILL)
    proc.wait()
    proc.stdout.close()
    return proc.returncode == -signal.SIGKILL


def _finish(url: str, *args: str) -> None:
    proc = _start(url, *args)
    out, _ = proc.communicate(timeout=120)
    assert proc.returncode == 0 and "done" in out, out[-500:]


def test_sigkill_during_compaction_leaves_a_verifiable_recoverable_log(url: str) -> None:
    rng = random.Random(BASE_SEED)
    kills = 0
    for _ in range(soak(3)):  # background compaction after snapshots, killed anywhere
        # after 1-30 more steps (30+ remain in the 3 CI runs), 0-5 ms into the next one
        nth = rng.randint(1, 30)
        kills += _kill_after(
            _start(url, "run", str(STEPS)), "step", rng.uniform(0.0, 0.005), nth=nth
        )
    _finish(url, "run", str(STEPS))
    _finish(url, "fill", str(BIG))
    for _ in range(soak(3)):  # offline compaction, a few entries per transaction
        _finish(url, "fill", str(BIG + 1 + kills))  # one more step: a new snapshot range
        kills += _kill_after(_start(url, "compact"), "compacting", rng.uniform(0.0, 0.05))
    _finish(url, "compact")
    assert kills > 0, "no run was killed (all finished first)"
    anyio.run(_check, url)


async def _check(url: str) -> None:
    store = open_store(url, read_only=True)
    await store.open()
    try:
        report = await ops.verify(store)
        assert report.ok, report.findings
        assert report.compacted.get("rolling", 1) > 1 and report.compacted.get("big", 1) > 1
    finally:
        await store.close()
    async with ActorSystem(open_store(url), actors=[Rolling, Big]) as system:
        rolling = await (await system.spawn(Rolling, "rolling")).ask(Peek())
        big = await (await system.spawn(Big, "big")).ask(Peek())
    assert rolling == list(range(STEPS))  # every message exactly once
    assert big == list(range(len(big))) and len(big) >= BIG
