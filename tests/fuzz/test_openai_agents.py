"""The argument fuzz of ``actorlog.integrations.openai_agents`` (see test_arguments.py): every
parameter of ``DurableAgent(...)``, ``DurableAgent.run(...)`` and ``DurableAgent.result(...)``
given each hostile value must succeed (a value it takes) or raise an ``ActorlogError`` at the
call; a refused run stores nothing (every row of the SQLite file compared before and after)."""

from __future__ import annotations

import inspect
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("agents")

from actorlog import ActorSystem
from actorlog.integrations import openai_agents
from actorlog.integrations.openai_agents import AgentActor, DurableAgent, RunInput
from actorlog.stores import MemoryStore, SqliteStore

from tests.integrations import openai_travel

from . import _world
from ._world import HOSTILE
from .test_arguments import Findings, judge, judge_result, outcome_of, values

#: DurableAgent's parameters: their kinds (_world.ACCEPTS), "agent" refusing every value
CONSTRUCTOR = {
    "agent": "nothing",
    "name": "id_or_none",
    "tools": "none",
    "default_tool_effect": "nothing",
    "run_config": "none",
    "context": "any",
    "max_turns": "int",
    "event_handler": "callable_or_none",
    "sequential_tools": "bool",
}
RUN = {
    "actor_id": "id",
    "input": "prompt",
    "message_id": "id_or_none",
    "new_conversation": "bool",
    "timeout": "float_or_none",
}


@pytest.fixture(autouse=True)
def _kinds(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(_world.ACCEPTS, "nothing", set())
    # a user's message: any text the store can hold
    monkeypatch.setitem(_world.ACCEPTS, "prompt", {"empty", "big", "nul"})


def test_every_parameter_is_fuzzed() -> None:
    assert set(inspect.signature(DurableAgent.__init__).parameters) - {"self"} == set(CONSTRUCTOR)
    assert set(inspect.signature(DurableAgent.run).parameters) - {"self", "system"} == set(RUN)
    assert {n for n in openai_agents.__all__ if inspect.isfunction(getattr(openai_agents, n))} == {
        "fingerprint",
        "idempotency_key",
        "reconciled",
    }


def test_durable_agent_refuses_hostile_values() -> None:
    f = Findings("DurableAgent")
    base: dict[str, Any] = {"agent": openai_travel.triage, "name": "fuzz-agent"}
    for param, kind in CONSTRUCTOR.items():
        for value in values():
            try:
                DurableAgent(**{**base, param: HOSTILE[value]})
                exc: BaseException | None = None
            except Exception as e:
                exc = e
            judge(f, param, kind, value, outcome_of(exc))
    f.check({})


def test_reconciled_refuses_what_is_not_callable() -> None:
    f = Findings("reconciled")
    for value in values():
        try:
            openai_agents.reconciled(HOSTILE[value])
            exc: BaseException | None = None
        except Exception as e:
            exc = e
        judge(f, "fn", "callable_or_none", value, outcome_of(exc))
    f.check({})


def test_run_refuses_hostile_values_and_stores_nothing(tmp_path: Path) -> None:
    f = Findings("DurableAgent.run")
    path = str(tmp_path / "agents.db")
    base: dict[str, Any] = {"actor_id": "fuzz-1", "input": "plan a trip to Rome"}

    async def go() -> None:
        async with ActorSystem(SqliteStore(path), actors=[AgentActor]) as system:
            await openai_travel.durable.run(system, **base, message_id="first")
            for param, kind in RUN.items():
                for value in values():
                    before = _world.dump(path)
                    args = {**base, "message_id": f"{param}-{value}", param: HOSTILE[value]}
                    try:
                        with anyio.fail_after(60):
                            try:
                                await openai_travel.durable.run(system, **args)
                            except TimeoutError:
                                if param != "timeout":
                                    raise
                                # the documented end of a run whose timeout= passed
                        exc: BaseException | None = None
                    except Exception as e:
                        exc = e
                    outcome = outcome_of(exc)
                    judge(f, param, kind, value, outcome)
                    if outcome.startswith("refused"):
                        changed = _world.diff(before, _world.dump(path))
                        if changed:
                            f.add(param, value, f"refused but stored: {changed}")

    anyio.run(go, backend="asyncio")
    f.check({})


def test_result_refuses_hostile_values() -> None:
    """``DurableAgent.result(system, actor_id, reply)`` (issue 25): what is not a system, an
    actor id or a run's reply is a ``ConfigurationError`` at the call."""
    f = Findings("DurableAgent.result")
    durable = openai_travel.durable

    async def go() -> None:
        async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
            await durable.run(system, "fuzz-1", "plan a trip to Rome")
            ref = await system.spawn(AgentActor, "fuzz-1")
            reply = await ref.ask(RunInput(durable.name, "plan a trip to Oslo"))
            await judge_result(f, durable, system, "fuzz-1", reply)

    anyio.run(go, backend="asyncio")
    f.check({})
