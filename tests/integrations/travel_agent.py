"""A deterministic travel agent on pydantic-ai's FunctionModel, with several tools, whose
model calls and tool side effects are counted in a SQLite ledger shared across processes."""

from __future__ import annotations

import os
import sqlite3
from contextlib import closing
from pathlib import Path

from actorlog.integrations.pydantic_ai import IDEMPOTENT, READ, DurableAgent, idempotency_key
from pydantic_ai import Agent, ModelRetry
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


def ledger_path() -> Path:
    return Path(os.environ.get("TRAVEL_LEDGER", "ledger.db"))


def record(table: str, key: str, value: str = "") -> None:
    with closing(sqlite3.connect(ledger_path(), timeout=30)) as db, db:
        db.execute(f"CREATE TABLE IF NOT EXISTS {table} (key TEXT, value TEXT)")
        db.execute(f"INSERT INTO {table} VALUES (?, ?)", (key, value))
    if os.environ.get("TRAVEL_ECHO"):
        print(f"[effect] {table} {key}", flush=True)


def _script(city: str, k: int, returns: list[str]) -> ModelResponse:
    def call(tool: str, i: int, **args: str) -> ToolCallPart:
        return ToolCallPart(tool, args, tool_call_id=f"{city}-{k}-{i}")

    steps: list[list[ToolCallPart]] = [
        [call("search", 0, city=city)],
        [call("check", 0, code="bad")],
        [call("check", 0, code="ok")],
        [call("book", 0, city=city), call("weather", 1, city=city)],
        [call("notify", 0, text=f"booked {city}")],
    ]
    if k < len(steps):
        return ModelResponse(parts=list(steps[k]))
    return ModelResponse(parts=[TextPart(f"Trip to {city}: " + "; ".join(returns))])


def model_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    # the latest user prompt, and how many responses the model gave since
    start = max(
        i
        for i, m in enumerate(messages)
        if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
    )
    prompt = next(p.content for p in messages[start].parts if isinstance(p, UserPromptPart))
    city = str(prompt).split()[-1]
    k = sum(1 for m in messages[start:] if isinstance(m, ModelResponse))
    returns = [
        str(p.content)
        for m in messages[start:]
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    record("model_calls", f"{city}:{k}")
    return _script(city, k, returns)


agent = Agent(FunctionModel(model_fn, model_name="travel-fn"), name="travel")


@agent.tool_plain
async def search(city: str) -> str:
    record("reads", f"search:{city}")
    return f"3 hotels in {city}"


@agent.tool_plain
async def check(code: str) -> str:
    if code == "bad":
        raise ModelRetry("code 'bad' is not valid, use 'ok'")
    return "code accepted"


@agent.tool_plain
async def book(city: str) -> str:
    key = idempotency_key()
    record("bookings", key, city)
    return f"booked a hotel in {city} ({key})"


@agent.tool_plain
async def weather(city: str) -> dict[str, str]:
    record("reads", f"weather:{city}")
    return {"city": city, "forecast": "sunny"}


@agent.tool_plain
async def notify(text: str) -> str:
    record("notifications", idempotency_key(), text)
    return "sent"


durable = DurableAgent(
    agent,
    tools={
        "search": READ,
        "check": READ,
        "weather": READ,
        "book": IDEMPOTENT,
        "notify": IDEMPOTENT,
    },
)
