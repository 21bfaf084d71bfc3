"""Write ``fixtures/payer_before_incarnations.jsonl``: a log recorded by actorlog before
incarnation ids (FORMAT.md [F13], format history), exported with ``actorlog export``: one
completed charge (``q1``) and one whose process was SIGKILLed inside the tool (``q2``: an
idempotent write in doubt). Committed; regenerate only with the old code on the path::

    git archive 1fb5839 runtime stores | tar -x -C /tmp/old && mkdir -p /tmp/old/pkg && \\
      cp -r /tmp/old/runtime /tmp/old/pkg/actorlog && \\
      cp -r /tmp/old/stores /tmp/old/pkg/actorlog/stores && \\
      PYTHONPATH=/tmp/old/pkg python -m tests.upgrading.make_keys_fixture
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile

import anyio
from actorlog import ActorSystem
from actorlog.cli._main import main
from actorlog.stores import SqliteStore

from .agents import KILL_IN_CHARGE, Payer, Question

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "payer_before_incarnations.jsonl")


async def record(path: str) -> None:
    async with ActorSystem(SqliteStore(path), actors=[Payer]) as system:
        ref = await system.spawn(Payer, "pay-1")
        await ref.ask(Question("q1"), message_id="q1")
        KILL_IN_CHARGE.add("q2")
        await ref.ask(Question("q2"), message_id="q2")  # never returns: SIGKILL


def make(out: str = FIXTURE) -> None:
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "old.db")
        child = subprocess.run(
            [sys.executable, "-m", "tests.upgrading.make_keys_fixture", "record", db], check=False
        )
        assert child.returncode == -9, child.returncode
        code = main(["export", db, "pay-1", "-o", out])
        assert code == 0, code


if __name__ == "__main__":
    if sys.argv[1:2] == ["record"]:
        anyio.run(record, sys.argv[2])
    else:
        make()
