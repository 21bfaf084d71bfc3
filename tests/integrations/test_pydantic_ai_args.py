"""pydantic-ai ``DurableAgent.run`` / ``answer`` refuse a bad ``timeout=`` at the call with
``ConfigurationError``, before anything is sent or stored (a sibling of the OpenAI Agents
SDK integration's fuzz finding)."""

from __future__ import annotations

import math
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from actorlog import ActorSystem, ConfigurationError
from actorlog.integrations.pydantic_ai import AgentActor, DurableAgent
from actorlog.stores import MemoryStore
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _deep(levels: int) -> Any:
    value: Any = []
    for _ in range(levels):
        value = [value]
    return value


@pytest.mark.anyio
@pytest.mark.parametrize(
    "timeout",
    [math.nan, math.inf, "5", True, 10**400, _deep(2000)],
    ids=["nan", "inf", "str", "bool", "huge", "deep"],
)
async def test_run_and_answer_refuse_a_bad_timeout(timeout: Any) -> None:
    durable = DurableAgent(Agent(TestModel(), name="t-timeout"))
    store = MemoryStore()
    async with ActorSystem(store, actors=[AgentActor]) as system:
        with pytest.raises(ConfigurationError, match="timeout"):
            await durable.run(system, "c-1", "hi", message_id="m", timeout=timeout)
        with pytest.raises(ConfigurationError, match="timeout"):
            await durable.answer(system, "c-1", {"x": 1}, message_id="a", timeout=timeout)
        assert await store.list_actors() == []
