"""How ``fixtures/pai_unstreamed_v0.db`` was made, with actorlog at commit 1a0fcb5 (model
requests were made without streaming: the event stream handler got each response rebuilt
whole): ``python tests/integrations/make_pai_stream_fixture.py OUT.db``. A run with an event
stream handler whose model answers with a tool call twice, then with text; the system shut
down while the third model request was in flight (its intent logged, no result).
test_pydantic_ai_stream.py rebuilds the same agent, with a model that streams, and resumes
it."""

from __future__ import annotations

import sys
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

reached = anyio.Event()


async def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    k = sum(1 for m in messages if isinstance(m, ModelResponse))
    if k < 2:
        call = ToolCallPart("lookup", {"q": f"q{k}"}, tool_call_id=f"c{k}")
        return ModelResponse(parts=[TextPart(f"looking up q{k}"), call])
    reached.set()
    await anyio.sleep_forever()
    raise AssertionError("unreachable")


agent = Agent(FunctionModel(fn, model_name="streamer"), name="unstreamed")


@agent.tool_plain
async def lookup(q: str) -> str:
    return f"found {q}"


async def handler(ctx: RunContext[Any], stream: Any) -> None:
    async for _ in stream:
        pass


durable = DurableAgent(agent, tools={"lookup": READ}, event_stream_handler=handler)


async def main(store: str) -> None:
    async def go(system: ActorSystem) -> None:
        await durable.run(system, "s", "go", message_id="m")

    async with (
        ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(go, system)
        await reached.wait()
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
