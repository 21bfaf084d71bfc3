"""How ``fixtures/pai_sequential_v0.db`` was made, with actorlog at commit 49148f5 (the
integration forced pydantic-ai's sequential tool mode; every effect of a step was logged in
the step's own task): ``python tests/integrations/make_pai_fixture.py OUT.db``. A run of
two responses with three tool calls each, stopped (the system shut down) while the last
call ran. test_pydantic_ai_tasks.py rebuilds the same agent and resumes it."""

from __future__ import annotations

import sys

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel


def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    k = sum(1 for m in messages if isinstance(m, ModelResponse))
    if k < 2:
        parts = [
            ToolCallPart("fetch", {"i": 10 * k + i}, tool_call_id=f"c{k}{i}") for i in range(3)
        ]
        return ModelResponse(parts=list(parts))
    return ModelResponse(parts=[TextPart("done")])


agent = Agent(FunctionModel(fn), name="exp")
reached = anyio.Event()


@agent.tool_plain
async def fetch(i: int) -> str:
    if i == 12:
        reached.set()
        await anyio.sleep_forever()
    return f"p{i}"


durable = DurableAgent(agent, tools={"fetch": READ})


async def main(store: str) -> None:
    async def go(system: ActorSystem) -> None:
        await durable.run(system, "a", "go", message_id="m")

    async with (
        ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(go, system)
        await reached.wait()
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
