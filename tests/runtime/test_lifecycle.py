"""Actor lifecycle on every store: finish (ctx.stop), cancel, terminate, delete + audit."""

from __future__ import annotations

import json
from collections.abc import Callable

import anyio
import attrs
import pytest
from actorlog import (
    Actor,
    ActorFinishedError,
    ActorSystem,
    ConfigurationError,
    Context,
    StepCancelledError,
    tool,
)
from actorlog.store import AuditStore, Store
from actorlog.stores import MemoryStore

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@attrs.frozen
class Work:
    text: str


@attrs.frozen
class Done:
    why: str


@attrs.frozen
class Slow:
    seconds: float


@attrs.define
class Count:
    n: int = 0


_started: list[anyio.Event] = []


@tool(effect="write")
async def slow_write(seconds: float) -> str:
    if _started:
        _started[-1].set()
    await anyio.sleep(seconds)
    return "wrote"


class Worker(Actor[Count]):
    def initial_state(self) -> Count:
        return Count()

    async def receive(self, ctx: Context, msg: Work | Done | Slow) -> int:
        self.state.n += 1
        if isinstance(msg, Done):
            ctx.stop(msg.why)
        if isinstance(msg, Slow):
            await ctx.call(slow_write, msg.seconds)
        return self.state.n


async def _events(store: Store, actor_id: str) -> list[str]:
    return [e.kind for e in await store.read_events(actor_id)]


async def _close(store: Store) -> None:
    if not isinstance(store, MemoryStore):
        await store.close()


async def test_finish_then_send_is_refused_also_after_restart(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Worker]) as system:
        ref = await system.spawn(Worker, "w")
        assert await ref.ask(Work("a")) == 1
        assert await ref.ask(Done("all done")) == 2  # the finishing step still replies
        assert system.status("w") == "finished"
        with pytest.raises(ActorFinishedError, match="all done"):
            await ref.ask(Work("b"))
        with pytest.raises(ActorFinishedError):
            await ref.send(Work("c"))
    async with ActorSystem(make_store(), actors=[Worker]) as system:
        assert system.status("w") == "unknown"  # not recovered at start
        with pytest.raises(ActorFinishedError):
            await system.spawn(Worker, "w")
        with pytest.raises(ActorFinishedError):
            await system.ref(Worker, "w").ask(Work("d"))
    store = make_store()
    await store.open()
    try:
        rows = await store.read("w")
        assert [r.kind for r in rows][-2:] == ["effect", "step"]
        assert rows[-2].type_tag == "finish"
        assert "finished" in await _events(store, "w")
        assert sum(1 for r in rows if r.kind == "message") == 2  # refused ones not logged
    finally:
        await _close(store)


async def test_cancel_a_long_write_call(make_store: StoreFactory) -> None:
    _started.append(anyio.Event())
    async with ActorSystem(make_store(), actors=[Worker]) as system:
        ref = await system.spawn(Worker, "c")
        result: list[BaseException] = []

        async def asker() -> None:
            try:
                await ref.ask(Slow(60))
            except BaseException as exc:
                result.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(asker)
            await _started[-1].wait()
            assert await system.cancel("c", reason="too slow", by="ops") is True
        assert isinstance(result[0], StepCancelledError), result
        assert "too slow" in str(result[0])
        assert await ref.ask(Work("after")) == 2  # the actor goes on
    async with ActorSystem(make_store(), actors=[Worker]) as system:
        # replay of the cancelled step stops where its log ends (no nondeterminism)
        assert await system.ref(Worker, "c").ask(Work("again")) == 3
    store = make_store()
    await store.open()
    try:
        rows = await store.read("c")
        results = [r for r in rows if r.kind == "result"]
        payload = json.loads(results[0].payload)
        assert payload["settled_by"] == "cancelled"
        assert "in doubt" in payload["error"]["message"]
        assert "cancelled" in await _events(store, "c")
    finally:
        await _close(store)


async def test_terminate_then_delete(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Worker]) as system:
        ref = await system.spawn(Worker, "t")
        assert await ref.ask(Work("a")) == 1
        with pytest.raises(ConfigurationError, match="running"):
            await system.delete("t")
        await system.terminate("t", reason="abuse", by="ops")
        assert system.status("t") == "terminated"
        with pytest.raises(ActorFinishedError, match="terminated"):
            await ref.ask(Work("b"))
        store = system.store
        assert isinstance(store, AuditStore)
        audit = await system.delete("t", by="ops", reason="gdpr")
        assert audit.actor_id == "t" and audit.kind == "deleted"
        assert await store.get_actor("t") is None
        assert await store.read("t") == []
        assert await store.read_events("t") == []
        [row] = await store.read_audit("t")
        assert json.loads(row.detail)["ended"] == "terminated"


async def test_delete_refuses_unfinished_unless_forced(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Worker]) as system:
        assert await (await system.spawn(Worker, "u")).ask(Work("a")) == 1
    async with ActorSystem(make_store(), actors=[Worker]) as system:
        with pytest.raises(ConfigurationError, match="force"):
            await system.delete("u")
        await system.delete("u", force=True)
        assert await system.store.get_actor("u") is None
        # the id starts afresh
        assert await (await system.spawn(Worker, "u")).ask(Work("b")) == 1
