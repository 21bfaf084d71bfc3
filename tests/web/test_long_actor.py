"""A 100,000-entry actor in the console (issue 24 item 18): its page shows a bounded window
of the timeline with older steps on request, live streams send only what is new in bounded
updates, clients that do not read are dropped, and the console keeps answering meanwhile.

The console runs under a real uvicorn (in a thread of this process, so the test can read
its count of live clients); the non-reading clients are real sockets that never read."""

from __future__ import annotations

import contextlib
import html
import json
import re
import socket
import threading
from collections.abc import Iterator
from pathlib import Path

import anyio
import httpx
import pytest
import uvicorn
from actorlog._journal.codec import make_row
from actorlog.stores import SqliteStore
from actorlog.web import ServeConfig, create_app
from actorlog.web.live import LiveClients
from starlette.applications import Starlette

from tests.cli._support import copy_store
from tests.web._big import build_long_actor
from tests.web._client import console
from tests.web._serve import free_port

ACTOR = "long-1"
WINDOW = 400  # entries per page (4 per step: 100 steps)


@pytest.fixture(scope="session")
def long_origin(tmp_path_factory: pytest.TempPathFactory) -> Path:
    db = tmp_path_factory.mktemp("long") / "long.db"
    assert build_long_actor(db, ACTOR, 100_000) == 100_000
    return db


@pytest.fixture
def long_db(long_origin: Path, tmp_path: Path) -> Path:
    return copy_store(long_origin, tmp_path)


def _steps(page: str) -> list[int]:
    return [
        int(s)
        for s in re.findall(
            r'<section data-key="step-\d+" class="item step[^"]*" id="step-(\d+)"', page
        )
    ]


def test_the_page_of_a_long_actor_is_a_bounded_window_with_older_steps_on_request(
    long_db: Path,
) -> None:
    with console(f"sqlite:///{long_db}", timeline_entries=WINDOW) as (client, _):
        page = client.get("/actor", params={"id": ACTOR})
        assert page.status_code == 200
        assert len(page.content) < 600_000  # the whole history is about 35 MB
        newest = _steps(page.text)
        assert newest[-1] == 99_997 and len(newest) == WINDOW // 4
        assert "after=100000" in page.text  # the live stream continues from the end
        older_link = re.search(r'id="older" href="([^"]*)"', page.text)
        assert older_link is not None
        older = client.get(html.unescape(older_link.group(1)))
        assert older.status_code == 200 and len(older.content) < 600_000
        before = _steps(older.text)
        assert before and before[-1] < newest[0] and len(before) == WINDOW // 4
        assert 'id="live"' not in older.text  # an older part is not live
        assert re.search(r'id="newer" href="/actor\?id=long-1"', older.text)
        first = client.get("/actor", params={"id": ACTOR, "before": 400})
        assert _steps(first.text)[0] == 1 and 'id="older"' not in first.text
        assert 'id="from-start"' in first.text


@contextlib.contextmanager
def _uvicorn(app: Starlette) -> Iterator[str]:
    port = free_port()
    server = uvicorn.Server(
        uvicorn.Config(
            app, host="127.0.0.1", port=port, log_level="critical", timeout_graceful_shutdown=1
        )
    )
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    for _ in range(600):
        if server.started:
            break
        thread.join(0.05)
    assert server.started, "uvicorn did not start"
    try:
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(30)


def _silent_client(base: str) -> socket.socket:
    """A live page that never reads: a small receive buffer, the request sent, no recv."""
    host, port = base.removeprefix("http://").split(":")
    s = socket.socket()
    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 1024)
    s.connect((host, int(port)))
    s.sendall(f"GET /actor/live?id={ACTOR}&after=0 HTTP/1.1\r\nHost: {host}\r\n\r\n".encode())
    return s


def _grow(db: Path, steps: int) -> None:
    """Append ``steps`` more copies of the actor's last step (another writer's news)."""

    async def grow() -> None:
        store = SqliteStore(db)
        await store.open()
        try:
            row = await store.get_actor(ACTOR)
            assert row is not None
            start = row.last_message_seq
            step = await store.read(ACTOR, after_seq=start - 1, upto_seq=row.last_seq, limit=100)
            width = len(step)
            rows = []
            for k in range(steps):
                shift = row.last_seq + 1 - start + k * width
                rows += [
                    make_row(
                        ACTOR,
                        r.seq + shift,
                        r.kind,
                        r.type_tag,
                        r.ref + shift if r.ref else 0,
                        None,
                        r.payload,
                    )
                    for r in step
                ]
            await store.append(ACTOR, row.last_seq, rows)
        finally:
            await store.close()

    anyio.run(grow, backend="asyncio")


def _updates(lines: Iterator[str]) -> Iterator[tuple[int, dict[str, object]]]:
    event = None
    for line in lines:
        if line.startswith("event: "):
            event = line[7:]
        elif line.startswith("data: ") and event == "update":
            yield len(line), json.loads(line[6:])


def _step_keys(update: dict[str, object]) -> list[str]:
    items = update["items"]
    assert isinstance(items, list)
    return [i["key"] for i in items if i["key"].startswith("step-")]


def test_live_clients_get_only_news_in_bounded_updates_and_silent_ones_are_dropped(
    long_db: Path,
) -> None:
    cfg = ServeConfig(
        store_url=f"sqlite:///{long_db}",
        source=str(long_db),
        poll_interval=0.05,
        live_send_timeout=0.5,
        timeline_entries=WINDOW,
    )
    app = create_app(cfg)
    live: LiveClients = app.state.live
    with _uvicorn(app) as base:
        silent = [_silent_client(base) for _ in range(5)]
        try:
            with httpx.stream(
                "GET", base + "/actor/live", params={"id": ACTOR, "after": "100000"}, timeout=60
            ) as reader:
                updates = _updates(reader.iter_lines())
                _grow(long_db, 3)  # the page is as new as the log: the first update is news
                size, news = next(updates)
                assert _step_keys(news) == ["step-100001", "step-100005", "step-100009"]
                assert news["reset"] is False and news["after"] == 100_012
                # the silent clients: each holds one update (the newest window), never more
                rounds = 0
                while live.dropped < 5:
                    rounds += 1
                    assert rounds <= 400, f"silent clients not dropped: {live}"
                    _grow(long_db, 150)  # more news than a window: updates stay bounded
                    overview = httpx.get(base + "/", timeout=60)  # the console answers
                    assert overview.status_code == 200 and 'data-actor="long-1"' in overview.text
                    size, news = next(updates)
                    assert size < 800_000
                    assert len(news["items"]) <= WINDOW // 4 + 1  # type: ignore[arg-type]
                assert live.open == 1  # the reader only
                page = httpx.get(base + "/actor", params={"id": ACTOR}, timeout=60)
                assert page.status_code == 200 and len(page.content) < 600_000
        finally:
            for s in silent:
                s.close()
    assert live.opened == 6 and live.dropped == 5
    assert live.largest_update < 800_000


class _GrowingStore:
    """A real SqliteStore that gets ``steps`` more steps from another writer right after its
    first ``get_actor`` answers: news that arrives while a window is being read."""

    def __init__(self, store: SqliteStore, db: Path, steps: int) -> None:
        self._store = store
        self._db = db
        self._steps = steps
        self.grown = False

    def __getattr__(self, name: str) -> object:
        return getattr(self._store, name)

    async def get_actor(self, actor_id: str) -> object:
        row = await self._store.get_actor(actor_id)
        if not self.grown:
            self.grown = True
            await anyio.to_thread.run_sync(_grow, self._db, self._steps)
        return row


def test_a_live_window_stays_bounded_when_news_arrives_while_it_is_read(long_db: Path) -> None:
    """The live stream's window is at most ``size`` entries even when another writer appends
    while it is read (CI under load saw 251 steps in one update of a 100-step window); the
    news beyond it comes in the next update, none is skipped."""
    from actorlog.web.window import window

    async def main() -> None:
        store = SqliteStore(long_db, read_only=True)  # as the console reads
        await store.open()
        try:
            growing = _GrowingStore(store, long_db, 150)
            w = await window(growing, ACTOR, size=WINDOW, since=0)  # type: ignore[arg-type]
            assert growing.grown
            assert len(w.steps) <= WINDOW // 4 + 1
            assert w.upto == 100_000 and w.newest  # the log's end when the window was cut
            nxt = await window(store, ACTOR, size=WINDOW * 4, since=w.upto)
            keys = [s.message_seq for s in nxt.steps]
            assert keys[0] == 100_001 and len(keys) == 150 and nxt.upto == 100_600
        finally:
            await store.close()

    anyio.run(main, backend="asyncio")
