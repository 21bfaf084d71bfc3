"""A process continuing a conversation (tests/integrations/test_pydantic_ai_outside.py):
``python outside_worker.py STORE PROMPT...`` runs each prompt in conversation ``conv``
(message id = the prompt). With ``OUTSIDE_BLOCK=q`` the tool blocks for ``q`` after
printing ``BLOCKED`` (the test SIGKILLs it there)."""

from __future__ import annotations

import os
import sys

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    for part in last.parts:
        if isinstance(part, UserPromptPart):
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": str(part.content)})])
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"answer {part.content}")])
    raise AssertionError("unexpected request")


agent = Agent(FunctionModel(fn, model_name="outside"), name="outside-proc")


@agent.tool_plain
async def lookup(q: str) -> str:
    if q == os.environ.get("OUTSIDE_BLOCK"):
        print("BLOCKED", flush=True)
        await anyio.sleep_forever()
    return f"found {q}"


durable = DurableAgent(agent, tools={"lookup": READ})


async def main(store: str, prompts: list[str]) -> None:
    async with ActorSystem(f"sqlite:///{store}", actors=[AgentActor]) as system:
        for p in prompts:
            result = await durable.run(system, "conv", p, message_id=p)
            print("DONE", result.output, len(result.messages), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2:])
