"""Store faults: the caller gets a clear error, nothing half-written is read back as valid,
and the system keeps serving the other actors.

``FaultyStore`` fails or stalls the Nth matching call of a real store (memory or SQLite).
After each fault the test checks three things: what the caller saw, that the other actor
kept working, and, by recovering from the inner store in a fresh system, that every
acknowledged message was handled exactly once and the failed one at most once (exactly once
after sending it again with the same message id).
"""

from __future__ import annotations

import sqlite3
from pathlib import Path
from typing import Any

import anyio
import pytest
from actorlog import (
    ActorlogError,
    ActorQuarantinedError,
    ActorSystem,
    CorruptEntryError,
    StoreUnavailableError,
)
from actorlog.stores import SqliteStore

from .conftest import FIGURES, StoreFactory
from .faulty import Fault, FaultyStore
from .helpers import TOOLS, Add, Counter, Get

pytestmark = pytest.mark.anyio


def _chain(exc: BaseException) -> list[BaseException]:
    out: list[BaseException] = []
    e: BaseException | None = exc
    while e is not None and e not in out:
        out.append(e)
        e = e.__cause__ or e.__context__
    return out


def _caused_by_store(exc: BaseException) -> bool:
    return any(isinstance(e, StoreUnavailableError) for e in _chain(exc))


async def _state(system: ActorSystem, actor_id: str) -> dict[str, Any]:
    ref = await system.spawn(Counter, actor_id)
    state: dict[str, Any] = await ref.ask(Get())
    return state


async def _check_recovered(store_factory: StoreFactory, acked: list[int], failed: int) -> None:
    """A fresh system over the real store: acknowledged messages handled once; sending
    the failed message again (same id) makes it handled exactly once."""
    async with ActorSystem(store_factory(), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "victim")
        await ref.ask(Add(failed), message_id=f"m{failed}")
        seen = (await _state(system, "victim"))["seen"]
        assert sorted(seen) == sorted([*acked, failed]), seen
        by = await _state(system, "bystander")
        assert len(by["seen"]) == len(set(by["seen"]))


@pytest.mark.parametrize("kind", ["disk_full", "io_error", "lock_timeout", "error_after_commit"])
@pytest.mark.parametrize("entry_kind", ["message", "intent", "result"])
async def test_failed_append_gives_a_clear_error_and_loses_nothing(
    make_store: StoreFactory, kind: str, entry_kind: str
) -> None:
    inner = make_store()
    fault = Fault("append", 1, kind, actor_id="victim", entry_kinds=(entry_kind,))
    fault.stall_seconds = 0.05
    faulty = FaultyStore(inner, [])
    acked: list[int] = []
    async with ActorSystem(faulty, actors=[Counter]) as system:
        victim = await system.spawn(Counter, "victim")
        bystander = await system.spawn(Counter, "bystander")
        for i in range(3):
            await victim.ask(Add(i), message_id=f"m{i}")
            acked.append(i)
        faulty.add(fault)
        with pytest.raises(ActorlogError) as info:
            await victim.ask(Add(3), message_id="m3", timeout=10)
        assert fault.fired
        assert _caused_by_store(info.value), repr(info.value)
        assert "injected" in "".join(str(e) for e in _chain(info.value))
        # a store failure stops the actor; it is not quarantined (its log is fine)
        with anyio.fail_after(10):
            while system.status("victim") != "stopped":
                await anyio.sleep(0.01)
        # the system keeps serving the other actor, during and after
        for i in range(3):
            await bystander.ask(Add(100 + i))
        # and the victim comes back once the store does: spawning it reads the truth back
        victim = await system.spawn(Counter, "victim")
        await victim.ask(Add(3), message_id="m3")
        await victim.ask(Add(4), message_id="m4")
        acked.append(4)
        assert sorted((await _state(system, "victim"))["seen"]) == [0, 1, 2, 3, 4]
    FIGURES["store faults injected"] += 1
    await _check_recovered(lambda: inner, acked, 3)


async def test_torn_batch_is_never_read_back_as_valid(make_store: StoreFactory) -> None:
    """A store that broke atomicity (half a payload written): recovery refuses the damaged
    entry (checksum), quarantines that actor only, and cuts or rewrites nothing."""
    inner = make_store()
    faulty = FaultyStore(inner)
    async with ActorSystem(faulty, actors=[Counter]) as system:
        victim = await system.spawn(Counter, "victim")
        bystander = await system.spawn(Counter, "bystander")
        await victim.ask(Add(1), message_id="m1")
        faulty.add(Fault("append", 1, "torn", actor_id="victim", entry_kinds=("message",)))
        with pytest.raises(ActorlogError) as info:
            await victim.ask(Add(2), message_id="m2", timeout=10)
        assert _caused_by_store(info.value)
        await bystander.ask(Add(7))
    FIGURES["store faults injected"] += 1
    await inner.open()
    rows_before = await inner.read("victim")
    await inner.close()
    async with ActorSystem(inner, actors=[Counter]) as system:
        with pytest.raises(ActorQuarantinedError) as q:
            await system.spawn(Counter, "victim")
        cause = q.value.__cause__
        assert isinstance(cause, CorruptEntryError), repr(cause)
        assert (cause.actor_id, cause.seq, cause.check) == (
            "victim",
            rows_before[-1].seq,
            "checksum",
        )
        assert system.status("victim") == "quarantined"
        by = await system.spawn(Counter, "bystander")
        assert (await by.ask(Get()))["seen"] == [7]
        assert await inner.read("victim") == rows_before  # nothing cut or rewritten


async def test_cancelled_sender_mid_commit_gets_exactly_once_by_message_id(
    make_store: StoreFactory,
) -> None:
    """The sender is cancelled while its message's commit is stalled: the commit completes
    (it is shielded), other actors are served meanwhile, and sending again is a no-op."""
    inner = make_store()
    faulty = FaultyStore(inner)
    async with ActorSystem(faulty, actors=[Counter]) as system:
        victim = await system.spawn(Counter, "victim")
        bystander = await system.spawn(Counter, "bystander")
        stall = faulty.add(Fault("append", 1, "stall", actor_id="victim", entry_kinds=("message",)))
        stall.stall_seconds = 30
        async with anyio.create_task_group() as tg:
            cancel = anyio.CancelScope()

            async def send() -> None:
                with cancel:
                    await victim.send(Add(5), message_id="m5")

            tg.start_soon(send)
            await stall.stalled.wait()
            cancel.cancel()
            assert (await bystander.ask(Add(1))) == 10  # served while the commit hangs
            stall.release.set()
        await victim.send(Add(5), message_id="m5")
        assert (await victim.ask(Get()))["seen"] == [5]
    FIGURES["store faults injected"] += 1
    async with ActorSystem(inner, actors=[Counter]) as system:
        assert (await _state(system, "victim"))["seen"] == [5]


async def test_shutdown_while_a_commit_is_stalled_keeps_the_log_consistent(
    make_store: StoreFactory,
) -> None:
    inner = make_store()
    faulty = FaultyStore(inner)
    TOOLS.calls.clear()
    async with ActorSystem(faulty, actors=[Counter], shutdown_grace=0.05) as system:
        victim = await system.spawn(Counter, "victim")
        await victim.ask(Add(1), message_id="m1")
        stall = faulty.add(Fault("append", 1, "stall", actor_id="victim", entry_kinds=("intent",)))
        stall.stall_seconds = 0.3
        await victim.send(Add(2), message_id="m2")
        await stall.stalled.wait()
    FIGURES["store faults injected"] += 1
    async with ActorSystem(inner, actors=[Counter]) as system:
        victim = await system.spawn(Counter, "victim")
        assert await victim.ask(Add(2), message_id="m2") == 30  # 10 + 20, handled once
        assert (await victim.ask(Get()))["seen"] == [1, 2]
    assert TOOLS.count("record", 2) == 1


@pytest.mark.parametrize("kind", ["io_error", "torn", "error_after_commit"])
async def test_failed_snapshot_write_never_blocks_correctness(
    make_store: StoreFactory, kind: str
) -> None:
    inner = make_store()
    faulty = FaultyStore(inner, [Fault("save_snapshot", 1, kind, actor_id="victim")])
    async with ActorSystem(faulty, actors=[Counter]) as system:
        victim = await system.spawn(Counter, "victim")  # snapshot_every = 3
        for i in range(7):
            await victim.ask(Add(i), message_id=f"m{i}")
        assert system.status("victim") in ("idle", "running")
    FIGURES["store faults injected"] += 1
    async with ActorSystem(inner, actors=[Counter]) as system:
        assert (await _state(system, "victim"))["seen"] == list(range(7))


@pytest.mark.parametrize("method", ["read", "list_snapshots", "load_snapshot", "get_actor"])
async def test_failed_read_during_recovery_is_clear_and_retryable(
    make_store: StoreFactory, method: str
) -> None:
    inner = make_store()
    async with ActorSystem(inner, actors=[Counter]) as system:
        victim = await system.spawn(Counter, "victim")
        for i in range(5):
            await victim.ask(Add(i), message_id=f"m{i}")
        await victim.send(Add(5), message_id="m5")
    faulty = FaultyStore(inner, [Fault(method, 1, "io_error", actor_id="victim")])
    async with ActorSystem(faulty, actors=[Counter], recover_on_start=False) as system:
        bystander = await system.spawn(Counter, "bystander")
        with pytest.raises(ActorlogError) as info:
            await system.spawn(Counter, "victim")
        assert _caused_by_store(info.value), repr(info.value)
        assert (await bystander.ask(Add(1))) == 10
        victim = await system.spawn(Counter, "victim")  # the store is back
        assert (await victim.ask(Get()))["seen"] == [0, 1, 2, 3, 4, 5]
    FIGURES["store faults injected"] += 1


async def test_failed_registration_writes_nothing_and_can_be_retried(
    make_store: StoreFactory,
) -> None:
    inner = make_store()
    faulty = FaultyStore(inner, [Fault("register_actor", 1, "disk_full")])
    async with ActorSystem(faulty, actors=[Counter]) as system:
        with pytest.raises(StoreUnavailableError, match="disk is full"):
            await system.spawn(Counter, "new")
        assert await inner.list_actors() == []
        ref = await system.spawn(Counter, "new")
        assert await ref.ask(Add(1)) == 10
    FIGURES["store faults injected"] += 1


async def test_failed_history_and_snapshot_cleanup_are_harmless(make_store: StoreFactory) -> None:
    inner = make_store()
    faults = [Fault("record_event", n, "io_error") for n in range(1, 20)]
    faults += [Fault("delete_snapshots", 1, "io_error")]
    async with ActorSystem(FaultyStore(inner, faults), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "victim", snapshot_keep=2)
        for i in range(12):
            await ref.ask(Add(i))
    async with ActorSystem(inner, actors=[Counter]) as system:
        assert (await _state(system, "victim"))["seen"] == list(range(12))
    FIGURES["store faults injected"] += 2


# -- real SQLite faults, below the store ------------------------------------------------------


async def test_real_sqlite_disk_full_then_space_again(tmp_path: Path) -> None:
    """SQLITE_FULL from the real database (``max_page_count``), not from the wrapper."""
    store = SqliteStore(tmp_path / "agents.db")
    async with ActorSystem(store, actors=[Counter]) as system:
        victim = await system.spawn(Counter, "victim")
        bystander = await system.spawn(Counter, "bystander")
        await victim.ask(Add(1), message_id="m1")
        await bystander.ask(Add(1), message_id="b1")
        w = store._writer()  # reaching under the store: tests only
        ((pages,),) = await w.execute_fetchall("PRAGMA page_count")
        await w.execute(f"PRAGMA max_page_count = {pages}")
        with pytest.raises(ActorlogError) as info:
            await victim.ask(Add(2, note="x" * 200_000), message_id="m2", timeout=10)
        assert any("full" in str(e) for e in _chain(info.value)), repr(info.value)
        await w.execute("PRAGMA max_page_count = 1073741823")
        assert await bystander.ask(Add(2), message_id="b2") == 30
        victim = await system.spawn(Counter, "victim")
        assert await victim.ask(Add(3), message_id="m3") == 40
    FIGURES["store faults injected"] += 1
    async with ActorSystem(SqliteStore(tmp_path / "agents.db"), actors=[Counter]) as system:
        assert (await _state(system, "victim"))["seen"] == [1, 3]


async def test_real_sqlite_lock_held_by_another_process(tmp_path: Path) -> None:
    """Another connection holds the write lock longer than busy_timeout: appends fail with
    a clear 'database is locked'; once it lets go, every actor works again."""
    db = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(db, busy_timeout=0.2), actors=[Counter]) as system:
        a = await system.spawn(Counter, "victim")
        b = await system.spawn(Counter, "bystander")
        await a.ask(Add(1), message_id="m1")
        other = sqlite3.connect(db, isolation_level=None)
        other.execute("BEGIN EXCLUSIVE")
        try:
            with pytest.raises(ActorlogError) as info:
                await a.ask(Add(2), message_id="m2", timeout=10)
            assert any("locked" in str(e) for e in _chain(info.value)), repr(info.value)
        finally:
            other.execute("ROLLBACK")
            other.close()
        assert await b.ask(Add(5), message_id="b5") == 50
        a = await system.spawn(Counter, "victim")
        assert await a.ask(Add(2), message_id="m2") == 30
    FIGURES["store faults injected"] += 1
