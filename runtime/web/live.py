"""Live actor pages: server-sent events carrying what is new in an actor's timeline.

A live page says where its timeline ends (``after``: the last seq it shows). The server polls
the store every ``poll_interval`` seconds per open page with cheap reads (the actor's summary
row, its operator history and snapshot list); when they change, and every
``RECHECK_SECONDS`` anyway (damage found in entries already shown changes none of them), it
reads the entries after ``after`` (at most ``timeline_entries`` of them, see
:mod:`.window`) and sends them: never the whole history. Polling works the same on every
store, also for a runtime in another process writing the same SQLite file.

Every client holds at most one update: the next is made only once the last was sent, and a
client that leaves an update unread for ``live_send_timeout`` seconds is dropped (its stream
ends; a browser reconnects by itself and continues from what it shows).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import anyio
import attrs
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.types import Receive, Scope, Send

from .._journal.errors import ActorlogError, ActorNotFoundError
from ..store import Store
from .common import config_of, parse_int, signed_in, store_of
from .config import ServeConfig
from .render import fragment, items
from .window import window

#: seconds without news after which a comment line keeps proxies from closing the stream
KEEP_ALIVE = 15.0

#: seconds between re-derivations of the actor's status when its log did not change
RECHECK_SECONDS = 5.0


@attrs.define
class LiveClients:
    """What the console's live streams do (``app.state.live``): how many are open, how many
    were dropped for not reading, and the largest update sent."""

    open: int = 0
    opened: int = 0
    dropped: int = 0
    largest_update: int = 0


def _event(name: str, data: object) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


async def _fingerprint(store: Store, actor_id: str) -> tuple[int, int, int, int] | None:
    row = await store.get_actor(actor_id)
    if row is None:
        return None
    events = await store.read_events(actor_id)
    snapshots = await store.list_snapshots(actor_id)
    return (row.last_seq, row.first_seq, len(events), len(snapshots))


async def _update(
    store: Store, cfg: ServeConfig, actor_id: str, after: int | None, ctx: dict[str, Any]
) -> tuple[dict[str, Any], int]:
    """What is new after seq ``after`` (None: the newest window), and the new ``after``."""
    w = await window(store, actor_id, size=cfg.timeline_entries, since=after)
    reset = after is None or w.since != after  # older news left out: redraw from here
    head = fragment("actor_head.html", a=w.actor, rulings=w.rulings, cfg=cfg, **ctx)
    data = {
        "after": w.upto,
        "since": w.since,
        "reset": reset,
        "status": w.actor.status,
        "problem": w.actor.problem,
        "head": head,
        "items": [{"key": k, "html": h} for k, h in items(w, cfg)],
    }
    return data, w.upto


async def stream(request: Request) -> Response:
    """``GET /actor/live?id=ACTOR&after=SEQ``: an ``update`` event (JSON: ``head`` HTML,
    ``items``: the timeline items after ``SEQ`` as ``key`` and ``html``, ``reset``: redraw
    the timeline from them, ``status``, ``problem``, ``after``: the new last seq) each time
    the actor changes, starting with what is new since ``SEQ``; a ``problem`` event (and the
    end) if the actor or the store cannot be read."""
    actor_id = request.query_params.get("id")
    if not actor_id:
        return PlainTextResponse("missing id", status_code=400)
    raw = request.query_params.get("after")
    try:
        after = None if raw is None or raw == "" else parse_int(raw, "after")
    except ActorlogError as exc:
        return PlainTextResponse(str(exc), status_code=400)
    cfg = config_of(request)
    store = store_of(request)
    can_write = cfg.allow_writes and signed_in(request)
    ctx = {"can_write": can_write, "csrf": cfg.csrf_value() if can_write else ""}

    async def events() -> AsyncIterator[str]:
        nonlocal after
        yield "retry: 2000\n\n"
        seen: tuple[int, int, int, int] | None = None
        last_head: str | None = None
        quiet = since_check = 0.0
        while True:
            try:
                now = await _fingerprint(store, actor_id)
                if now is None:
                    raise ActorNotFoundError(f"actor {actor_id!r} is no longer in the store")
                if now != seen or since_check >= RECHECK_SECONDS:
                    data, new_after = await _update(store, cfg, actor_id, after, ctx)
                    since_check = 0.0
                    if seen is None and not data["reset"] and new_after == after:
                        # the page is as new as the log: nothing to send yet
                        send = False
                    else:
                        send = now != seen or data["head"] != last_head
                    seen, after, last_head = now, new_after, data["head"]
                    if send:
                        yield _event("update", data)
                        quiet = 0.0
            except ActorlogError as exc:
                yield _event("problem", {"message": f"{type(exc).__name__}: {exc}"})
                return
            except Exception as exc:  # the store's driver: a damaged or vanished file
                message = f"the store cannot be read: {type(exc).__name__}: {exc}"
                yield _event("problem", {"message": message})
                return
            if quiet >= KEEP_ALIVE:
                yield ": keep-alive\n\n"
                quiet = 0.0
            await anyio.sleep(cfg.poll_interval)
            quiet += cfg.poll_interval
            since_check += cfg.poll_interval

    clients: LiveClients = request.app.state.live
    return EventStream(events(), send_timeout=cfg.live_send_timeout, clients=clients)


class EventStream(Response):
    """Server-sent events, one at a time: the next is made once the last was sent; a client
    that leaves one unread for ``send_timeout`` seconds is dropped. Ends when the client
    disconnects."""

    media_type = "text/event-stream"

    def __init__(
        self, events: AsyncIterator[str], *, send_timeout: float, clients: LiveClients
    ) -> None:
        # as StreamingResponse does: no body, so no content-length
        self.status_code = 200
        self.background = None
        self.init_headers({"cache-control": "no-store", "x-accel-buffering": "no"})
        self.events = events
        self.send_timeout = send_timeout
        self.clients = clients

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        c = self.clients
        c.open += 1
        c.opened += 1
        try:
            await send({"type": "http.response.start", "status": 200, "headers": self.raw_headers})
            async with anyio.create_task_group() as tg:

                async def until_disconnect() -> None:
                    while (await receive())["type"] != "http.disconnect":
                        pass
                    tg.cancel_scope.cancel()

                tg.start_soon(until_disconnect)
                dropped = await self._send_all(send)
                tg.cancel_scope.cancel()
            if dropped:
                # the response stays unfinished: the server closes the connection
                c.dropped += 1
                return
            with anyio.move_on_after(self.send_timeout):
                await send({"type": "http.response.body", "body": b"", "more_body": False})
        finally:
            c.open -= 1
            await self.events.aclose()  # type: ignore[attr-defined]  # an async generator

    async def _send_all(self, send: Send) -> bool:
        """Send every event; True if the client stopped reading (the send timed out)."""
        async for text in self.events:
            body = text.encode()
            self.clients.largest_update = max(self.clients.largest_update, len(body))
            with anyio.move_on_after(self.send_timeout) as scope:
                await send({"type": "http.response.body", "body": body, "more_body": True})
            if scope.cancelled_caught:
                return True
        return False
