"""The console's application: :func:`create_app` and its read-only pages.

One read-only store is opened for the application's lifetime (a SQLite reader is welcome
while a runtime writes the file). Every read goes through :mod:`actorlog.ops`, the operator
API the command line uses; the writes are in :mod:`.writes`, the live updates in :mod:`.live`.
"""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path

import anyio
from starlette.applications import Starlette
from starlette.middleware import Middleware
from starlette.middleware.trustedhost import TrustedHostMiddleware
from starlette.requests import Request
from starlette.responses import PlainTextResponse, Response
from starlette.routing import Route
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from .. import ops
from .._journal.errors import (
    ActorlogError,
    ActorNotFoundError,
    AlreadyDecidedError,
    ConfigurationError,
    SequenceConflictError,
    StoreError,
    StoreLockedError,
    WALError,
)
from .._views.html import CSS
from ..ops.listing import SORTS, STATUSES
from ..ops.rulings import rulings_if_any
from ..store import Store
from . import lifecycle, live, writes
from .common import actor_id_param, config_of, int_param, problem, show, store_of
from .config import ServeConfig
from .render import step_links, timeline
from .window import window

Handler = Callable[[Request], Awaitable[Response]]

#: every response: nothing from another origin, no inline script (an escaping slip cannot run)
SECURITY_HEADERS = {
    "content-security-policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
    ),
    "x-content-type-options": "nosniff",
    "x-frame-options": "DENY",
    "referrer-policy": "same-origin",  # no-referrer would make the browser send Origin: null
    "cache-control": "no-store",
}


class _SecurityHeaders:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return

        async def with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                have = {k.lower() for k, _ in message.get("headers", [])}
                extra = [
                    (k.encode(), v.encode())
                    for k, v in SECURITY_HEADERS.items()
                    if k.encode() not in have
                ]
                message["headers"] = [*message.get("headers", []), *extra]
            await send(message)

        await self.app(scope, receive, with_headers)


async def overview(request: Request) -> Response:
    q = request.query_params
    cfg = config_of(request)
    store = store_of(request)
    status = q.get("status") or None
    actor_type = q.get("class") or None
    search = q.get("q") or None
    sort = q.get("sort") or "id"
    descending = q.get("desc") == "1"
    offset = int_param(request, "offset", 0)
    p = await ops.list_actors_page(
        store,
        status=status,
        actor_type=actor_type,
        search=search,
        sort=sort,
        descending=descending,
        offset=offset,
        limit=cfg.page_size,
    )
    owners = {}
    if store.capabilities.leases:
        wanted = {a.actor_id for a in p.actors}
        owners = {le.actor_id: le for le in await ops.leases(store) if le.actor_id in wanted}
    # cancelled writes needing a ruling (from cheap reads; the log only of actors with one)
    rulings = {a.actor_id: await rulings_if_any(store, a.actor_id) for a in p.actors}
    params = {
        k: v
        for k, v in {
            "status": status,
            "class": actor_type,
            "q": search,
            "sort": sort,
            "desc": "1" if descending else None,
        }.items()
        if v
    }
    return show(
        request,
        "overview.html",
        p=p,
        owners=owners,
        rulings={k: v for k, v in rulings.items() if v},
        leases=store.capabilities.leases,
        params=params,
        statuses=STATUSES,
        sorts=list(SORTS),
        filters={"status": status, "class": actor_type, "q": search, "sort": sort},
        descending=descending,
        page_size=cfg.page_size,
    )


async def actor_page(request: Request) -> Response:
    """One page of the actor's timeline: the newest steps, or those before ``before`` (a
    seq; the "older steps" link), never the whole log."""
    actor_id = actor_id_param(request)
    cfg = config_of(request)
    raw = request.query_params.get("before")
    before = None if raw is None or raw == "" else int_param(request, "before")
    w = await window(store_of(request), actor_id, size=cfg.timeline_entries, before=before)
    return show(
        request,
        "actor.html",
        w=w,
        a=w.actor,
        rulings=w.rulings,
        timeline=timeline(w, cfg),
        steps=step_links(w, cfg),
        notice=request.query_params.get("notice"),
    )


async def queue(request: Request) -> Response:
    store = store_of(request)
    waiting = await ops.waiting_intents(store)
    rulings = await ops.waiting_rulings(store)
    return show(request, "queue.html", waiting=waiting, rulings=rulings)


async def verify_page(request: Request) -> Response:
    actor_id = request.query_params.get("id") or None
    report = None
    if request.query_params.get("run") == "1" or actor_id:
        report = await ops.verify(store_of(request), actor_id)
    return show(request, "verify.html", report=report, actor_id=actor_id)


async def entry_page(request: Request) -> Response:
    actor_id = actor_id_param(request)
    v = await ops.show(store_of(request), actor_id, int_param(request, "seq"))
    return show(request, "entry.html", v=v)


_STATIC = Path(__file__).parent / "static"


async def stylesheet(request: Request) -> Response:
    """The timeline's style (the HTML export's) and the console's."""
    css = CSS + (_STATIC / "console.css").read_text("utf-8")
    return PlainTextResponse(css, media_type="text/css")


async def script(request: Request) -> Response:
    js = (_STATIC / "console.js").read_text("utf-8")
    return PlainTextResponse(js, media_type="text/javascript")


def _guarded(fn: Handler) -> Handler:
    """Errors as pages: what the operator asked for could not be done, and why."""

    async def run(request: Request) -> Response:
        try:
            return await fn(request)
        except ActorNotFoundError as exc:
            return problem(request, exc, 404)
        except (ops.ForkRefusedError, AlreadyDecidedError) as exc:
            return problem(request, exc, 409)  # the log is not as the request expected
        except ConfigurationError as exc:
            return problem(request, exc, 400)
        except (StoreLockedError, SequenceConflictError) as exc:
            return problem(request, exc, 409)  # someone else writes: retry later
        except (StoreError, WALError) as exc:
            return problem(request, exc, 503)  # the store is missing, damaged or down
        except ActorlogError as exc:
            return problem(request, exc, 409)

    return run


def create_app(cfg: ServeConfig, *, store: Store | None = None) -> Starlette:
    """The console for ``cfg.store_url``. It opens the store read-only when it starts (or
    uses ``store``, already open, left open) and closes it when it stops."""

    @contextlib.asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        app.state.write_lock = anyio.Lock()
        if store is not None:
            app.state.store = store
            yield
            return
        async with ops.opened(cfg.store_url) as opened:
            app.state.store = opened
            yield

    routes = [
        Route("/", _guarded(overview)),
        Route("/actor", _guarded(actor_page)),
        Route("/actor/live", live.stream),
        Route("/queue", _guarded(queue)),
        Route("/verify", _guarded(verify_page)),
        Route("/entry", _guarded(entry_page)),
        Route("/console.css", stylesheet),
        Route("/login", writes.login, methods=["GET", "POST"]),
        Route("/logout", writes.logout, methods=["POST"]),
        Route("/resolve", _guarded(writes.resolve), methods=["POST"]),
        Route("/fork", _guarded(writes.fork_page), methods=["GET"]),
        Route("/fork", _guarded(writes.fork), methods=["POST"]),
        Route("/cancel", _guarded(lifecycle.cancel), methods=["POST"]),
        Route("/terminate", _guarded(lifecycle.terminate), methods=["POST"]),
        Route("/delete", _guarded(lifecycle.delete_page), methods=["GET"]),
        Route("/delete", _guarded(lifecycle.delete), methods=["POST"]),
        Route("/deleted", _guarded(lifecycle.deleted)),
        Route("/console.js", script),
    ]
    middleware = [Middleware(_SecurityHeaders)]
    if cfg.allowed_hosts is not None:
        middleware.append(Middleware(TrustedHostMiddleware, allowed_hosts=cfg.allowed_hosts))
    app = Starlette(routes=routes, middleware=middleware, lifespan=lifespan)
    app.state.config = cfg
    app.state.live = live.LiveClients()
    return app
