"""A call the handler's own scope cancels while the runtime settles it (issue 25): while an
in-doubt re-run marks its attempt started, while a reconcile function is asked, while an
operator's ruling is awaited. Each is settled in the log by its in-doubt policy when it is
cancelled; a completed step never holds an unsettled intent.

Found by CI's concurrent model on a SQLite file (``conc_losers_settled``): after a crash, a
race's read in doubt was re-run; its ``attempt`` decision was logged, and the winner
cancelled it while it waited for that decision's commit (another task's flush was
committing): ``Context._settle`` had not registered the call as open before ``_run``, so
nothing settled it (``ops.history``: ``retry_interrupted`` in a step that completed). The
siblings: a reconcile function cancelled while asked at recovery (also unsettled), and a
write cancelled while waiting for an operator (settled plain ``cancelled``, though it may
have happened, and the actor's status stayed ``in_doubt``).

Crashes are real: a worker process on a SQLite file is SIGKILLed while its tools run.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem, ConfigurationError, InDoubtError, ops
from actorlog.stores import SqliteStore

from tests.effects.abandon_agents import KICK, LEDGER, Race, Racer
from tests.runtime._gated import GatedStore

pytestmark = [pytest.mark.anyio, pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])]

ROOT = Path(__file__).resolve().parents[2]
#: the statuses of a call with no outcome in the log (ops.history)
OPEN = ("in_doubt", "auto", "retry_authorized", "retry_interrupted")


def _crash(db: Path, ledger: Path, backend: str, kind: str, contestants: int) -> None:
    """Run the worker until every contestant's tool started, then SIGKILL it."""
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    args = [str(db), str(ledger), backend, kind, str(contestants)]
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.effects.abandon_worker", *args],
        env=env,
        cwd=ROOT,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        for _ in range(6000):  # up to 60 s to start and call its tools
            if ledger.exists() and len(ledger.read_text().splitlines()) >= contestants:
                break
            if proc.poll() is not None:
                raise AssertionError(f"the worker ended: {proc.communicate()}")
            subprocess.run(["sleep", "0.01"], check=True)
        else:
            raise AssertionError("the worker never started its tools")
    finally:
        os.kill(proc.pid, signal.SIGKILL)
        proc.communicate()
    assert proc.returncode == -9


async def _crashed(tmp_path: Path, backend: str, kind: str, contestants: int = 2) -> Path:
    db, ledger = tmp_path / "agents.db", tmp_path / "ledger.txt"
    await anyio.to_thread.run_sync(_crash, db, ledger, backend, kind, contestants)
    LEDGER.update(path=str(ledger), hold=False, asks=0, happened=True)
    KICK["go"] = anyio.Event()
    return db


async def _step(db: Path) -> ops.Step:
    """The step of message ``q``, read from the file (the runtime may hold it: a reader),
    completed with every call settled."""
    reader = SqliteStore(db, read_only=True)
    await reader.open()
    try:
        h = await ops.history(reader, "r")
    finally:
        await reader.close()
    step = h.steps[0]
    assert step.status == "ok", (step.status, step.error)
    unsettled = [c for c in step.calls if c.status in OPEN]
    assert not unsettled, f"a completed step holds unsettled calls: {unsettled}"
    return step


async def _replays(db: Path, msg: Race, reply: str) -> None:
    """A new runtime replays the step from the log: the same reply, no tool runs."""
    ledger = Path(LEDGER["path"])
    before = ledger.read_text()
    async with ActorSystem(SqliteStore(db), actors=[Racer]) as system:
        ref = await system.spawn(Racer, "r")
        assert await ref.ask(msg, message_id="q") == reply
    assert ledger.read_text() == before


async def test_an_in_doubt_rerun_cancelled_while_marking_its_attempt_is_settled(
    tmp_path: Path, anyio_backend: str
) -> None:
    """Two reads in doubt are re-run at recovery; the first one's ``attempt`` decision
    commit is held, so the other waits for that commit; the referee cancels both then."""
    db = await _crashed(tmp_path, anyio_backend, "read")
    store = GatedStore(SqliteStore(db))
    gate = store.gate("append", entry_kinds=("decision",))
    async with ActorSystem(store, actors=[Racer]) as system:
        with anyio.fail_after(30):
            await gate.reached.wait()
            await anyio.wait_all_tasks_blocked()  # the other waits for the held commit
            KICK["go"].set()
            await anyio.wait_all_tasks_blocked()
            gate.open()
            ref = await system.spawn(Racer, "r")
            reply = await ref.ask(Race("read"), message_id="q")
        step = await _step(db)
    assert reply == "kicked:"
    assert sorted((c.args[0], c.status, c.settled_by) for c in step.calls) == [
        ("r0", "error", "cancelled"),
        ("r1", "error", "cancelled"),
    ]
    assert not any(c.in_doubt for c in step.calls)  # a read: plain cancelled
    await _replays(db, Race("read"), reply)


@pytest.mark.parametrize("happened", [True, False])
async def test_a_reconcile_cancelled_while_asked_at_recovery_records_its_answer(
    tmp_path: Path, anyio_backend: str, happened: bool
) -> None:
    """A reconciled write in doubt at recovery: the referee cancels the race while its
    reconcile function is asked; it is asked again, shielded, and its answer recorded."""
    db = await _crashed(tmp_path, anyio_backend, "reconcile", contestants=1)
    LEDGER["happened"] = happened
    async with ActorSystem(SqliteStore(db), actors=[Racer]) as system:
        with anyio.fail_after(30):
            while LEDGER["asks"] < 1:
                await anyio.sleep(0.01)
            KICK["go"].set()
            ref = await system.spawn(Racer, "r")
            reply = await ref.ask(Race("reconcile", 1), message_id="q")
        step = await _step(db)
    assert reply == "kicked:" and LEDGER["asks"] == 2
    (call,) = step.calls
    assert (call.status, call.settled_by) == ("error", "cancelled")
    assert call.reconciled == ("happened" if happened else "not_happened")
    assert call.reconciled_value == ("booked r0" if happened else None)
    assert not call.in_doubt and not call.needs_ruling
    await _replays(db, Race("reconcile", 1), reply)
    assert LEDGER["asks"] == 2  # replay asks nothing again


async def _cancelled_while_waiting(system: ActorSystem, db: Path, msg: Race) -> str:
    """The step waits for an operator's ruling (its asks get InDoubtError); the referee
    cancels the call; the step completes, and the actor runs again."""
    with anyio.fail_after(30):
        waiting = await system.wait_in_doubt("r")
        assert system.status("r") == "in_doubt"
        (intent_seq,) = waiting
        KICK["go"].set()
        ref = await system.spawn(Racer, "r")
        while True:  # an ask before the step saw the cancel still gets InDoubtError
            try:
                reply: str = await ref.ask(msg, message_id="q")
                break
            except InDoubtError:
                await anyio.sleep(0.01)
    assert system.status("r") == "idle"  # not left "in_doubt"
    assert system.in_doubt("r") == {}
    step = await _step(db)
    (call,) = step.calls
    assert call.intent_seq == intent_seq
    assert (call.status, call.settled_by) == ("error", "cancelled")
    assert call.in_doubt and call.needs_ruling  # it may have happened: an operator rules
    listed = await ops.calls_needing_ruling(system.store, "r")
    assert [c.intent_seq for c in listed] == [intent_seq]
    # nothing waits for a decision any more: a retry is refused, nothing written (a
    # result or a failure is a ruling, recorded in the operator history: docs/operators.md)
    with pytest.raises(ConfigurationError):
        await system.resolve("r", intent_seq, retry=True)
    assert [c.intent_seq for c in await ops.calls_needing_ruling(system.store, "r")] == [intent_seq]
    # the actor goes on with the next message
    assert await ref.ask(Race("read", contestants=0), message_id="next") == "kicked:"
    return reply


async def test_a_write_cancelled_while_waiting_for_an_operator_needs_a_ruling(
    tmp_path: Path, anyio_backend: str
) -> None:
    """After a SIGKILL: a plain write in doubt escalates; the referee cancels it while the
    operator is asked; it is recorded in doubt, for a ruling, and replay takes that path."""
    db = await _crashed(tmp_path, anyio_backend, "escalate", contestants=1)
    async with ActorSystem(SqliteStore(db), actors=[Racer]) as system:
        reply = await _cancelled_while_waiting(system, db, Race("escalate", 1))
        (call,) = await ops.calls_needing_ruling(system.store, "r")
        await ops.resolve(system.store, "r", call.intent_seq, fail="the bank has no such payment")
        assert await ops.calls_needing_ruling(system.store, "r") == []
    assert reply == "kicked:"
    await _replays(db, Race("escalate", 1), reply)


async def test_a_timed_out_write_cancelled_while_waiting_for_an_operator_needs_a_ruling(
    tmp_path: Path, anyio_backend: str
) -> None:
    """Live: a write's attempt times out (in doubt), its retry policy asks an operator
    first; the referee cancels it while it waits: recorded in doubt, not plain cancelled."""
    ledger = tmp_path / "ledger.txt"
    LEDGER.update(path=str(ledger), hold=True, asks=0, happened=True)
    KICK["go"] = anyio.Event()
    db = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(db), actors=[Racer]) as system:
        ref = await system.spawn(Racer, "r")
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                # the ask gets InDoubtError while the step waits for the operator
                with pytest.raises(InDoubtError):
                    await ref.ask(Race("timeout", contestants=1), message_id="q")

            tg.start_soon(ask)
            reply = await _cancelled_while_waiting(system, db, Race("timeout", 1))
    assert reply == "kicked:"
    assert ledger.read_text().splitlines() == ["start t0"]  # the one attempt, never re-run
    await _replays(db, Race("timeout", 1), reply)


async def test_a_decision_being_logged_when_the_cancel_comes_settles_the_call(
    tmp_path: Path, anyio_backend: str
) -> None:
    """One decision per intent: the operator's decision is being committed (held) when the
    referee cancels the waiting call; the decision settles it (no cancelled result is
    written too) and the call returns it, as replay does."""
    db = await _crashed(tmp_path, anyio_backend, "escalate", contestants=1)
    store = GatedStore(SqliteStore(db))
    gate = store.gate("append", entry_kinds=("decision",))
    async with ActorSystem(store, actors=[Racer]) as system:
        with anyio.fail_after(30):
            (intent_seq,) = await system.wait_in_doubt("r")
            async with anyio.create_task_group() as tg:
                tg.start_soon(lambda: system.resolve("r", intent_seq, result="paid e0"))
                await gate.reached.wait()  # the decision is logged, its commit held
                KICK["go"].set()
                await anyio.wait_all_tasks_blocked()
                gate.open()
            ref = await system.spawn(Racer, "r")
            reply = await ref.ask(Race("escalate", 1), message_id="q")
        step = await _step(db)
    assert reply == "kicked:paid e0"
    (call,) = step.calls
    assert (call.status, call.value, call.settled_by) == ("resolved", "paid e0", "operator")
    assert not call.in_doubt and [d.action for d in call.decisions] == ["result"]
    conn = sqlite3.connect(db)
    try:  # one settlement: no cancelled result next to the decision
        (results,) = conn.execute(
            "SELECT count(*) FROM entries WHERE kind = 'result' AND ref = ?", (intent_seq,)
        ).fetchone()
    finally:
        conn.close()
    assert results == 0
    await _replays(db, Race("escalate", 1), reply)
