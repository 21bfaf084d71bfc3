"""``DurableAgent(emit_deltas=True)`` end to end with ``ctx.emit`` / ``ref.ask_stream``
(docs/pydantic-ai.md, "Deltas to the step's callers"; docs/streaming.md): live, the caller
gets each delta while the model streams, then the reply; after a SIGKILL mid-request on a
SQLite file, a caller asking again with the same ``message_id`` rebuilds exactly the final
text by (request, part, offset); on PostgreSQL the owning runtime streams and a client-mode
system gets ``ConfigurationError`` before anything is written."""

from __future__ import annotations

import json
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

from actorlog import ActorSystem, ConfigurationError
from actorlog.integrations.pydantic_ai import AgentActor, DurableAgent, RunPrompt
from actorlog.stores import MemoryStore, PostgresStore
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests import _pg

from .test_pydantic_ai_stream import reduce

ROOT = Path(__file__).parent.parent.parent
CHUNKS = [f"w{i} " for i in range(10)]  # what emit_worker.py's model streams, in this order


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.mark.anyio
async def test_the_caller_gets_each_delta_while_the_model_streams_then_the_reply() -> None:
    """The model yields its next chunk only once the ``ask_stream`` caller received the one
    before: deltas held back until the step ends could never get past the first chunk."""
    received: list[dict[str, Any]] = []
    chunks = ["Hel", "lo ", "wor", "ld"]

    async def stream_fn(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for chunk in chunks:
            yield chunk
            with anyio.fail_after(30):  # an integration that buffers never hands it on
                while not any(ev.get("delta") == chunk for ev in received):
                    await anyio.sleep(0.001)

    model = FunctionModel(stream_function=stream_fn, model_name="streamer")
    durable = DurableAgent(Agent(model, name="t-emit-live"), emit_deltas=True)
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        ref = await system.spawn(AgentActor, "s")
        stream = ref.ask_stream(RunPrompt(durable.name, "go"), message_id="m")
        async for ev in stream:
            received.append(ev.data)
        reply = stream.reply
    assert reply["output"] == "Hello world"
    text = {"event": "pydantic_ai.delta", "request": 0, "part": 0, "part_kind": "text"}
    assert received == [
        {"event": "pydantic_ai.request", "request": 0, "replayed": False},
        {**text, "offset": 0, "delta": "Hel"},
        {**text, "offset": 3, "delta": "lo "},
        {**text, "offset": 6, "delta": "wor"},
        {**text, "offset": 9, "delta": "ld"},
        {"event": "pydantic_ai.request_end", "request": 0},
    ]
    assert reduce(received) == {(0, 0): "Hello world"}


# -- SIGKILL mid-request on a SQLite file ------------------------------------------------------


def _worker(tmp: Path, mode: str) -> subprocess.Popen[str]:
    args = [str(tmp / "agents.db"), str(tmp / "ledger.db"), str(tmp / "flag"), mode]
    return subprocess.Popen(
        [sys.executable, "-m", "tests.integrations.emit_worker", *args],
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        cwd=ROOT,
    )


def _requests_made(ledger: Path) -> list[str]:
    with closing(sqlite3.connect(ledger)) as db:
        return [str(k) for (k,) in db.execute("SELECT key FROM requests ORDER BY rowid")]


def test_killed_mid_request_a_caller_asking_again_rebuilds_exactly_the_final_text(
    tmp_path: Path,
) -> None:
    """SIGKILL once the caller received three deltas of the answer's request (in flight, not
    logged). A caller asking again with the same ``message_id`` gets the completed request
    whole (``replayed``), the one in flight streamed again from its start, then the reply;
    rebuilding by (request, part, offset) over everything the callers received gives exactly
    the final text. The completed request is not made again."""
    (tmp_path / "flag").touch()
    first = _worker(tmp_path, "first")
    assert first.stdout is not None
    seen: list[dict[str, Any]] = []
    answer_deltas = 0
    for line in first.stdout:
        data = json.loads(line)["data"]
        seen.append(data)
        answer_deltas += data["event"] == "pydantic_ai.delta" and data["request"] == 1
        if answer_deltas == 3:
            break
    first.send_signal(signal.SIGKILL)
    _, err = first.communicate(timeout=60)
    assert first.returncode == -signal.SIGKILL, err
    assert reduce(seen) == {(0, 0): '{"what": "start"}', (1, 0): "w0 w1 w2 "}
    assert _requests_made(tmp_path / "ledger.db") == ["0", "1"]

    (tmp_path / "flag").unlink()  # the resumed request waits for the caller to join
    again = _worker(tmp_path, "again")
    out, err = again.communicate(timeout=120)
    assert again.returncode == 0, err
    *lines, last = out.splitlines()
    assert json.loads(last.removeprefix("REPLY ")) == "".join(CHUNKS)
    events = [json.loads(line) for line in lines]
    data = [ev["data"] for ev in events]
    assert [ev["number"] for ev in events] == list(range(1, len(events) + 1))
    call = {"tool_name": "note", "tool_call_id": "n0", "part_kind": "tool-call"}
    text = {"event": "pydantic_ai.delta", "request": 1, "part": 0, "part_kind": "text"}
    offsets = [sum(len(c) for c in CHUNKS[:i]) for i in range(len(CHUNKS))]
    assert data == [
        {"event": "pydantic_ai.request", "request": 0, "replayed": True},  # whole, from the log
        {"event": "pydantic_ai.delta", "request": 0, "part": 0, **call}
        | {"offset": 0, "delta": '{"what": "start"}'},
        {"event": "pydantic_ai.request_end", "request": 0},
        {"event": "pydantic_ai.request", "request": 1, "replayed": False},  # made again
        *[{**text, "offset": o, "delta": c} for o, c in zip(offsets, CHUNKS, strict=True)],
        {"event": "pydantic_ai.request_end", "request": 1},
    ]
    final = {(0, 0): '{"what": "start"}', (1, 0): "".join(CHUNKS)}
    assert reduce(data) == final
    assert reduce(seen + data) == final  # a caller that kept what it showed before
    assert _requests_made(tmp_path / "ledger.db") == ["0", "1", "1"]


# -- PostgreSQL: the owner streams, a client is refused ----------------------------------------


@pytest.fixture
def pg_url() -> str:
    return _pg.postgres_url("pydantic-ai streaming on PostgreSQL")


@pytest.fixture
async def pg_schema(pg_url: str) -> AsyncIterator[str]:
    schema = _pg.new_schema("actorlog_pai_emit")
    yield schema
    await _pg.drop_schemas(pg_url, schema)


@pytest.mark.anyio
async def test_on_postgres_the_owner_streams_and_a_client_gets_a_configuration_error(
    pg_url: str, pg_schema: str
) -> None:
    async def stream_fn(messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for chunk in ["on ", "pg"]:
            yield chunk

    model = FunctionModel(stream_function=stream_fn, model_name="streamer")
    durable = DurableAgent(Agent(model, name="t-emit-pg"), emit_deltas=True)
    runtime = ActorSystem(
        PostgresStore(pg_url, schema=pg_schema), actors=[AgentActor], owner="r", lease_ttl=2.0
    )
    client = ActorSystem(PostgresStore(pg_url, schema=pg_schema), client=True)
    async with runtime, client:
        owned = await runtime.spawn(AgentActor, "c")
        stream = owned.ask_stream(RunPrompt(durable.name, "go"), message_id="q-1")
        received = [ev.data async for ev in stream]
        assert stream.reply["output"] == "on pg"
        assert reduce(received) == {(0, 0): "on pg"}

        remote = client.ref(AgentActor, "c")
        with pytest.raises(ConfigurationError, match="another process"):
            async for _ in remote.ask_stream(RunPrompt(durable.name, "again"), message_id="q-2"):
                pass
        store = runtime.store
        assert isinstance(store, PostgresStore)
        assert await store.inbox_for("r") == []  # nothing queued for the owner
        logged = [r.message_id for r in await store.read("c") if r.kind == "message"]
        assert logged == ["q-1"]  # nothing written for the refused stream
        reply = await remote.ask(RunPrompt(durable.name, "again"), message_id="q-2", timeout=30)
        assert reply["output"] == "on pg"
