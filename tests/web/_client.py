"""The console under Starlette's TestClient, and reads of the store to check what it did."""

from __future__ import annotations

import contextlib
import re
from collections.abc import Iterator
from typing import Any

import anyio
from actorlog import ops
from actorlog.web import ServeConfig, create_app
from starlette.testclient import TestClient

TOKEN = "s3cret-token"
BASE = "http://127.0.0.1"


@contextlib.contextmanager
def console(url: str, **options: Any) -> Iterator[tuple[TestClient, ServeConfig]]:
    """The console over ``url`` (the store opened and closed by the app, as served)."""
    cfg = ServeConfig(store_url=url, source=url, **options)
    with TestClient(create_app(cfg), base_url=BASE) as client:
        yield client, cfg


def sign_in(client: TestClient) -> None:
    r = client.get("/login", params={"token": TOKEN}, follow_redirects=False)
    assert r.status_code == 303, r.text
    assert "actorlog_session" in client.cookies


def csrf_of(html: str) -> str:
    m = re.search(r'name="csrf" value="([0-9a-f]+)"', html)
    assert m is not None, "no write form on the page"
    return m.group(1)


def status(url: str, actor_id: str) -> ops.ActorStatus:
    async def read() -> ops.ActorStatus:
        async with ops.opened(url) as store:
            return await ops.actor_status(store, actor_id)

    return anyio.run(read, backend="asyncio")


def events(url: str, actor_id: str) -> list[ops.Event]:
    async def read() -> list[ops.Event]:
        async with ops.opened(url) as store:
            return (await ops.history(store, actor_id)).events

    return anyio.run(read, backend="asyncio")
