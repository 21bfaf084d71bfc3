"""The PostgreSQL append check (the ``entries`` trigger) for multi-row statements: for
every writer, including SQL typed by hand, a statement with one bad actor inserts nothing;
summaries advance row by row; a stale fenced writer whose rows collide with the new owner's
gets ``LeaseLostError``. (A check once per statement was tried for issue 17 and measured
slower for small batches: docs/benchmarks/postgres.md.)"""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import asyncpg
import pytest
from actorlog import LeaseLostError
from actorlog._journal.codec import make_row
from actorlog.store import EntryRow
from actorlog.stores import PostgresStore
from actorlog.stores._sql import ENTRY_COLS, entry_values

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    # Only for the type checker: pytest imports conftest.py itself (tests/ is no package).
    from tests.stores.conftest import PostgresHarness

pytestmark = pytest.mark.anyio


def row(actor_id: str, seq: int, kind: str = "message", ref: int = 0) -> EntryRow:
    mid = f"m-{seq}" if kind == "message" else None
    return make_row(actor_id, seq, kind, "tests.Ask", ref, mid, b"{}")


@pytest.fixture
async def raw(pg_harness: PostgresHarness) -> AsyncIterator[asyncpg.Connection]:
    await pg_harness.open()
    conn = await asyncpg.connect(pg_harness.url, server_settings={"search_path": pg_harness.schema})
    try:
        yield conn
    finally:
        await conn.close()


async def insert(conn: asyncpg.Connection, *rows: EntryRow) -> None:
    """One hand-typed multi-row INSERT (no fencing token)."""
    values = ", ".join(
        "(" + ", ".join(f"${8 * i + k}" for k in range(1, 9)) + ")" for i in range(len(rows))
    )
    args = [v for r in rows for v in entry_values(r)]
    await conn.execute(f"INSERT INTO entries ({ENTRY_COLS}) VALUES {values}", *args)


async def summary(conn: asyncpg.Connection, actor_id: str) -> tuple[int, ...]:
    r = await conn.fetchrow(
        "SELECT first_seq, last_seq, last_message_seq, handled_seq FROM actors WHERE actor_id = $1",
        actor_id,
    )
    assert r is not None
    return tuple(r)


async def test_a_statement_advances_each_actors_summary_as_row_by_row_would(
    pg_harness: PostgresHarness, raw: asyncpg.Connection
) -> None:
    store = await pg_harness.open()
    for a in ("a", "b"):
        await store.register_actor(a, "t")
    await insert(
        raw,
        row("a", 1),
        row("b", 1),
        row("a", 2, "intent", 1),
        row("a", 3, "step", 1),
        row("a", 4),
        row("b", 2, "step", 1),
    )
    assert await summary(raw, "a") == (1, 4, 4, 1)
    assert await summary(raw, "b") == (1, 2, 1, 1)
    await insert(raw, row("a", 5, "step", 4))
    assert await summary(raw, "a") == (1, 5, 4, 4)


@pytest.mark.parametrize(
    "rows",
    [
        pytest.param([row("a", 1), row("a", 3)], id="gap"),
        pytest.param([row("a", 2)], id="not-after-last"),
        pytest.param([row("a", 1), row("b", 2)], id="one-actor-of-two"),
        pytest.param([row("a", 1), row("nobody", 1)], id="unregistered"),
    ],
)
async def test_a_statement_with_one_bad_actor_inserts_nothing(
    pg_harness: PostgresHarness, raw: asyncpg.Connection, rows: list[EntryRow]
) -> None:
    store = await pg_harness.open()
    for a in ("a", "b"):
        await store.register_actor(a, "t")
    with pytest.raises(asyncpg.IntegrityConstraintViolationError, match="actorlog: "):
        await insert(raw, *rows)
    assert await raw.fetchval("SELECT count(*) FROM entries") == 0
    assert await summary(raw, "a") == (0, 0, 0, 0)
    assert await summary(raw, "b") == (0, 0, 0, 0)


async def test_a_stale_writer_tripping_over_the_new_owners_rows_gets_lease_lost(
    pg_harness: PostgresHarness,
) -> None:
    old = await pg_harness.open()
    new = await pg_harness.open()
    assert isinstance(old, PostgresStore) and isinstance(new, PostgresStore)
    await old.register_actor("z", "t")
    first = await old.acquire_lease("z", "old", 0.05)
    assert first is not None
    old.set_fence("z", first)
    await old.append("z", 0, [row("z", 1)])
    await anyio.sleep(0.2)  # the old owner's lease expires
    second = await new.acquire_lease("z", "new", 30)
    assert second == first + 1
    new.set_fence("z", second)
    await new.append("z", 1, [row("z", 2)])
    # the zombie appends seq 2 too: the row exists (unique key) before any token check
    with pytest.raises(LeaseLostError) as info:
        await old.append("z", 1, [make_row("z", 2, "message", "tests.Ask", 0, "other", b"{}")])
    assert info.value.current == second
    assert [r.message_id for r in await new.read("z")] == ["m-1", "m-2"]
