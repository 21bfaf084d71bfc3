"""Durable timers on every store: ctx.sleep, send_later, cancel_timer, schedules."""

from __future__ import annotations

import datetime
import sys
from collections.abc import Callable

import anyio
import pytest
from actorlog import ActorSystem, ConfigurationError, HandlerError
from actorlog.store import Store

from .._keys import EffectId
from .agents import Get, Later, Nap, Note, Recorder, Sender, Sleeper

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]
UTC = datetime.UTC


async def wait_until(cond: Callable[[], object], timeout: float = 15) -> None:
    with anyio.fail_after(timeout):
        while not cond():
            await anyio.sleep(0.01)


async def messages(store: Store, actor_id: str) -> list[str | None]:
    return [r.message_id for r in await store.read(actor_id, kinds=["message"])]


async def test_sleep_is_logged_and_later_messages_wait_behind_it(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Sleeper]) as system:
        ref = system.ref(Sleeper, "s")
        async with anyio.create_task_group() as tg:
            tg.start_soon(ref.ask, Nap(1.0, "a"))  # long enough to be seen asleep under load
            await wait_until(lambda: system._cells.get("s") and system._cells["s"].sleeping)
            got = await ref.ask(Note("after"))
        assert got == ["start:a", "end:a", "after"]
        effects = await system.store.read("s", kinds=["effect"])
        assert [e.type_tag for e in effects] == ["sleep"]


async def test_sleep_interrupted_by_shutdown_resumes_after_restart(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Sleeper]) as system:
        await system.ref(Sleeper, "s").send(Nap(0.5, "a"))
        await wait_until(lambda: system._cells.get("s") and system._cells["s"].sleeping)
    async with ActorSystem(make_store(), actors=[Sleeper]) as system:
        ref = system.ref(Sleeper, "s")
        got = await ref.ask(Note("after"))  # waits behind the resumed sleep
        assert got == ["start:a", "end:a", "after"]
        assert [e.type_tag for e in await system.store.read("s", kinds=["effect"])] == ["sleep"]


async def test_replay_of_a_completed_step_never_sleeps(make_store: StoreFactory) -> None:
    """The step logged a one-hour sleep, abandoned it (its own scope) and completed: a
    replay from the log must not wait that hour."""
    async with ActorSystem(make_store(), actors=[Sleeper]) as system:
        assert await system.ref(Sleeper, "s").ask(Nap(-1, "a")) == ["start:a", "end:a"]
    with anyio.fail_after(20):
        async with ActorSystem(make_store(), actors=[Sleeper]) as system:
            assert await system.ref(Sleeper, "s").ask(Note("b")) == ["start:a", "end:a", "b"]
            assert system.last_recovery("s")["steps_replayed"] == 1  # type: ignore[index]


async def test_sleep_rejects_bad_arguments(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Sleeper]) as system:
        with pytest.raises(HandlerError, match=r"ConfigurationError: ctx.sleep\(\) takes seconds"):
            await system.ref(Sleeper, "s").ask(Nap(-5, "x"))
        assert await system.store.read("s", kinds=["effect"]) == []  # nothing logged


async def test_ctx_send_later_delivers_once_and_is_recorded(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Sender, Recorder]) as system:
        timer_id = await system.ref(Sender, "snd").ask(Later("rec", "hello", 0.1))
        assert timer_id == EffectId("snd", 1, 1)  # after the spawn effect
        rec = system.ref(Recorder, "rec")
        await wait_until(lambda: system._timers.fired >= 1)
        assert await rec.ask(Get()) == ["hello"]
        assert (await messages(system.store, "rec"))[:1] == [f"timer:{timer_id}"]
        assert len(await messages(system.store, "rec")) == 2  # the note and the Get
        tags = [e.type_tag for e in await system.store.read("snd", kinds=["effect"])]
        assert tags == ["spawn", "send_later"]
        (t,) = await system.timers("rec")
        assert (t.timer_id, t.state, t.sender) == (timer_id, "fired", "snd")
        assert await system.cancel_timer(timer_id) == "fired"


async def test_send_later_cancel_and_its_answers(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Recorder]) as system:
        rec = system.ref(Recorder, "rec")
        far = await system.send_later(rec, Note("never"), delay=3600)
        now = await system.send_later(rec, Note("now"), at=datetime.datetime.now(UTC))
        assert await system.cancel_timer(far) == "cancelled"
        assert await system.cancel_timer(far) == "cancelled"
        await wait_until(lambda: system._timers.fired >= 1)
        assert await system.cancel_timer(now) == "fired"
        assert await system.cancel_timer("no-such-timer") == "unknown"
        assert await rec.ask(Get()) == ["now"]
        with pytest.raises(ConfigurationError, match="exactly one of delay= or at="):
            await system.send_later(rec, Note("x"))
        with pytest.raises(ConfigurationError, match="timezone-aware"):
            await system.send_later(rec, Note("x"), at=datetime.datetime(2030, 1, 1))


async def test_send_later_with_message_id_is_idempotent(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Recorder]) as system:
        rec = system.ref(Recorder, "rec")
        a = await system.send_later(rec, Note("once"), delay=0.05, message_id="m-1")
        b = await system.send_later(rec, Note("once"), delay=0.05, message_id="m-1")
        assert a == b
        await wait_until(lambda: system._timers.fired >= 1)
        await anyio.sleep(0.1)
        assert await rec.ask(Get()) == ["once"]
        assert (await messages(system.store, "rec"))[0] == "m-1"


async def test_send_later_survives_a_restart_of_the_runtime(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Recorder]) as system:
        await system.send_later(system.ref(Recorder, "rec"), Note("late"), delay=0.3)
    async with ActorSystem(make_store(), actors=[Recorder]) as system:
        await wait_until(lambda: system._timers.fired >= 1)
        assert await system.ref(Recorder, "rec").ask(Get()) == ["late"]


async def test_timers_fire_in_due_order_between_messages(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Recorder]) as system:
        rec = system.ref(Recorder, "rec")
        for label, delay in (("t3", 0.3), ("t1", 0.1), ("t2", 0.2)):
            await system.send_later(rec, Note(label), delay=delay)
        await rec.send(Note("first"))
        await wait_until(lambda: system._timers.fired >= 3)
        await rec.send(Note("last"))
        assert await rec.ask(Get()) == ["first", "t1", "t2", "t3", "last"]


async def test_schedule_every_fires_once_per_firing_until_unscheduled(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Recorder]) as system:
        rec = system.ref(Recorder, "rec")
        first = await system.schedule(
            "tick", rec, Note("tick"), every=datetime.timedelta(seconds=0.1)
        )
        assert first > datetime.datetime.now(UTC)
        await wait_until(lambda: system._timers.fired >= 3)
        assert await system.unschedule("tick")
        assert not await system.unschedule("tick")
        fired = system._timers.fired
        await anyio.sleep(0.3)
        assert system._timers.fired == fired
        ids = [m for m in await messages(system.store, "rec") if m and m.startswith("sch")]
        assert len(ids) == fired and len(set(ids)) == fired
        assert all(m.startswith("schedule:tick@") for m in ids)
        assert await rec.ask(Get()) == ["tick"] * fired


async def test_missed_firings_skip_or_catch_up_once(make_store: StoreFactory) -> None:
    start = datetime.datetime.now(UTC) - datetime.timedelta(hours=1)
    every = datetime.timedelta(minutes=7)
    async with ActorSystem(make_store(), actors=[Recorder]) as system:
        skip, once = system.ref(Recorder, "skip"), system.ref(Recorder, "once")
        await system.schedule("s", skip, Note("s"), every=every, start=start)
        await system.schedule(
            "c", once, Note("c"), every=every, start=start, missed="catch_up_once"
        )
        await wait_until(lambda: system._timers.fired >= 2)
        assert await once.ask(Get()) == ["c"]  # one for all that were missed
        assert await skip.ask(Get()) == []
        (mid, _get) = await messages(system.store, "once")
        latest = start + every * 8  # 56 minutes after start: the last slot before now
        assert mid == f"schedule:c@{latest.isoformat()}"
        for name in ("s", "c"):
            (t,) = [t for t in await system.timers() if t.timer_id == f"schedule:{name}"]
            assert t.state == "pending"
            assert t.due == (start + every * 9).timestamp()


async def test_cron_schedule_and_the_hint_without_the_extra(
    make_store: StoreFactory, monkeypatch: pytest.MonkeyPatch
) -> None:
    async with ActorSystem(make_store(), actors=[Recorder]) as system:
        rec = system.ref(Recorder, "rec")
        first = await system.schedule("daily-report", rec, Note("r"), cron="0 9 * * *")
        assert (first.hour, first.minute, first.tzinfo) == (9, 0, UTC)
        with pytest.raises(ConfigurationError, match="bad cron expression"):
            await system.schedule("bad", rec, Note("r"), cron="61 * * * *")
        monkeypatch.setitem(sys.modules, "cronsim", None)
        with pytest.raises(ConfigurationError, match=r"pip install 'actorlog\[cron\]'"):
            await system.schedule("x", rec, Note("r"), cron="0 9 * * *")
        assert [t.timer_id for t in await system.timers()] == ["schedule:daily-report"]
