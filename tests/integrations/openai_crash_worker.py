"""Worker process for the OpenAI Agents SDK SIGKILL tests: runs the travel agent on two
prompts in one conversation over a SQLite store (streamed with ``stream`` as the second
argument), then prints the outcome as one JSON line."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.integrations.openai_agents import AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from agents import StreamEvent

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.integrations import openai_travel

EVENTS: list[str] = []


async def on_event(event: StreamEvent) -> None:
    if event.type == "raw_response_event":
        EVENTS.append(event.data.type)


streamed = DurableAgent(
    openai_travel.triage,
    name="travel-streamed",
    tools=openai_travel.durable.tools,
    run_config=openai_travel.durable.run_config,
    event_handler=on_event,
    sequential_tools=openai_travel.durable.sequential_tools,
)


async def run(store: str, mode: str) -> dict[str, Any]:
    """Both prompts to the end (resuming whatever the store holds); the outcome."""
    durable = streamed if mode == "stream" else openai_travel.durable
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        outputs: list[Any] = []
        result = None
        for i, city in enumerate(["Lisbon", "Porto"]):
            result = await durable.run(
                system, "trip-7", f"plan a trip to {city}", message_id=f"trip-7/{i}"
            )
            outputs.append(result.final_output)
        assert result is not None
        done = {
            "outputs": outputs,
            "items": result.items,
            "last_agent": result.last_agent,
            "usage": [result.usage.requests, result.usage.input_tokens, result.usage.output_tokens],
            "events": len(EVENTS),
        }
        return done


async def main(store: str, mode: str) -> None:
    print("DONE " + json.dumps(await run(store, mode)), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "run")
