"""Worker process for the SIGKILL test: runs the travel agent on three prompts in one
conversation over a SQLite store (each start asks them all again, by message id: the runs
recorded before come from the log), then prints the outcome as one JSON line: each run's
output and whole conversation (rebuilt from the chain of replies, FORMAT.md [F23])."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import AgentActor
from actorlog.stores import SqliteStore
from pydantic_ai.messages import ModelMessagesTypeAdapter

sys.path.insert(0, str(Path(__file__).resolve().parents[2]))

from tests.integrations.travel_agent import durable

VOLATILE = {"timestamp"}


def strip(value: Any) -> Any:
    """Message history without clock readings (they differ between any two runs)."""
    if isinstance(value, dict):
        return {k: strip(v) for k, v in value.items() if k not in VOLATILE}
    if isinstance(value, list):
        return [strip(v) for v in value]
    return value


async def main(store: str) -> None:
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        outputs = []
        conversations = []
        result = None
        for i, city in enumerate(["Lisbon", "Porto", "Faro"]):
            result = await durable.run(
                system, "trip-7", f"plan a trip to {city}", message_id=f"trip-7/{i}"
            )
            outputs.append(result.output)
            history = ModelMessagesTypeAdapter.dump_python(result.messages, mode="json")
            conversations.append(strip(history))
        assert result is not None
        done = {
            "outputs": outputs,
            "messages": conversations,
            "usage": {
                "requests": result.usage.requests,
                "input_tokens": result.usage.input_tokens,
                "output_tokens": result.usage.output_tokens,
            },
        }
        print("DONE " + json.dumps(done), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
