"""An agent that is killed mid-run (SIGKILL) and resumes without repeating its tool calls.

Run it:  python examples/crash_resume.py

The driver starts this file again as a worker process. The worker runs a travel-planning
agent on the embedded SQLite store: three legs, each a step with four tool calls (two
"LLM" reads, one idempotent booking written to an external ledger, one more read). The
driver SIGKILLs the worker in the middle of the second leg, then starts it again. The
second run replays what was done from the log, continues the interrupted step from its last
recorded effect, and finishes. The driver then checks the ledger: every booking exactly once.
"""

from __future__ import annotations

import os
import signal
import sqlite3
import subprocess
import sys
import tempfile
import time
from contextlib import closing
from pathlib import Path

import actorlog
import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.stores import SqliteStore

WORKDIR = Path(os.environ.get("ACTORLOG_EXAMPLE_DIR", tempfile.gettempdir())) / "actorlog-example"
STORE = WORKDIR / "agents.db"
LEDGER = WORKDIR / "ledger.db"
KILL_AFTER_TOOL_RUNS = 6  # the driver kills the worker after this many tool executions


def say(line: str) -> None:
    print(line, flush=True)


# -- tools: every side effect goes through ctx.call ----------------------------------------


@tool(name="ask_llm", effect="read")
async def ask_llm(prompt: str) -> str:
    """A slow, paid model call. Safe to repeat, but we'd rather not pay twice."""
    await anyio.sleep(0.05)
    say(f"    [tool ran] ask_llm({prompt!r})")
    return f"answer to {prompt}"


@tool(name="book", effect="write", idempotent=True)
async def book(leg: int, what: str, *, idempotency_key: str) -> str:
    """An irreversible booking, deduplicated by the provider on the idempotency key."""
    with closing(sqlite3.connect(LEDGER)) as db, db:
        db.execute("CREATE TABLE IF NOT EXISTS bookings (key TEXT PRIMARY KEY, what TEXT)")
        db.execute("CREATE TABLE IF NOT EXISTS attempts (key TEXT)")
        db.execute("INSERT INTO attempts VALUES (?)", (idempotency_key,))
        db.execute("INSERT OR IGNORE INTO bookings VALUES (?, ?)", (idempotency_key, what))
    say(f"    [tool ran] book(leg={leg}, {what!r}) key={idempotency_key}")
    return f"booking for leg {leg}"


# -- the agent ------------------------------------------------------------------------------


# stable names: this file runs as a script (__main__), and the log records names
@actorlog.message(name="plan-leg")
@attrs.define
class PlanLeg:
    leg: int
    city: str


@actorlog.message(name="trip")
@attrs.define
class Trip:
    legs: list[str] = attrs.Factory(list)


class TripPlanner(Actor[Trip], name="trip-planner"):
    snapshot_every = 2

    async def receive(self, ctx: Context, msg: PlanLeg) -> str:
        hotels = await ctx.call(ask_llm, f"hotels in {msg.city}")
        pick = await ctx.call(ask_llm, f"pick one of: {hotels}")
        booking = await ctx.call(book, msg.leg, pick)
        summary = await ctx.call(ask_llm, f"summarize {booking}")
        self.state.legs.append(summary)
        return summary


async def worker() -> None:
    async with ActorSystem(SqliteStore(STORE), actors=[TripPlanner]) as system:
        ref = await system.spawn(TripPlanner, "trip-42")
        rec = system.last_recovery("trip-42")
        if rec and rec["entries_read"]:
            say(
                f"  recovered trip-42: snapshot at seq {rec['snapshot_seq']}, "
                f"{rec['entries_read']} log entries read, {rec['steps_replayed']} completed "
                f"steps replayed, {rec['pending_messages']} messages pending, "
                f"{rec['in_doubt']} tool call(s) in doubt, in {rec['duration_s'] * 1000:.1f} ms"
            )
        for leg, city in enumerate(["Lisbon", "Porto", "Madrid"], start=1):
            reply = await ref.ask(PlanLeg(leg, city), message_id=f"leg-{leg}")
            say(f"  leg {leg} done: {reply}")


def driver() -> int:
    WORKDIR.mkdir(parents=True, exist_ok=True)
    for f in WORKDIR.iterdir():
        f.unlink()
    cmd = [sys.executable, __file__, "--worker"]
    say(f"run 1: the agent starts (store: {STORE})")
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    runs = 0
    for line in proc.stdout:
        print(line, end="", flush=True)
        if "[tool ran]" in line:
            runs += 1
            if runs == KILL_AFTER_TOOL_RUNS:
                proc.send_signal(signal.SIGKILL)
                break
    proc.wait()
    say(f"\n*** SIGKILL after {runs} tool executions (exit code {proc.returncode}) ***\n")
    time.sleep(0.1)
    say("run 2: the same command again; the agent resumes from its log")
    out = subprocess.run(cmd, stdout=subprocess.PIPE, text=True, check=True).stdout
    print(out, end="")
    second = out.count("[tool ran]")
    with closing(sqlite3.connect(LEDGER)) as db:
        bookings = db.execute("SELECT count(*) FROM bookings").fetchone()[0]
        attempts = db.execute("SELECT count(*) FROM attempts").fetchone()[0]
    total = runs + second
    say("\nsummary")
    say("  workload: 3 legs x 4 tool calls = 12 tool calls")
    say(f"  executed: {runs} before the kill + {second} after = {total}")
    say(f"  re-run because in doubt at the kill (read or idempotent tools only): {total - 12}")
    say(
        f"  bookings in the ledger: {bookings} (booking attempts: {attempts}) -> exactly once: "
        f"{'yes' if bookings == 3 else 'NO'}"
    )
    ok = bookings == 3 and total - 12 <= 1
    say("OK: nothing completed was redone, no booking was repeated" if ok else "FAILED")
    return 0 if ok else 1


if __name__ == "__main__":
    if "--worker" in sys.argv:
        anyio.run(worker)
    else:
        sys.exit(driver())
