"""Events from a step to its callers: ``ctx.emit`` and ``ref.ask_stream`` (docs/streaming.md).

On asyncio and trio, MemoryStore, a real SQLite file and PostgreSQL (``make_store``)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any, ClassVar

import anyio
import pytest
from actorlog import (
    Actor,
    ActorlogError,
    ActorSystem,
    AskStream,
    ConfigurationError,
    Context,
    EncodeError,
    HandlerError,
    StepEvent,
    tool,
)

from tests.conftest import StoreFactory
from tests.model.stream_machine import CrashingStore, Plan, Streamer

from .stream_agents import Log, Narrator, Quiet, Tell

pytestmark = pytest.mark.anyio


async def _all(stream: AskStream) -> list[tuple[int, Any, bool]]:
    return [(ev.number, ev.data, ev.replayed) async for ev in stream]


async def test_events_arrive_live_in_order_then_the_reply(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Narrator]) as system:
        ref = await system.spawn(Narrator, "n")
        stream = ref.ask_stream(Tell("x", 3), message_id="q-1")
        got = await _all(stream)
        assert got == [
            (1, "start", False),
            (2, {"stage": "about x", "done": 0}, False),  # an attrs value arrives as a dict
            (3, {"stage": "about x", "done": 1}, False),
            (4, {"stage": "about x", "done": 2}, False),
        ]
        assert stream.reply == "told 3"
        assert stream.dropped == 0
        # the message was asked exactly once: asking again returns the recorded reply
        assert await ref.ask(Tell("x", 3), message_id="q-1") == "told 3"
        # a step already completed streams its reply only
        again = ref.ask_stream(Tell("x", 3), message_id="q-1")
        assert await _all(again) == []
        assert again.reply == "told 3"


async def test_a_message_that_emits_nothing_streams_only_its_reply(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Quiet]) as system:
        stream = system.ref(Quiet, "q").ask_stream(Tell("y"))
        assert await _all(stream) == []
        assert stream.reply == "about y"


class Gated(Actor[Log]):
    """Emits one event, waits for the test's gate, emits two more."""

    gate: anyio.Event

    async def receive(self, ctx: Context, msg: Tell) -> str:
        ctx.emit("one")
        await Gated.gate.wait()
        ctx.emit("two")
        ctx.emit("three")
        return "gated"


async def test_every_caller_waiting_gets_the_events_and_a_late_joiner_the_recent_ones(
    make_store: StoreFactory,
) -> None:
    Gated.gate = anyio.Event()
    async with ActorSystem(make_store(), actors=[Gated]) as system:
        ref = await system.spawn(Gated, "g")
        first = ref.ask_stream(Tell("z"), message_id="q-1")
        assert await first.__anext__() == StepEvent(1, "one")
        # a second caller joins the running step: it gets what was emitted so far, then live
        second = ref.ask_stream(Tell("z"), message_id="q-1")
        assert await second.__anext__() == StepEvent(1, "one")
        Gated.gate.set()
        results: dict[str, list[Any]] = {}

        async def drain(name: str, stream: AskStream) -> None:
            results[name] = [ev.data for ev in [e async for e in stream]] + [stream.reply]

        async with anyio.create_task_group() as tg:
            tg.start_soon(drain, "first", first)
            tg.start_soon(drain, "second", second)
        assert results == {"first": ["two", "three", "gated"], "second": ["two", "three", "gated"]}


class Chatty(Actor[Log]):
    async def receive(self, ctx: Context, msg: Tell) -> str:
        for i in range(msg.n):
            ctx.emit(i)
        return "said"


async def test_a_slow_caller_loses_events_past_its_buffer_never_the_reply(
    make_store: StoreFactory,
) -> None:
    """The actor never waits for a caller: with ``buffer=2`` and a caller that reads nothing
    until the step is over, 2 events are kept, the rest dropped (a gap), the reply arrives."""
    async with ActorSystem(make_store(), actors=[Chatty]) as system:
        ref = await system.spawn(Chatty, "c")
        slow = ref.ask_stream(Tell("w", 10), message_id="q-1", buffer=2)
        async with slow:  # logged and listening, reading nothing yet
            # the step runs to its end meanwhile: an ask of the next message is answered
            assert await ref.ask(Tell("w", 0), message_id="q-2") == "said"
            got = await _all(slow)
        assert [number for number, _, _ in got] == [1, 2]
        assert slow.dropped == 8
        assert slow.reply == "said"


class Failing(Actor[Log]):
    async def receive(self, ctx: Context, msg: Tell) -> str:
        ctx.emit("trying")
        raise RuntimeError("no luck")


async def test_a_handler_error_is_raised_by_the_iteration_after_the_events(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Failing]) as system:
        stream = system.ref(Failing, "f").ask_stream(Tell("v"), message_id="q-1")
        got: list[Any] = []
        with pytest.raises(HandlerError, match="no luck"):
            async for ev in stream:
                got.append(ev.data)
        assert got == ["trying"]
        with pytest.raises(ConfigurationError, match="iteration"):
            stream.reply  # noqa: B018  # the property raises: there is no reply


class BadEmitter(Actor[Log]):
    async def receive(self, ctx: Context, msg: Tell) -> str:
        for bad in (object(), len, "\ud800", "x" * (1024 * 1024 + 1), float("nan")):
            try:
                ctx.emit(bad)
            except EncodeError:
                continue
            return "emitted something it should not have"
        ctx.emit("fine")
        return "refused all"


async def test_emit_of_a_value_the_codec_cannot_encode_raises_and_emits_nothing(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[BadEmitter]) as system:
        stream = system.ref(BadEmitter, "b").ask_stream(Tell("u"))
        assert await _all(stream) == [(1, "fine", False)]  # numbers only count what went out
        assert stream.reply == "refused all"


class PlainForms(Actor[Log]):
    async def receive(self, ctx: Context, msg: Tell) -> str:
        ctx.emit({1: b"xy", "s": {2, 1}, "t": (1, 2)})
        return "sent"


async def test_an_event_arrives_in_the_plain_form_json_gives_back(
    make_store: StoreFactory,
) -> None:
    """docs/streaming.md: a set or tuple arrives as a list, bytes as base85 text and a
    dict's int keys as text."""
    async with ActorSystem(make_store(), actors=[PlainForms]) as system:
        stream = system.ref(PlainForms, "p").ask_stream(Tell("v"), message_id="p-1")
        assert await _all(stream) == [(1, {"1": "czF", "s": [1, 2], "t": [1, 2]}, False)]
        assert stream.reply == "sent"


@pytest.mark.parametrize(
    ("kwargs", "match"),
    [
        ({"message_id": ""}, "message_id"),
        ({"message_id": 7}, "message_id"),
        ({"buffer": 0}, "buffer"),
        ({"buffer": True}, "buffer"),
        ({"buffer": 2.0}, "buffer"),
        ({"buffer": 10**7}, "buffer"),
    ],
)
async def test_bad_arguments_fail_at_the_call_and_write_nothing(
    make_store: StoreFactory, kwargs: dict[str, Any], match: str
) -> None:
    store = make_store()
    async with ActorSystem(store, actors=[Narrator]) as system:
        ref = await system.spawn(Narrator, "n")
        with pytest.raises(ConfigurationError, match=match):
            ref.ask_stream(Tell("x"), **kwargs)
        assert [r.kind for r in await store.read("n")] == []


async def test_a_caller_that_stops_listening_leaves_the_step_running(
    make_store: StoreFactory,
) -> None:
    Gated.gate = anyio.Event()
    async with ActorSystem(make_store(), actors=[Gated]) as system:
        ref = await system.spawn(Gated, "g")
        async with ref.ask_stream(Tell("z"), message_id="q-1") as stream:
            async for ev in stream:
                assert ev.data == "one"
                break
        Gated.gate.set()
        assert await ref.ask(Tell("z"), message_id="q-1") == "gated"
        async for _ in stream:  # closed: nothing more
            raise AssertionError("a closed stream yields nothing")


class Outliver(Actor[Log]):
    kept: ClassVar[list[Context]] = []

    async def receive(self, ctx: Context, msg: Tell) -> str:
        Outliver.kept.append(ctx)
        return "ok"


async def test_emit_after_the_handler_returned_raises(make_store: StoreFactory) -> None:
    Outliver.kept = []
    async with ActorSystem(make_store(), actors=[Outliver]) as system:
        assert await system.ref(Outliver, "o").ask(Tell("t")) == "ok"
        with pytest.raises(ConfigurationError, match="after the handler returned"):
            Outliver.kept[0].emit("late")


def test_the_streaming_example_prints_the_events_then_the_reply() -> None:
    """examples/streaming.py (shown whole in docs/streaming.md), run as a reader would."""
    root = Path(__file__).resolve().parents[2]
    out = subprocess.run(
        [sys.executable, "-W", "error", str(root / "examples" / "streaming.py")],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    assert out.splitlines() == [
        "1 searching",
        "2 {'found': 12}",
        "3 drafting",
        "a draft about lisbon from 12 results",
    ]


async def test_an_event_whose_entries_never_became_durable_is_not_delivered(
    make_store: StoreFactory,
) -> None:
    """Found by the stream model: the store dies on the commit that carries the result an
    event shows. The step fails its callers; the event must not reach them (a resumed run
    computes that result again, and may emit something else at that number)."""
    inner = make_store()
    store = CrashingStore(inner)
    ops = "rrre"
    store.countdown = 4  # message+intent, result+intent, result+intent, then the last result
    got: list[Any] = []
    async with ActorSystem(store, actors=[Streamer]) as system:
        stream = system.ref(Streamer, "s").ask_stream(Plan("t", ops), message_id="t")
        with pytest.raises(ActorlogError):
            async for ev in stream:
                got.append(ev.data)
    assert got == []
    async with ActorSystem(make_store(), actors=[Streamer]) as system:
        again = system.ref(Streamer, "s").ask_stream(Plan("t", ops), message_id="t")
        assert [ev.number async for ev in again] in ([1], [])
        assert again.reply == "done t"


async def test_a_cancelled_caller_leaves_no_waiter_behind(make_store: StoreFactory) -> None:
    """Cancellation belongs to whoever started it: a stream cancelled while it waits for the
    next event withdraws its slot (read through the cell: no public API shows waiters)."""
    Gated.gate = anyio.Event()
    async with ActorSystem(make_store(), actors=[Gated]) as system:
        ref = await system.spawn(Gated, "g")
        stream = ref.ask_stream(Tell("z"), message_id="q-1")
        with anyio.move_on_after(0.2):
            async for _ in stream:
                pass  # "one", then it waits: the gate is closed
        assert system._cells["g"].waiters == {}
        Gated.gate.set()
        assert await ref.ask(Tell("z"), message_id="q-1") == "gated"


#: the context of the step running ``Speaker`` (what an integration's model call closes over)
SPEAKING: list[Context] = []


@tool(effect="read")
async def speak(words: int) -> str:
    """A model call that streams its tokens to the step's callers as it makes them."""
    ctx = SPEAKING[-1]
    for i in range(words):
        ctx.emit(f"tok{i}")
        if i == 0:
            await Speaker.gate.wait()  # the first token is out while the tool still runs
    return " ".join(f"tok{i}" for i in range(words))


class Speaker(Actor[Log]):
    gate: anyio.Event

    async def receive(self, ctx: Context, msg: Tell) -> str:
        SPEAKING.append(ctx)
        ctx.emit("calling")
        return str(await ctx.call(speak, msg.n))


async def test_a_running_tool_can_emit_and_its_events_go_out_while_it_runs(
    make_store: StoreFactory,
) -> None:
    Speaker.gate = anyio.Event()
    async with ActorSystem(make_store(), actors=[Speaker]) as system:
        stream = system.ref(Speaker, "sp").ask_stream(Tell("t", 3), message_id="q-1")
        first = [await stream.__anext__(), await stream.__anext__()]
        assert [ev.data for ev in first] == ["calling", "tok0"]  # the tool is still waiting
        Speaker.gate.set()
        assert [ev.data async for ev in stream] == ["tok1", "tok2"]
        assert stream.reply == "tok0 tok1 tok2"
