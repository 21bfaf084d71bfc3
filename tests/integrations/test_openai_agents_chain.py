"""An OpenAI Agents SDK DurableAgent run's reply holds only its new items (issue 25,
FORMAT.md [F23]); the caller still gets the whole conversation (``DurableRunResult.items``),
rebuilt from the chain of replies in the log, in a new system too."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("agents")

from actorlog import ActorSystem
from actorlog.integrations.openai_agents import IDEMPOTENT, READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from agents import RunConfig

from tests._payload import payload_of
from tests.integrations import openai_travel
from tests.integrations.openai_travel import TravelModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK runs on asyncio


def durable() -> DurableAgent[Any]:
    return DurableAgent(
        openai_travel.triage,
        name="t-chain",
        tools={"search": READ, "weather": "read", "book": IDEMPOTENT},
        run_config=RunConfig(model=TravelModel()),
    )


def replies(store: Path) -> list[dict[str, Any]]:
    with closing(sqlite3.connect(store)) as db:
        rows = db.execute("SELECT payload FROM entries WHERE kind = 'step' ORDER BY seq")
        return [payload_of("step", p)["reply"] for (p,) in rows.fetchall()]


@pytest.mark.anyio
async def test_a_run_replies_with_its_new_items_and_the_caller_gets_them_all(
    tmp_path: Path,
) -> None:
    store = tmp_path / "agents.db"
    cities = ["Lisbon", "Porto", "Oslo", "Rome"]
    agent = durable()
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        runs = [
            await agent.run(
                system, "c", f"plan a trip to {city}", message_id=city, new_conversation=i == 2
            )
            for i, city in enumerate(cities)
        ]
    lisbon, porto, oslo, rome = runs
    assert porto.items[: len(lisbon.items)] == lisbon.items
    assert porto.items[len(lisbon.items) :] == porto.new_items
    assert oslo.items == oslo.new_items  # a new conversation
    assert rome.items[: len(oslo.items)] == oslo.items and rome.new_items[0]["role"] == "user"
    logged = replies(store)
    assert all("items" not in r for r in logged)
    assert [r["base"] is None for r in logged] == [True, False, True, False]
    assert [len(r["tail"]) for r in logged] == [len(r.new_items) for r in runs]

    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        again = [
            await durable().run(
                system, "c", f"plan a trip to {city}", message_id=city, new_conversation=i == 2
            )
            for i, city in enumerate(cities)
        ]
    assert again == runs
