"""The metrics of docs/tracing.md, read back through the SDK's InMemoryMetricReader.

The reader is cumulative and shared by the session, so each test compares before and after.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import anyio
import pytest
from actorlog import ActorSystem
from actorlog._tracing.telemetry import ATTR
from actorlog.store import Store
from opentelemetry.sdk.metrics.export import InMemoryMetricReader

from .telemetry_agents import CALLS, Ask, Researcher

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


def _points(reader: InMemoryMetricReader, name: str) -> list[Any]:
    data = reader.get_metrics_data()
    found: list[Any] = []
    for rm in data.resource_metrics if data is not None else ():
        for sm in rm.scope_metrics:
            if sm.scope.name != "actorlog":
                continue
            for m in sm.metrics:
                if m.name == name:
                    found.extend(m.data.data_points)
    return found


def _count(reader: InMemoryMetricReader, name: str) -> int:
    """Recordings of a histogram so far."""
    return sum(int(p.count) for p in _points(reader, name))


def _sum(reader: InMemoryMetricReader, name: str) -> float:
    """Sum of a histogram's recordings, or a counter's value."""
    return sum(float(p.sum if hasattr(p, "sum") else p.value) for p in _points(reader, name))


def _gauge(reader: InMemoryMetricReader, name: str) -> float:
    (point,) = _points(reader, name)
    return float(point.value)


async def test_append_duration_and_batch_size(
    metric_reader: InMemoryMetricReader, memory_store: StoreFactory
) -> None:
    appends, entries = (
        _count(metric_reader, "actorlog.append.duration"),
        _sum(metric_reader, "actorlog.append.batch_size"),
    )
    store = memory_store()
    async with ActorSystem(store, actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        await ref.ask(Ask("charge:1"))
    await store.open()
    written = len(await store.read("r"))
    assert _count(metric_reader, "actorlog.append.duration") > appends
    assert _count(metric_reader, "actorlog.append.batch_size") > appends
    # every entry is made durable by exactly one append
    assert _sum(metric_reader, "actorlog.append.batch_size") - entries == written
    durations = _points(metric_reader, "actorlog.append.duration")
    assert all(p.min >= 0 for p in durations)


async def test_recovery_duration_and_replayed_steps(
    metric_reader: InMemoryMetricReader, memory_store: StoreFactory
) -> None:
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        for q in ("a", "b", "c"):
            await ref.ask(Ask(q))
    recoveries = _count(metric_reader, "actorlog.recovery.duration")
    replayed = _sum(metric_reader, "actorlog.recovery.replayed_steps")
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        await system.spawn(Researcher, "r")
    assert _count(metric_reader, "actorlog.recovery.duration") == recoveries + 1
    assert _sum(metric_reader, "actorlog.recovery.replayed_steps") == replayed + 3
    # points are per actor class (the reader also holds earlier tests' classes)
    types = [
        dict(p.attributes)[ATTR.ACTOR_TYPE]
        for p in _points(metric_reader, "actorlog.recovery.duration")
    ]
    assert any(str(t).endswith("telemetry_agents.Researcher") for t in types), types


async def test_in_doubt_gauge_counts_intents_waiting_for_an_operator(
    metric_reader: InMemoryMetricReader, memory_store: StoreFactory
) -> None:
    CALLS.hang = {"send_email"}
    async with ActorSystem(memory_store(), actors=[Researcher], shutdown_grace=0) as system:
        # the instruments exist from the first start of a system once OTel is configured
        assert _gauge(metric_reader, "actorlog.intents.in_doubt") == 0
        await (await system.spawn(Researcher, "r")).send(Ask("email:x"), message_id="m1")
        with anyio.fail_after(5):
            await CALLS.started.wait()
    CALLS.hang = set()
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        with anyio.fail_after(5):
            (seq,) = await system.wait_in_doubt("r")
        assert _gauge(metric_reader, "actorlog.intents.in_doubt") == 1
        await system.resolve("r", seq, result="done", by="ops")
        with anyio.fail_after(5):
            await system.ref(Researcher, "r").ask(Ask("email:x"), message_id="m1")
        assert _gauge(metric_reader, "actorlog.intents.in_doubt") == 0
