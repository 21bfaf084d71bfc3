"""``ctx.emit`` in traces: one ``actorlog.step.emitted`` span event per batch of events
(the emits between two entries the step writes) on the step's span, never a span per event
(docs/tracing.md)."""

from __future__ import annotations

import pytest
from actorlog import ActorSystem
from actorlog._tracing.telemetry import ATTR, EVENT, SPAN
from actorlog.stores import MemoryStore
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ..durability.stream_agents import Narrator, Tell
from .conftest import one

pytestmark = pytest.mark.anyio


async def test_each_batch_of_emits_is_one_span_event_on_the_step(
    spans: InMemorySpanExporter,
) -> None:
    async with ActorSystem(MemoryStore(), actors=[Narrator]) as system:
        stream = system.ref(Narrator, "n").ask_stream(Tell("x", 3))
        assert len([ev async for ev in stream]) == 4
    finished = spans.get_finished_spans()
    step = one(finished, SPAN.STEP)
    batches = [dict(e.attributes or {}) for e in step.events if e.name == EVENT.EMITTED]
    # "start" before the tool call; the three progress events after its result
    assert [(b[ATTR.EVENT_FIRST], b[ATTR.EVENT_COUNT]) for b in batches] == [(1, 1), (2, 3)]
    assert batches[0][ATTR.EVENT_BYTES] == len('"start"')
    assert len(finished) == len({s.name for s in finished})  # no span per event
