"""How ``fixtures/oai_whole_fingerprints_v0.db`` was made, with actorlog at commit 6797b7d
(each OpenAI Agents model call's fingerprint covered the whole request; run replies already
chained): ``python -m tests.integrations.make_oai_chain_fixture OUT.db``. Two conversations
of the same agent (a triage agent handing off to a planner that calls ``search``,
``weather`` and ``book``, answered by ``openai_travel.TravelModel``): ``snap`` (spawned with
``snapshot_every=2``) and ``plain`` (no snapshot). In each, runs to ``Lisbon``, ``Porto``,
``Rome`` completed (5 model calls and 3 tool calls each), then the system shut down while
the fourth run's (``Oslo``) ``search`` ran (its intent logged, no result), after its first
two model calls. test_openai_agents_chain.py rebuilds the same agent and resumes them."""

from __future__ import annotations

import sys
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.integrations.openai_agents import IDEMPOTENT, READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from agents import Agent, RunConfig, function_tool

from tests.integrations.openai_travel import PLANNER, TRIAGE, TravelModel

CITIES = ["Lisbon", "Porto", "Rome", "Oslo"]
#: the city whose ``search`` blocks (while the fixture is made)
BLOCK: list[str] = []
reached = anyio.Event()
blocked: list[str] = []


@function_tool
async def search(city: str) -> str:
    """Find the best hotel in a city."""
    if city in BLOCK:
        blocked.append(city)
        if len(blocked) == 2:
            reached.set()
        await anyio.sleep_forever()
    return f"Hotel {city} Central"


@function_tool
async def weather(city: str) -> str:
    """Tomorrow's weather in a city."""
    return f"sunny in {city}"


@function_tool
async def book(what: str) -> str:
    """Book a hotel."""
    return f"booked {what}"


def make(name: str = "oai-chain", **config: Any) -> DurableAgent[Any]:
    """The fixture's agent (``name``: another one's; ``config``: more of its RunConfig)."""
    planner: Agent[Any] = Agent(name="planner", instructions=PLANNER, tools=[search, weather, book])
    triage: Agent[Any] = Agent(name="triage", instructions=TRIAGE, handoffs=[planner])
    return DurableAgent(
        triage,
        name=name,
        tools={"search": READ, "weather": READ, "book": IDEMPOTENT},
        run_config=RunConfig(model=TravelModel(), **config),
    )


async def main(store: str) -> None:
    durable = make()

    async def last(system: ActorSystem, actor: str) -> None:
        await durable.run(system, actor, f"plan a trip to {CITIES[3]}", message_id="r3")

    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        await system.spawn(AgentActor, "snap", snapshot_every=2)
        for actor in ("snap", "plain"):
            for i, city in enumerate(CITIES[:3]):
                await durable.run(system, actor, f"plan a trip to {city}", message_id=f"r{i}")
    BLOCK.append(CITIES[3])
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
