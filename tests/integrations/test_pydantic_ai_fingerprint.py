"""The model request fingerprint covers the tool definitions and their declared effects
(issue 18.22): a changed tool description, an added tool or a changed effect is
non-determinism on replay, not a silently replayed response. Logs recorded before keep
replaying (their requests are checked against the messages only)."""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from actorlog import ActorQuarantinedError, ActorSystem, NonDeterminismError
from actorlog.integrations import pydantic_ai as integration
from actorlog.integrations._pai_fingerprint import _VOLATILE, fingerprint
from actorlog.integrations._pai_stream import _dump_response
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
    ModelMessagesTypeAdapter,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
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


def _reference_fingerprint(messages: list[ModelMessage]) -> str:
    """The fingerprint as every version up to issue 25's last round computed it: the logs
    they recorded hold it, so a faster computation must give the same hex."""

    def strip(value: Any) -> Any:
        if isinstance(value, dict):
            return {k: strip(v) for k, v in value.items() if k not in _VOLATILE}
        if isinstance(value, list):
            return [strip(v) for v in value]
        return value

    plain = strip(ModelMessagesTypeAdapter.dump_python(list(messages), mode="json"))
    blob = json.dumps(plain, sort_keys=True, separators=(",", ":")).encode()
    return hashlib.sha256(blob).hexdigest()


def _messages_with_volatile_keys_everywhere() -> list[ModelMessage]:
    t = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    args = {"q": "x", "timestamp": 5, "nested": [{"run_id": 1, "keep": [1.5, True, None]}]}
    found = {"found": ["a", {"conversation_id": "z", "n": 2}], "empty": {}, "list": []}
    return [
        ModelRequest(parts=[UserPromptPart("plan a trip", timestamp=t)], run_id="r1"),
        ModelResponse(
            parts=[TextPart("thinking"), ToolCallPart("search", args, tool_call_id="c1")],
            model_name="m",
            timestamp=t,
            run_id="r1",
        ),
        ModelRequest(
            parts=[ToolReturnPart("search", found, tool_call_id="c1", timestamp=t)], run_id="r1"
        ),
    ]


def test_the_fingerprint_is_the_one_earlier_versions_logged() -> None:
    """Volatile keys are left out at any depth (tool arguments and results too), exactly as
    before: a changed computation would make every recorded request non-deterministic."""
    messages = _messages_with_volatile_keys_everywhere()
    assert fingerprint(messages) == _reference_fingerprint(messages)
    assert fingerprint(messages[:1]) == _reference_fingerprint(messages[:1])
    assert fingerprint([]) == _reference_fingerprint([])


def test_a_response_is_logged_as_the_messages_adapter_dumps_it() -> None:
    response = _messages_with_volatile_keys_everywhere()[1]
    assert isinstance(response, ModelResponse)
    (expected,) = ModelMessagesTypeAdapter.dump_python([response], mode="json")
    got = _dump_response(response)
    assert json.dumps(got) == json.dumps(expected)  # the same keys, in the same order
