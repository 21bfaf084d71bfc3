"""The PostgreSQL server the tests run against, and fresh schemas on it.

One place for what ``tests/conftest.py``, ``tests/stores``, ``tests/cluster`` and
``tests/torture`` all need:

* :func:`postgres_url` resolves the server from ``ACTORLOG_TEST_POSTGRES_URL`` (or
  ``DATABASE_URL``); ``source .ci/pg.sh; pg_start`` exports both. Without one the calling test
  skips, except under CI (``CI`` set), where it fails: CI must test every store.
* :func:`new_schema` names a fresh schema (a test's own store, isolated from every other
  test and run on the same server); :func:`create_schema` and :func:`drop_schemas` make and
  remove them; :func:`schema_url` is a URL whose ``search_path`` is that schema, so
  ``open_store(url)`` (or ``PostgresStore(url)``) opens the store kept there.
"""

from __future__ import annotations

import os
import uuid
from typing import Any, NoReturn
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import pytest

__all__ = [
    "URL_VARS",
    "create_schema",
    "drop_schemas",
    "in_ci",
    "new_schema",
    "postgres_url",
    "quote_ident",
    "schema_url",
    "unavailable",
]

#: Where the server's URL is looked for, in order.
URL_VARS = ("ACTORLOG_TEST_POSTGRES_URL", "DATABASE_URL")


def in_ci() -> bool:
    """True when running under CI, where a missing service fails the tests needing it."""
    return os.environ.get("CI", "").strip().lower() not in ("", "0", "false", "no")


def unavailable(reason: str, in_ci_hint: str) -> NoReturn:
    """A service a test needs is missing: skip it, or under CI fail it (CI must test
    everything; ``in_ci_hint`` says what CI must do)."""
    if in_ci():
        pytest.fail(f"{reason}. {in_ci_hint}", pytrace=False)
    pytest.skip(reason)


def postgres_url(what: str = "PostgreSQL tests") -> str:
    """The test server's URL. Without one: ``pytest.skip``, or under CI ``pytest.fail``.

    Args:
        what: the tests that need it, for the skip or failure message.
    """
    for var in URL_VARS:
        url = os.environ.get(var)
        if url:
            return url
    reason = (
        f"{what} need a PostgreSQL server: set {' or '.join(URL_VARS)} "
        "(locally: source .ci/pg.sh; pg_start)"
    )
    unavailable(
        reason,
        "CI is set, so these tests must run: .ci/run must start PostgreSQL "
        "(source .ci/pg.sh; pg_start) before pytest.",
    )


def new_schema(prefix: str = "actorlog_test") -> str:
    """A fresh, unused schema name (not created: ``PostgresStore(schema=...)`` creates it)."""
    return f"{prefix}_{uuid.uuid4().hex[:16]}"


def quote_ident(name: str) -> str:
    """An SQL identifier, quoted."""
    return '"' + name.replace('"', '""') + '"'


def schema_url(url: str, schema: str) -> str:
    """``url`` with ``search_path`` set to ``schema`` (what ``PostgresStore(url,
    schema=schema).url`` gives): a store opened from it keeps its tables there."""
    parts = urlsplit(url)
    query = [kv for kv in parse_qsl(parts.query, keep_blank_values=True) if kv[0] != "search_path"]
    query.append(("search_path", quote_ident(schema)))
    return urlunsplit(parts._replace(query=urlencode(query)))


async def create_schema(url: str, schema: str) -> None:
    """Create ``schema`` (if missing), so that a store opened by URL can use it."""
    import asyncpg  # the optional dependency: only when a test uses PostgreSQL

    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f"CREATE SCHEMA IF NOT EXISTS {quote_ident(schema)}")
    finally:
        await conn.close()


async def drop_schemas(url: str, *schemas: str) -> None:
    """Drop these schemas and everything in them (missing ones are fine)."""
    if not schemas:
        return
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        for schema in schemas:
            await conn.execute(f"DROP SCHEMA IF EXISTS {quote_ident(schema)} CASCADE")
    finally:
        await conn.close()


async def take_over(store: Any, actor_id: str, owner: str = "b", ttl: float = 30) -> int:
    """Take ``actor_id``'s lease for ``owner`` as if its holder had paused past its lease:
    expire the lease in SQL, then acquire it. The holder's renewal loop may renew the lease
    between the two statements (a renewal extends a lease nobody took yet), so expire and
    acquire again until the lease is taken; returns the new token."""
    for _ in range(200):
        await store._execute("UPDATE leases SET expires_at = now() WHERE actor_id = $1", actor_id)
        token = await store.acquire_lease(actor_id, owner, ttl)
        if token is not None:
            return int(token)
    raise AssertionError(f"the lease of {actor_id!r} was renewed 200 times in a row")
