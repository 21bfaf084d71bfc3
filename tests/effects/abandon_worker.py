"""A runtime SIGKILLed by tests/runtime/test_abandoned_while_settling.py.

``python -m tests.effects.abandon_worker DB LEDGER BACKEND KIND CONTESTANTS``: asks the
racer (abandon_agents.py) one question (message id ``q``) on the SQLite file DB; its tools
hang after writing ``start ARG`` to LEDGER, and the test kills the process.
"""

from __future__ import annotations

import sys

import anyio
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from tests.effects.abandon_agents import KICK, LEDGER, Race, Racer


async def main(db: str, kind: str, contestants: int) -> None:
    KICK["go"] = anyio.Event()  # never set: the process is killed first
    async with ActorSystem(SqliteStore(db), actors=[Racer]) as system:
        ref = await system.spawn(Racer, "r")
        await ref.ask(Race(kind, contestants), message_id="q")


if __name__ == "__main__":
    db, ledger, backend, kind, contestants = sys.argv[1:6]
    LEDGER["path"] = ledger
    anyio.run(main, db, kind, int(contestants), backend=backend)
