"""A fork keeps its source's spawn options (found by the model test's fork rule).

``spawn(..., snapshot_every=1, snapshot_keep=5)`` saves the options in the store (an
``options`` event) so that they hold "for good": through passivation, restarts and new
processes (docs/tuning.md). ``fork`` copies the log and a snapshot but not that event, so the
fork ran with the class defaults: no snapshot after any of its steps, and every recovery of
it replayed all its steps since the copied snapshot.
"""

from __future__ import annotations

import pytest
from actorlog import ActorSystem, ops
from actorlog.stores import MemoryStore

from ._agents import Biller, Job, ran

pytestmark = pytest.mark.anyio


async def test_a_fork_keeps_the_spawn_options_of_its_source() -> None:
    ran.clear()
    store = MemoryStore()
    async with ActorSystem(store, actors=[Biller]) as system:
        ref = await system.spawn(Biller, "bill-1", snapshot_every=1, snapshot_keep=5)
        for name in ("a", "b"):
            await ref.ask(Job(name), message_id=name)
    await store.open()
    h = await ops.history(store, "bill-1")
    assert [s.seq for s in h.snapshots] == [4, 8]  # one after each step (4 entries a step)
    await ops.fork(store, "bill-1", at=8, new_id="bill-2", yes=True)
    async with ActorSystem(store, actors=[Biller]) as system:
        fork = await system.spawn(Biller, "bill-2")  # as docs/operators.md says: no options
        for name in ("c", "d"):
            await fork.ask(Job(name), message_id=name)
    await store.open()
    h = await ops.history(store, "bill-2")
    assert [s.seq for s in h.snapshots] == [8, 12, 16]  # was [8]: the class default (None)
    assert [e.detail for e in h.events if e.kind == "options"] == [
        {"snapshot_every": 1, "snapshot_keep": 5}
    ]
    async with ActorSystem(store, actors=[Biller]) as system:
        await system.spawn(Biller, "bill-2")
        rec = system.last_recovery("bill-2")
        assert rec is not None and rec["steps_replayed"] == 0, rec  # was 2
