"""docs/queries.md as a user reads it (black box, a real SQLite file): a query "logs
nothing. No entry, no event, no commit", is read-only and shares nothing with the state."""

from __future__ import annotations

import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import attrs
import pytest
from actorlog import (
    Actor,
    ActorNotFoundError,
    ActorSystem,
    Context,
    ReadOnlyQueryError,
    message,
)


@attrs.define
class Notes:
    turns: list[str] = attrs.Factory(list)
    meta: dict[str, Any] = attrs.Factory(dict)


@message(name="outside.note")
@attrs.frozen
class Note:
    text: str


class Notebook(Actor[Notes], name="outside.notebook"):
    async def receive(self, ctx: Context, msg: Note) -> str:
        self.state.turns.append(msg.text)
        self.state.meta.setdefault("nested", {"a": [1]})
        return msg.text


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def stored(db: Path) -> tuple[Any, ...]:
    """What the file holds: its actors, entries and events."""
    with closing(sqlite3.connect(db)) as c:
        return tuple(
            c.execute(f"SELECT count(*) FROM {t}").fetchone()[0]
            for t in ("actors", "entries", "events")
        )


@pytest.mark.anyio
async def test_a_query_of_an_actor_the_store_does_not_hold_creates_none(tmp_path: Path) -> None:
    """The old code registered the actor (a row in ``actors``, listed by ``actorlog
    actors`` from then on) and answered with its initial state; ``read_state`` (and a
    query from a client) raise ActorNotFoundError."""
    db = tmp_path / "a.db"
    async with ActorSystem(f"sqlite:///{db}", actors=[Notebook]) as system:
        await (await system.spawn(Notebook, "n")).ask(Note("hi"), message_id="1")
        before = stored(db)
        with pytest.raises(ActorNotFoundError):
            await system.ref(Notebook, "typo").query(lambda s: s.turns)
        assert stored(db) == before
        with pytest.raises(ActorNotFoundError):
            await system.read_state(Notebook, "typo")
        assert await system.ref(Notebook, "n").query(lambda s: s.turns) == ["hi"]
    assert stored(db) == before
    async with ActorSystem(f"sqlite:///{db}", actors=[Notebook]) as system:
        # not loaded in this system: started from the log, as the page says (its recovery
        # records its ``recovered`` event; the query itself nothing)
        assert await system.ref(Notebook, "n").query(lambda s: list(s.turns)) == ["hi"]
        with pytest.raises(ActorNotFoundError):
            await system.ref(Notebook, "typo").query(lambda s: s.turns)
    assert stored(db)[:2] == before[:2]


@pytest.mark.anyio
async def test_a_query_is_read_only_and_shares_nothing(tmp_path: Path) -> None:
    db = tmp_path / "a.db"
    async with ActorSystem(f"sqlite:///{db}", actors=[Notebook]) as system:
        ref = await system.spawn(Notebook, "n")
        await ref.ask(Note("hi"), message_id="1")
        before = stored(db)
        with pytest.raises(ReadOnlyQueryError):
            await ref.query(lambda s: s.meta["nested"]["a"].append(2))
        got = await ref.query(lambda s: s.meta)
        got["nested"]["a"].append(99)
        assert await ref.query(lambda s: s.meta) == {"nested": {"a": [1]}}
        assert stored(db) == before
