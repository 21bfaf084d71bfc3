"""Retention and compaction (issue 14.4) on every store: what compaction removes, what it
must keep (recovery, verify, history, in-doubt intents, the dedupe window), and bad values."""

from __future__ import annotations

import json
from collections.abc import Callable
from datetime import timedelta
from typing import Any, ClassVar

import anyio
import attrs
import pytest
from actorlog import (
    Actor,
    ActorSystem,
    ConfigurationError,
    Context,
    LogCompactedError,
    ops,
)
from actorlog._durability.retention import bound, compact
from actorlog.store import CompactingStore, Store

from tests._payload import payload_of

from ..runtime.agents import Add

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@attrs.define
class Total:
    n: int = 0


class Keeper(Actor[Total], name="tests.retention.Keeper"):
    snapshot_every: ClassVar[int | None] = 5
    snapshot_keep: ClassVar[int] = 2
    retention: ClassVar[str | float | timedelta] = "since-snapshot"

    async def receive(self, ctx: Context, msg: Add) -> int:
        ctx.now()  # an effect entry per step: entries between message and step
        self.state.n += msg.n
        return self.state.n


class Auditor(Keeper, name="tests.retention.Auditor"):
    retention: ClassVar[str | float | timedelta] = "all"


async def _compacted(store: Store, actor_id: str, at_least: int) -> int:
    """Wait for the background compaction; the actor's first kept seq."""
    with anyio.fail_after(10):
        while True:
            row = await store.get_actor(actor_id)
            assert row is not None
            if row.first_seq >= at_least:
                return row.first_seq
            await anyio.sleep(0.01)


async def test_since_snapshot_compacts_and_recovery_and_verify_hold(
    make_store: StoreFactory,
) -> None:
    store = make_store()
    async with ActorSystem(store, actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        for i in range(40):
            assert await ref.ask(Add(1), message_id=f"m{i}") == i + 1
        # wait for the compaction after the last snapshots (an earlier one may land first)
        first = await _compacted(store, "k", 51)
        assert first > 50  # 40 steps of 3 entries; two snapshots 5 steps apart kept
    store = make_store()
    async with ActorSystem(store, actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        assert await ref.ask(Add(1)) == 41  # recovered from a snapshot over the kept log
    await store.open()
    report = await ops.verify(store, "k")
    assert report.ok, report.findings
    assert report.compacted["k"] >= first
    h = await ops.history(store, "k")
    assert h.actor.first_seq >= first
    assert any(e.kind == "compacted" for e in h.events)
    assert h.steps and h.steps[0].message_seq >= first
    await store.close()


async def test_retention_all_keeps_everything(make_store: StoreFactory) -> None:
    store = make_store()
    async with ActorSystem(store, actors=[Auditor]) as system:
        ref = await system.spawn(Auditor, "a")
        for _ in range(20):
            await ref.ask(Add(1))
        await anyio.sleep(0.05)
        row = await store.get_actor("a")
        assert row is not None and row.first_seq == 1
        assert [r.seq for r in await store.read("a", upto_seq=3)] == [1, 2, 3]


async def test_retention_spawn_option_is_saved_and_used_offline(make_store: StoreFactory) -> None:
    store = make_store()
    async with ActorSystem(store, actors=[Auditor]) as system:
        ref = await system.spawn(Auditor, "a", retention=timedelta(hours=1))
        for _ in range(20):
            await ref.ask(Add(1))
        assert system._cells["a"].policy.retention == 3600.0
        events = await store.read_events("a")
        saved = [json.loads(e.detail) for e in events if e.kind == "options"]
        assert saved[-1]["retention"] == 3600.0
        await anyio.sleep(0.05)
        row = await store.get_actor("a")
        assert row is not None and row.first_seq == 1  # all logged within the window
    await store.open()
    done = await ops.compact(store)  # the saved window: everything is within it
    assert [(r.actor_id, r.removed) for r in done] == [("a", 0)]
    assert "window" in done[0].reason
    done = await ops.compact(store, "a", retention="since-snapshot", by="tester")
    assert done[0].removed > 0
    details = [json.loads(e.detail) for e in await store.read_events("a") if e.kind == "compacted"]
    assert details[-1]["by"] == "tester"
    await store.close()


@pytest.mark.parametrize(
    "bad", ["some", "", timedelta(0), timedelta(seconds=-1), -1, 0, float("nan"), True, None]
)
async def test_bad_retention_is_refused_at_the_call(make_store: StoreFactory, bad: Any) -> None:
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        with pytest.raises(ConfigurationError, match="retention"):
            await system.spawn(Keeper, "k", retention=bad)

        class Bad(Keeper, name="tests.retention.Bad"):
            retention = bad

        with pytest.raises(ConfigurationError, match="retention"):
            await system.spawn(Bad, "b")
        assert await system.store.get_actor("k") is None


async def test_a_window_keeps_what_was_logged_within_it(make_store: StoreFactory) -> None:
    store = make_store()
    async with ActorSystem(store, actors=[Auditor]) as system:
        ref = await system.spawn(Auditor, "a")
        for _ in range(30):
            await ref.ask(Add(1))
    await store.open()
    msgs = await store.read("a", kinds=["message"])
    middle = msgs[10]
    at = payload_of(middle.kind, middle.payload)["at"]
    # a window that starts right at the 11th message: everything before it may go, but not
    # what was logged in the same millisecond ([F19]: ``at`` has millisecond resolution)
    start = min(m.seq for m in msgs if payload_of(m.kind, m.payload)["at"] >= at)
    assert start <= middle.seq
    first, upto, reason = await bound(store, "a", 100.0, now=at + 100.0)
    assert (first, upto) == (1, start - 1) and "window" in reason
    done = await compact(store, "a", 100.0, by="test", now=at + 100.0)
    assert done.first_seq == start
    assert (await store.read("a", limit=1))[0].seq == start
    assert (await ops.verify(store)).ok
    await store.close()


async def test_dedupe_window_is_the_kept_log(make_store: StoreFactory) -> None:
    """A repeated message id in the kept log is answered from the log; one whose message was
    compacted away is a new message (docs/recovery.md states it)."""
    store = make_store()
    async with ActorSystem(store, actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        for i in range(30):
            await ref.ask(Add(1), message_id=f"m{i}")
        first = await _compacted(store, "k", 2)
        kept = await store.read("k", kinds=["message"])
        assert kept[0].seq >= first
        # the last kept message: background compactions of earlier snapshots may still be
        # running and remove kept[0] meanwhile; no later snapshot can remove this one
        assert await ref.ask(Add(1), message_id=kept[-1].message_id) == 30  # deduplicated
        assert await ref.ask(Add(1), message_id="m0") == 31  # compacted: runs again


# -- the bound, on hand-made logs ---------------------------------------------------------


async def _log_with_snapshot(make_store: StoreFactory) -> Store:
    store = make_store()
    async with ActorSystem(store, actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k", retention="all")
        for _ in range(12):
            await ref.ask(Add(1))
    await store.open()
    return store


async def test_recovery_without_a_snapshot_over_a_compacted_log_is_a_named_error(
    make_store: StoreFactory,
) -> None:
    store = await _log_with_snapshot(make_store)
    done = await compact(store, "k", "since-snapshot", by="test")
    assert done.removed > 0
    await store.delete_snapshots("k", [s.seq for s in await store.list_snapshots("k")])
    await store.close()
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        with pytest.raises(Exception) as info:
            await system.spawn(Keeper, "k")
        assert isinstance(info.value.__cause__ or info.value, LogCompactedError)


async def test_verify_reports_a_missing_start_without_a_record(
    make_store: StoreFactory,
) -> None:
    store = await _log_with_snapshot(make_store)
    assert isinstance(store, CompactingStore)
    # a compaction whose start record does not verify (a wrong checksum) is damage
    await store.compact("k", 3, checksum=12345)
    report = await ops.verify(store, "k")
    assert [f.check for f in report.findings] == ["log start"]
    assert "checksum" in report.findings[0].detail
    assert "k" not in report.compacted
    await store.close()


async def test_compact_refuses_a_store_that_cannot() -> None:
    class Plain:
        url = "plain://"

    with pytest.raises(ConfigurationError, match="cannot compact"):
        await compact(Plain(), "k", "since-snapshot", by="t")  # type: ignore[arg-type]  # a stand-in


async def test_a_start_inside_a_step_is_not_damage(make_store: StoreFactory) -> None:
    """A crash between two compaction transactions can leave the kept log starting inside a
    step (its message removed, its effect and step kept): history and verify show the kept
    steps and no damage."""
    store = await _log_with_snapshot(make_store)
    assert isinstance(store, CompactingStore)
    from actorlog._journal.codec import log_start_checksum

    await store.compact("k", 4, checksum=log_start_checksum("k", 5))  # message 4 removed
    h = await ops.history(store, "k")
    assert h.damage == []
    assert h.steps[0].message_seq == 7
    assert (await ops.verify(store, "k")).ok
    await store.close()
