"""A file of each SQLite layout written by a real runtime, for the tests that read it from
outside (tests/cli/test_sqlite_layouts_cli.py, tests/web/test_console_layouts.py): ``r1``
(snapshots every 4 steps, 2 kept, retention since-snapshot) takes 30 asks while 10 other
actors take theirs; then repeated asks and a reused message id, as a caller would make them."""

from __future__ import annotations

import sqlite3
from pathlib import Path

import anyio
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.errors import MessageIdReusedError
from actorlog.stores import SqliteStore

from tests._sqlitefile import new_files_in

#: the queries ``search`` answered, in order (a repeated ask runs no tool)
RAN: list[str] = []


@attrs.define
class Ask:
    question: str


@attrs.define
class Notes:
    answers: list[str] = attrs.Factory(list)


@tool(effect="read", name="layouts.search")
async def search(q: str) -> str:
    RAN.append(q)
    return f"answer to {q}"


class Researcher(Actor[Notes], name="layouts.Researcher"):
    async def receive(self, ctx: Context, msg: Ask) -> str:
        found = await ctx.call(search, msg.question)
        self.state.answers.append(found)
        return found


async def write(path: Path) -> None:
    """One runtime: ``r1`` (snapshots every 4 steps, 2 kept, retention since-snapshot) takes
    30 asks while 20 other actors take theirs; then repeated asks and a reused id."""
    async with ActorSystem(SqliteStore(path), actors=[Researcher]) as system:
        r1 = await system.spawn(
            Researcher, "r1", snapshot_every=4, snapshot_keep=2, retention="since-snapshot"
        )
        for i in range(30):
            await r1.ask(Ask(f"q{i}"), message_id=f"m-{i}")
            if i % 3 == 0:
                other = await system.spawn(Researcher, f"x{i:02d}")
                await other.ask(Ask("hi"), message_id="m-0")
                await other.ask(Ask("hello"), message_id="m-1")
        ran = len(RAN)
        # a repeated ask: the recorded reply, no tool run, nothing written
        actor = await system.store.get_actor("r1")
        assert actor is not None
        assert await r1.ask(Ask("q28"), message_id="m-28") == "answer to q28"
        assert await r1.ask(Ask("q29"), message_id="m-29") == "answer to q29"
        assert len(RAN) == ran
        # the same id with another message: refused, nothing written
        with pytest.raises(MessageIdReusedError, match="m-28"):
            await r1.ask(Ask("something else"), message_id="m-28")
        again = await system.store.get_actor("r1")
        assert again is not None and again.last_seq == actor.last_seq
        # the other actors' m-0 is theirs: x00's repeated ask has its own reply
        assert await system.ref(Researcher, "x00").ask(Ask("hi"), message_id="m-0") == (
            "answer to hi"
        )
        assert len(RAN) == ran


def made(tmp_path_factory: pytest.TempPathFactory) -> dict[int, Path]:
    """A file of each format (4: as that version made it; 5: a new file) written by
    :func:`write`, checkpointed (its WAL empty)."""
    out: dict[int, Path] = {}
    for layout in (4, 5):
        path = tmp_path_factory.mktemp(f"format{layout}") / "agents.db"
        with pytest.MonkeyPatch.context() as mp:
            new_files_in(mp, layout)
            RAN.clear()
            anyio.run(write, path)
        db = sqlite3.connect(path)
        db.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        db.close()
        out[layout] = path
    return out


def copy(origin: Path, to: Path) -> Path:
    """A copy of the file ``origin`` (and its WAL, if any) at ``to / origin.name``."""
    import shutil

    for f in origin.parent.glob(origin.name + "*"):
        if not f.name.endswith("-actorlog.lock"):
            shutil.copyfile(f, to / f.name)
    return to / origin.name
