"""PostgresStore beyond the shared contract: connection failures, DSNs, schemas, locks."""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

import anyio
import asyncpg
import pytest
from actorlog._journal.codec import make_row
from actorlog._journal.errors import SequenceConflictError, StoreUnavailableError, StoreURLError
from actorlog.stores import PostgresStore, open_store

if TYPE_CHECKING:
    from collections.abc import AsyncIterator

    from actorlog.store import EntryRow

    # Only for the type checker: pytest imports conftest.py itself (tests/ is no package).
    from tests.stores.conftest import PostgresHarness

pytestmark = pytest.mark.anyio

ACTOR = "actor-1"


def msg(seq: int, message_id: str | None = None) -> EntryRow:
    return make_row(ACTOR, seq, "message", "tests.Ask", 0, message_id or f"m-{seq}", b"{}")


def with_query(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


@pytest.fixture
async def raw(pg_harness: PostgresHarness) -> AsyncIterator[asyncpg.Connection]:
    """A plain asyncpg connection in the harness's schema (created by opening a store)."""
    await pg_harness.open()
    conn = await asyncpg.connect(pg_harness.url, server_settings={"search_path": pg_harness.schema})
    try:
        yield conn
    finally:
        await conn.close()


async def test_unreachable_server_is_unavailable_and_hides_the_password() -> None:
    store = PostgresStore("postgresql://user:s3cret@127.0.0.1:1/db")
    assert "s3cret" not in repr(store)
    with pytest.raises(StoreUnavailableError) as info:
        await store.open()
    assert "s3cret" not in str(info.value)
    assert "127.0.0.1:1" in str(info.value)


@pytest.mark.parametrize(
    "url",
    ["postgresql://u@127.0.0.1:notaport/db", "postgresql://u@h/db?sslmode=bogus", "mysql://u@h/db"],
)
async def test_unparsable_dsn_is_a_url_error(url: str) -> None:
    with pytest.raises(StoreURLError):
        await PostgresStore(url).open()


async def test_connection_lost_mid_append_is_unavailable_and_wrote_nothing(
    pg_harness: PostgresHarness, raw: asyncpg.Connection
) -> None:
    """Failure, not rejection: StoreUnavailableError; a later read tells what was written."""
    app = f"actorlog-kill-{uuid.uuid4().hex[:8]}"
    store = PostgresStore(
        with_query(pg_harness.url, f"application_name={app}"),
        schema=pg_harness.schema,
        max_size=2,
    )
    await store.open()
    try:
        await store.register_actor(ACTOR, "tests.T")
        await store.append(ACTOR, 0, [msg(1)])
        # Hold the actor's row lock so that the next append waits inside its statement.
        tx = raw.transaction()
        await tx.start()
        await raw.execute("SELECT 1 FROM actors WHERE actor_id = $1 FOR UPDATE", ACTOR)
        outcome: list[BaseException] = []

        async def append() -> None:
            try:
                await store.append(ACTOR, 1, [msg(2)])
            except StoreUnavailableError as exc:
                outcome.append(exc)

        async with anyio.create_task_group() as tg:
            tg.start_soon(append)
            with anyio.fail_after(10):
                while not await raw.fetchval(
                    "SELECT count(*) FROM pg_stat_activity "
                    "WHERE application_name = $1 AND wait_event_type = 'Lock'",
                    app,
                ):
                    await anyio.sleep(0.01)
            await raw.execute(
                "SELECT pg_terminate_backend(pid) FROM pg_stat_activity "
                "WHERE application_name = $1",
                app,
            )
        await tx.rollback()
        assert len(outcome) == 1, "the append should have failed"
        assert [r.seq for r in await store.read(ACTOR)] == [1]  # nothing half-written
        await store.append(ACTOR, 1, [msg(2)])  # the pool reconnects
        assert [r.seq for r in await store.read(ACTOR)] == [1, 2]
    finally:
        await store.close()


@pytest.mark.parametrize("schema", ['Actor Log "{}"', "user"], ids=["mixed-case", "keyword"])
async def test_schema_name_needing_quotes_works_and_its_url_reopens(
    postgres_url: str, schema: str
) -> None:
    schema = schema.format(uuid.uuid4().hex[:6])
    store = PostgresStore(postgres_url, schema=schema)
    await store.open()
    try:
        await store.register_actor(ACTOR, "tests.T")
        await store.append(ACTOR, 0, [msg(1)])
        other = open_store(store.url)
        await other.open()
        try:
            assert await other.read(ACTOR) == [msg(1)]
            with pytest.raises(SequenceConflictError):
                await other.append(ACTOR, 0, [msg(1, "again")])
        finally:
            await other.close()
    finally:
        await store.close()
        conn = await asyncpg.connect(postgres_url)
        try:
            await conn.execute('DROP SCHEMA "' + schema.replace('"', '""') + '" CASCADE')
        finally:
            await conn.close()


async def test_schemas_are_independent_and_the_trigger_uses_its_own(
    pg_harness: PostgresHarness, other_pg_harness: PostgresHarness, raw: asyncpg.Connection
) -> None:
    """A writer whose search_path names another schema still hits this schema's checks."""
    store = await pg_harness.open()
    await store.register_actor(ACTOR, "tests.T")
    await store.append(ACTOR, 0, [msg(1)])
    elsewhere = await other_pg_harness.open()
    assert await elsewhere.list_actors() == []
    await elsewhere.register_actor(ACTOR, "tests.Other")  # same id, other schema
    await raw.execute("SET search_path = " + other_pg_harness.schema)
    insert = (
        f"INSERT INTO {pg_harness.schema}.entries (actor_id, seq, kind, type_tag, ref, "
        "message_id, payload, checksum) VALUES ($1, $2, 'message', 't', 0, $3, ''::bytea, 0)"
    )
    with pytest.raises(asyncpg.IntegrityConstraintViolationError, match="seq conflict"):
        await raw.execute(insert, ACTOR, 3, "gap")
    await raw.execute(insert, ACTOR, 2, "next")  # checked against this schema's actors
    actor = await store.get_actor(ACTOR)
    assert actor is not None and actor.last_seq == 2
    other = await elsewhere.get_actor(ACTOR)
    assert other is not None and other.last_seq == 0
    assert await elsewhere.read(ACTOR) == []


async def test_read_only_open_of_an_empty_schema_is_unavailable(postgres_url: str) -> None:
    store = PostgresStore(postgres_url, schema=f"empty_{uuid.uuid4().hex[:8]}", read_only=True)
    with pytest.raises(StoreUnavailableError, match="no actorlog store"):
        await store.open()


async def test_reopen_does_not_take_the_schema_lock_for_ddl(
    pg_harness: PostgresHarness, raw: asyncpg.Connection
) -> None:
    """Opening an up-to-date store runs no DDL, so it does not block on running writers."""
    store = await pg_harness.open()
    await store.register_actor(ACTOR, "tests.T")
    tx = raw.transaction()
    await tx.start()
    try:
        # A writer holding locks on entries and actors (as an append in flight does).
        await raw.execute("LOCK TABLE entries, actors IN ROW EXCLUSIVE MODE")
        with anyio.fail_after(5):
            again = await pg_harness.open()
        assert [a.actor_id for a in await again.list_actors()] == [ACTOR]
    finally:
        await tx.rollback()
