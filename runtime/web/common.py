"""What every page handler needs: the store, the configuration, the signed-in check, and
pages and error pages drawn with them."""

from __future__ import annotations

import contextlib
from collections.abc import AsyncIterator
from typing import Any

import anyio
from starlette.requests import Request
from starlette.responses import Response

from .. import ops
from .._journal.checks import parse_json as parse_json
from .._journal.errors import ConfigurationError
from ..store import Store
from .config import SESSION_COOKIE, ServeConfig
from .render import page


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


@contextlib.asynccontextmanager
async def writable(request: Request) -> AsyncIterator[Store]:
    """The store opened for writing, for one write. The console's writes take turns (one
    lock per console): two operators at once never meet the console's own SQLite writer
    lock, and the second sees what the first wrote (``AlreadyDecidedError``, say)."""
    lock: anyio.Lock = request.app.state.write_lock
    async with lock, ops.opened(config_of(request).store_url, read_only=False) as store:
        yield store


def config_of(request: Request) -> ServeConfig:
    cfg: ServeConfig = request.app.state.config
    return cfg


def signed_in(request: Request) -> bool:
    return config_of(request).signed_in(request.cookies.get(SESSION_COOKIE))


def show(request: Request, name: str, *, status_code: int = 200, **ctx: Any) -> Response:
    return page(
        name,
        config_of(request),
        status_code=status_code,
        signed_in=signed_in(request),
        path=request.url.path,
        **ctx,
    )


def problem(request: Request, exc: BaseException, status_code: int) -> Response:
    """An error page naming the error's type (also in the ``x-actorlog-error`` header, for
    scripts) and what it says."""
    name = type(exc).__name__
    response = show(request, "error.html", status_code=status_code, message=f"{name}: {exc}")
    response.headers["x-actorlog-error"] = name
    return response


def int_param(request: Request, name: str, default: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise ConfigurationError(f"missing {name}")
        return default
    return parse_int(raw, name)


#: the numbers a seq, offset or count can be (a store's 64-bit integer)
_INT_MIN, _INT_MAX = -(2**63), 2**63 - 1


def parse_int(raw: str, name: str) -> int:
    """A form or query value as a whole number a store can hold, else ConfigurationError."""
    try:
        value = int(raw.strip())
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, not {short(raw)}") from None
    if not _INT_MIN <= value <= _INT_MAX:
        raise ConfigurationError(f"{name} is out of range: {short(raw)}")
    return value


def short(raw: str, limit: int = 40) -> str:
    """A value an operator typed, quoted and shortened for an error message."""
    return repr(raw if len(raw) <= limit else raw[:limit] + "...")


def actor_id_param(request: Request) -> str:
    actor_id = request.query_params.get("id")
    if not actor_id:
        raise ConfigurationError("missing id (the actor's id)")
    return actor_id
