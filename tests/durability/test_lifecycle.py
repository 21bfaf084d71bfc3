"""Actor lifecycle on every store: finish (ctx.stop), cancel, terminate, delete + audit."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

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

from tests._payload import payload_of

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
        payload = payload_of("result", results[0].payload)
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


@attrs.frozen
class Hold:
    """Held in its tool until the test opens the gate."""


_gate: list[anyio.Event] = []


@tool(effect="read", name="test_lifecycle.gated")
async def gated() -> str:
    _started[-1].set()
    await _gate[-1].wait()
    return "open"


class Gated(Actor[Count], name="test_lifecycle.gated_actor"):
    """Its ``Work`` step has an effect (``ctx.now``): replaying a refused one through the
    handler is a divergence, not a silent change of the state."""

    def initial_state(self) -> Count:
        return Count()

    async def receive(self, ctx: Context, msg: Work | Done | Hold) -> int:
        if isinstance(msg, Hold):
            await ctx.call(gated)
        elif isinstance(msg, Done):
            ctx.stop(msg.why)
        else:
            ctx.now()
        self.state.n += 1
        return self.state.n


@pytest.mark.parametrize("how", ["stop", "terminate"])
async def test_queued_asks_get_finished_error_with_a_recorded_step(
    make_store: StoreFactory, how: str
) -> None:
    """Issue 24 items 8 and 9: asks queued behind a step when the actor ends (``ctx.stop()``
    in an earlier queued message, or ``system.terminate``) get ``ActorFinishedError`` with a
    recorded step, never ``ActorQuarantinedError`` (it was an ``IndexError`` in refusing
    them); nothing is quarantined, and a later recovery does not run the refused steps
    through the handler (here that would be a ``NonDeterminismError``)."""
    from actorlog import ActorlogError, ops

    _started.append(anyio.Event())
    _gate.append(anyio.Event())
    got: dict[int, object] = {}
    async with ActorSystem(make_store(), actors=[Gated]) as system:
        ref = await system.spawn(Gated, "g")

        async def ask(i: int, msg: Work | Done | Hold) -> None:
            try:
                got[i] = await ref.ask(msg, message_id=f"m-{i}")
            except ActorlogError as exc:
                got[i] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(ask, 0, Hold())
            await _started[-1].wait()  # step 1 is in its tool: what follows queues
            queued: list[Work | Done] = [Done("bye")] if how == "stop" else []
            queued += [Work(str(i)) for i in range(3)]
            journal = system._cells["g"].journal
            for i, msg in enumerate(queued, start=1):
                tg.start_soon(ask, i, msg)
                with anyio.fail_after(20):  # in the log (in this order) before the next
                    while journal.last_seq < 2 + i:
                        await anyio.sleep(0.01)
            if how == "terminate":
                await system.terminate("g", reason="enough", by="ops")
            else:
                _gate[-1].set()
        ended = "finished" if how == "stop" else "terminated"
        work = [i for i, m in enumerate(queued, start=1) if isinstance(m, Work)]
        for i in work:
            err = got[i]
            assert isinstance(err, ActorFinishedError), got
            assert err.how == ended
        assert system.status("g") == ended
        assert "quarantined" not in await _events(system.store, "g")
        rows = await system.store.read("g")
        steps = {r.ref: payload_of(r.kind, r.payload) for r in rows if r.kind == "step"}
        messages = [r.seq for r in rows if r.kind == "message"]
        assert set(messages) <= set(steps)  # every message has its recorded step
        for seq in messages[-3:]:
            assert steps[seq]["error"]["type"] == "ActorFinishedError"
    # a new runtime: the refused steps are not replayed through the handler
    async with ActorSystem(make_store(), actors=[Gated]) as system:
        with pytest.raises(ActorFinishedError, match=ended):
            await system.ref(Gated, "g").ask(Work("later"))
        assert system.status("g") == ended
        assert "quarantined" not in await _events(system.store, "g")
        status = await ops.actor_status(system.store, "g")
        assert status.status == ended, status
    report = await _replay_check(make_store())
    assert report.ok, report.lines()


async def _replay_check(store: Store) -> Any:
    from actorlog.testing import replay

    await store.open()
    try:
        return await replay(store, actors=[Gated])
    finally:
        await _close(store)


async def test_replay_check_of_a_step_an_operator_cancelled_ends(make_store: StoreFactory) -> None:
    """The replay tester cuts a step cancelled by an operator where its log ends, as recovery
    does (it waited forever for a cancel that never comes: found with issue 24 item 8)."""
    _started.append(anyio.Event())
    _gate.append(anyio.Event())
    async with ActorSystem(make_store(), actors=[Gated]) as system:
        ref = await system.spawn(Gated, "k")
        async with anyio.create_task_group() as tg:

            async def ask() -> None:
                with pytest.raises(StepCancelledError):
                    await ref.ask(Hold())

            tg.start_soon(ask)
            await _started[-1].wait()
            assert await system.cancel("k", reason="stuck", by="ops")
    with anyio.fail_after(30):
        report = await _replay_check(make_store())
    assert report.ok and report.steps == 1, report.lines()
