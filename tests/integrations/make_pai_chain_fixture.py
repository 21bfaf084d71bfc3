"""How ``fixtures/pai_whole_replies_v0.db`` was made, with actorlog at commit 126c181 (each
run's reply held the whole conversation; each model request's fingerprint covered all its
messages): ``python tests/integrations/make_pai_chain_fixture.py OUT.db``. Two conversations
of the same agent: ``snap`` (spawned with ``snapshot_every=2``: a snapshot of a state
without ``run_seq``) and ``plain`` (no snapshot). In each, runs ``q0``, ``q1``, ``q2``
completed (one tool call each), then the system shut down while run ``q3``'s tool call ran
(its intent logged, no result). test_pydantic_ai_chain.py rebuilds the same agent and
resumes them."""

from __future__ import annotations

import sys

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
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

reached = anyio.Event()
blocked: list[str] = []


def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    for part in last.parts:
        if isinstance(part, UserPromptPart):
            return ModelResponse(parts=[ToolCallPart("lookup", {"q": str(part.content)})])
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"answer {part.content}")])
    raise AssertionError("unexpected request")


agent = Agent(FunctionModel(fn, model_name="chain"), name="chain")


@agent.tool_plain
async def lookup(q: str) -> str:
    if q == "q3":
        blocked.append(q)
        if len(blocked) == 2:
            reached.set()
        await anyio.sleep_forever()
    return f"found {q}"


durable = DurableAgent(agent, tools={"lookup": READ})


async def main(store: str) -> None:
    async def last(system: ActorSystem, actor: str) -> None:
        await durable.run(system, actor, "q3", message_id="q3")

    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        await system.spawn(AgentActor, "snap", snapshot_every=2)
        for actor in ("snap", "plain"):
            for i in range(3):
                await durable.run(system, actor, f"q{i}", message_id=f"q{i}")
    async with (
        ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system,
        anyio.create_task_group() as tg,
    ):
        for actor in ("snap", "plain"):
            tg.start_soon(last, system, actor)
        await reached.wait()
        tg.cancel_scope.cancel()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
