"""A small on-call agent, run as a real process by the CLI tests.

``python incident_worker.py DB MODE [CALLS]``

* ``crash``: asks the agent three questions; the third pages the on-call team through a
  non-idempotent write tool that blocks forever once its intent is durable. The process prints
  ``BLOCKED`` and waits for the test to SIGKILL it, leaving the intent in doubt.
* ``clean``: asks the three questions without blocking and exits normally.
* ``resume``: starts the runtime on the store (recovering what the crash left), waits for the
  third question's reply and prints ``{"reply": ..., "state": ...}`` as one JSON line.
* ``resume-fork ID``: spawns actor ``ID`` (a fork), asks it one more question, prints the same.

Every tool call that really runs is appended to ``CALLS`` (JSON lines), so a test can tell a
call that happened from one served from the log.
"""

from __future__ import annotations

import json
import sys
from typing import Any

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, HandlerError, tool
from actorlog.stores import SqliteStore

ACTOR_ID = "incident-7"
QUESTIONS = [
    ("q-1", "why is checkout slow?", False),
    ("q-2", "which query regressed?", False),
    ("q-3", "is the primary database down?", True),
]

_calls_path = ""
_block_page = False


def _record(tool_name: str, **fields: Any) -> None:
    if _calls_path:
        with open(_calls_path, "a") as f:
            f.write(json.dumps({"tool": tool_name, **fields}) + "\n")


@attrs.define
class Ask:
    __actorlog_tag__ = "oncall.Ask"
    question: str
    page: bool = False


@attrs.define
class Notes:
    __actorlog_tag__ = "oncall.Notes"
    answers: list[str] = attrs.Factory(list)
    pages: list[str] = attrs.Factory(list)


@tool(effect="read", name="search_runbooks")
async def search_runbooks(query: str) -> str:
    _record("search_runbooks", query=query)
    return f"runbook says: {query} -> check pg_stat_activity"


@tool(effect="write", idempotent=True, name="send_email")
async def send_email(to: str, body: str, *, idempotency_key: str) -> str:
    _record("send_email", to=to, key=idempotency_key)
    return f"email to {to} queued"


@tool(effect="write", name="page_oncall")
async def page_oncall(team: str, summary: str) -> str:
    """Not idempotent and no reconcile: after a crash it is in doubt and escalates."""
    _record("page_oncall", team=team)
    if _block_page:
        print("BLOCKED", flush=True)
        await anyio.sleep_forever()
    return "PAGE-1001"


class OnCall(Actor[Notes]):
    __actorlog_tag__ = "oncall.OnCall"
    snapshot_every = 2

    async def receive(self, ctx: Context, msg: Ask) -> str:
        found = await ctx.call(search_runbooks, msg.question)
        ctx.now()
        if msg.page:
            ticket = await ctx.call(page_oncall, "db-team", found)
            self.state.pages.append(ticket)
        await ctx.call(send_email, "ops@example.com", found)
        self.state.answers.append(found)
        return found


async def _ask_all(db: str) -> None:
    async with ActorSystem(SqliteStore(db), actors=[OnCall]) as system:
        ref = await system.spawn(OnCall, ACTOR_ID)
        for mid, question, page in QUESTIONS:
            reply = await ref.ask(Ask(question, page), message_id=mid)
            print(json.dumps({"message_id": mid, "reply": reply}), flush=True)


async def _resume(
    db: str, actor_id: str, message_id: str, question: str, page: bool = False
) -> None:
    async with ActorSystem(SqliteStore(db), actors=[OnCall], shutdown_grace=1.0) as system:
        ref = await system.spawn(OnCall, actor_id)
        out: dict[str, Any] = {}
        with anyio.fail_after(20):
            try:
                # the message sent under that id (another one would be MessageIdReusedError)
                out["reply"] = await ref.ask(Ask(question, page), message_id=message_id)
            except HandlerError as exc:
                out["error"] = {"type": exc.error_type, "message": exc.message}
        cell = system._cells[actor_id]  # the state, to check what the step did
        out["state"] = attrs.asdict(cell.actor.state)
        print(json.dumps(out), flush=True)


def main(argv: list[str]) -> None:
    global _calls_path, _block_page
    db, mode = argv[0], argv[1]
    _calls_path = argv[2] if len(argv) > 2 and mode != "resume-fork" else ""
    if mode == "crash":
        _block_page = True
        anyio.run(_ask_all, db, backend="asyncio")
    elif mode == "clean":
        anyio.run(_ask_all, db, backend="asyncio")
    elif mode == "resume":
        _, question, page = QUESTIONS[2]
        anyio.run(_resume, db, ACTOR_ID, "q-3", question, page, backend="asyncio")
    elif mode == "resume-fork":
        fork_id = argv[2]
        _calls_path = argv[3] if len(argv) > 3 else ""
        anyio.run(_resume, db, fork_id, "fork-q", "what changed after the fork?", backend="asyncio")
    else:
        raise SystemExit(f"unknown mode {mode!r}")


if __name__ == "__main__":
    main(sys.argv[1:])
