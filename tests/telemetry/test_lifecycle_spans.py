"""An actor's end in traces (docs/tracing.md), with the real OTel SDK: ``ctx.stop()`` and an
operator's cancel as events on the step span; cancel, terminate and delete (system and ``ops``
API) as ``actorlog.lifecycle`` spans."""

from __future__ import annotations

import anyio
import pytest
from actorlog import ActorSystem, ConfigurationError, StepCancelledError, ops
from actorlog._tracing.telemetry import ATTR, EVENT, SPAN
from actorlog.store import Store
from actorlog.stores import MemoryStore
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter
from opentelemetry.trace import StatusCode

from tests.durability import test_lifecycle as lc

from .conftest import attrs_of, named

pytestmark = pytest.mark.anyio


def _lifecycle(spans: InMemorySpanExporter) -> list[tuple[str, str, str, str]]:
    return [
        (
            a[ATTR.LIFECYCLE_ACTION],
            a[ATTR.ACTOR_ID],
            a[ATTR.LIFECYCLE_BY],
            a[ATTR.LIFECYCLE_REASON],
        )
        for a in map(attrs_of, named(spans.get_finished_spans(), SPAN.LIFECYCLE))
    ]


async def test_finish_is_an_event_on_its_step(spans: InMemorySpanExporter) -> None:
    async with ActorSystem(MemoryStore(), actors=[lc.Worker]) as system:
        ref = await system.spawn(lc.Worker, "w")
        await ref.ask(lc.Work("a"))
        await ref.ask(lc.Done("all done"))
    steps = named(spans.get_finished_spans(), SPAN.STEP)
    assert len(steps) == 2
    assert [e.name for e in steps[0].events] == []
    (ev,) = [e for e in steps[1].events if e.name == EVENT.FINISHED]
    assert dict(ev.attributes or {}) == {ATTR.LIFECYCLE_REASON: "all done"}


async def test_cancel_is_a_lifecycle_span_and_an_event_on_the_cut_step(
    spans: InMemorySpanExporter,
) -> None:
    lc._started.append(anyio.Event())
    async with ActorSystem(MemoryStore(), actors=[lc.Worker]) as system:
        ref = await system.spawn(lc.Worker, "c")
        errors: list[BaseException] = []

        async def asker() -> None:
            try:
                await ref.ask(lc.Slow(60))
            except StepCancelledError as exc:
                errors.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(asker)
            await lc._started[-1].wait()
            assert await system.cancel("c", reason="too slow", by="ops") is True
        assert errors
        assert await system.cancel("c", reason="again", by="ops") is False  # nothing runs
    finished = spans.get_finished_spans()
    assert _lifecycle(spans) == [
        ("cancel", "c", "ops", "too slow"),
        ("cancel", "c", "ops", "again"),
    ]
    first, second = named(finished, SPAN.LIFECYCLE)
    assert ATTR.LIFECYCLE_REQUESTED not in attrs_of(first)
    assert attrs_of(second)[ATTR.LIFECYCLE_REQUESTED] is True
    (step,) = named(finished, SPAN.STEP)
    assert step.status.status_code == StatusCode.ERROR
    (ev,) = [e for e in step.events if e.name == EVENT.STEP_CANCELLED]
    a = dict(ev.attributes or {})
    assert (a[ATTR.LIFECYCLE_BY], a[ATTR.LIFECYCLE_REASON]) == ("ops", "too slow")
    assert list(a[ATTR.CANCELLED_CALLS]) == ["tests.durability.test_lifecycle.slow_write"]  # type: ignore[arg-type]


async def test_terminate_and_delete_are_lifecycle_spans(spans: InMemorySpanExporter) -> None:
    async with ActorSystem(MemoryStore(), actors=[lc.Worker]) as system:
        ref = await system.spawn(lc.Worker, "t")
        await ref.ask(lc.Work("a"))
        await ref.ask(lc.Work("b"))
        await system.spawn(lc.Worker, "u")
        await system.terminate("t", reason="abuse", by="ops")
        await system.delete("t", by="ops", reason="gdpr")
        store = system.store
    await store.open()
    await ops.terminate(store, "u", by="ops2", reason="offline")
    with pytest.raises(ConfigurationError, match="has not finished"):
        await store_delete_unended(store)
    await ops.delete(store, "u", yes=True, by="ops2", reason="gone")
    assert _lifecycle(spans) == [
        ("terminate", "t", "ops", "abuse"),
        ("delete", "t", "ops", "gdpr"),
        ("terminate", "u", "ops2", "offline"),
        ("delete", "v", "ops2", "not ended"),
        ("delete", "u", "ops2", "gone"),
    ]
    statuses = [s.status.status_code for s in named(spans.get_finished_spans(), SPAN.LIFECYCLE)]
    assert statuses[3] == StatusCode.ERROR  # the refused delete
    assert StatusCode.ERROR not in statuses[:3] + statuses[4:]


async def store_delete_unended(store: Store) -> None:
    """A delete refused inside the traced part: an actor that never ended, not forced."""
    from actorlog._durability import lifecycle as _lifecycle

    async with ActorSystem(store, actors=[lc.Worker]) as system:
        await (await system.spawn(lc.Worker, "v")).ask(lc.Work("x"))
    await store.open()
    await _lifecycle.delete_actor(store, "v", by="ops2", reason="not ended", force=False)
