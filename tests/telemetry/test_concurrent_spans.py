"""The spans of parallel tool calls (issue 25): the ``actorlog.tool_call`` spans of calls that
tasks of one step made at the same time overlap in time under that one step span, live and
when the step is resumed after a crash; a finished step replayed from the log serves its
calls and links to the original step span, whose calls overlapped. Each call span carries
the task that made it (``actorlog.step.task``). Real SDK, in-memory exporter;
tests/telemetry/test_phoenix_e2e.py sends the resumed fan-out to a real OTLP backend."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import anyio
import pytest
from actorlog import ActorSystem
from actorlog._tracing.telemetry import ATTR, EVENT, SPAN
from actorlog.store import Store
from opentelemetry.sdk.trace import ReadableSpan
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from .concurrent_agents import MEET, WIDTH, Fan, FanOut
from .conftest import attrs_of, named

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@pytest.fixture(autouse=True)
def _meeting() -> Iterator[None]:
    MEET.reset()
    yield
    MEET.reset()


def _children(finished: tuple[ReadableSpan, ...], parent: ReadableSpan) -> list[ReadableSpan]:
    assert parent.context is not None
    return [
        s for s in finished if s.parent is not None and s.parent.span_id == parent.context.span_id
    ]


def assert_parallel_under(finished: tuple[ReadableSpan, ...], step: ReadableSpan) -> None:
    """The step's tool_call children: one per task of the fan-out, every two overlapping in
    time, inside the step span."""
    calls = [s for s in _children(finished, step) if s.name == SPAN.TOOL_CALL]
    assert sorted(attrs_of(c)[ATTR.TASK] for c in calls) == [str(i) for i in range(WIDTH)]
    for c in calls:
        assert c.start_time is not None and c.end_time is not None
        assert step.start_time is not None and step.end_time is not None
        assert step.start_time <= c.start_time <= c.end_time <= step.end_time
        for other in calls:
            assert other.start_time is not None and other.end_time is not None
            if other is not c:  # overlap: each started before the other ended
                assert c.start_time < other.end_time and other.start_time < c.end_time


async def test_live_parallel_calls_overlap_under_the_step_span(
    memory_store: StoreFactory, spans: InMemorySpanExporter
) -> None:
    async with ActorSystem(memory_store(), actors=[FanOut]) as system:
        ref = await system.spawn(FanOut, "fan")
        with anyio.fail_after(10):
            assert await ref.ask(Fan("a"), message_id="m1") == "met 0, met 1, met 2"
    finished = spans.get_finished_spans()
    (step,) = named(finished, SPAN.STEP)
    assert_parallel_under(finished, step)
    assert all(not attrs_of(c)[ATTR.SERVED_FROM_LOG] for c in named(finished, SPAN.TOOL_CALL))


async def _crash_mid_fan_out(make_store: StoreFactory) -> None:
    """Stop the system without grace while every call of the fan-out runs: each intent is
    logged, no result is (what a SIGKILL there leaves)."""
    MEET.hang = True
    async with ActorSystem(make_store(), actors=[FanOut], shutdown_grace=0) as system:
        ref = await system.spawn(FanOut, "fan")
        await ref.send(Fan("a"), message_id="m1")
        with anyio.fail_after(10):
            await MEET.all_here.wait()
    MEET.reset()


async def test_a_resumed_fan_out_runs_its_calls_in_parallel_again(
    memory_store: StoreFactory, spans: InMemorySpanExporter
) -> None:
    await _crash_mid_fan_out(memory_store)
    spans.clear()
    async with ActorSystem(memory_store(), actors=[FanOut]) as system:
        ref = system.ref(FanOut, "fan")
        with anyio.fail_after(10):
            assert await ref.ask(Fan("a"), message_id="m1") == "met 0, met 1, met 2"
    assert sorted(MEET.ran) == list(range(WIDTH))  # each in-doubt read re-ran once
    finished = spans.get_finished_spans()
    (recover,) = [s for s in named(finished, SPAN.RECOVER) if attrs_of(s)[ATTR.IN_DOUBT]]
    doubts = [dict(e.attributes or {}) for e in recover.events if e.name == EVENT.IN_DOUBT]
    assert sorted(str(d[ATTR.TASK]) for d in doubts) == [str(i) for i in range(WIDTH)]
    (resumed,) = [
        s for s in named(finished, SPAN.REPLAY_STEP) if attrs_of(s)[ATTR.FINISHED_LIVE] is True
    ]
    assert_parallel_under(finished, resumed)


async def test_a_replayed_fan_out_links_to_its_overlapping_original(
    memory_store: StoreFactory, spans: InMemorySpanExporter
) -> None:
    """A finished fan-out step replayed on recovery (no snapshot): its calls are served from
    the log (no tool runs, each span as long as serving took), each span names its task, and
    the replay step links to the original step span, whose calls overlap."""
    async with ActorSystem(memory_store(), actors=[FanOut]) as system:
        ref = await system.spawn(FanOut, "fan", snapshot_every=None)
        with anyio.fail_after(10):
            await ref.ask(Fan("a"), message_id="m1")
    live = spans.get_finished_spans()
    (original,) = named(live, SPAN.STEP)
    spans.clear()
    MEET.reset()
    async with ActorSystem(memory_store(), actors=[FanOut]) as system:
        ref = system.ref(FanOut, "fan")
        with anyio.fail_after(10):
            assert await ref.ask(Fan("a"), message_id="m1") == "met 0, met 1, met 2"
    assert MEET.ran == []  # served, not run
    finished = spans.get_finished_spans()
    (replayed,) = named(finished, SPAN.REPLAY_STEP)
    assert attrs_of(replayed)[ATTR.FINISHED_LIVE] is False
    served = _children(finished, replayed)
    assert all(attrs_of(c)[ATTR.SERVED_FROM_LOG] for c in served)
    assert sorted(attrs_of(c)[ATTR.TASK] for c in served) == [str(i) for i in range(WIDTH)]
    assert original.context is not None
    assert [link.context.span_id for link in replayed.links] == [original.context.span_id]
    assert_parallel_under(live, original)
