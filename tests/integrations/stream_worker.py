"""Worker process for the streaming SIGKILL test: a pydantic-ai agent whose model streams (a
tool call, then an answer in ten chunks), run over a SQLite store. Each model request the
provider starts is counted in a SQLite ledger; each event the handler sees is printed as an
``[event]`` line (the test kills the process after a chosen delta); the outcome is one
``DONE`` JSON line."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    ModelMessage,
    ModelResponse,
    PartDeltaEvent,
    PartEndEvent,
    PartStartEvent,
    TextPartDelta,
    ToolCallPart,
)
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

CHUNKS = [f"w{i} " for i in range(10)]


def record(key: str) -> None:
    with closing(sqlite3.connect(Path(os.environ["STREAM_LEDGER"]), timeout=30)) as db, db:
        db.execute("CREATE TABLE IF NOT EXISTS requests (key TEXT)")
        db.execute("INSERT INTO requests VALUES (?)", (key,))


async def stream_fn(
    messages: list[ModelMessage], info: AgentInfo
) -> AsyncIterator[str | DeltaToolCalls]:
    k = sum(1 for m in messages if isinstance(m, ModelResponse))
    record(str(k))
    if k == 0:
        yield {0: DeltaToolCall(name="note", json_args='{"what": "start"}', tool_call_id="n0")}
        return
    for chunk in CHUNKS:
        await anyio.sleep(0.02)
        yield chunk


agent = Agent(FunctionModel(stream_function=stream_fn, model_name="chunky"), name="chunky")


@agent.tool_plain
async def note(what: str) -> str:
    return f"noted {what}"


def describe(event: AgentStreamEvent) -> str:
    if isinstance(event, PartStartEvent):
        part = event.part
        if isinstance(part, ToolCallPart):
            return f"start {event.index} {part.tool_name} {part.args_as_json_str()}"
        return f"start {event.index} {getattr(part, 'content', '')}"
    if isinstance(event, PartDeltaEvent) and isinstance(event.delta, TextPartDelta):
        return f"delta {event.index} {event.delta.content_delta}"
    if isinstance(event, PartEndEvent):
        return f"end {event.index}"
    return type(event).__name__


async def handler(ctx: RunContext[Any], stream: Any) -> None:
    async for event in stream:
        print(f"[event] {describe(event)}", flush=True)


durable = DurableAgent(agent, tools={"note": READ}, event_stream_handler=handler)


async def main(store: str) -> None:
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "chunky-1", "talk", message_id="chunky-1/1")
    print("DONE " + json.dumps({"output": result.output}), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
