"""Worker process for the ``emit_deltas`` SIGKILL test: a pydantic-ai agent whose model
streams (a tool call, then an answer in ten chunks) with ``DurableAgent(emit_deltas=True)``,
run over a SQLite store and asked with ``ref.ask_stream``. Each model request the provider
starts is counted in a SQLite ledger; each event the caller receives is printed as a JSON
line (the test kills the process after a chosen delta); the reply is one ``REPLY`` line.

The answer's request waits for ``flag`` (a file) before it streams: ``first`` runs with it
present; ``again`` creates it once the caller has received its first event, so the caller
has joined the resumed step before its request in flight is made again."""

from __future__ import annotations

import json
import sqlite3
import sys
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent, RunPrompt
from actorlog.stores import SqliteStore
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse
from pydantic_ai.models.function import AgentInfo, DeltaToolCall, DeltaToolCalls, FunctionModel

CHUNKS = [f"w{i} " for i in range(10)]
LEDGER = Path(sys.argv[2]) if len(sys.argv) > 2 else Path("ledger.db")
FLAG = Path(sys.argv[3]) if len(sys.argv) > 3 else Path("flag")


def record(key: str) -> None:
    with closing(sqlite3.connect(LEDGER, timeout=30)) as db, db:
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
    while not FLAG.exists():
        await anyio.sleep(0.01)
    for chunk in CHUNKS:
        await anyio.sleep(0.02)
        yield chunk


agent = Agent(FunctionModel(stream_function=stream_fn, model_name="emitty"), name="emitty")


@agent.tool_plain
async def note(what: str) -> str:
    return f"noted {what}"


durable = DurableAgent(agent, tools={"note": READ}, emit_deltas=True)


async def main(store: str, mode: str) -> None:
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        ref = await system.spawn(AgentActor, "emitty-1")
        stream = ref.ask_stream(RunPrompt("emitty", "talk"), message_id="emitty-1/1")
        async for ev in stream:
            line = {"number": ev.number, "data": ev.data, "replayed": ev.replayed}
            print(json.dumps(line), flush=True)
            if mode == "again":
                FLAG.touch()
        print("REPLY " + json.dumps(stream.reply["output"]), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[4])
