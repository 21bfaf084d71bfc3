"""Write ``fixtures/payer_format_v1.db``: a small SQLite store written by actorlog in format
version 1 (before the compact payloads of format 2, FORMAT.md "Format history"): actor
``pay-1`` (:class:`.agents.Payer`, ``snapshot_every=1``) answered ``q1`` (a snapshot covers
it), then its process was SIGKILLed inside the tool of ``q2`` (an idempotent write in doubt).
Committed; regenerate only with the format-1 code on the path (commit b37c3b5)::

    git archive b37c3b5 runtime stores | tar -x -C /tmp/old && mkdir -p /tmp/old/pkg && \\
      cp -r /tmp/old/runtime /tmp/old/pkg/actorlog && \\
      cp -r /tmp/old/stores /tmp/old/pkg/actorlog/stores && \\
      PYTHONPATH=/tmp/old/pkg python -m tests.upgrading.make_v1_sqlite_fixture
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
import tempfile

import anyio
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from .agents import KILL_IN_CHARGE, Payer, Question

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "payer_format_v1.db")


async def record(path: str) -> None:
    async with ActorSystem(SqliteStore(path), actors=[Payer]) as system:
        ref = await system.spawn(Payer, "pay-1", snapshot_every=1)
        await ref.ask(Question("q1"), message_id="q1")
        KILL_IN_CHARGE.add("q2")
        await ref.ask(Question("q2"), message_id="q2")  # never returns: SIGKILL


def make(out: str = FIXTURE) -> None:
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "old.db")
        child = subprocess.run(
            [sys.executable, "-m", "tests.upgrading.make_v1_sqlite_fixture", "record", db],
            check=False,
        )
        assert child.returncode == -9, child.returncode
        con = sqlite3.connect(db)  # fold the WAL into the file: one self-contained file
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        con.execute("PRAGMA journal_mode=DELETE")
        con.close()
        shutil.copyfile(db, out)


if __name__ == "__main__":
    if sys.argv[1:2] == ["record"]:
        anyio.run(record, sys.argv[2])
    else:
        make()
