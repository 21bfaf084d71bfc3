"""The model request fingerprint covers the tool definitions and their declared effects
(issue 18.22): a changed tool description, an added tool or a changed effect is
non-determinism on replay, not a silently replayed response. Logs recorded before keep
replaying (their requests are checked against the messages only)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from actorlog import ActorQuarantinedError, ActorSystem, NonDeterminismError
from actorlog.integrations import pydantic_ai as integration
from actorlog.integrations.pydantic_ai import (
    IDEMPOTENT,
    READ,
    AgentActor,
    DurableAgent,
    ToolEffect,
)
from actorlog.stores import SqliteStore
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def two_step(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    returns = [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    if not returns:
        return ModelResponse(parts=[ToolCallPart("lookup", {"x": "1"}, tool_call_id="c1")])
    return ModelResponse(parts=[TextPart("answer: " + returns[-1])])


def make_agent(
    name: str, *, description: str = "Look a thing up.", extra: bool = False
) -> Agent[None, str]:
    agent = Agent(FunctionModel(two_step, model_name="fp"), name=name)

    async def lookup(x: str) -> str:
        return f"found {x}"

    agent.tool_plain(description=description)(lookup)
    if extra:

        @agent.tool_plain
        async def other(y: str) -> str:
            """Another tool."""
            return y

    return agent


CHANGES: dict[str, tuple[dict[str, Any], dict[str, ToolEffect]]] = {
    "description": ({"description": "Look a thing up, carefully."}, {"lookup": READ}),
    "added tool": ({"extra": True}, {"lookup": READ}),
    "effect": ({}, {"lookup": IDEMPOTENT}),
}


@pytest.mark.anyio
@pytest.mark.parametrize("change", sorted(CHANGES))
async def test_a_changed_tool_definition_is_non_determinism_on_replay(
    tmp_path: Path, change: str
) -> None:
    name = f"t-fp-{change}"
    store = tmp_path / "agents.db"
    durable = DurableAgent(make_agent(name), tools={"lookup": READ})
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        first = await durable.run(system, "c", "go", message_id="m")
    assert first.output == "answer: found 1"
    agent_kwargs, tools = CHANGES[change]
    changed = DurableAgent(make_agent(name, **agent_kwargs), tools=tools)
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await changed.run(system, "c", "go", message_id="m")
    assert isinstance(info.value.__cause__, NonDeterminismError)
    assert "pydantic_ai.model_request" in str(info.value.__cause__)


@pytest.mark.anyio
async def test_the_same_agent_replays(tmp_path: Path) -> None:
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        durable = DurableAgent(make_agent("t-fp-same"), tools={"lookup": READ})
        first = await durable.run(system, "c", "go", message_id="m")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        durable = DurableAgent(make_agent("t-fp-same"), tools={"lookup": READ})
        again = await durable.run(system, "c", "go", message_id="m")
        second = await durable.run(system, "c", "more", message_id="m2")
    assert again.output == first.output
    assert second.output == "answer: found 1"


@pytest.mark.anyio
async def test_a_log_recorded_before_tools_were_fingerprinted_still_replays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Requests logged with two arguments (model name, messages fingerprint) by earlier
    versions are checked as before; new requests in the same conversation get the tools."""
    store = tmp_path / "agents.db"
    with monkeypatch.context() as m:
        m.setattr(integration, "_FINGERPRINT_TOOLS", False)  # what earlier versions logged
        async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
            durable = DurableAgent(make_agent("t-fp-old"), tools={"lookup": READ})
            first = await durable.run(system, "c", "go", message_id="m")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        # even with a changed description: the old entries cannot tell
        durable = DurableAgent(
            make_agent("t-fp-old", description="changed"), tools={"lookup": READ}
        )
        again = await durable.run(system, "c", "go", message_id="m")
        await durable.run(system, "c", "more", message_id="m2")
    assert again.output == first.output
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        durable = DurableAgent(make_agent("t-fp-old"), tools={"lookup": READ})
        with pytest.raises(ActorQuarantinedError) as info:
            # m2's requests were logged with the tools: the description change shows
            await durable.run(system, "c", "more", message_id="m2")
    assert isinstance(info.value.__cause__, NonDeterminismError)
