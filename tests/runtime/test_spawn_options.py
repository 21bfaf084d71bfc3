"""Per-spawn snapshot options hold for the system, not only for the first cell (issue 18.4)."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from actorlog import ActorSystem
from actorlog.store import Store

from ..durability.test_snapshot_policy import Counter
from .agents import Add

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


async def test_spawn_options_survive_passivation(make_store: StoreFactory) -> None:
    store = make_store()
    async with ActorSystem(store, actors=[Counter], passivate_after=0.05) as system:
        ref = await system.spawn(Counter, "c", snapshot_every=1, snapshot_keep=5)
        await ref.ask(Add(1))
        with anyio.fail_after(10):
            while "c" in system._cells:
                await anyio.sleep(0.01)
        for _ in range(7):
            await ref.ask(Add(1))
        policy = system._cells["c"].policy
        assert (policy.every, policy.keep) == (1, 5)
        with anyio.fail_after(10):  # the last one is written after the reply
            while len(await store.list_snapshots("c")) < 5:
                await anyio.sleep(0.01)


async def test_spawn_options_apply_to_a_running_actor(make_store: StoreFactory) -> None:
    store = make_store()
    async with ActorSystem(store, actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c")  # class: snapshot_every = 3
        await system.spawn(Counter, "c", snapshot_every=1)
        assert await ref.ask(Add(1)) == 1
        assert system._cells["c"].policy.every == 1
        with anyio.fail_after(10):  # written after the reply
            while not await store.list_snapshots("c"):
                await anyio.sleep(0.01)


async def test_spawn_options_hold_in_a_new_system(make_store: StoreFactory) -> None:
    """Options are saved with the actor: a new system (a new process) starts the actor with
    them without being given them again, and a later spawn changes only what it gives."""
    async with ActorSystem(make_store(), actors=[Counter]) as system:
        await system.spawn(Counter, "c", snapshot_every=1, snapshot_keep=5)
    async with ActorSystem(make_store(), actors=[Counter]) as system:
        await system.spawn(Counter, "c")
        policy = system._cells["c"].policy
        assert (policy.every, policy.keep) == (1, 5)
        await system.spawn(Counter, "c", snapshot_keep=7)
    store = make_store()
    async with ActorSystem(store, actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c")
        policy = system._cells["c"].policy
        assert (policy.every, policy.keep) == (1, 7)
        for _ in range(3):
            await ref.ask(Add(1))
        with anyio.fail_after(10):  # snapshot_every=1: one per step, written after the reply
            while len(await store.list_snapshots("c")) < 3:
                await anyio.sleep(0.01)
