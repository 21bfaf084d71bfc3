"""``ActorSystem.resolve`` rules on a write its handler cancelled while it ran (issue 25;
docs/operators.md "Cancelled writes in doubt"), as ``ops.resolve`` does: a ``resolved``
event with ``"ruling": true`` in the operator history, the log untouched; typed errors and
nothing stored for a retry, a second ruling, or a seq that is not such a call.

Before: the live system took only decisions for steps waiting here, so it refused every
ruling (``ConfigurationError``: no step waits on it; ``ActorNotFoundError`` for an actor
not loaded) and, on SQLite, where a running runtime holds the file, nobody could rule.
"""

from __future__ import annotations

import json
from typing import Any

import anyio
import pytest
from actorlog import ActorSystem, ops
from actorlog.errors import ActorNotFoundError, AlreadyDecidedError, ConfigurationError
from actorlog.store import Store

from tests.conftest import StoreFactory
from tests.effects.test_cancelled_write_in_doubt import Agent, Deadline, _fresh

pytestmark = pytest.mark.anyio


async def _stored(store: Store) -> tuple[int, int]:
    return (await ops.actor_status(store, "a")).last_seq, len(await store.read_events("a"))


async def _cancelled_call(system: ActorSystem) -> int:
    ref = await system.spawn(Agent, "a")
    assert await ref.ask(Deadline(), message_id="d1") == "went on"
    (call,) = await ops.calls_needing_ruling(system.store, "a")
    with anyio.fail_after(10):  # the runtime's in_doubt event (recorded in the background)
        while not any(e.kind == "in_doubt" for e in await system.store.read_events("a")):
            await anyio.sleep(0.01)
    return call.intent_seq


async def test_the_live_system_rules_on_a_cancelled_write_once(make_store: StoreFactory) -> None:
    _fresh()
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        seq = await _cancelled_call(system)
        before = await _stored(system.store)
        message_seq = (await ops.history(system.store, "a")).steps[0].message_seq
        refused: list[tuple[dict[str, Any], type[Exception]]] = [
            ({"intent_seq": seq, "retry": True}, ConfigurationError),  # no retry can run
            ({"intent_seq": message_seq, "fail": "no"}, ConfigurationError),  # not a call
            ({"intent_seq": 10_000, "fail": "no"}, ConfigurationError),  # not in the log
        ]
        for kwargs, error in refused:
            with pytest.raises(error):
                await system.resolve("a", **kwargs)
            assert await _stored(system.store) == before, kwargs
        await system.resolve("a", seq, result={"tx": 7}, by="ops@example.com", reason="seen")
        assert await _stored(system.store) == (before[0], before[1] + 1)  # an event, no entry
        (call,) = (await ops.history(system.store, "a")).steps[0].calls
        assert call.ruling is not None and not call.needs_ruling
        assert (call.ruling.action, call.ruling.value, call.ruling.by) == (
            "result",
            {"tx": 7},
            "ops@example.com",
        )
        with pytest.raises(AlreadyDecidedError) as caught:
            await system.resolve("a", seq, fail="no")
        assert (caught.value.action, caught.value.by) == ("result", "ops@example.com")
        with pytest.raises(AlreadyDecidedError):
            await ops.resolve(system.store, "a", seq, fail="no")  # the same rule offline
        assert await _stored(system.store) == (before[0], before[1] + 1)
        # the actor goes on as before
        ref = system.ref(Agent, "a")
        assert await ref.ask(Deadline(), message_id="d2") == "went on"


async def test_the_live_system_rules_on_an_actor_it_has_not_loaded(
    make_store: StoreFactory,
) -> None:
    """The step is complete: a ruling needs no running step, so a runtime that has not
    loaded the actor (after a restart) takes it too. An unknown actor stays
    ``ActorNotFoundError``."""
    _fresh()
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        seq = await _cancelled_call(system)
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        assert system.last_recovery("a") is None  # not loaded: idle, nothing to recover
        await system.resolve("a", seq, fail="the bank has no such transfer")
        (call,) = (await ops.history(system.store, "a")).steps[0].calls
        assert call.ruling is not None and call.ruling.action == "fail"
        with pytest.raises(ActorNotFoundError):
            await system.resolve("nobody", seq, fail="no")


async def test_concurrent_live_rulings_on_one_call_record_one(make_store: StoreFactory) -> None:
    _fresh()
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        seq = await _cancelled_call(system)
        before = await _stored(system.store)
        outcomes: list[str] = []

        async def rule(i: int) -> None:
            try:
                await system.resolve("a", seq, result=i, by=f"op-{i}")
                outcomes.append("ok")
            except AlreadyDecidedError:
                outcomes.append("refused")

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(rule, i)
        assert sorted(outcomes) == ["ok"] + ["refused"] * 4
        assert await _stored(system.store) == (before[0], before[1] + 1)


async def test_with_two_rulings_recorded_the_first_counts_everywhere(
    make_store: StoreFactory,
) -> None:
    """Two rulings on one call (an offline one racing a live one on PostgreSQL, which
    nothing serializes): ``history`` shows the first, as the check that refuses a third
    names it (before: ``history`` showed the last, the check named the first)."""
    _fresh()
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        seq = await _cancelled_call(system)
        store = system.store
        for by in ("first", "second"):  # what two racing writers leave
            detail = {"intent_seq": seq, "action": "fail", "by": by, "reason": "", "ruling": True}
            await store.record_event("a", "resolved", json.dumps(detail))
        (call,) = (await ops.history(store, "a")).steps[0].calls
        assert call.ruling is not None and call.ruling.by == "first"
        with pytest.raises(AlreadyDecidedError) as caught:
            await system.resolve("a", seq, result="x")
        assert caught.value.by == "first"
