"""A tool's failure is that call's error, always logged, never the system's (issue 11.2, 11.5).

DESIGN.md section 10: "A completed step never holds an unsettled intent: if an outcome cannot
be logged as given, a sanitized error is" and "a cancellation a tool raises that the runtime
did not ask for is that call's error, never the system's".
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import anyio.lowlevel
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, HandlerError, Tool, ToolCallError, tool
from actorlog._journal.codec import MAX_PAYLOAD_BYTES
from actorlog.store import EntryRow, Store
from actorlog.stores import MemoryStore

from tests._payload import payload_of

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]

RUNS: list[str] = []
ERROR_TYPES = (
    "ValueError",
    "_BadStr",
    "CancelledError",
    "Cancelled",
    "GeneratorExit",
    "EncodeError",
)


@pytest.fixture(autouse=True)
def _reset_runs() -> None:
    RUNS.clear()


@attrs.define
class Call:
    tool: str
    arg: str = ""


@attrs.define
class Log:
    seen: list[str] = attrs.Factory(list)


async def _captured_cancellation() -> BaseException:
    """A real cancellation exception of the running backend, caught in a scope of our own
    (what a tool gets when it awaits something another task cancelled)."""
    caught: BaseException | None = None
    with anyio.CancelScope() as scope:
        scope.cancel()
        try:
            await anyio.lowlevel.checkpoint()
        except anyio.get_cancelled_exc_class() as exc:
            caught = exc
    assert caught is not None
    return caught


def _raiser(make: Callable[[str], BaseException]) -> Callable[[str], Any]:
    async def fn(arg: str) -> str:
        RUNS.append(arg)
        raise make(arg)

    return fn


async def _stray_cancel(arg: str) -> str:
    RUNS.append(arg)
    raise await _captured_cancellation()


async def _cancelled_future(arg: str) -> str:
    RUNS.append(arg)
    if anyio.get_cancelled_exc_class() is not asyncio.CancelledError:
        raise await _captured_cancellation()
    fut: asyncio.Future[str] = asyncio.get_running_loop().create_future()
    fut.cancel()  # someone else cancelled what the tool awaits
    return await fut


_FAILURES: dict[str, Callable[[str], Any]] = {
    "surrogate": _raiser(lambda a: ValueError(f"body {a} \udcff\ud800 end")),
    "oversize": _raiser(lambda a: ValueError("x" * (MAX_PAYLOAD_BYTES + 10))),
    "bad_str": _raiser(lambda a: _BadStr()),
    "stray_cancel": _stray_cancel,
    "cancelled_future": _cancelled_future,
    "generator_exit": _raiser(lambda a: GeneratorExit(a)),
}


class _BadStr(Exception):
    def __str__(self) -> str:
        raise RuntimeError("__str__ is broken")


READ_TOOLS = {k: tool(effect="read", name=f"read.{k}")(f) for k, f in _FAILURES.items()}
WRITE_TOOLS = {k: tool(effect="write", name=f"write.{k}")(f) for k, f in _FAILURES.items()}


class Caller(Actor[Log]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Call) -> str:
        kind, _, name = msg.tool.partition(":")
        tools = READ_TOOLS if kind == "read" else WRITE_TOOLS
        try:
            await ctx.call(tools[name], msg.arg)
        except ToolCallError as exc:
            self.state.seen.append(exc.error_type)
            return f"{exc.error_type}: {exc.message[:40]}"
        return "ok"


class Failing(Actor[Log]):
    """The step's own error cannot be logged as given."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Call) -> str:
        if msg.tool == "surrogate":
            raise ValueError("handler \udcff")
        if msg.tool == "oversize":
            raise ValueError("y" * (MAX_PAYLOAD_BYTES + 10))
        if msg.tool == "stray_cancel":
            raise await _captured_cancellation()
        if msg.tool == "generator_exit":
            raise GeneratorExit("from the handler")
        if msg.tool == "reply_surrogate":
            return "reply \udcff"
        if msg.tool == "reply_oversize":
            return "z" * (MAX_PAYLOAD_BYTES + 10)
        raise _BadStr()


@asynccontextmanager
async def running(make_store: StoreFactory) -> AsyncIterator[ActorSystem]:
    async with ActorSystem(make_store(), actors=[Caller, Failing], shutdown_grace=5) as system:
        yield system


async def rows(make_store: StoreFactory, actor_id: str) -> list[EntryRow]:
    store = make_store()
    await store.open()
    try:
        return list(await store.read(actor_id))
    finally:
        if not isinstance(store, MemoryStore):
            await store.close()


def unsettled_intents(entries: list[EntryRow]) -> list[int]:
    settled = {r.ref for r in entries if r.kind in ("result", "decision")}
    return [r.seq for r in entries if r.kind == "intent" and r.seq not in settled]


@pytest.mark.parametrize("policy", ["read", "write"])
@pytest.mark.parametrize("failure", sorted(_FAILURES))
async def test_a_tool_failure_is_logged_and_replayed_as_that_calls_error(
    make_store: StoreFactory, failure: str, policy: str
) -> None:
    """Whatever a tool raises (an unloggable message, a cancellation nobody asked for,
    GeneratorExit), the intent gets a result, the step completes with the error the
    handler saw, and a restart neither re-runs the tool nor hangs on it."""
    async with running(make_store) as system:
        ref = await system.spawn(Caller, "c")
        with anyio.fail_after(10):
            live = await ref.ask(Call(f"{policy}:{failure}", "a1"), message_id="m1")
            # the system survives: the actor handles the next message
            again = await ref.ask(Call(f"{policy}:{failure}", "a2"), message_id="m2")
    assert live.startswith(ERROR_TYPES)
    assert live.startswith(again.split(":")[0])
    assert RUNS == ["a1", "a2"]
    entries = await rows(make_store, "c")
    assert unsettled_intents(entries) == []
    assert [r.kind for r in entries].count("step") == 2
    for r in entries:
        if r.kind == "result":
            err = payload_of(r.kind, r.payload)["error"]
            assert len(err["message"]) < 70_000
            err["message"].encode()  # valid UTF-8: no lone surrogates left
    async with running(make_store) as system:
        with anyio.fail_after(10):
            ref = await system.spawn(Caller, "c")
            assert await ref.ask(Call(f"{policy}:{failure}", "a1"), message_id="m1") == live
            await ref.ask(Call("read:surrogate", "a3"))
    assert RUNS == ["a1", "a2", "a3"]  # nothing re-ran on recovery


@pytest.mark.parametrize("failure", ["surrogate", "oversize", "bad_str"])
async def test_a_tool_error_keeps_its_type_and_marks_truncation(
    make_store: StoreFactory, failure: str
) -> None:
    async with running(make_store) as system:
        ref = await system.spawn(Caller, "c")
        await ref.ask(Call(f"read:{failure}", "a"))
    [result] = [
        payload_of(r.kind, r.payload) for r in await rows(make_store, "c") if r.kind == "result"
    ]
    err = result["error"]
    assert err["type"] in ("ValueError", "_BadStr")
    if failure == "surrogate":
        assert err["message"] == "body a \\udcff\\ud800 end"
    elif failure == "oversize":
        assert err["message"].startswith("xxxx")
        assert "truncated" in err["message"]
    else:
        assert "RuntimeError" in err["message"]


@pytest.mark.parametrize(
    "failure",
    [
        "surrogate",
        "oversize",
        "bad_str",
        "stray_cancel",
        "generator_exit",
        "reply_surrogate",
        "reply_oversize",
    ],
)
async def test_a_handler_error_that_cannot_be_logged_as_given_keeps_its_type(
    make_store: StoreFactory, failure: str
) -> None:
    async with running(make_store) as system:
        ref = await system.spawn(Failing, "f")
        with anyio.fail_after(10):
            with pytest.raises(HandlerError) as live:
                await ref.ask(Call(failure), message_id="m1")
    assert live.value.error_type in ERROR_TYPES
    async with running(make_store) as system:
        ref = await system.spawn(Failing, "f")
        with anyio.fail_after(10):
            with pytest.raises(HandlerError) as replayed:
                await ref.ask(Call(failure), message_id="m1")
    assert str(replayed.value) == str(live.value)


async def _hang(arg: str) -> str:
    RUNS.append(arg)
    await anyio.sleep_forever()
    return "never"


async def _hang_keyed(arg: str, *, idempotency_key: str) -> str:
    return await _hang(arg)


HANGING: dict[str, Tool[..., str]] = {
    "read": tool(effect="read", name="hang.read")(_hang),
    "write": tool(effect="write", name="hang.write")(_hang),
    "idempotent": tool(effect="write", idempotent=True, name="hang.idem")(_hang_keyed),
}


class Impatient(Actor[Log]):
    """Gives up on a tool call with its own timeout, then goes on."""

    snapshot_every = None

    async def receive(self, ctx: Context, msg: Call) -> str:
        with anyio.move_on_after(0.05):
            await ctx.call(HANGING[msg.tool], msg.arg)
            return "returned"
        self.state.seen.append("gave up")
        with contextlib.suppress(ToolCallError):  # the step goes on with effects
            await ctx.call(READ_TOOLS["surrogate"], "after")
        return "gave up"


@pytest.mark.parametrize("policy", sorted(HANGING))
async def test_a_call_the_handler_cancels_is_settled_before_its_step_completes(
    make_store: StoreFactory, policy: str
) -> None:
    """The handler's own timeout cancels a tool: the step completes, so the intent must
    be settled (as cancelled), and replay takes the same path without running the tool
    again and without waiting for an operator."""
    async with ActorSystem(make_store(), actors=[Impatient], shutdown_grace=5) as system:
        ref = await system.spawn(Impatient, "i")
        with anyio.fail_after(10):
            assert await ref.ask(Call(policy, "a"), message_id="m1") == "gave up"
    entries = await rows(make_store, "i")
    assert unsettled_intents(entries) == []
    assert RUNS == ["a", "after"]
    async with ActorSystem(make_store(), actors=[Impatient], shutdown_grace=5) as system:
        with anyio.fail_after(10):
            ref = await system.spawn(Impatient, "i")
            assert await ref.ask(Call(policy, "a"), message_id="m1") == "gave up"
            assert system.status("i") != "quarantined"
    assert RUNS == ["a", "after"]


STAGE: dict[str, Any] = {"crash": True, "started": anyio.Event()}


async def _crash_then_stray(arg: str) -> str:
    RUNS.append(arg)
    if STAGE["crash"]:
        STAGE["started"].set()
        await anyio.sleep_forever()
    raise await _captured_cancellation()


ON_RESTART = {
    "read": tool(effect="read", name="restart.read")(_crash_then_stray),
    "reconcile": tool(
        effect="write",
        name="restart.reconcile",
        reconcile=lambda key, args: _captured_cancellation_raised(),
    )(_crash_then_stray),
}


async def _captured_cancellation_raised() -> None:
    raise await _captured_cancellation()


class Restarted(Actor[Log]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Call) -> str:
        try:
            await ctx.call(ON_RESTART[msg.tool], msg.arg)
        except ToolCallError as exc:
            return exc.error_type
        return "ok"


@pytest.mark.parametrize("policy", ["read", "reconcile"])
async def test_a_stray_cancellation_when_recovery_settles_an_in_doubt_call_is_no_poison_pill(
    make_store: StoreFactory, policy: str
) -> None:
    """Issue 11.5: recovery re-runs an in-doubt read (or asks a reconcile function) at
    start, and it raises a cancellation nobody asked for: that was the system's crash at
    every start. Now it is that call's error (read) or "don't know" (reconcile: escalate)."""
    STAGE["crash"], STAGE["started"] = True, anyio.Event()
    async with ActorSystem(make_store(), actors=[Restarted], shutdown_grace=0) as system:
        ref = await system.spawn(Restarted, "r")
        await ref.send(Call(policy, "a"), message_id="m1")
        with anyio.fail_after(10):
            await STAGE["started"].wait()
    STAGE["crash"] = False
    for start in range(2):  # and again: nothing is left to poison the next start
        async with ActorSystem(make_store(), actors=[Restarted]) as system:
            with anyio.fail_after(10):
                ref = await system.spawn(Restarted, "r")
                if policy == "read":
                    assert await ref.ask(Call(policy, "a"), message_id="m1") in ERROR_TYPES
                    continue
                if start == 0:
                    [seq] = await system.wait_in_doubt("r")
                    await system.resolve("r", seq, fail="checked: it did not happen")
                assert await ref.ask(Call(policy, "a"), message_id="m1") == "OperatorFailed"
    assert unsettled_intents(await rows(make_store, "r")) == []
