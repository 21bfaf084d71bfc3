"""Write ``fixtures/researcher_v1.jsonl``: the history ``ResearcherV1`` records for two
questions, exported with ``actorlog export``. Run it only to regenerate the fixture (it is
committed: the point is a history recorded by an older handler)::

    python -m tests.upgrading.make_fixture
"""

from __future__ import annotations

import os
import tempfile

import anyio
from actorlog import ActorSystem
from actorlog.cli._main import main
from actorlog.stores import SqliteStore

from .agents import Question, ResearcherV1

HERE = os.path.dirname(os.path.abspath(__file__))
FIXTURE = os.path.join(HERE, "fixtures", "researcher_v1.jsonl")


async def record(path: str) -> None:
    async with ActorSystem(SqliteStore(path), actors=[ResearcherV1]) as system:
        ref = await system.spawn(ResearcherV1, "r1")
        await ref.ask(Question("tides"), message_id="q1")
        await ref.ask(Question("moons"), message_id="q2")


def make(out: str = FIXTURE) -> None:
    with tempfile.TemporaryDirectory() as d:
        db = os.path.join(d, "v1.db")
        anyio.run(record, db)
        code = main(["export", db, "r1", "-o", out])
        assert code == 0, code


if __name__ == "__main__":
    make()
