"""A tool's retry back-off survives SIGKILL (issue 14, part 1): a real worker process is
killed while it waits between attempts; the restarted runtime resumes what is left of the
logged wait (not a fresh one), goes on with attempt 2 (the count is not restarted), and
never re-runs the attempt that had failed. SQLite and PostgreSQL."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from collections.abc import AsyncIterator
from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem, StoreError
from actorlog._journal.records import DecisionRecord, ResultRecord, decode_entry
from actorlog.stores.url import open_store

from tests import _pg

from .._keys import Key
from .retry_agents import DELAY, PLAN_DELAY, PLANNED, Go, Retrier

pytestmark = pytest.mark.anyio
ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=["sqlite", "postgres"])
async def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> AsyncIterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{tmp_path / 'agents.db'}"
        return
    url = _pg.postgres_url("the retry crash test")
    schema = _pg.new_schema("retry")
    from actorlog.stores import PostgresStore  # needs asyncpg: only when used

    created = PostgresStore(url, schema=schema)  # the worker opens it by URL
    await created.open()
    await created.close()
    yield _pg.schema_url(url, schema)
    await _pg.drop_schemas(url, schema)


async def _decisions(url: str, actor_id: str = "retrier") -> list[DecisionRecord | ResultRecord]:
    store = open_store(url, read_only=True)
    try:
        await store.open()
        rows = await store.read(actor_id, kinds=["decision", "result"])
    except StoreError:  # the worker has not created the store yet
        return []
    finally:
        await store.close()
    out: list[DecisionRecord | ResultRecord] = []
    for r in rows:
        rec = decode_entry(r)
        assert isinstance(rec, DecisionRecord | ResultRecord)
        out.append(rec)
    return out


def _start_worker(
    url: str, env: dict[str, str], output: Path, which: str = ""
) -> subprocess.Popen[bytes]:
    with output.open("wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "tests.torture.retry_worker", url, which],
            env=env,
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


async def test_sigkill_during_backoff_resumes_the_wait_and_the_count(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    runs = tmp_path / "runs.txt"
    monkeypatch.setenv("ACTORLOG_RETRY_RUNS", str(runs))  # the restarted runtime's tool
    env = dict(os.environ, ACTORLOG_RETRY_RUNS=str(runs), PYTHONPATH=str(ROOT))
    output = tmp_path / "worker.out"
    worker = _start_worker(store_url, env, output)
    try:
        # wait until attempt 1's failure and its back-off are durable, then kill mid-wait
        with anyio.fail_after(60):
            while not await _decisions(store_url):
                assert worker.poll() is None, output.read_text()
                await anyio.sleep(0.05)
        worker.send_signal(signal.SIGKILL)
        assert worker.wait(timeout=30) == -signal.SIGKILL
    finally:
        if worker.poll() is None:
            worker.kill()
            worker.wait()
    (failed,) = await _decisions(store_url)
    assert isinstance(failed, DecisionRecord) and failed.action == "attempt_failed"
    assert (failed.attempt, failed.delay) == (1, DELAY)
    assert failed.at is not None and failed.error is not None
    assert failed.error.type == "ConnectionError"
    assert len(runs.read_text().splitlines()) == 1  # killed before attempt 2 started
    await anyio.sleep(1.0)  # part of the back-off passes while nothing runs
    restarted = time.time()
    async with ActorSystem(open_store(store_url), actors=[Retrier]) as system:
        ref = await system.spawn(Retrier, "retrier")
        with anyio.fail_after(60):
            got = await ref.ask(Go("report"), message_id="go-1")
    assert got == "report done on run 2"
    lines = runs.read_text().splitlines()
    # attempt 1 ran once (before the kill), attempt 2 once (after): nothing repeated, and
    # both with the same idempotency key
    assert [line.split()[:2] for line in lines] == [
        ["1", Key("retrier", 1, 0)],
        ["2", lines[0].split()[1]],
    ]
    after = await _decisions(store_url)
    assert [getattr(r, "action", "result") for r in after] == [
        "attempt_failed",
        "attempt",
        "result",
    ]
    marker, result = after[1], after[2]
    assert isinstance(result, ResultRecord) and result.ok and result.attempt == 2
    assert marker.at is not None
    # attempt 2 started only once the logged back-off was over, counted from the failure's
    # logged time (not from the restart: that would be a fresh wait of DELAY seconds)
    assert marker.at >= failed.at + DELAY - 0.01
    assert marker.at < restarted + DELAY, (marker.at - restarted, "the wait started again")


def _actions(recs: list[DecisionRecord | ResultRecord]) -> list[str]:
    return [getattr(r, "action", "result") for r in recs]


@pytest.mark.parametrize("effect", ["read", "write"])
async def test_sigkill_at_every_attempt_boundary_runs_the_next_attempt(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, effect: str
) -> None:
    """Issue 24 item 6: a read (or an idempotent write) with ``Retry(attempts=5)``: attempt 1
    fails, the worker is killed during its back-off (after attempt 1's record, before attempt
    2's), then during attempt 2, then during attempt 3 (the re-run of 2), then during the
    back-off after attempt 4 failed. Each restart goes on with the next attempt number, never
    waits for an operator, and attempt 5 settles the call."""
    from actorlog import ops

    actor_id = f"planned-{effect}"
    runs = tmp_path / "runs.txt"
    plan = "fail,hang,hang,fail,ok"
    monkeypatch.setenv("ACTORLOG_RETRY_RUNS", str(runs))
    monkeypatch.setenv("ACTORLOG_RETRY_PLAN", plan)
    env = dict(
        os.environ, ACTORLOG_RETRY_RUNS=str(runs), ACTORLOG_RETRY_PLAN=plan, PYTHONPATH=str(ROOT)
    )

    def run_count() -> int:
        return len(runs.read_text().splitlines()) if runs.exists() else 0

    async def kill_when(ready: str, expect: list[str], n_runs: int) -> None:
        output = tmp_path / f"worker-{ready}.out"
        worker = _start_worker(store_url, env, output, effect)
        try:
            with anyio.fail_after(60):
                while not (
                    _actions(await _decisions(store_url, actor_id)) == expect
                    and run_count() == n_runs
                ):
                    assert worker.poll() is None, output.read_text()
                    await anyio.sleep(0.05)
            worker.send_signal(signal.SIGKILL)
            assert worker.wait(timeout=30) == -signal.SIGKILL
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        assert _actions(await _decisions(store_url, actor_id)) == expect, ready
        assert run_count() == n_runs, ready
        store = open_store(store_url, read_only=True)
        try:
            await store.open()
            status = await ops.actor_status(store, actor_id)
        finally:
            await store.close()
        # never an operator's business: the runtime goes on by itself
        assert [i.state for i in status.in_doubt] == ["auto"], (ready, status.in_doubt)

    # attempt 1 failed; killed during the back-off (before attempt 2's marker)
    await kill_when("backoff-1", ["attempt_failed"], 1)
    # killed during attempt 2 (its marker is durable, the tool hangs)
    await kill_when("during-2", ["attempt_failed", "attempt"], 2)
    # killed during attempt 3, the re-run of the interrupted attempt 2
    await kill_when("during-3", ["attempt_failed", "attempt", "attempt"], 3)
    # attempt 4 (the re-run of 3) fails; killed during its back-off
    during_4 = ["attempt_failed", "attempt", "attempt", "attempt", "attempt_failed"]
    await kill_when("backoff-4", during_4, 4)
    cls = PLANNED[effect]
    async with ActorSystem(open_store(store_url), actors=[cls]) as system:
        ref = await system.spawn(cls, actor_id)
        with anyio.fail_after(60):
            got = await ref.ask(Go("report"), message_id="go-1")
    assert got == "report ok on run 5"
    after = await _decisions(store_url, actor_id)
    assert _actions(after) == [*during_4, "attempt", "result"]
    failed = [r for r in after if isinstance(r, DecisionRecord) and r.action == "attempt_failed"]
    assert [f.attempt for f in failed] == [1, 4]
    assert all(f.delay == PLAN_DELAY for f in failed)
    result = after[-1]
    assert isinstance(result, ResultRecord) and result.ok and result.attempt == 5
    keys = {line.split()[1] for line in runs.read_text().splitlines()}
    assert len(keys) == 1  # one idempotency key for every attempt ("no-key" for the read)
    assert run_count() == 5


@pytest.mark.parametrize("effect", ["read", "write"])
async def test_sigkill_in_the_first_two_attempts_never_runs_more_than_attempts(
    store_url: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, effect: str
) -> None:
    """Issue 24 item 6, found again by the model (``retry_double_kill``): ``Retry(attempts=5)``,
    the worker is killed during attempt 1 (no outcome yet), then during its re-run (attempt
    2); attempts 3, 4 and 5 fail. The re-run of the interrupted first attempt is marked
    started like any attempt, so the second kill does not re-number it: the call fails after
    five runs in all (a sixth run would succeed: the plan says ``ok`` after its end)."""
    from actorlog import ActorlogError

    actor_id = f"planned-{effect}"
    runs = tmp_path / "runs.txt"
    plan = "hang,hang,fail,fail,fail"
    monkeypatch.setenv("ACTORLOG_RETRY_RUNS", str(runs))
    monkeypatch.setenv("ACTORLOG_RETRY_PLAN", plan)
    env = dict(
        os.environ, ACTORLOG_RETRY_RUNS=str(runs), ACTORLOG_RETRY_PLAN=plan, PYTHONPATH=str(ROOT)
    )

    def run_count() -> int:
        return len(runs.read_text().splitlines()) if runs.exists() else 0

    for n_runs in (1, 2):  # killed during attempt 1, then during its re-run
        output = tmp_path / f"worker-{n_runs}.out"
        worker = _start_worker(store_url, env, output, effect)
        try:
            with anyio.fail_after(60):
                while run_count() < n_runs:
                    assert worker.poll() is None, output.read_text()
                    await anyio.sleep(0.05)
            worker.send_signal(signal.SIGKILL)
            assert worker.wait(timeout=30) == -signal.SIGKILL
        finally:
            if worker.poll() is None:
                worker.kill()
                worker.wait()
        assert run_count() == n_runs
    # the re-run of attempt 1 was marked started before it ran
    assert _actions(await _decisions(store_url, actor_id)) == ["attempt"]
    cls = PLANNED[effect]
    async with ActorSystem(open_store(store_url), actors=[cls]) as system:
        ref = await system.spawn(cls, actor_id)
        with anyio.fail_after(60), pytest.raises(ActorlogError, match="run 5 failed"):
            await ref.ask(Go("report"), message_id="go-1")
    assert run_count() == 5
    after = await _decisions(store_url, actor_id)
    assert _actions(after) == [
        "attempt",
        "attempt",
        "attempt_failed",
        "attempt",
        "attempt_failed",
        "attempt",
        "result",
    ]
    failed = [r for r in after if isinstance(r, DecisionRecord) and r.action == "attempt_failed"]
    assert [f.attempt for f in failed] == [3, 4]
    result = after[-1]
    assert isinstance(result, ResultRecord) and not result.ok and result.attempt == 5
