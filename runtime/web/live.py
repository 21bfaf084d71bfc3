"""Live actor pages: server-sent events carrying the redrawn timeline whenever the log grows.

The server polls the store (three cheap reads: the actor's summary row, its operator history
and its snapshot list) every ``poll_interval`` seconds per open page, and sends the page's
new head and timeline when any of them changed. Polling works the same on every store, also
for a runtime in another process writing the same SQLite file.
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator

import anyio
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response, StreamingResponse

from .. import ops
from .._errors import ActorlogError
from ..store import Store
from .common import config_of, signed_in, store_of
from .render import fragment, timeline

#: seconds without news after which a comment line keeps proxies from closing the stream
KEEP_ALIVE = 15.0


def fingerprint(h: ops.History) -> str:
    """What changes when anything the actor page shows changes."""
    return f"{h.actor.last_seq}:{len(h.events)}:{len(h.snapshots)}"


async def _fingerprint(store: Store, actor_id: str) -> str | None:
    row = await store.get_actor(actor_id)
    if row is None:
        return None
    events = await store.read_events(actor_id)
    snapshots = await store.list_snapshots(actor_id)
    return f"{row.last_seq}:{len(events)}:{len(snapshots)}"


def _event(name: str, data: object) -> str:
    return f"event: {name}\ndata: {json.dumps(data)}\n\n"


async def stream(request: Request) -> Response:
    """``GET /actor/live?id=ACTOR&seen=FINGERPRINT``: an ``update`` event (JSON: ``head``,
    ``timeline`` HTML, ``status``, ``fingerprint``) each time the actor's log changes from
    ``seen``; a ``problem`` event (and the end) if it cannot be read."""
    actor_id = request.query_params.get("id")
    if not actor_id:
        return PlainTextResponse("missing id", status_code=400)
    cfg = config_of(request)
    store = store_of(request)
    can_write = cfg.allow_writes and signed_in(request)
    csrf = cfg.csrf_value() if can_write else ""
    seen = request.query_params.get("seen")

    async def events() -> AsyncIterator[str]:
        nonlocal seen
        quiet = 0.0
        yield "retry: 2000\n\n"
        while True:
            try:
                now = await _fingerprint(store, actor_id)
                if now is not None and now != seen:
                    h = await ops.history(store, actor_id)
                    seen = fingerprint(h)
                    head = fragment(
                        "actor_head.html", a=h.actor, cfg=cfg, can_write=can_write, csrf=csrf
                    )
                    yield _event(
                        "update",
                        {
                            "fingerprint": seen,
                            "status": h.actor.status,
                            "head": head,
                            "timeline": str(timeline(h, cfg)),
                        },
                    )
                    quiet = 0.0
            except ActorlogError as exc:
                yield _event("problem", {"message": str(exc)})
                return
            if quiet >= KEEP_ALIVE:
                yield ": keep-alive\n\n"
                quiet = 0.0
            await anyio.sleep(cfg.poll_interval)
            quiet += cfg.poll_interval

    return StreamingResponse(
        events(),
        media_type="text/event-stream",
        headers={"cache-control": "no-store", "x-accel-buffering": "no"},
    )
