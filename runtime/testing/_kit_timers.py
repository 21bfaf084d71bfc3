"""The store contract for the optional timer index (``capabilities.timers``,
``actorlog.store.TimerStore``): a mixin of :class:`actorlog.testing.StoreContract`. Every
test skips for a store without the capability."""

from __future__ import annotations

import time
from typing import Any

import pytest

from ..store import AuditStore, Store, TimerRow
from ._kit import StoreHarness, needs, registered, require


def timer(timer_id: str, due: float, *, actor_id: str = "actor-1", **kw: Any) -> TimerRow:
    """A pending timer row for the contract tests."""
    values: dict[str, Any] = {
        "timer_id": timer_id,
        "actor_id": actor_id,
        "actor_type": "tests.Researcher",
        "due": due,
        "message_id": f"m-{timer_id}",
        "type_tag": "tests.Ping",
        "body": '{"n": 1}',
        "sender": None,
        "recurrence": None,
        "state": "pending",
        "created_at": 1700000000.0,
    }
    values.update(kw)
    return TimerRow(**values)


def _timers(harness: StoreHarness, store: Store) -> Any:
    require(harness, store, "timers")
    return store


class TimerContract:
    """Contract tests of the timer index (a mixin of ``StoreContract``)."""

    @needs("timers")
    async def test_timer_put_get_and_list_by_due(self, harness: StoreHarness, store: Store) -> None:
        s = _timers(harness, store)
        assert await s.put_timer(timer("b", 200.0, sender="x", recurrence='{"every": 5}'))
        assert await s.put_timer(timer("a", 100.0, actor_id="actor-2"))
        got = await s.get_timer("b")
        assert got == timer("b", 200.0, sender="x", recurrence='{"every": 5}')
        assert [t.timer_id for t in await s.list_timers()] == ["a", "b"]
        assert [t.timer_id for t in await s.list_timers("actor-2")] == ["a"]
        assert await s.get_timer("missing") is None

    @needs("timers")
    async def test_timer_put_is_idempotent_unless_replace(
        self, harness: StoreHarness, store: Store
    ) -> None:
        s = _timers(harness, store)
        assert await s.put_timer(timer("t", 100.0))
        assert not await s.put_timer(timer("t", 50.0, body='{"n": 2}'))
        assert (await s.get_timer("t")).due == 100.0
        assert await s.fire_timer("t", 100.0, None)
        # a fired timer is not armed again by a repeated put (a replayed send_later)
        assert not await s.put_timer(timer("t", 100.0))
        assert (await s.get_timer("t")).state == "fired"
        assert await s.put_timer(timer("t", 300.0, body='{"n": 3}'), replace=True)
        got = await s.get_timer("t")
        assert (got.due, got.state, got.body) == (300.0, "pending", '{"n": 3}')

    @needs("timers")
    async def test_due_timers_earliest_first_up_to_limit(
        self, harness: StoreHarness, store: Store
    ) -> None:
        s = _timers(harness, store)
        for i, due in enumerate([30.0, 10.0, 20.0, 40.0]):
            await s.put_timer(timer(f"t{i}", due))
        assert await s.next_due() == 10.0
        assert [t.timer_id for t in await s.due_timers(30.0)] == ["t1", "t2", "t0"]
        assert [t.timer_id for t in await s.due_timers(30.0, limit=2)] == ["t1", "t2"]
        assert await s.due_timers(5.0) == []

    @needs("timers")
    async def test_fire_marks_fired_or_moves_a_schedule_once(
        self, harness: StoreHarness, store: Store
    ) -> None:
        s = _timers(harness, store)
        await s.put_timer(timer("once", 10.0))
        await s.put_timer(timer("every", 20.0, recurrence='{"every": 60}'))
        assert await s.fire_timer("once", 10.0, None)
        assert not await s.fire_timer("once", 10.0, None)  # a second firing changes nothing
        assert await s.fire_timer("every", 20.0, 80.0)
        assert not await s.fire_timer("every", 20.0, 80.0)  # it is at 80 now
        assert [t.timer_id for t in await s.due_timers(100.0)] == ["every"]
        assert await s.next_due() == 80.0
        assert (await s.get_timer("once")).state == "fired"

    @needs("timers")
    async def test_cancel_answers_what_the_timer_was(
        self, harness: StoreHarness, store: Store
    ) -> None:
        s = _timers(harness, store)
        await s.put_timer(timer("a", 10.0))
        await s.put_timer(timer("b", 20.0))
        assert await s.cancel_timer("a") == "pending"  # cancelled by this call
        assert await s.cancel_timer("a") == "cancelled"
        assert await s.fire_timer("b", 20.0, None)
        assert await s.cancel_timer("b") == "fired"  # too late
        assert await s.cancel_timer("nope") is None
        assert await s.due_timers(100.0) == []
        assert await s.next_due() is None
        assert not await s.fire_timer("a", 10.0, None)  # a cancelled timer never fires

    @needs("timers")
    async def test_delete_timers_before_keeps_pending_ones(
        self, harness: StoreHarness, store: Store
    ) -> None:
        s = _timers(harness, store)
        await s.put_timer(timer("fired", 10.0))
        await s.put_timer(timer("pending", 10.0))
        await s.put_timer(timer("late", 50.0))
        await s.fire_timer("fired", 10.0, None)
        await s.fire_timer("late", 50.0, None)
        assert await s.delete_timers_before(20.0) == 1
        assert [t.timer_id for t in await s.list_timers()] == ["pending", "late"]

    @needs("timers", "durable")
    async def test_timers_survive_reopen(self, harness: StoreHarness) -> None:
        first = await harness.open()
        s = _timers(harness, first)
        now = time.time()
        await s.put_timer(timer("t", now + 3600))
        await s.put_timer(timer("gone", now))
        await s.cancel_timer("gone")
        await first.close()
        again: Any = await harness.open()
        assert [(t.timer_id, t.state) for t in await again.list_timers()] == [
            ("gone", "cancelled"),
            ("t", "pending"),
        ]
        assert await again.next_due() == now + 3600

    @needs("timers")
    async def test_claim_and_cancel_are_one_decision(
        self, harness: StoreHarness, store: Store
    ) -> None:
        """Issue 24 item 1: a claimed one-off timer is past cancelling (it is being
        delivered); a cancelled one cannot be claimed; a claimed schedule can be cancelled
        and then neither fires nor moves."""
        s = _timers(harness, store)
        await s.put_timer(timer("a", 10.0))
        await s.put_timer(timer("b", 10.0))
        await s.put_timer(timer("sch", 10.0, recurrence='{"every": 60}'))
        assert await s.claim_timer("a", 10.0)
        assert not await s.claim_timer("a", 11.0)  # another due time: not this firing
        assert await s.cancel_timer("a") == "firing"  # too late: it is being delivered
        assert (await s.get_timer("a")).state == "firing"
        assert await s.claim_timer("a", 10.0)  # a claim left by a crash is taken up again
        assert await s.fire_timer("a", 10.0, None)
        assert (await s.get_timer("a")).state == "fired"
        assert await s.cancel_timer("b") == "pending"
        assert not await s.claim_timer("b", 10.0)  # cancelled: never claimed, never fired
        assert await s.claim_timer("sch", 10.0)
        assert await s.cancel_timer("sch") == "firing"  # a schedule stops from firing too
        assert not await s.fire_timer("sch", 10.0, 70.0)
        assert (await s.get_timer("sch")).state == "cancelled"
        assert await s.due_timers(100.0) == []

    @needs("timers", "audit")
    async def test_delete_actor_cancels_its_pending_and_claimed_timers(
        self, harness: StoreHarness, store: Store
    ) -> None:
        """A deleted actor's timers never fire: its pending ones and its claimed ones (a
        ``firing`` row left by a crash during delivery, which a restart would claim and
        deliver again) are cancelled with it; another actor's claimed timer stays."""
        s = _timers(harness, store)
        if not isinstance(store, AuditStore):
            pytest.skip("the store has no delete_actor/read_audit: list 'audit' in lacks")
        await registered(store, "actor-1", "actor-2")
        await s.put_timer(timer("a", 10.0))
        await s.put_timer(timer("b", 10.0))
        await s.put_timer(timer("sch", 10.0, recurrence='{"every": 60}'))
        await s.put_timer(timer("c", 10.0, actor_id="actor-2"))
        for claimed in ("b", "sch", "c"):
            assert await s.claim_timer(claimed, 10.0)
        await store.delete_actor("actor-1", '{"by":"kit"}')
        states = {t.timer_id: t.state for t in await s.list_timers()}
        assert states == {"a": "cancelled", "b": "cancelled", "sch": "cancelled", "c": "firing"}
        assert [t.timer_id for t in await s.due_timers(100.0)] == ["c"]
        assert not await s.claim_timer("b", 10.0)
        assert not await s.fire_timer("sch", 10.0, 70.0)

    @needs("timers")
    async def test_claimed_timers_stay_due_and_a_schedule_returns_to_pending(
        self, harness: StoreHarness, store: Store
    ) -> None:
        s = _timers(harness, store)
        await s.put_timer(timer("a", 10.0))
        await s.put_timer(timer("sch", 20.0, recurrence='{"every": 60}'))
        assert await s.claim_timer("a", 10.0)
        assert await s.claim_timer("sch", 20.0)
        assert [t.timer_id for t in await s.due_timers(30.0)] == ["a", "sch"]
        assert await s.next_due() == 10.0
        assert await s.fire_timer("sch", 20.0, 80.0)
        got = await s.get_timer("sch")
        assert (got.state, got.due) == ("pending", 80.0)
        assert await s.delete_timers_before(1000.0) == 0  # claimed and pending rows stay

    @needs("timers")
    async def test_fail_timer_settles_an_undeliverable_timer(
        self, harness: StoreHarness, store: Store
    ) -> None:
        """Issue 24 item 2: ``failed: <reason>``, never due again, cancel says so."""
        s = _timers(harness, store)
        await s.put_timer(timer("a", 10.0))
        assert await s.claim_timer("a", 10.0)
        assert await s.fail_timer("a", 10.0, "actor 'x' is finished")
        assert (await s.get_timer("a")).state == "failed: actor 'x' is finished"
        assert not await s.fail_timer("a", 10.0, "again")
        assert not await s.claim_timer("a", 10.0)
        assert await s.due_timers(100.0) == []
        assert await s.next_due() is None
        assert await s.cancel_timer("a") == "failed: actor 'x' is finished"
        assert await s.delete_timers_before(20.0) == 1
