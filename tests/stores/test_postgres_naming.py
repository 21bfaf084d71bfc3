"""PostgresStore: ``?schema=`` in a URL, identifier length, asyncio only, misleading errors."""

from __future__ import annotations

import anyio
import asyncpg
import pytest
from actorlog import ConfigurationError, CorruptEntryError, StoreCorruptError
from actorlog.store import EntryRow
from actorlog.stores import PostgresStore, open_store

from tests import _pg

pytestmark = pytest.mark.anyio


@pytest.fixture(scope="module")
def postgres_url() -> str:
    return _pg.postgres_url("PostgresStore naming tests")


def with_query(url: str, query: str) -> str:
    return url + ("&" if "?" in url else "?") + query


async def _tables_in(url: str, schema: str) -> bool:
    conn = await asyncpg.connect(url)
    try:
        found = await conn.fetchval("SELECT to_regclass($1)", f"{_pg.quote_ident(schema)}.entries")
        return found is not None
    finally:
        await conn.close()


async def test_schema_in_the_url_is_the_store_schema(postgres_url: str) -> None:
    """FORMAT.md section 6a documents ``?schema=NAME``; the server rejected it as an unknown
    setting. It is taken out of the connection parameters and used as the schema."""
    schema = _pg.new_schema("actorlog_urlschema")
    store = open_store(with_query(postgres_url, f"schema={schema}"))
    try:
        await store.open()
        await store.register_actor("a", "t")
        assert isinstance(store, PostgresStore) and store.schema == schema
        assert await _tables_in(postgres_url, schema)
        again = open_store(store.url, read_only=True)  # url reopens it
        await again.open()
        try:
            assert [a.actor_id for a in await again.list_actors()] == ["a"]
        finally:
            await again.close()
    finally:
        await store.close()
        await _pg.drop_schemas(postgres_url, schema)


def test_conflicting_schemas_are_refused(postgres_url: str) -> None:
    with pytest.raises(ConfigurationError, match="conflicting"):
        PostgresStore(with_query(postgres_url, "schema=a"), schema="b")
    with pytest.raises(ConfigurationError, match="conflicting"):
        PostgresStore(with_query(postgres_url, "schema=a&schema=b"))


async def test_schema_names_longer_than_63_bytes_are_refused(postgres_url: str) -> None:
    """PostgreSQL cuts identifiers to 63 bytes: two such tenants shared one store."""
    base = _pg.new_schema("actorlog_long")
    long_a, long_b = (base + "_" * 63)[:63] + "a", (base + "_" * 63)[:63] + "b"
    for name in (long_a, long_b, "é" * 32):
        with pytest.raises(ConfigurationError, match="63 bytes"):
            PostgresStore(postgres_url, schema=name)
        with pytest.raises(ConfigurationError, match="63 bytes"):
            open_store(with_query(postgres_url, f"schema={name}"))
    exact = (base + "_" * 63)[:63]
    store = PostgresStore(postgres_url, schema=exact)
    try:
        await store.open()
        assert await _tables_in(postgres_url, exact)
    finally:
        await store.close()
        await _pg.drop_schemas(postgres_url, exact)


def test_postgres_store_under_trio_says_asyncio_only_and_names_sqlite() -> None:
    """Refused at ``open``, before any connection (so no server is needed here): the error
    says PostgresStore runs on asyncio only and names the durable store that runs on trio."""

    async def main() -> None:
        # never contacted: the backend check comes first
        store = PostgresStore("postgresql://nobody@127.0.0.1:1/none")
        await store.open()

    with pytest.raises(ConfigurationError, match="asyncio only") as info:
        anyio.run(main, backend="trio")
    assert "SqliteStore" in str(info.value) and "asyncpg" in str(info.value)


# -- misleading errors (issue 11.11) ------------------------------------------------------


async def test_bad_input_is_configuration_not_an_unavailable_store(postgres_url: str) -> None:
    """A lone surrogate or an integer beyond 64 bits is the caller's error, not a transient
    failure; in a group commit it fails only its own append."""
    from actorlog._journal.codec import make_row

    schema = _pg.new_schema("actorlog_badinput")
    store = PostgresStore(postgres_url, schema=schema)
    await store.open()
    try:
        with pytest.raises(ConfigurationError):
            await store.get_actor("bad\udc80")
        with pytest.raises(ConfigurationError):
            await store.read("a", after_seq=2**70)
        await store.register_actor("a", "t")
        await store.register_actor("b", "t")
        good = make_row("a", 1, "message", "t", 0, "ok", b"{}")
        bad = make_row("b", 1, "message", "t", 0, "ok", b"{}")
        bad = type(bad)("b", 1, "message", "t", 0, "m\udc80", b"{}", bad.checksum)
        results: dict[str, object] = {}

        async def put(actor: str, row: EntryRow) -> None:
            try:
                await store.append(actor, 0, [row])
                results[actor] = "ok"
            except Exception as exc:
                results[actor] = exc

        async with anyio.create_task_group() as tg:
            tg.start_soon(put, "a", good)
            tg.start_soon(put, "b", bad)
        assert results["a"] == "ok"
        assert isinstance(results["b"], ConfigurationError), results
    finally:
        await store.close()
        await _pg.drop_schemas(postgres_url, schema)


async def test_a_damaged_last_seq_is_damage_not_another_runtime(postgres_url: str) -> None:
    from actorlog._journal.codec import make_row

    schema = _pg.new_schema("actorlog_lastseq")
    store = PostgresStore(postgres_url, schema=schema)
    await store.open()
    try:
        await store.register_actor("a", "t")
        await store.append("a", 0, [make_row("a", 1, "message", "t", 0, "m1", b"{}")])
        conn = await asyncpg.connect(postgres_url, server_settings={"search_path": schema})
        try:
            await conn.execute("UPDATE actors SET last_seq = last_seq + 5")
        finally:
            await conn.close()
        with pytest.raises(CorruptEntryError) as info:
            await store.append("a", 1, [make_row("a", 2, "message", "t", 0, "m2", b"{}")])
        assert info.value.actor_id == "a" and "actors.last_seq" in str(info.value)
        assert "another runtime" not in str(info.value)
    finally:
        await store.close()
        await _pg.drop_schemas(postgres_url, schema)


@pytest.mark.parametrize(
    ("key", "read_only"),
    # a read-only opener checks the format version only (it migrates nothing)
    [("format_version", False), ("format_version", True), ("schema_version", False)],
)
async def test_a_damaged_version_in_actorlog_meta_is_named(
    postgres_url: str, key: str, read_only: bool
) -> None:
    """A version that is not a number was a raw ValueError at open: it is damage below the
    rows, named with the store and the column, and nothing is changed."""
    schema = _pg.new_schema("actorlog_meta")
    store = PostgresStore(postgres_url, schema=schema)
    try:
        await store.open()
        await store.close()
        conn = await asyncpg.connect(postgres_url)
        try:
            await conn.execute(
                f"UPDATE {_pg.quote_ident(schema)}.actorlog_meta SET value = 'x1' WHERE key = $1",
                key,
            )
        finally:
            await conn.close()
        damaged = PostgresStore(postgres_url, schema=schema, read_only=read_only)
        with pytest.raises(StoreCorruptError, match=f"actorlog_meta.{key} holds 'x1'"):
            await damaged.open()
        await damaged.close()
    finally:
        await _pg.drop_schemas(postgres_url, schema)
