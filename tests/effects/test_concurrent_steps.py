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

import anyio
import pytest
from actorlog import ActorQuarantinedError, ActorSystem, NonDeterminismError

from tests._payload import payload_of
from tests.conftest import StoreFactory
from tests.runtime.concurrent_agents import (
    FICKLE,
    LEDGER,
    AsyncioShapes,
    Fan,
    FanOut,
    Fickle,
    Go,
    Misuse,
    Races,
    expected,
)

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
    return {str(payload_of("intent", payload)["args"][0]) for (payload,) in rows}


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["order", "first", "deadline", "nested", "sleep"])
async def test_races_take_the_live_path_on_replay(make_store: StoreFactory, kind: str) -> None:
    """Whatever finished first live finishes first on replay: outcomes are handed back in
    the order they were logged (a loser of a race and a call cut by a deadline are logged
    as cancelled when they are cancelled, and on replay wait for the same cancel)."""
    async with ActorSystem(make_store(), actors=[Races]) as system:
        ref = await system.spawn(Races, "r")
        live = await ref.ask(Go(kind), message_id="m")
    store = make_store()
    async with ActorSystem(store, actors=[Races]) as system:
        ref = await system.spawn(Races, "r")  # replays the step from the log
        replayed = await ref.query(lambda s: list(s.got))
        rows = await store.read("r", after_seq=0)
    assert replayed == live
    if kind == "order":
        assert live[:3] == ["b", "c", "a"]
    if kind == "sleep":  # a replayed sleep wakes at its place among the results
        assert live[:3] == ["s", "slept", "t"]
    if kind in ("first", "deadline"):
        cancelled = [
            r
            for r in rows
            if r.kind == "result" and payload_of(r.kind, r.payload).get("settled_by") == "cancelled"
        ]
        assert len(cancelled) == 1
        # settled when it was cancelled: before the intent of the call made after it
        after = next(
            r
            for r in rows
            if r.kind == "intent" and (b"after" in r.payload or b"next" in r.payload)
        )
        assert cancelled[0].seq < after.seq


@pytest.mark.anyio
@pytest.mark.parametrize(
    "backend_and_store", [("asyncio", "memory"), ("asyncio", "sqlite")], indirect=True
)
@pytest.mark.parametrize("kind", ["gather", "taskgroup", "wait"])
async def test_asyncio_combinators_replay(make_store: StoreFactory, kind: str) -> None:
    """asyncio.gather, asyncio.TaskGroup and asyncio.wait(FIRST_COMPLETED) replay the live
    path (asyncio only: they are asyncio's)."""
    async with ActorSystem(make_store(), actors=[AsyncioShapes]) as system:
        ref = await system.spawn(AsyncioShapes, "a")
        live = await ref.ask(Go(kind), message_id="m")
    async with ActorSystem(make_store(), actors=[AsyncioShapes]) as system:
        ref = await system.spawn(AsyncioShapes, "a")
        assert await ref.query(lambda s: list(s.got)) == live
    expected_live = {
        "gather": ["g1", "g2", "g3"],
        "taskgroup": ["t2", "t1"],
        "wait": ["w-fast", "after"],
    }
    assert live == expected_live[kind]


@pytest.mark.anyio
async def test_keys_are_per_task_and_stable(make_store: StoreFactory) -> None:
    """[F18] Keys of calls made by spawned tasks end in "{task}.{index}"; root keys are as
    before; every key differs."""
    store = make_store()
    async with ActorSystem(store, actors=[FanOut]) as system:
        ref = await system.spawn(FanOut, "fan")
        await ref.ask(Fan(2), message_id="q")
        rows = await store.read("fan", after_seq=0)
    intents = [payload_of(r.kind, r.payload) for r in rows if r.kind == "intent"]
    tasks = sorted((p["task"], p["index"], p["key"].rsplit(":", 1)[1]) for p in intents)
    assert tasks == [("0", 0, "0.0"), ("0", 1, "0.1"), ("1", 0, "1.0"), ("1", 1, "1.1")]


@pytest.mark.anyio
@pytest.mark.parametrize("kind", ["thread", "stale"])
async def test_effects_that_cannot_be_durable_fail_at_the_call(
    make_store: StoreFactory, kind: str
) -> None:
    """ctx from another thread, or a Context kept past its step: ConfigurationError at the
    call, saying what to do; nothing is logged for it."""
    store = make_store()
    async with ActorSystem(store, actors=[Misuse]) as system:
        ref = await system.spawn(Misuse, "m")
        if kind == "stale":
            assert await ref.ask(Go("keep"), message_id="k") == "kept"
        got = await ref.ask(Go(kind), message_id="x")
        rows = await store.read("m", after_seq=0)
    assert got.startswith("ConfigurationError: ctx.now() was called ")
    assert "another thread" in got if kind == "thread" else "after the step" in got
    assert "Call ctx only from the handler" in got
    assert not [r for r in rows if r.kind == "effect"]


@pytest.mark.anyio
@pytest.mark.parametrize("path", ["skip", "other"])
async def test_nondeterminism_names_the_task(make_store: StoreFactory, path: str) -> None:
    """A task that takes another path on replay (asks for another call, or ends without
    the one it made live while another task waits for its turn behind it) quarantines the
    actor with NonDeterminismError naming that task; no tool runs."""
    FICKLE["task1"] = "call"
    async with ActorSystem(make_store(), actors=[Fickle]) as system:
        ref = await system.spawn(Fickle, "f")
        # the order the calls finished in is timing (a loaded machine can finish "o" first)
        assert sorted(await ref.ask(Go("x"), message_id="m")) == ["o", "z", "z2"]
    FICKLE["task1"] = path
    try:
        async with ActorSystem(make_store(), actors=[Fickle]) as system:
            with anyio.fail_after(10), pytest.raises(ActorQuarantinedError) as info:
                await system.spawn(Fickle, "f")
    finally:
        FICKLE["task1"] = "call"
    cause = info.value.__cause__
    assert isinstance(cause, NonDeterminismError)
    assert cause.task == "1" and cause.index == 0 and "of task 1" in str(cause)
    assert 'slow("o", 0.05)' in cause.expected


@pytest.mark.anyio
@pytest.mark.parametrize(
    "backend_and_store", [("asyncio", "sqlite"), ("trio", "sqlite")], indirect=True
)
@pytest.mark.parametrize("path", ["call", "other"])
async def test_replay_tester_checks_concurrent_handlers(
    make_store: StoreFactory, path: str
) -> None:
    """actorlog.testing.replay replays a concurrent step from a SQLite file (no tool runs)
    and names the task of a divergence."""
    from actorlog.testing import replay

    FICKLE["task1"] = "call"
    store = make_store()
    async with ActorSystem(store, actors=[Fickle]) as system:
        ref = await system.spawn(Fickle, "f")
        await ref.ask(Go("x"), message_id="m")
    FICKLE["task1"] = path
    try:
        with anyio.fail_after(10):
            report = await replay(str(store.path), actors=[Fickle])  # type: ignore[attr-defined]  # a SqliteStore
    finally:
        FICKLE["task1"] = "call"
    if path == "call":
        assert report.ok and report.steps == 1, report.lines()
    else:
        (d,) = report.divergences
        assert (d.task, d.index) == ("1", 0)
        assert "effect #0 of task 1" in str(d)
