"""PostgresStore schema naming: ``?schema=`` in a URL, identifier length, asyncio only."""

from __future__ import annotations

import anyio
import asyncpg
import pytest
from actorlog import ConfigurationError
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


def test_postgres_store_under_trio_says_it_needs_asyncio(postgres_url: str) -> None:
    async def main() -> None:
        store = PostgresStore(postgres_url, schema=_pg.new_schema("actorlog_trio"))
        await store.open()

    with pytest.raises(ConfigurationError, match="asyncio"):
        anyio.run(main, backend="trio")
