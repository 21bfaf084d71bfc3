"""The journal's shield around an append (``_durability/wal.py``): skipped only for a store
whose ``append`` never suspends (``MemoryStore``'s own), kept for every other store, and for
a subclass of ``MemoryStore`` that overrides ``append`` (it may suspend: a test's slow or
faulty store). A cancellation that reaches a suspended append would leave the journal
broken; shielded, the append completes and the actor goes on."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from actorlog import ActorSystem
from actorlog._durability.wal import append_never_suspends
from actorlog.stores import MemoryStore, SqliteStore

from tests.torture.helpers import Add, Counter, Get

pytestmark = pytest.mark.anyio


class _SlowAppend(MemoryStore):
    """A MemoryStore whose append suspends: once ``stall`` is set, the next waits for
    ``release``."""

    def __init__(self) -> None:
        super().__init__()
        self.stall = False
        self.stalled = anyio.Event()
        self.release = anyio.Event()

    async def append(self, actor_id: str, expected_last_seq: int, rows: Any) -> Any:
        if self.stall:
            self.stall = False
            self.stalled.set()
            await self.release.wait()
        return await super().append(actor_id, expected_last_seq, rows)


class _Inherits(MemoryStore):
    """A subclass that keeps MemoryStore's append."""


class _Wrapper:
    """A store forwarding to a MemoryStore (as the tests' FaultyStore does)."""

    def __init__(self) -> None:
        self.inner = MemoryStore()

    async def append(self, actor_id: str, expected_last_seq: int, rows: Any) -> Any:
        return await self.inner.append(actor_id, expected_last_seq, rows)


def test_only_a_store_whose_own_append_never_suspends_goes_unshielded(tmp_path: Path) -> None:
    assert append_never_suspends(MemoryStore())
    assert append_never_suspends(_Inherits())
    assert not append_never_suspends(_SlowAppend())  # overrides append: shielded
    assert not append_never_suspends(_Wrapper())
    assert not append_never_suspends(SqliteStore(tmp_path / "a.db"))


@pytest.mark.parametrize("anyio_backend", ["asyncio", "trio"])
async def test_a_cancel_during_a_suspended_append_of_a_memory_subclass_leaves_the_log_whole() -> (
    None
):
    """The sender is cancelled while its message's append is suspended: the append is
    shielded, so it completes, the journal is not broken, and the actor goes on."""
    store = _SlowAppend()
    async with ActorSystem(store, actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c")
        await ref.ask(Add(1), message_id="m1")  # handled and durable: the log is idle
        store.stall = True
        async with anyio.create_task_group() as tg:
            cancel = anyio.CancelScope()

            async def send() -> None:
                with cancel:
                    await ref.send(Add(2), message_id="m2")

            tg.start_soon(send)
            await store.stalled.wait()
            cancel.cancel()
            await anyio.sleep(0.01)  # the cancel reaches the sender while the append waits
            store.release.set()
        # the append completed although its sender was cancelled: m2 is in the log, and
        # the journal is whole (an interrupted append would have broken it)
        assert await store.find_message("c", "m2") is not None
        assert system._cells["c"].journal.broken is None
        await ref.send(Add(2), message_id="m2")  # logged already: a no-op
        assert (await ref.ask(Get()))["seen"] == [1, 2]
    async with ActorSystem(store, actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c")
        assert (await ref.ask(Get()))["seen"] == [1, 2]
