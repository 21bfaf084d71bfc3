"""A travel agent on the OpenAI Agents SDK with a scripted model: no network, no API key.

``TravelModel`` implements the SDK's own ``Model`` interface (``get_response`` and
``stream_response``); what it answers depends only on the request (the agent's instructions
and the input items), so a resumed run gets the same answers as the first one. A triage
agent hands off to a planner, which calls ``search``, ``weather`` and ``book`` (one call per
turn, or ``search`` and ``weather`` in one turn with ``TRAVEL_PARALLEL=1``) and then answers.

With ``TRAVEL_LEDGER`` set, every model call and every tool run is written to that SQLite
file (the crash tests count them); with ``TRAVEL_ECHO`` set, each is printed as an
``[effect]`` line when it starts (the crash tests kill the worker on them).
"""

from __future__ import annotations

import hashlib
import json
import os
import re
import sqlite3
from collections.abc import AsyncIterator
from contextlib import closing
from typing import Any

import anyio
from actorlog.integrations.openai_agents import IDEMPOTENT, READ, DurableAgent, idempotency_key
from agents import (
    Agent,
    Handoff,
    Model,
    ModelResponse,
    ModelSettings,
    ModelTracing,
    RunConfig,
    TResponseInputItem,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.agent_output import AgentOutputSchemaBase
from agents.items import TResponseOutputItem, TResponseStreamEvent
from agents.testing import ModelStep, ScriptedModel, assistant_message, function_call
from agents.tool import Tool
from openai.types.responses.response_prompt_param import ResponsePromptParam

set_tracing_disabled(True)  # the SDK's own trace exporter would post to api.openai.com

_INCARNATION = re.compile(r":[0-9a-f]{16}:[0-9]+:")
TRIAGE = "You route travel requests."
PLANNER = "You plan trips: search, check the weather, book, then answer."


def _ledger(table: str, key: str, value: str) -> None:
    path = os.environ.get("TRAVEL_LEDGER")
    if os.environ.get("TRAVEL_ECHO"):
        print(f"[effect] {table} {value}", flush=True)
    if not path:
        return
    with closing(sqlite3.connect(path, timeout=30)) as db, db:
        db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT, value TEXT)")
        db.execute(f"INSERT INTO {table} VALUES (?, ?)", (key, value))


def _plain(item: Any) -> dict[str, Any]:
    if isinstance(item, dict):
        return item
    dumped: dict[str, Any] = item.model_dump(mode="json", exclude_unset=True)
    return dumped


def respond(instructions: str | None, items: list[dict[str, Any]]) -> list[TResponseOutputItem]:
    """The scripted answer to a request."""
    users = [i for i in items if i.get("role") == "user"]
    turn = len(users)
    city = str(users[-1]["content"]).rsplit(" ", 1)[-1] if users else "nowhere"
    last_user = max(n for n, i in enumerate(items) if i.get("role") == "user")
    since = items[last_user + 1 :]
    outputs = {
        i["call_id"]: str(i.get("output")) for i in since if i.get("type") == "function_call_output"
    }
    calls = [i for i in since if i.get("type") == "function_call"]
    if instructions == TRIAGE:
        return [function_call("transfer_to_planner", {}, call_id=f"t{turn}-handoff")]
    done = [c["name"] for c in calls if c["call_id"] in outputs]
    parallel = bool(os.environ.get("TRAVEL_PARALLEL"))
    if "search" not in done:
        first = [function_call("search", {"city": city}, call_id=f"t{turn}-search")]
        if parallel:
            first.append(function_call("weather", {"city": city}, call_id=f"t{turn}-weather"))
        return first
    if "weather" not in done:
        return [function_call("weather", {"city": city}, call_id=f"t{turn}-weather")]
    if "book" not in done:
        pick = outputs[f"t{turn}-search"]
        return [function_call("book", {"what": pick}, call_id=f"t{turn}-book")]
    summary = "; ".join(outputs[c["call_id"]] for c in calls if c["name"] != "transfer_to_planner")
    return [assistant_message(f"Trip to {city}: {summary}", item_id=f"t{turn}-answer")]


class TravelModel(Model):
    """The scripted model: answers from the request alone; logs each call to the ledger."""

    def __init__(self) -> None:
        self.calls = 0

    def _answer(self, instructions: str | None, input: str | list[TResponseInputItem]) -> ModelStep:
        self.calls += 1
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        plain = [_plain(i) for i in items]
        blob = json.dumps([instructions, plain], sort_keys=True, default=str)
        # keys of idempotent calls hold the actor log's incarnation id (FORMAT.md [F13]) and
        # the step's seq (one more after a crash's in-doubt re-run wrote its attempt decision):
        # left out, so runs on two logs log the same requests under the same ledger key
        blob = _INCARNATION.sub(":<incarnation>:<seq>:", blob)
        output = respond(instructions, plain)
        _ledger("model_calls", hashlib.sha256(blob.encode()).hexdigest(), str(len(plain)))
        usage = Usage(requests=1, input_tokens=10 * len(plain), output_tokens=7)
        return ModelStep(output=output, usage=usage, response_id=f"resp-{len(plain)}")

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> ModelResponse:
        step = self._answer(system_instructions, input)
        await anyio.sleep(0.01)
        return ModelResponse(
            output=list(step.output), usage=step.usage, response_id=step.response_id
        )

    async def stream_response(
        self,
        system_instructions: str | None,
        input: str | list[TResponseInputItem],
        model_settings: ModelSettings,
        tools: list[Tool],
        output_schema: AgentOutputSchemaBase | None,
        handoffs: list[Handoff[Any, Any]],
        tracing: ModelTracing,
        *,
        previous_response_id: str | None,
        conversation_id: str | None,
        prompt: ResponsePromptParam | None,
    ) -> AsyncIterator[TResponseStreamEvent]:
        # the SDK's own scripted model builds the event stream of a response
        scripted = ScriptedModel([self._answer(system_instructions, input)])
        stream = scripted.stream_response(
            system_instructions,
            input,
            model_settings,
            tools,
            output_schema,
            handoffs,
            tracing,
            previous_response_id=previous_response_id,
            conversation_id=conversation_id,
            prompt=prompt,
        )
        async for event in stream:
            yield event


#: "start search", "end search", ... in the order the read tools ran (in this process)
ORDER: list[str] = []


@function_tool
async def search(city: str) -> str:
    """Find the best hotel in a city."""
    ORDER.append("start search")
    _ledger("reads", city, f"search {city}")
    await anyio.sleep(0.05)
    ORDER.append("end search")
    return f"Hotel {city} Central"


@function_tool
async def weather(city: str) -> str:
    """Tomorrow's weather in a city."""
    ORDER.append("start weather")
    _ledger("reads", city, f"weather {city}")
    await anyio.sleep(0.05)
    ORDER.append("end weather")
    return f"sunny in {city}"


@function_tool
async def book(what: str) -> str:
    """Book a hotel (a write the provider deduplicates by key)."""
    key = idempotency_key()
    _ledger("bookings", key, what)
    await anyio.sleep(0.02)
    return f"booked {what} (ref {key})"


MODEL = TravelModel()
planner: Agent[Any] = Agent(name="planner", instructions=PLANNER, tools=[search, weather, book])
triage: Agent[Any] = Agent(name="triage", instructions=TRIAGE, handoffs=[planner])
durable = DurableAgent(
    triage,
    name="travel",
    tools={"search": READ, "weather": READ, "book": IDEMPOTENT},
    run_config=RunConfig(model=MODEL),
    sequential_tools=bool(os.environ.get("TRAVEL_SEQUENTIAL")),
)
