"""The argument fuzz of ``actorlog.integrations.pydantic_ai`` (see test_arguments.py), for
the parameter issue 26 added: ``DurableAgent(emit_deltas=...)`` given each hostile value
must succeed (True/False) or raise an ``ActorlogError`` at the call."""

from __future__ import annotations

from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

from actorlog.integrations.pydantic_ai import DurableAgent
from pydantic_ai import Agent
from pydantic_ai.models.test import TestModel

from ._world import HOSTILE
from .test_arguments import Findings, judge, outcome_of, values


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
