"""Every operator write refuses an actor whose log is damaged (issue 24, item 15): ``actorlog
restart`` (docs/upgrading.md, operators.md: exit 2), and its siblings ``resolve``,
``cancel``, ``terminate`` and ``delete``, on the CLI and the ops API. Nothing is written."""

from __future__ import annotations

import sqlite3
from collections.abc import Iterator
from pathlib import Path

import anyio.to_thread
import pytest
from actorlog import ActorlogError, ActorSystem, ConfigurationError, ops
from actorlog.cli._main import main
from actorlog.ops import lifecycle
from actorlog.stores import SqliteStore

from .agents import CALLS, HANG_ONCE, Question, ResearcherV1

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(autouse=True)
def _clean() -> Iterator[None]:
    CALLS.clear()
    HANG_ONCE.clear()
    yield
    CALLS.clear()
    HANG_ONCE.clear()


def damage(db: str, seq: int) -> None:
    """Flip one bit of an entry's payload: its checksum no longer matches."""
    with sqlite3.connect(db) as conn:
        (payload,) = conn.execute(
            "SELECT payload FROM entries WHERE actor_id = 'r1' AND seq = ?", (seq,)
        ).fetchone()
        flipped = bytes([payload[0] ^ 0x01]) + bytes(payload[1:])
        conn.execute(
            "UPDATE entries SET payload = ? WHERE actor_id = 'r1' AND seq = ?", (flipped, seq)
        )
    conn.close()


def dump(db: str) -> list[object]:
    with sqlite3.connect(db) as conn:
        rows: list[object] = [
            conn.execute(f"SELECT * FROM {table} ORDER BY 1, 2").fetchall()
            for table in ("actors", "entries", "snapshots", "events", "store_audit")
        ]
    conn.close()
    return rows


async def quarantined_by_damage(db: str, *, terminated: bool = False) -> None:
    """Two steps recorded, then seq 6 (the second step's intent) damaged; a runtime
    quarantines the actor when it recovers it."""
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV1]) as system:
        ref = await system.spawn(ResearcherV1, "r1")
        for q in ("tides", "moons"):
            await ref.ask(Question(q), message_id=q)
        if terminated:
            await system.terminate("r1", reason="done with it")
    damage(db, 6)
    if not terminated:
        async with ActorSystem(SqliteStore(db), actors=[ResearcherV1]) as system:
            with pytest.raises(ActorlogError):
                await system.spawn(ResearcherV1, "r1")


async def cli(*args: str) -> int:
    return await anyio.to_thread.run_sync(main, list(args))


async def test_restart_command_refuses_a_damaged_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    db = str(tmp_path / "d.db")
    await quarantined_by_damage(db)
    async with ops.opened("sqlite:///" + db) as store:
        assert (await ops.actor_status(store, "r1")).status == "quarantined"
    before = dump(db)
    assert await cli("restart", db, "r1", "--reason", "try") == 2
    captured = capsys.readouterr()
    assert "recorded the restart" not in captured.out
    assert "damaged" in captured.err and "seq 6" in captured.err, captured.err
    assert "actorlog verify" in captured.err
    async with ops.opened("sqlite:///" + db, read_only=False) as store:
        with pytest.raises(ConfigurationError, match="seq 6"):
            await ops.restart(store, "r1")
    assert dump(db) == before


@pytest.mark.parametrize("command", ["cancel", "terminate", "resolve"])
async def test_other_write_commands_refuse_a_damaged_log(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], command: str
) -> None:
    db = str(tmp_path / "d.db")
    await quarantined_by_damage(db)
    before = dump(db)
    args = [command, db, "r1"] + (["6", "--fail", "no"] if command == "resolve" else [])
    assert await cli(*args) == 2
    err = capsys.readouterr().err
    assert "seq 6" in err and "actorlog verify" in err, err
    async with ops.opened("sqlite:///" + db, read_only=False) as store:
        with pytest.raises(ConfigurationError, match="seq 6"):
            if command == "cancel":
                await lifecycle.cancel(store, "r1")
            elif command == "terminate":
                await lifecycle.terminate(store, "r1")
            else:
                await ops.resolve(store, "r1", 6, fail="no")
    assert dump(db) == before


async def test_delete_of_a_damaged_log_needs_force(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """An ended actor is deleted with ``--yes``; with a damaged log ``--yes`` is refused
    (exit 2, nothing deleted), and only ``--force`` deletes it."""
    db = str(tmp_path / "d.db")
    await quarantined_by_damage(db, terminated=True)
    before = dump(db)
    assert await cli("delete", db, "r1", "--yes") == 2
    err = capsys.readouterr().err
    assert "seq 6" in err and "--force" in err, err
    assert dump(db) == before
    assert await cli("delete", db, "r1", "--force") == 0
    async with ops.opened("sqlite:///" + db) as store:
        assert [d.actor_id for d in await lifecycle.deleted(store)] == ["r1"]


async def test_system_restart_refuses_an_actor_quarantined_for_damage(tmp_path: Path) -> None:
    """The live sibling: ``system.restart`` records no ``restarted`` event for a log it
    cannot recover."""
    db = str(tmp_path / "d.db")
    await quarantined_by_damage(db)
    async with ActorSystem(SqliteStore(db), actors=[ResearcherV1]) as system:
        with pytest.raises(ActorlogError):
            await system.spawn(ResearcherV1, "r1")
        before = dump(db)
        with pytest.raises(ConfigurationError, match="damaged log"):
            await system.restart("r1", reason="try")
        assert dump(db) == before
        assert system.status("r1") == "quarantined"
