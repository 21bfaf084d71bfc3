"""The console over a PostgreSQL store: the overview with owners and leases, an actor page,
the in-doubt queue and a resolve next to the store's runtimes. Needs a server
(``ACTORLOG_TEST_POSTGRES_URL``; skips without one, except under CI, where it fails)."""

from __future__ import annotations

import re
from collections.abc import Iterator

import anyio
import pytest
from actorlog import ActorSystem
from actorlog.stores import PostgresStore

from tests import _pg
from tests.cli._agents import Auditor, Biller, Job, crash_mid_call, ran
from tests.web._client import TOKEN, console, csrf_of, events, sign_in, status


@pytest.fixture
def pg_store_url(pg_url: str) -> Iterator[str]:
    """A fresh schema with ``bill-1`` (``charge_card("hang")`` in doubt, intent seq 6) and
    ``bill-2`` (idle, owned by a runtime that is still alive while the test reads)."""
    schema = _pg.new_schema("web")

    async def make() -> str:
        ran.clear()
        await crash_mid_call(PostgresStore(pg_url, schema=schema))
        return PostgresStore(pg_url, schema=schema).url

    url = anyio.run(make, backend="asyncio")
    yield url
    anyio.run(_pg.drop_schemas, pg_url, schema, backend="asyncio")


def test_console_on_postgres_shows_owners_and_resolves(pg_url: str, pg_store_url: str) -> None:
    url = pg_store_url

    async def with_live_owner() -> tuple[str, str, str]:
        store = PostgresStore(url)
        async with ActorSystem(store, actors=[Biller, Auditor], owner="node-a") as system:
            ref = await system.spawn(Biller, "bill-2")
            assert await ref.ask(Job("ok"), message_id="b2") == "charged ok"

            def read() -> tuple[str, str, str]:
                with console(url, allow_writes=True, token=TOKEN) as (client, _):
                    overview = client.get("/").text
                    queue = client.get("/queue").text
                    actor = client.get("/actor", params={"id": "bill-1"}).text
                    return overview, queue, actor

            return await anyio.to_thread.run_sync(read)

    overview, queue, actor = anyio.run(with_live_owner, backend="asyncio")
    assert "<th>owner</th>" in overview and "node-a" in overview
    assert re.search(r'data-actor="bill-1" data-status="in_doubt"', overview)
    assert re.findall(r'data-actor="([^"]*)" data-intent-seq="(\d+)"', queue) == [("bill-1", "6")]
    assert "charge_card" in actor

    with console(url, allow_writes=True, token=TOKEN) as (client, _):
        sign_in(client)
        csrf = csrf_of(client.get("/actor", params={"id": "bill-1"}).text)
        r = client.post(
            "/resolve",
            data={"id": "bill-1", "intent_seq": "6", "action": "fail", "csrf": csrf},
            follow_redirects=False,
        )
        assert r.status_code == 303, r.text
        filtered = client.get("/", params={"status": "in_doubt"}).text
        assert 'data-actor="' not in filtered
    assert status(url, "bill-1").in_doubt == []
    assert [e.detail["action"] for e in events(url, "bill-1") if e.kind == "resolved"] == ["fail"]
