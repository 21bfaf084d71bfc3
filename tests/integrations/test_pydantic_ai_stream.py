"""Streamed model requests (docs/pydantic-ai.md, "Streaming and event stream handlers"): the
handler gets the provider's deltas live, the complete response is logged once, a request
served from the log is not streamed (its parts come whole), a run recorded without streaming
resumes, and ``emit_deltas`` hands the deltas to the step's ``ref.ask_stream`` callers."""

from __future__ import annotations

import json
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("pydantic_ai")

from actorlog import ActorSystem, ConfigurationError, HandlerError, ops
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent, RunPrompt
from actorlog.stores import MemoryStore, SqliteStore
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPart,
    TextPartDelta,
    ToolCallPart,
    ToolCallPartDelta,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

FIXTURE = Path(__file__).with_name("fixtures") / "pai_unstreamed_v0.db"
REQUEST = "pydantic_ai.model_request"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def describe(event: AgentStreamEvent) -> str:
    if isinstance(event, PartStartEvent):
        part = event.part
        if isinstance(part, ToolCallPart):
            args = part.args if isinstance(part.args, str) else json.dumps(part.args)
            return f"start {event.index} {part.tool_name} {args}"
        return f"start {event.index} {getattr(part, 'content', '')}"
    if isinstance(event, PartDeltaEvent):
        delta = event.delta
        if isinstance(delta, TextPartDelta):
            return f"delta {event.index} {delta.content_delta}"
        if isinstance(delta, ToolCallPartDelta):
            return f"delta {event.index} {delta.args_delta}"
    if isinstance(event, PartEndEvent):
        return f"end {event.index}"
    if isinstance(event, FunctionToolCallEvent):
        return f"call {event.part.tool_name}"
    return type(event).__name__


def responses(messages: list[ModelMessage]) -> int:
    return sum(1 for m in messages if isinstance(m, ModelResponse))


async def logged_requests(store: Path, actor_id: str) -> list[tuple[str, Any]]:
    """The model requests in the log: (status, result) each."""
    async with ops.opened(f"sqlite:///{store}") as s:
        found = await ops.history(s, actor_id)
    return [(c.status, c.value) for st in found.steps for c in st.calls if c.tool == REQUEST]


def lookup_then_answer(asked: list[int]) -> FunctionModel:
    """Request 0 streams a tool call of ``lookup`` (its arguments in two chunks), request 1
    streams the answer in three; ``asked`` counts the requests made (by number)."""

    async def stream_fn(
        messages: list[ModelMessage], info: AgentInfo
    ) -> AsyncIterator[str | DeltaToolCalls]:
        k = responses(messages)
        asked.append(k)
        if k == 0:
            yield {0: DeltaToolCall(name="lookup", json_args='{"q": ', tool_call_id="c0")}
            yield {0: DeltaToolCall(json_args='"x"}')}
        else:
            for chunk in ["fo", "un", "d x"]:
                yield chunk

    return FunctionModel(stream_function=stream_fn, model_name="streamer")


@pytest.mark.anyio
async def test_the_handler_gets_each_delta_while_the_model_streams() -> None:
    """The model yields its next chunk only once the handler has seen the one before: a
    response handed on after its stream ended could never get past the first chunk."""
    seen: list[str] = []

    async def stream_fn(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for chunk in ["Hel", "lo ", "wor", "ld"]:
            yield chunk
            with anyio.fail_after(10):  # an integration that buffers never hands it on
                while not any(s.endswith(" " + chunk) for s in seen):
                    await anyio.sleep(0.001)

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        async for event in stream:
            seen.append(describe(event))

    model = FunctionModel(stream_function=stream_fn, model_name="streamer")
    durable = DurableAgent(Agent(model, name="t-live-deltas"), event_stream_handler=handler)
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        result = await durable.run(system, "s", "go", message_id="m")
    assert result.output == "Hello world"
    assert seen == [
        "start 0 Hel",
        "FinalResultEvent",
        "delta 0 lo ",
        "delta 0 wor",
        "delta 0 ld",
        "end 0",
    ]


@pytest.mark.anyio
async def test_a_request_served_from_the_log_is_not_streamed(tmp_path: Path) -> None:
    """Stopped while the tool ran (after the first request streamed and was logged): the
    resumed run gets the first response from the log, its parts whole (no deltas), runs the
    tool again (a read in doubt) and streams the second request; each request is logged
    once, with its complete response."""
    asked: list[int] = []
    events: list[str] = []
    ran: list[str] = []
    block = True
    reached = anyio.Event()

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        async for event in stream:
            events.append(describe(event))

    agent = Agent(lookup_then_answer(asked), name="t-from-log")

    @agent.tool_plain
    async def lookup(q: str) -> str:
        ran.append(q)
        if block:
            reached.set()
            await anyio.sleep_forever()
        return f"found {q}"

    durable = DurableAgent(agent, tools={"lookup": READ}, event_stream_handler=handler)
    store = tmp_path / "agents.db"
    async with (
        ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system,
        anyio.create_task_group() as tg,
    ):

        async def go() -> None:
            await durable.run(system, "s", "go", message_id="m")

        tg.start_soon(go)
        with anyio.fail_after(30):
            await reached.wait()
        tg.cancel_scope.cancel()
    assert asked == [0]
    live = list(events)
    assert live[:4] == ['start 0 lookup {"q": ', 'delta 0 "x"}', "end 0", "call lookup"]

    block = False
    events.clear()
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "s", "go", message_id="m")
    assert result.output == "found x"
    assert asked == [0, 1] and ran == ["x", "x"]
    # the logged response, whole: one start with the complete arguments, its end
    assert events[:3] == ['start 0 lookup {"q": "x"}', "end 0", "call lookup"]
    assert events[-5:] == ["start 0 fo", "FinalResultEvent", "delta 0 un", "delta 0 d x", "end 0"]
    logged = await logged_requests(store, "s")
    assert [status for status, _ in logged] == ["ok", "ok"]
    assert logged[1][1]["parts"][0]["content"] == "found x"

    # asked again: the recorded reply, nothing requested (recovery at start replays the
    # step from the log to rebuild the conversation: its events come whole, no deltas)
    events.clear()
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        again = await durable.run(system, "s", "go", message_id="m")
    assert again.output == "found x" and asked == [0, 1]
    assert not [e for e in events if e.startswith("delta")]


@pytest.mark.anyio
async def test_a_run_recorded_without_streaming_resumes_streamed(tmp_path: Path) -> None:
    """``fixtures/pai_unstreamed_v0.db`` (make_pai_stream_fixture.py) was recorded by the
    integration before it streamed, stopped while its third model request was in flight.
    With a model that streams it resumes: the two logged requests come from the log (their
    parts whole), the one in flight is made again, streamed."""
    asked: list[str] = []
    events: list[str] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        asked.append("whole")
        raise AssertionError("the requests recorded are not made again, the rest streams")

    async def stream_fn(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        asked.append(f"streamed {responses(messages)}")
        for chunk in ["all ", "done"]:
            yield chunk

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        async for event in stream:
            events.append(describe(event))

    model = FunctionModel(fn, stream_function=stream_fn, model_name="streamer")
    agent = Agent(model, name="unstreamed")

    @agent.tool_plain
    async def lookup(q: str) -> str:
        return f"found {q}"

    durable = DurableAgent(agent, tools={"lookup": READ}, event_stream_handler=handler)
    store = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, store)
    # the third request in doubt ("auto": settled by the runtime when it recovers)
    assert [s for s, _ in await logged_requests(store, "s")] == ["ok", "ok", "auto"]
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "s", "go", message_id="m")
    assert result.output == "all done"
    assert asked == ["streamed 2"]
    starts = [e for e in events if e.startswith(("start", "delta"))]
    assert starts == [
        "start 0 looking up q0",
        'start 1 lookup {"q": "q0"}',
        "start 0 looking up q1",
        'start 1 lookup {"q": "q1"}',
        "start 0 all ",
        "delta 0 done",
    ]
    assert [s for s, _ in await logged_requests(store, "s")] == ["ok", "ok", "ok"]


@pytest.mark.anyio
async def test_a_stream_that_fails_is_logged_as_a_failed_request(tmp_path: Path) -> None:
    """The provider fails mid-stream: the request's result is the error (logged once), the
    run fails; asked again, the same failure, and the model is not asked again."""
    asked: list[int] = []

    async def stream_fn(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        asked.append(1)
        yield "partial "
        raise RuntimeError("connection reset by the provider")

    agent = Agent(FunctionModel(stream_function=stream_fn), name="t-stream-fails")
    durable = DurableAgent(agent, event_stream_handler=_read_all)
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        with pytest.raises(HandlerError, match="connection reset"):
            await durable.run(system, "s", "go", message_id="m")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        with pytest.raises(HandlerError, match="connection reset"):
            await durable.run(system, "s", "go", message_id="m")
    assert asked == [1]
    assert [s for s, _ in await logged_requests(store, "s")] == ["error"]


async def _read_all(ctx: RunContext[Any], stream: Any) -> None:
    async for _ in stream:
        pass


# -- emit_deltas: the deltas to the step's callers ---------------------------------------------


def reduce(emitted: list[dict[str, Any]]) -> dict[tuple[int, int], str]:
    """What a caller rebuilds from the dicts (docs/pydantic-ai.md): one text per (request,
    part); a request's start clears its parts, a delta replaces the text from its offset."""
    texts: dict[tuple[int, int], str] = {}
    for ev in emitted:
        if ev["event"] == "pydantic_ai.request":
            texts = {k: v for k, v in texts.items() if k[0] != ev["request"]}
        elif ev["event"] == "pydantic_ai.delta":
            key = (ev["request"], ev["part"])
            texts[key] = texts.get(key, "")[: ev["offset"]] + ev["delta"]
    return texts


async def stream_events(
    system: ActorSystem, durable: DurableAgent[Any, Any], actor_id: str, message_id: str
) -> tuple[list[dict[str, Any]], list[bool], Any]:
    """Run ``durable`` on "go" through ``ref.ask_stream``: the events' data, their
    ``replayed`` flags, and the reply."""
    ref = await system.spawn(AgentActor, actor_id)
    stream = ref.ask_stream(RunPrompt(durable.name, "go"), message_id=message_id)
    data: list[dict[str, Any]] = []
    flags: list[bool] = []
    async for ev in stream:
        data.append(ev.data)
        flags.append(ev.replayed)
    return data, flags, stream.reply


@pytest.mark.anyio
async def test_emit_deltas_hands_the_deltas_to_the_callers(tmp_path: Path) -> None:
    """Without a handler, ``emit_deltas=True`` streams the requests and hands plain dicts
    to the ``ref.ask_stream`` caller: live, each delta at its offset; after a resume, a
    request served from the log as one dict per part (offset 0, the whole text,
    ``replayed``), then the live ones."""
    emitted: list[dict[str, Any]] = []
    asked: list[int] = []
    block = True
    reached = anyio.Event()
    agent = Agent(lookup_then_answer(asked), name="t-emit")

    @agent.tool_plain
    async def lookup(q: str) -> str:
        if block:
            reached.set()
            await anyio.sleep_forever()
        return f"found {q}"

    durable = DurableAgent(agent, tools={"lookup": READ}, emit_deltas=True)
    store = tmp_path / "agents.db"
    async with (
        ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system,
        anyio.create_task_group() as tg,
    ):
        ref = await system.spawn(AgentActor, "s")

        async def go() -> None:
            async for ev in ref.ask_stream(RunPrompt("t-emit", "go"), message_id="m"):
                emitted.append(ev.data)

        tg.start_soon(go)
        with anyio.fail_after(30):
            await reached.wait()
            while len(emitted) < 4:  # the caller gets the events the step emitted so far
                await anyio.sleep(0.001)
        tg.cancel_scope.cancel()
    call = {"tool_name": "lookup", "tool_call_id": "c0"}
    delta = {"event": "pydantic_ai.delta", "request": 0, "part": 0}
    assert emitted == [
        {"event": "pydantic_ai.request", "request": 0, "replayed": False},
        {**delta, "part_kind": "tool-call", "offset": 0, "delta": '{"q": ', **call},
        {**delta, "part_kind": "tool-call", "offset": 6, "delta": '"x"}'},
        {"event": "pydantic_ai.request_end", "request": 0},
    ]

    block = False
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        again, flags, reply = await stream_events(system, durable, "s", "m")
    assert reply["output"] == "found x" and asked == [0, 1]
    text = {"event": "pydantic_ai.delta", "request": 1, "part": 0, "part_kind": "text"}
    assert again == [
        {"event": "pydantic_ai.request", "request": 0, "replayed": True},
        {**delta, "part_kind": "tool-call", "offset": 0, "delta": '{"q": "x"}', **call},
        {"event": "pydantic_ai.request_end", "request": 0},
        {"event": "pydantic_ai.request", "request": 1, "replayed": False},
        {**text, "offset": 0, "delta": "fo"},
        {**text, "offset": 2, "delta": "un"},
        {**text, "offset": 4, "delta": "d x"},
        {"event": "pydantic_ai.request_end", "request": 1},
    ]
    # the request served from the log says so in its dict; the StepEvent's own flag is
    # False, as the emits come after the last recorded effect (docs/streaming.md)
    assert flags == [False] * 8
    assert reduce(again) == reduce(emitted + again) == {(0, 0): '{"q": "x"}', (1, 0): "found x"}


def test_emit_deltas_is_checked() -> None:
    agent = Agent(FunctionModel(stream_function=_never), name="t-emit-checked")
    for bad in ["yes", 1, None]:
        with pytest.raises(ConfigurationError, match="emit_deltas"):
            DurableAgent(agent, emit_deltas=bad)  # type: ignore[arg-type]
    assert DurableAgent(agent, emit_deltas=True).emit_deltas is True


async def _never(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
    raise AssertionError("not asked")
    yield ""


# -- SIGKILL in the middle of a streamed request -----------------------------------------------

WORKER = Path(__file__).with_name("stream_worker.py")
CHUNKS = [f"w{i} " for i in range(10)]  # what the worker's model streams, in this order


def _worker(store: Path, ledger: Path, kill_after_deltas: int | None) -> list[str]:
    """Run the worker; SIGKILL it once its handler printed ``kill_after_deltas`` deltas.
    The whole lines it printed."""
    env = dict(os.environ, STREAM_LEDGER=str(ledger))
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(store)],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    for line in proc.stdout:
        if not line.endswith("\n"):
            break
        lines.append(line.rstrip("\n"))
        deltas = sum(1 for x in lines if x.startswith("[event] delta"))
        if deltas == kill_after_deltas:
            proc.send_signal(signal.SIGKILL)
            break
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    rc = proc.wait(timeout=120)
    assert rc == (0 if kill_after_deltas is None else -signal.SIGKILL), err
    return lines


def _requests_made(ledger: Path) -> list[str]:
    with closing(sqlite3.connect(ledger)) as db:
        return [str(k) for (k,) in db.execute("SELECT key FROM requests ORDER BY rowid")]


def test_killed_mid_stream_the_request_is_made_again_and_completed_ones_are_not(
    tmp_path: Path,
) -> None:
    """SIGKILL after the handler saw three deltas of the second request: it was not logged
    (in doubt), so the resumed run makes it again and streams it from its start; the first
    request (logged) is not made again: its response comes whole."""
    store, ledger = tmp_path / "agents.db", tmp_path / "ledger.db"
    before = _worker(store, ledger, 3)
    assert [x for x in before if x.startswith("[event] delta")] == [
        "[event] delta 0 w1 ",
        "[event] delta 0 w2 ",
        "[event] delta 0 w3 ",
    ]
    assert _requests_made(ledger) == ["0", "1"]
    assert [s for s, _ in anyio.run(logged_requests, store, "chunky-1")] == [
        "ok",
        "auto",
    ]  # in doubt (a read: made again)

    after = _worker(store, ledger, None)
    assert json.loads(after[-1].removeprefix("DONE ")) == {"output": "".join(CHUNKS)}
    assert _requests_made(ledger) == ["0", "1", "1"]  # the first request was not made again
    events = [x.removeprefix("[event] ") for x in after if x.startswith("[event]")]
    first = events.index("FunctionToolCallEvent")
    assert events[:first] == ['start 0 note {"what":"start"}', "end 0"]  # whole, from the log
    texts = [e for e in events[first:] if e.startswith(("start", "delta"))]
    assert texts == ["start 0 w0 "] + [f"delta 0 {c}" for c in CHUNKS[1:]]
    assert [s for s, _ in anyio.run(logged_requests, store, "chunky-1")] == ["ok", "ok"]


@pytest.mark.anyio
async def test_a_handler_that_raises_mid_stream_fails_the_run_and_it_recovers(
    tmp_path: Path,
) -> None:
    """The handler raises after two deltas: the run fails with its error, which is logged as
    the request's outcome (a response is not); after a restart the actor recovers (the
    failed run replays: it fails at that request, which does not stream, without waiting
    for the handler) and asking again gives the recorded failure without a new request."""
    asked: list[int] = []

    async def stream_fn(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        asked.append(1)
        for chunk in ["a", "b", "c", "d"]:
            yield chunk

    fail = [True]  # the first run's handler fails (not the replay's, nor the next run's)

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        n = 0
        async for event in stream:
            n += isinstance(event, PartDeltaEvent)
            if n == 2 and fail[0]:
                fail[0] = False
                raise ValueError("the consumer went away")

    agent = Agent(FunctionModel(stream_function=stream_fn), name="t-handler-raises")
    durable = DurableAgent(agent, event_stream_handler=handler)
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        with pytest.raises(HandlerError, match="the consumer went away"):
            await durable.run(system, "s", "go", message_id="m")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        with pytest.raises(HandlerError, match="the consumer went away"):
            await durable.run(system, "s", "go", message_id="m")
        ok = await durable.run(system, "s", "again", message_id="m2")
    assert ok.output == "abcd"
    assert asked == [1, 1]
    assert [s for s, _ in await logged_requests(store, "s")] == ["error", "ok"]


@pytest.mark.anyio
async def test_a_model_that_cannot_stream_is_handed_on_whole() -> None:
    """A ``FunctionModel`` without ``stream_function`` is asked without streaming: the
    handler gets its response whole, and the ``ask_stream`` caller one delta per part."""
    events: list[str] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        return ModelResponse(parts=[TextPart("all at once")])

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        async for event in stream:
            events.append(describe(event))

    agent = Agent(FunctionModel(fn), name="t-whole")
    durable = DurableAgent(agent, event_stream_handler=handler, emit_deltas=True)
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        emitted, flags, reply = await stream_events(system, durable, "s", "m")
    assert reply["output"] == "all at once"
    assert events == ["start 0 all at once", "FinalResultEvent", "end 0"]
    assert emitted == [
        {"event": "pydantic_ai.request", "request": 0, "replayed": False},
        {
            "event": "pydantic_ai.delta",
            "request": 0,
            "part": 0,
            "part_kind": "text",
            "offset": 0,
            "delta": "all at once",
        },
        {"event": "pydantic_ai.request_end", "request": 0},
    ]
    assert flags == [False, False, False]
