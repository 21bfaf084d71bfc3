"""Worker process for the parallel SIGKILL test: a pydantic-ai agent whose model responses
carry several tool calls at once (pydantic-ai's default parallel mode), run over a SQLite
store. Each tool's start and end is counted in a SQLite ledger and printed as an
``[effect]`` line (the test kills the process after a chosen number of them); each event
the run's event stream handler sees is printed as an ``[event]`` line; the outcome is one
``DONE`` JSON line.

Round 1: ``fetch(i)`` for i in 0..3, reads that take (4 - i) x 100 ms (they finish in the
reverse order); round 2: ``save(i)`` for i in 0..2, idempotent writes that take
(3 - i) x 100 ms; then the answer."""

from __future__ import annotations

import json
import os
import sqlite3
import sys
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import (
    IDEMPOTENT,
    READ,
    AgentActor,
    DurableAgent,
    idempotency_key,
)
from actorlog.stores import SqliteStore
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

FETCHES, SAVES, STEP_S = 4, 3, 0.1


def record(table: str, key: str) -> None:
    path = Path(os.environ["FANOUT_LEDGER"])
    with closing(sqlite3.connect(path, timeout=30)) as db, db:
        db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT)")
        db.execute(f"INSERT INTO {table} VALUES (?)", (key,))
    print(f"[effect] {table} {key}", flush=True)


def model_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    k = sum(1 for m in messages if isinstance(m, ModelResponse))
    record("model_calls", str(k))
    if k == 0:
        calls = [ToolCallPart("fetch", {"i": i}, tool_call_id=f"f{i}") for i in range(FETCHES)]
        return ModelResponse(parts=list(calls))
    if k == 1:
        calls = [ToolCallPart("save", {"i": i}, tool_call_id=f"s{i}") for i in range(SAVES)]
        return ModelResponse(parts=list(calls))
    returns = [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    return ModelResponse(parts=[TextPart("; ".join(returns))])


agent = Agent(FunctionModel(model_fn, model_name="fanout-fn"), name="fanout")


@agent.tool_plain
async def fetch(i: int) -> str:
    record("started", f"fetch:{i}")
    await anyio.sleep((FETCHES - i) * STEP_S)
    record("finished", f"fetch:{i}")
    return f"page {i}"


@agent.tool_plain
async def save(i: int) -> str:
    key = idempotency_key()
    record("started", f"save:{i}")
    await anyio.sleep((SAVES - i) * STEP_S)
    record("finished", f"save:{i}")
    record("saved", key)
    return f"saved {i}"


def describe(event: AgentStreamEvent) -> str:
    if isinstance(event, FunctionToolCallEvent):
        return f"call {event.part.tool_call_id}"
    if isinstance(event, FunctionToolResultEvent):
        return f"result {event.tool_call_id} {event.part.content}"
    return type(event).__name__


async def handler(ctx: RunContext[Any], stream: Any) -> None:
    async for event in stream:
        print(f"[event] {describe(event)}", flush=True)


durable = DurableAgent(
    agent, tools={"fetch": READ, "save": IDEMPOTENT}, event_stream_handler=handler
)


async def main(store: str) -> None:
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "fan-7", "fan out", message_id="fan-7/1")
    history = ModelMessagesTypeAdapter.dump_python(result.messages, mode="json")
    tool_returns = [
        (p["tool_call_id"], p["content"])
        for m in history
        for p in m["parts"]
        if p.get("part_kind") == "tool-return"
    ]
    done = {"output": result.output, "tool_returns": tool_returns}
    print("DONE " + json.dumps(done), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
