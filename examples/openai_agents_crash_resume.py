"""An OpenAI Agents SDK run killed mid-run (SIGKILL) that resumes without asking the model
again for a response it already paid for, and without repeating a booking.

Run it (offline: the "LLM" is a scripted ``agents.Model``, no API key needed):

    pip install -e '.[openai-agents]' && python examples/openai_agents_crash_resume.py

The driver starts this file again as a worker process. The worker runs a triage agent that
hands off to a travel planner, through actorlog's DurableAgent on the embedded SQLite
store: the planner searches flights and hotels (reads), books both (idempotent writes,
deduplicated by the provider on the idempotency key) and answers. The driver SIGKILLs the
worker right after the first booking, starts it again, and checks the ledgers: each model
call answered once (plus at most the one in flight at the kill), each booking once.
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
from collections.abc import AsyncIterator
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.integrations.openai_agents import (
    IDEMPOTENT,
    READ,
    AgentActor,
    DurableAgent,
    idempotency_key,
)
from actorlog.stores import SqliteStore
from agents import (
    Agent,
    Model,
    ModelResponse,
    RunConfig,
    Usage,
    function_tool,
    set_tracing_disabled,
)
from agents.testing import assistant_message, function_call

WORKDIR = Path(os.environ.get("ACTORLOG_EXAMPLE_DIR", tempfile.gettempdir())) / "actorlog-oai"
STORE = WORKDIR / "agents.db"
LEDGER = WORKDIR / "ledger.db"

set_tracing_disabled(True)  # offline: the SDK's trace exporter would post to api.openai.com


def say(line: str) -> None:
    print(line, flush=True)


def ledger(sql: str, *args: str) -> None:
    with closing(sqlite3.connect(LEDGER)) as db, db:
        db.execute("CREATE TABLE IF NOT EXISTS model_calls (n TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS bookings (key TEXT PRIMARY KEY, what TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS attempts (key TEXT)")
        db.execute(sql, args)


# -- the "LLM": a scripted agents.Model (leave it out to use OpenAI's models) ---------------


class TravelLLM(Model):
    """Answers from the request alone, like a model would: what the triage agent should do,
    or the planner's next tool call given the tool results so far."""

    async def get_response(
        self, system_instructions: str | None, input: Any, *args: Any, **kwargs: Any
    ) -> ModelResponse:
        items = [i if isinstance(i, dict) else i.model_dump() for i in input]
        results = [str(i["output"]) for i in items if i.get("type") == "function_call_output"]
        n = f"{system_instructions[:6] if system_instructions else ''}{len(results)}"
        ledger("INSERT INTO model_calls VALUES (?)", n)
        say(f"    [model] call {n}")
        await anyio.sleep(0.05)
        if system_instructions == TRIAGE:
            output = [function_call("transfer_to_planner", {}, call_id="h1")]
        else:
            done = results[1:]  # the first output is the handoff's
            script = [
                function_call("search", {"what": "flights to Lisbon"}, call_id="c1"),
                function_call("search", {"what": "hotels in Lisbon"}, call_id="c2"),
                function_call("book", {"what": done[0] if done else ""}, call_id="c3"),
                function_call("book", {"what": done[1] if len(done) > 1 else ""}, call_id="c4"),
            ]
            if len(done) < len(script):
                output = [script[len(done)]]
            else:
                output = [assistant_message("Booked: " + "; ".join(done[2:]))]
        usage = Usage(requests=1, input_tokens=10 * len(items), output_tokens=5)
        return ModelResponse(output=output, usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> AsyncIterator[Any]:
        raise NotImplementedError(
            "this scripted model answers plain runs only: the example never streams"
        )


# -- the agents and their tools -------------------------------------------------------------


@function_tool
async def search(what: str) -> str:
    """Look something up (a read: re-run if a crash leaves it in doubt)."""
    await anyio.sleep(0.05)
    say(f"    [tool ran] search({what!r})")
    return f"best of {what}"


@function_tool
async def book(what: str) -> str:
    """Book it (a write the provider deduplicates by idempotency key)."""
    key = idempotency_key()
    ledger("INSERT INTO attempts VALUES (?)", key)
    ledger("INSERT OR IGNORE INTO bookings VALUES (?, ?)", key, what)
    say(f"    [tool ran] book({what!r}) key={key}")
    return f"{what} (ref {key})"


TRIAGE = "Route the request to the right agent."
planner: Agent[None] = Agent(name="planner", instructions="Plan and book.", tools=[search, book])
triage: Agent[None] = Agent(name="triage", instructions=TRIAGE, handoffs=[planner])

# At import time, once per process: recovery looks the agent up by its name.
durable = DurableAgent(
    triage,
    name="travel-planner",
    tools={"search": READ, "book": IDEMPOTENT},
    run_config=RunConfig(model=TravelLLM()),
)


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
        say(f"  output: {result.final_output}")
        say(f"  answered by: {result.last_agent}, items: {len(result.items)}")
        say(f"  usage: {result.usage.requests} model calls, {result.usage.input_tokens} tokens in")
        say("RESULT " + json.dumps({"output": result.final_output, "n": len(result.items)}))


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
        calls = db.execute("SELECT count(*), count(DISTINCT n) FROM model_calls").fetchone()
        bookings = db.execute("SELECT count(*) FROM bookings").fetchone()[0]
        attempts = db.execute("SELECT count(*) FROM attempts").fetchone()[0]
    say("\nsummary")
    say(f"  model calls answered: {calls[0]} for {calls[1]} distinct calls")
    say(f"  bookings in the ledger: {bookings} (booking attempts: {attempts})")
    # 6 distinct calls: triage's handoff, 4 tool calls, the answer
    ok = calls[1] == 6 and calls[0] <= 7 and bookings == 2 and "RESULT" in out
    say(
        "OK: no paid model call repeated but the one in flight, no booking repeated"
        if ok
        else "FAILED"
    )
    return 0 if ok else 1


if __name__ == "__main__":
    if "--worker" in sys.argv:
        anyio.run(worker)
    else:
        sys.exit(driver())
