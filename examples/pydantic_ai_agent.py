"""A pydantic-ai agent killed mid-run (SIGKILL) that resumes without asking the model again
for a response it already paid for, and without repeating a booking.

Run it (offline: the "LLM" is pydantic-ai's FunctionModel):

    pip install -e '.[pydantic-ai]' && python examples/pydantic_ai_agent.py

The driver starts this file again as a worker process. The worker runs a pydantic-ai agent
through actorlog's DurableAgent on the embedded SQLite store: the model searches flights
and hotels (reads), books both (idempotent writes, deduplicated by the provider on the
idempotency key) and writes a summary. The driver SIGKILLs the worker right after the first
booking, starts it again, and checks the ledgers: each model request answered once (plus
at most the one in flight at the kill), each booking once.
"""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import (
    IDEMPOTENT,
    READ,
    AgentActor,
    DurableAgent,
    idempotency_key,
)
from actorlog.stores import SqliteStore
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

WORKDIR = Path(os.environ.get("ACTORLOG_EXAMPLE_DIR", tempfile.gettempdir())) / "actorlog-pai"
STORE = WORKDIR / "agents.db"
LEDGER = WORKDIR / "ledger.db"


def say(line: str) -> None:
    print(line, flush=True)


def ledger(sql: str, *args: str) -> None:
    with closing(sqlite3.connect(LEDGER)) as db, db:
        db.execute("CREATE TABLE IF NOT EXISTS model_calls (n INTEGER)")
        db.execute("CREATE TABLE IF NOT EXISTS bookings (key TEXT PRIMARY KEY, what TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS attempts (key TEXT)")
        db.execute(sql, args)


# -- the "LLM": a scripted FunctionModel (swap in "openai:gpt-5" or any other model) --------


def travel_llm(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    n = sum(1 for m in messages if isinstance(m, ModelResponse))  # responses so far
    ledger("INSERT INTO model_calls VALUES (?)", str(n))
    say(f"    [model] request {n + 1}")
    returns = [
        str(p.content)
        for m in messages
        if isinstance(m, ModelRequest)
        for p in m.parts
        if isinstance(p, ToolReturnPart)
    ]
    script = [
        [ToolCallPart("search", {"what": "flights to Lisbon"}, tool_call_id="t1")],
        [ToolCallPart("search", {"what": "hotels in Lisbon"}, tool_call_id="t2")],
        [ToolCallPart("book", {"what": returns[0] if returns else ""}, tool_call_id="t3")],
        [ToolCallPart("book", {"what": returns[1] if len(returns) > 1 else ""}, tool_call_id="t4")],
    ]
    if n < len(script):
        return ModelResponse(parts=list(script[n]))
    return ModelResponse(parts=[TextPart("Booked: " + "; ".join(returns[2:]))])


agent = Agent(FunctionModel(travel_llm, model_name="travel-llm"), name="travel-planner")


@agent.tool_plain
async def search(what: str) -> str:
    """Look something up (a read: re-run if a crash leaves it in doubt)."""
    await anyio.sleep(0.05)
    say(f"    [tool ran] search({what!r})")
    return f"best of {what}"


@agent.tool_plain
async def book(what: str) -> str:
    """Book it (a write the provider deduplicates by idempotency key)."""
    key = idempotency_key()
    ledger("INSERT INTO attempts VALUES (?)", key)
    ledger("INSERT OR IGNORE INTO bookings VALUES (?, ?)", key, what)
    say(f"    [tool ran] book({what!r}) key={key}")
    return f"{what} (ref {key})"


durable = DurableAgent(agent, tools={"search": READ, "book": IDEMPOTENT})


async def worker() -> None:
    async with ActorSystem(SqliteStore(STORE), actors=[AgentActor]) as system:
        await system.spawn(AgentActor, "trip-42")  # resumes trip-42 if its log exists
        rec = system.last_recovery("trip-42")
        if rec and rec["entries_read"]:
            say(
                f"  recovered trip-42: {rec['entries_read']} log entries read, "
                f"{rec['in_doubt']} call(s) in doubt"
            )
        result = await durable.run(
            system, "trip-42", "Plan my trip to Lisbon", message_id="trip-42/plan"
        )
        say(f"  output: {result.output}")
        say(f"  messages in history: {len(result.messages)}, usage: {result.usage}")
        say("RESULT " + json.dumps({"output": result.output, "n": len(result.messages)}))


def driver() -> int:
    WORKDIR.mkdir(parents=True, exist_ok=True)
    for f in WORKDIR.iterdir():
        f.unlink()
    cmd = [sys.executable, __file__, "--worker"]
    say(f"run 1: the agent starts (store: {STORE})")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    for line in proc.stdout:
        print(line, end="", flush=True)
        if "[tool ran] book(" in line:
            proc.send_signal(signal.SIGKILL)
            break
    proc.stdout.close()
    proc.wait()
    say(f"\n*** SIGKILL after the first booking (exit code {proc.returncode}) ***\n")
    time.sleep(0.1)
    say("run 2: the same command again; the agent resumes from its log")
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
    print(out, end="")
    with closing(sqlite3.connect(LEDGER)) as db:
        requests = db.execute("SELECT count(*), count(DISTINCT n) FROM model_calls").fetchone()
        bookings = db.execute("SELECT count(*) FROM bookings").fetchone()[0]
        attempts = db.execute("SELECT count(*) FROM attempts").fetchone()[0]
    say("\nsummary")
    say(f"  model requests answered: {requests[0]} for {requests[1]} distinct requests")
    say(f"  bookings in the ledger: {bookings} (booking attempts: {attempts})")
    ok = requests[1] == 5 and requests[0] <= 6 and bookings == 2 and "RESULT" in out
    say(
        "OK: no paid request repeated but the one in flight, no booking repeated"
        if ok
        else "FAILED"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    if "--worker" in sys.argv:
        anyio.run(worker)
    else:
        sys.exit(driver())
