"""Messaging holes (issues 11.3, 11.4, 18.2, 18.3): cancelled and retried asks, duplicate
sends acknowledged before they are durable, re-asks racing passivation, cells passivated
before the post they were started for.

Every test runs twice: with the message-id filter (a fresh id is checked in memory, only a
maybe-seen one in the store) and without it (every id looked up in the store, as for a store
without ``MessageIdIndex`` or a log over ``SEEN_IDS_LIMIT``): the races differ.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from actorlog import ActorSystem, StoreUnavailableError
from actorlog._durability import seenids as seenids_module
from actorlog.store import Store
from actorlog.stores import MemoryStore

from ..runtime._gated import GatedStore
from ..runtime.agents import Add, Researcher

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@pytest.fixture(autouse=True, params=["filter", "store"])
def lookup(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """How a post checks its id: ``filter`` (the default), or ``store`` for every id. The
    value is the name of the store method a new cell's first fresh id reaches first: the
    index lookup in both (the filter loads in the background, issue 24 item 23)."""
    if request.param == "store":
        monkeypatch.setattr(seenids_module, "SEEN_IDS_LIMIT", 0)
    return "find_message"


async def wait_until(cond: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not cond():
            await anyio.sleep(0.005)


async def message_ids(make_store: StoreFactory, actor_id: str) -> list[str | None]:
    store = make_store()
    await store.open()
    try:
        return [r.message_id for r in await store.read(actor_id, kinds=["message"])]
    finally:
        if not isinstance(store, MemoryStore):
            await store.close()


async def test_cancelled_reask_leaves_no_orphan_slot(make_store: StoreFactory) -> None:
    """11.3: an ask of an answered id cancelled while it looks the reply up must not leave a
    slot behind that later asks with that id wait on forever."""
    store = GatedStore(make_store())
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Add(2), message_id="m") == "2"
        gate = store.gate("find_ref", actor_id="r")
        with anyio.CancelScope() as scope:
            async with anyio.create_task_group() as tg:

                async def reask() -> None:
                    await ref.ask(Add(2), message_id="m")

                tg.start_soon(reask)
                await gate.reached.wait()
                scope.cancel()
        gate.open()
        with anyio.fail_after(5):
            assert await ref.ask(Add(2), message_id="m") == "2"
        cell = system._cells["r"]
        assert not cell.waiters and not cell.inflight_ids
        assert cell.is_idle()


async def test_cancelled_ask_with_timeout_leaves_no_waiter(make_store: StoreFactory) -> None:
    store = GatedStore(make_store())
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        gate = store.gate("append", actor_id="r")  # the step's commit
        with anyio.move_on_after(0.05):
            await ref.ask(Add(1), message_id="m")
        gate.open()
        with anyio.fail_after(5):
            assert await ref.ask(Add(1), message_id="m") == "1"
        await wait_until(lambda: system._cells["r"].is_idle())
        assert not system._cells["r"].waiters
    assert await message_ids(make_store, "r") == ["m"]


async def test_duplicate_send_is_not_acknowledged_before_the_commit(
    make_store: StoreFactory,
) -> None:
    """11.4: a retry of an in-flight send waits for the commit carrying the message and gets
    its failure; it never returns while the message may still be lost."""
    store = GatedStore(make_store())
    results: dict[str, Any] = {}
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        gate = store.gate("append", actor_id="r", fail=True)

        async def send(name: str) -> None:
            try:
                await ref.send(Add(1), message_id="m")
                results[name] = "ok"
            except Exception as exc:
                results[name] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(send, "first")
            await gate.reached.wait()
            tg.start_soon(send, "retry")
            # the retry found "m" in flight and waits for the commit carrying it
            journal = system._cells["r"].journal
            await wait_until(lambda: journal._flush_done is not None or "retry" in results)
            gate.open()
    assert isinstance(results["first"], StoreUnavailableError), results
    assert isinstance(results["retry"], StoreUnavailableError), results
    assert await message_ids(make_store, "r") == []


async def test_sender_waiting_behind_a_failed_commit_gets_the_store_error(
    make_store: StoreFactory,
) -> None:
    """11.4: a send whose message rides on another caller's failed commit gets the documented
    StoreUnavailableError, not ActorStoppedError."""
    store = GatedStore(make_store())
    results: dict[str, Any] = {}
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        gate = store.gate("append", actor_id="r", fail=True)

        async def send(name: str) -> None:
            try:
                await ref.send(Add(1), message_id=name)
                results[name] = "ok"
            except Exception as exc:
                results[name] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(send, "a")
            await gate.reached.wait()
            tg.start_soon(send, "b")
            # b's message is written (in flight) and b waits for the commit under way (a's,
            # held by the gate): gated on that, not on a sleep (b first looks its id up in
            # the store, which on PostgreSQL can take longer than any fixed sleep)
            cell = system._cells["r"]
            await wait_until(lambda: "b" in cell.inflight_ids or "b" in results)
            gate.open()
    assert isinstance(results["a"], StoreUnavailableError), results
    assert isinstance(results["b"], StoreUnavailableError), results


async def test_reask_while_the_step_commits_does_not_log_the_message_twice(
    make_store: StoreFactory,
) -> None:
    """Sibling of 11.4: an ask retried after its step ran but before that step's commit
    completed must wait for it, not log a second message with the same id."""
    store = GatedStore(make_store())
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        gate = store.gate("append", actor_id="r")
        replies: list[Any] = []

        async def ask() -> None:
            replies.append(await ref.ask(Add(3), message_id="m"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            await gate.reached.wait()
            tg.start_soon(ask)
            # the retry found "m" handled but not durable: it waits for the step's commit
            journal = system._cells["r"].journal
            await wait_until(lambda: journal._flush_done is not None)
            gate.open()
        assert replies == ["3", "3"]
        assert system.status("r") == "idle"
    assert await message_ids(make_store, "r") == ["m"]


async def test_reask_while_passivating_gets_the_recorded_reply(make_store: StoreFactory) -> None:
    """18.2: re-asking an answered id while the actor passivates returns the recorded reply
    (slow lookups; the passivation, if it starts at all, is held while it writes its last
    snapshot so that the re-ask's lookups straddle it)."""
    store = GatedStore(make_store())
    async with ActorSystem(store, actors=[Researcher], passivate_after=0.05) as system:
        ref = await system.spawn(Researcher, "r")
        assert await ref.ask(Add(4), message_id="m") == "4"
        find = store.gate("find_message", actor_id="r")
        snap = store.gate("save_snapshot", actor_id="r")
        step = store.gate("find_ref", actor_id="r")
        got: list[Any] = []

        async def reask() -> None:
            got.append(await ref.ask(Add(4), message_id="m"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(reask)
            with anyio.fail_after(10):
                await find.reached.wait()
            with anyio.move_on_after(1):  # a fixed runtime does not passivate meanwhile
                await snap.reached.wait()
            find.open()
            with anyio.move_on_after(1):
                await step.reached.wait()
            snap.open()
            with anyio.move_on_after(1):
                await wait_until(lambda: "r" not in system._cells)
            step.open()
        assert got == ["4"]


async def test_cell_started_for_a_post_is_not_passivated_before_it(
    make_store: StoreFactory, lookup: str
) -> None:
    """18.3: a cell recovered for a message must not count as idle before that message is
    posted, however slow the lookup and however short ``passivate_after``."""
    store = GatedStore(make_store())
    async with ActorSystem(store, actors=[Researcher], passivate_after=0.01) as system:
        ref = system.ref(Researcher, "r")
        assert await ref.ask(Add(1), message_id="a") == "1"
        await wait_until(lambda: "r" not in system._cells)
        slow = store.gate(lookup, actor_id="r")  # the new cell's check of the fresh id
        got: list[Any] = []

        async def ask() -> None:
            got.append(await ref.ask(Add(1), message_id="b"))

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask)
            with anyio.fail_after(10):
                await slow.reached.wait()
            await anyio.sleep(0.1)  # many passivation rounds
            slow.open()
        assert got == ["2"]
        assert store.calls["list_snapshots"] <= 3  # not recovered over and over


async def test_max_actors_one_many_clients_all_asks_succeed(make_store: StoreFactory) -> None:
    """18.3: with max_actors=1 and many actors and clients, every ask is answered."""
    store = GatedStore(make_store())
    # a loaded machine
    store.delay = {"find_message": 0.002, "message_ids": 0.002, "get_actor": 0.002}
    async with ActorSystem(store, actors=[Researcher], max_actors=1) as system:
        errors: list[BaseException] = []

        async def client(i: int) -> None:
            for k in range(5):
                try:
                    ref = system.ref(Researcher, f"a{(i + k) % 6}")
                    await ref.ask(Add(1), message_id=f"{i}-{k}")
                except Exception as exc:
                    errors.append(exc)

        async with anyio.create_task_group() as tg:
            for i in range(12):
                tg.start_soon(client, i)
        assert errors == []
        totals = [int(await system.ref(Researcher, f"a{i}").ask(Add(0))) for i in range(6)]
        assert sum(totals) == 60
