"""A runtime killed with SIGKILL by tests/runtime/test_concurrent_steps.py.

``python -m tests.runtime.concurrent_worker DB LEDGER BACKEND KILL_AT``: asks the fan-out
agent one question (message id ``q``) on the SQLite file DB; the KILL_AT-th tool start
SIGKILLs the process (0: never). Prints the reply as JSON when it gets one.
"""

from __future__ import annotations

import json
import sys

import anyio
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from tests.runtime.concurrent_agents import LEDGER, Fan, FanOut


async def main(db: str) -> None:
    async with ActorSystem(SqliteStore(db), actors=[FanOut]) as system:
        ref = await system.spawn(FanOut, "fan")
        reply = await ref.ask(Fan(4), message_id="q")
        print(json.dumps({"reply": reply}), flush=True)


if __name__ == "__main__":
    db, ledger, backend, kill_at = sys.argv[1:5]
    LEDGER["path"], LEDGER["kill_at"] = ledger, int(kill_at)
    anyio.run(main, db, backend=backend)
