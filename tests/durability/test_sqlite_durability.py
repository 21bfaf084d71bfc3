"""SQLite-specific guarantees: what is on disk when a call returns, and two runtimes on one
file. Real files, checked through a second, independent sqlite3 connection."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path

import pytest
from actorlog import Actor, ActorSystem, Context, StoreLockedError
from actorlog.stores import SqliteStore

from ..runtime.agents import Add, Ask, Notes, Researcher

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # one backend is enough here (SqliteStore on trio: tests/stores)


def on_disk(path: Path, actor_id: str) -> list[tuple[int, str]]:
    with closing(sqlite3.connect(path)) as db:
        return db.execute(
            "SELECT seq, kind FROM entries WHERE actor_id = ? ORDER BY seq", (actor_id,)
        ).fetchall()


async def test_send_returns_after_the_message_is_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    async with ActorSystem(SqliteStore(path), actors=[Researcher]) as system:
        ref = await system.spawn(Researcher, "r")
        await ref.send(Add(1), message_id="m-1")
        assert (1, "message") in on_disk(path, "r")


async def test_tool_runs_only_after_its_intent_is_on_disk(tmp_path: Path) -> None:
    path = tmp_path / "a.db"
    seen: list[list[tuple[int, str]]] = []

    async def probe() -> str:
        seen.append(on_disk(path, "p"))
        return "ok"

    class Prober(Actor[Notes]):
        async def receive(self, ctx: Context, msg: Ask) -> str:
            return str(await ctx.call(probe))

    async with ActorSystem(SqliteStore(path), actors=[Prober]) as system:
        ref = await system.spawn(Prober, "p")
        await ref.ask(Ask("x"))
    assert seen == [[(1, "message"), (2, "intent")]]


async def test_two_runtimes_cannot_interleave_one_actors_log(tmp_path: Path) -> None:
    """One runtime per SQLite file: the second is refused at start (the file's lock); a
    writer that bypasses the lock (sqlite3 by hand) still meets the append trigger."""
    path = tmp_path / "a.db"
    async with ActorSystem(SqliteStore(path), actors=[Researcher]) as a:
        with pytest.raises(StoreLockedError):
            async with ActorSystem(SqliteStore(path), actors=[Researcher]):
                pass
        ra = await a.spawn(Researcher, "x")
        assert await ra.ask(Add(1)) == "1"
        with (
            closing(sqlite3.connect(path, isolation_level=None)) as db,
            pytest.raises(sqlite3.IntegrityError, match="seq conflict"),
        ):
            db.execute(
                "INSERT INTO entries VALUES ('x', 2, 'message', 't', 0, 'intruder', x'7b7d', 0)"
            )
        assert await ra.ask(Add(1)) == "2"
    kinds = [k for _, k in on_disk(path, "x")]
    assert kinds == ["message", "step", "message", "step"]
