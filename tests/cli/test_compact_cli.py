"""``actorlog compact`` (issue 14.4), run for real: it honours each actor's saved retention,
``--retention`` overrides it, and ``history`` and ``verify`` show the compacted log."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from tests.durability.test_retention import Auditor
from tests.runtime.agents import Add

from ._support import cli


async def _fill(db: Path) -> None:
    async with ActorSystem(SqliteStore(db), actors=[Auditor]) as system:
        keep = await system.spawn(Auditor, "keep")  # class retention "all", none saved
        roll = await system.spawn(Auditor, "roll", retention="all")
        for _ in range(20):
            await keep.ask(Add(1))
            await roll.ask(Add(1))
        await system.spawn(Auditor, "roll", retention="since-snapshot")  # saved, for the CLI


def test_compact_uses_saved_retention_and_history_verify_show_it(tmp_path: Path) -> None:
    db = tmp_path / "agents.db"
    anyio.run(_fill, db)
    r = cli("compact", db, "--json")
    assert r.code == 0, r.err
    got = {d["actor_id"]: d for d in r.json_lines()}
    assert got["keep"]["removed"] == 0 and got["keep"]["retention"] == "all"
    assert got["roll"]["removed"] > 0 and got["roll"]["retention"] == "since-snapshot"
    first = got["roll"]["first_seq"]
    h = cli("history", db, "roll")
    assert f"log compacted: kept from seq {first}" in h.out
    assert "[compacted]" in h.out
    v = cli("verify", db)
    assert v.code == 0 and f"compacted logs: roll from seq {first}" in v.out
    r = cli("compact", db, "--actor", "keep", "--retention", "30d")
    assert r.code == 0 and "keep: nothing removed" in r.out  # all within the window
    r = cli("compact", db, "--actor", "keep", "--retention", "since-snapshot", "--by", "ops")
    assert r.code == 0 and "keep: removed" in r.out


@pytest.mark.parametrize("bad", ["3x", "0", "-5d", "never"])
def test_compact_refuses_a_bad_retention(tmp_path: Path, bad: str) -> None:
    r = cli("compact", tmp_path / "agents.db", "--retention", bad)
    assert r.code == 2 and "--retention" in r.err
