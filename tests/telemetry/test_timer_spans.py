"""Durable sleeps and timer firings in traces (docs/tracing.md), with the real OTel SDK: the
``actorlog.timer.sleep`` / ``sleep_resumed`` events on the step span and one
``actorlog.timer.fire`` span per timer or schedule firing, parent of the step it causes."""

from __future__ import annotations

import datetime
import time
from collections.abc import Callable

import anyio
import pytest
from actorlog import ActorSystem
from actorlog._tracing.telemetry import ATTR, EVENT, SPAN
from actorlog.stores import MemoryStore
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.time.agents import Get, Later, Nap, Note, Recorder, Sender, Sleeper

from .conftest import attrs_of, named, one

pytestmark = pytest.mark.anyio


async def _wait(cond: Callable[[], object], timeout: float = 15) -> None:
    with anyio.fail_after(timeout):
        while not cond():
            await anyio.sleep(0.01)


def _events(span: ReadableSpan, name: str) -> list[dict[str, object]]:
    return [dict(e.attributes or {}) for e in span.events if e.name == name]


async def test_a_sleep_is_an_event_with_its_wake_time(spans: InMemorySpanExporter) -> None:
    async with ActorSystem(MemoryStore(), actors=[Sleeper]) as system:
        before = time.time()
        await system.ref(Sleeper, "s").ask(Nap(0.05, "a"))
        after = time.time()
    step = one(spans.get_finished_spans(), SPAN.STEP)
    (ev,) = _events(step, EVENT.SLEEP)
    until, remaining = ev[ATTR.TIMER_UNTIL], ev[ATTR.TIMER_REMAINING]
    assert isinstance(until, float) and isinstance(remaining, float)
    assert before + 0.05 <= until <= after + 0.05
    # the time left when the event was written: its wake time minus a moment within the
    # call (not "more than 0": on a loaded machine the sleep may be over by then)
    assert remaining <= 0.05
    assert before - 1e-6 <= until - remaining <= after + 1e-6
    assert _events(step, EVENT.SLEEP_RESUMED) == []


async def test_a_sleep_resumed_after_a_restart_says_the_time_left(
    spans: InMemorySpanExporter,
) -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Sleeper]) as system:
        await system.ref(Sleeper, "s").send(Nap(0.6, "a"))
        await _wait(lambda: system._cells.get("s") and system._cells["s"].sleeping)
    (first,) = [
        e
        for s in spans.get_finished_spans()
        for e in _events(s, EVENT.SLEEP)
        if s.name == SPAN.STEP
    ]
    spans.clear()
    async with ActorSystem(store, actors=[Sleeper]) as system:
        got = await system.ref(Sleeper, "s").ask(Get())
        assert got == ["start:a", "end:a"]
    resumed = [
        s
        for s in named(spans.get_finished_spans(), SPAN.REPLAY_STEP)
        if attrs_of(s)[ATTR.FINISHED_LIVE]
    ]
    (step,) = resumed
    (ev,) = _events(step, EVENT.SLEEP_RESUMED)
    assert ev[ATTR.TIMER_UNTIL] == first[ATTR.TIMER_UNTIL]  # the logged wake time
    remaining = ev[ATTR.TIMER_REMAINING]
    assert isinstance(remaining, float) and remaining < 0.6  # only the time left
    assert _events(step, EVENT.SLEEP) == []


async def test_a_send_later_firing_is_a_span_and_the_parent_of_its_step(
    spans: InMemorySpanExporter,
) -> None:
    async with ActorSystem(MemoryStore(), actors=[Sender, Recorder]) as system:
        timer_id = await system.ref(Sender, "snd").ask(Later("rec", "x", 0.05))
        rec = system.ref(Recorder, "rec")
        await _wait(lambda: system._timers.fired >= 1)
        assert await rec.ask(Get()) == ["x"]
    finished = spans.get_finished_spans()
    fire = one(finished, SPAN.TIMER_FIRE)
    a = attrs_of(fire)
    assert a[ATTR.TIMER_ID] == timer_id
    assert a[ATTR.ACTOR_ID] == "rec"
    assert a[ATTR.MESSAGE_ID] == f"timer:{timer_id}"
    assert a[ATTR.TIMER_OUTCOME] == "delivered"
    assert isinstance(a[ATTR.TIMER_DUE], float) and a[ATTR.TIMER_LATENESS] >= 0.0
    assert ATTR.SCHEDULE_NAME not in a
    (step,) = [
        s
        for s in named(finished, SPAN.STEP)
        if attrs_of(s).get(ATTR.MESSAGE_ID) == f"timer:{timer_id}"
    ]
    assert step.parent is not None and fire.context is not None
    assert step.parent.span_id == fire.context.span_id


async def test_schedule_firings_name_the_schedule_and_its_missed_policy(
    spans: InMemorySpanExporter,
) -> None:
    start = datetime.datetime.now(datetime.UTC) - datetime.timedelta(hours=1)
    every = datetime.timedelta(minutes=7)
    async with ActorSystem(MemoryStore(), actors=[Recorder]) as system:
        skip, once = system.ref(Recorder, "skip"), system.ref(Recorder, "once")
        await system.schedule("s", skip, Note("s"), every=every, start=start)
        await system.schedule(
            "c", once, Note("c"), every=every, start=start, missed="catch_up_once"
        )
        await _wait(lambda: system._timers.fired >= 2)
        assert await once.ask(Get()) == ["c"]
    fires = {
        attrs_of(s)[ATTR.SCHEDULE_NAME]: attrs_of(s)
        for s in named(spans.get_finished_spans(), SPAN.TIMER_FIRE)
    }
    assert set(fires) == {"s", "c"}
    s, c = fires["s"], fires["c"]
    assert (s[ATTR.SCHEDULE_MISSED], s[ATTR.TIMER_OUTCOME]) == ("skip", "skipped")
    assert ATTR.SCHEDULE_FIRING not in s
    assert (c[ATTR.SCHEDULE_MISSED], c[ATTR.TIMER_OUTCOME]) == ("catch_up_once", "delivered")
    latest = start + every * 8
    assert c[ATTR.SCHEDULE_FIRING] == latest.timestamp()
    assert c[ATTR.MESSAGE_ID] == f"schedule:c@{latest.isoformat()}"
    assert c[ATTR.TIMER_ID] == "schedule:c"
    for a in (s, c):
        assert a[ATTR.TIMER_DUE] == start.timestamp()
        assert a[ATTR.TIMER_LATENESS] >= 3600.0  # an hour late: the runtime was not there
