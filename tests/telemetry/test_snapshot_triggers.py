"""Why each snapshot was written: the ``actorlog.snapshot`` span's trigger and recovery
estimate, and the ``snapshot`` history event that counts every snapshot written (also those
deleted beyond ``snapshot_keep``), shown by ``actorlog history``."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest
from actorlog import ActorSystem, ops
from actorlog._durability.snapshots import SnapshotPolicy, SnapshotTrigger
from actorlog._tracing.telemetry import ATTR, SPAN
from actorlog.store import Store
from actorlog.stores import SqliteStore
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from ..cli._support import cli
from .conftest import attrs_of, named
from .telemetry_agents import Ask, Researcher

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


def test_the_policy_names_the_setting_that_fired() -> None:
    assert SnapshotPolicy(every=3).trigger(3, 0.0) is SnapshotTrigger.EVERY_STEPS
    assert SnapshotPolicy(every=3).trigger(2, 0.0) is None
    assert (
        SnapshotPolicy(every=None, every_seconds=5).trigger(1, 6.0) is SnapshotTrigger.EVERY_SECONDS
    )
    budget = SnapshotPolicy(every=None, recovery_budget=0.05)
    assert budget.trigger(1, 0.0, (0.001, 0.04)) is SnapshotTrigger.RECOVERY_BUDGET
    assert budget.trigger(1, 0.0, (0.001, 0.001)) is None
    assert SnapshotPolicy(every=3).trigger(0, 99.0) is None


async def test_snapshot_span_says_which_trigger_fired_and_the_recovery_estimate(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    async with ActorSystem(memory_store(), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r", snapshot_every=2)
        for i in range(2):
            await ref.ask(Ask(f"q{i}"), message_id=f"q{i}")
    (snap,) = named(spans.get_finished_spans(), SPAN.SNAPSHOT)
    a = attrs_of(snap)
    assert a[ATTR.SNAPSHOT_TRIGGER] == "every_steps"
    estimate = a[ATTR.SNAPSHOT_RECOVERY_ESTIMATE]
    assert isinstance(estimate, float) and estimate > 0


async def test_a_passivated_actor_snapshots_with_trigger_passivation(
    spans: InMemorySpanExporter, memory_store: StoreFactory
) -> None:
    async with ActorSystem(memory_store(), actors=[Researcher], max_actors=1) as system:
        first = await system.spawn(Researcher, "r1", snapshot_every=None)
        await first.ask(Ask("a"), message_id="a")
        second = await system.spawn(Researcher, "r2", snapshot_every=None)
        await second.ask(Ask("b"), message_id="b")  # r1 leaves memory: max_actors=1
    triggers = {
        attrs_of(s)[ATTR.ACTOR_ID]: attrs_of(s)[ATTR.SNAPSHOT_TRIGGER]
        for s in named(spans.get_finished_spans(), SPAN.SNAPSHOT)
    }
    assert triggers["r1"] == "passivation"


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_history_counts_every_snapshot_written_not_only_the_kept_ones(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(path), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r", snapshot_every=1, snapshot_keep=2)
        for i in range(5):
            await ref.ask(Ask(f"q{i}"), message_id=f"q{i}")
    store = SqliteStore(path)
    await store.open()
    try:
        h = await ops.history(store, "r")
    finally:
        await store.close()
    written = [e for e in h.events if e.kind == "snapshot"]
    assert len(written) == 5 and len(h.snapshots) == 2
    assert {e.detail["trigger"] for e in written} == {"every_steps"}
    assert sorted(e.detail["seq"] for e in written)[-2:] == sorted(s.seq for s in h.snapshots)
    run = cli("history", f"sqlite:///{path}", "r")
    assert run.code == 0, run.err
    assert "snapshots: 5 written, 2 kept" in run.out
    assert "written (every_steps" in run.out
