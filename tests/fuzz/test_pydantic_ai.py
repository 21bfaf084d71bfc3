"""The argument fuzz of ``actorlog.integrations.pydantic_ai`` (see test_arguments.py), for
the parameter issue 26 added, ``DurableAgent(emit_deltas=...)``, and the method issue 25
added, ``DurableAgent.result(...)``: given each hostile value they must succeed or raise an
``ActorlogError`` at the call."""

from __future__ import annotations

from typing import Any

import anyio
import pytest

pytest.importorskip("pydantic_ai")

from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import AgentActor, DurableAgent, RunPrompt
from actorlog.stores import MemoryStore
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from ._world import HOSTILE
from .test_arguments import Findings, judge, judge_result, outcome_of, values


def test_emit_deltas_refuses_hostile_values() -> None:
    f = Findings("DurableAgent(emit_deltas=...)")
    agent: Agent[Any, Any] = Agent(TestModel(), name="fuzz-pai")
    for value in values():
        try:
            DurableAgent(agent, emit_deltas=HOSTILE[value])
            exc: BaseException | None = None
        except Exception as e:
            exc = e
        judge(f, "emit_deltas", "bool", value, outcome_of(exc))
    f.check({})


def test_result_refuses_hostile_values() -> None:
    """``DurableAgent.result(system, actor_id, reply)`` (issue 25): a ``reply`` that is not
    a run's reply, a ``system`` that is not an ActorSystem or a bad ``actor_id`` is a
    ``ConfigurationError`` at the call."""
    f = Findings("DurableAgent.result")
    agent: Agent[Any, Any] = Agent(TestModel(), name="fuzz-pai-result")
    durable = DurableAgent(agent)

    async def go() -> None:
        async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
            good = await durable._ask(system, "fuzz-1", RunPrompt(durable.name, "hi"), None, None)
            reply = await (await system.spawn(AgentActor, "fuzz-1")).ask(
                RunPrompt(durable.name, "again")
            )
            assert good.output is not None
            await judge_result(f, durable, system, "fuzz-1", reply)

    anyio.run(go, backend="asyncio")
    f.check({})
