"""The ``actorlog.compact`` span (docs/tracing.md), from the runtime's background compaction
and from ``ops.compact``, with the real OTel SDK."""

from __future__ import annotations

import anyio
import pytest
from actorlog import ActorSystem, ops
from actorlog._tracing.telemetry import ATTR, SPAN
from actorlog.stores import MemoryStore
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.durability.test_retention import Auditor, Keeper
from tests.runtime.agents import Add

from .conftest import attrs_of, named

pytestmark = pytest.mark.anyio


async def test_compaction_is_traced(spans: InMemorySpanExporter) -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Keeper, Auditor]) as system:
        ref = await system.spawn(Keeper, "k")
        audit = await system.spawn(Auditor, "a")
        for _ in range(12):
            await ref.ask(Add(1))
            await audit.ask(Add(1))
        with anyio.fail_after(10):
            while not named(spans.get_finished_spans(), SPAN.COMPACT):
                await anyio.sleep(0.01)
    background = [attrs_of(s) for s in named(spans.get_finished_spans(), SPAN.COMPACT)]
    assert {a[ATTR.ACTOR_ID] for a in background} == {"k"}  # not the "all" one
    assert any(a[ATTR.COMPACT_REMOVED] > 0 for a in background)
    assert all(a[ATTR.COMPACT_RETENTION] == "since-snapshot" for a in background)
    spans.clear()
    await store.open()
    await ops.compact(store, "a", retention=3600.0)
    (span,) = named(spans.get_finished_spans(), SPAN.COMPACT)
    a = attrs_of(span)
    assert (a[ATTR.ACTOR_ID], a[ATTR.COMPACT_RETENTION], a[ATTR.COMPACT_REMOVED]) == (
        "a",
        "window 3600s",
        0,
    )
    assert a[ATTR.COMPACT_FIRST_SEQ] == 1
