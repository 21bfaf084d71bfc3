"""Writes ``fixtures/fan_before_tasks.jsonl``: run with actorlog from before [F18] (commit
49148f5) on the path: ``python -m tests.upgrading.make_fan_fixture``."""

from __future__ import annotations

import os
import tempfile

import anyio
from actorlog import ActorSystem
from actorlog.cli._main import main
from actorlog.stores import SqliteStore

from tests.upgrading.old_fan_agents import Ask, OldFan

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "fan_before_tasks.jsonl")


async def _run(db: str) -> None:
    async with ActorSystem(SqliteStore(db), actors=[OldFan]) as system:
        ref = await system.spawn(OldFan, "o1")
        print(await ref.ask(Ask("x"), message_id="m1"))


if __name__ == "__main__":
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "old.db")
        anyio.run(_run, db)
        code = main(["export", db, "o1", "-o", FIXTURE])
        assert code == 0, code
