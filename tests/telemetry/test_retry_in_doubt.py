"""Recovery counts an attempt of a retry interrupted by a crash as in doubt
(``actorlog.recover.in_doubt`` and one ``actorlog.intent.in_doubt`` event naming the attempt),
with the real OTel SDK; a back-off interrupted between attempts is not in doubt."""

from __future__ import annotations

from collections.abc import Callable, Iterator

import anyio
import pytest
from actorlog import ActorSystem, Retry, tool
from actorlog._tracing.telemetry import ATTR, EVENT, SPAN
from actorlog.store import Store
from actorlog.stores import MemoryStore
from opentelemetry.sdk.trace.export.in_memory_span_exporter import InMemorySpanExporter

from tests.effects import test_retry as rt

from .conftest import attrs_of, one

pytestmark = pytest.mark.anyio


@tool(effect="write", retry=Retry(attempts=3, initial=3600.0, jitter=False), name="slow_backoff")
async def slow_backoff(q: str) -> str:
    return await rt._behave("slow_backoff", q)


rt.TOOLS["slow_backoff"] = slow_backoff


@pytest.fixture(autouse=True)
def _reset_retry() -> Iterator[None]:
    for d in (rt.RUNS, rt.FAIL, rt.HANG, rt.HANG_AT, rt.RECONCILE):
        d.clear()
    yield
    for d in (rt.RUNS, rt.FAIL, rt.HANG, rt.HANG_AT, rt.RECONCILE):
        d.clear()


@pytest.mark.parametrize(
    ("name", "effect", "policy"),
    [("crashy_read", "read", "rerun"), ("crashy_write", "write", "escalate")],
)
async def test_an_attempt_interrupted_in_a_retry_is_in_doubt_on_recovery(
    spans: InMemorySpanExporter, name: str, effect: str, policy: str
) -> None:
    store = MemoryStore()
    make: Callable[[], Store] = lambda: store  # noqa: E731
    await rt._crash_during_attempt_2(make, "c", name)
    spans.clear()
    async with ActorSystem(store, actors=[rt.Caller]) as system:
        await system.spawn(rt.Caller, "c")
        if effect == "write":
            with anyio.fail_after(10):
                await system.wait_in_doubt("c")
    recover = one(spans.get_finished_spans(), SPAN.RECOVER)
    assert attrs_of(recover)[ATTR.IN_DOUBT] == 1
    (ev,) = [dict(e.attributes or {}) for e in recover.events if e.name == EVENT.IN_DOUBT]
    assert ev[ATTR.ATTEMPT] == 2
    assert (ev[ATTR.TOOL], ev[ATTR.TOOL_EFFECT], ev[ATTR.TOOL_POLICY]) == (name, effect, policy)
    assert system.last_recovery("c")["in_doubt"] == 1  # type: ignore[index]


async def test_a_backoff_interrupted_between_attempts_is_not_in_doubt(
    spans: InMemorySpanExporter,
) -> None:
    """Attempt 1 failed (recorded) and the next waits a long back-off: nothing ran unrecorded."""
    store = MemoryStore()
    rt.FAIL["slow_backoff"] = 1
    async with ActorSystem(store, actors=[rt.Caller], shutdown_grace=0) as system:
        await (await system.spawn(rt.Caller, "b")).send(rt.Use("slow_backoff"))
        with anyio.fail_after(10):
            while not await store.read("b", kinds=["decision"]):  # attempt_failed logged
                await anyio.sleep(0.01)
    spans.clear()
    async with ActorSystem(store, actors=[rt.Caller], shutdown_grace=0) as system:
        await system.spawn(rt.Caller, "b")
    recover = one(spans.get_finished_spans(), SPAN.RECOVER)
    assert attrs_of(recover)[ATTR.IN_DOUBT] == 0
    assert [e for e in recover.events if e.name == EVENT.IN_DOUBT] == []
