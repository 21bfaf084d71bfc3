"""What every page handler needs: the store, the configuration, the signed-in check, and
pages and error pages drawn with them."""

from __future__ import annotations

from typing import Any

from starlette.requests import Request
from starlette.responses import Response

from .._errors import ConfigurationError
from ..store import Store
from .config import SESSION_COOKIE, ServeConfig
from .render import page


def store_of(request: Request) -> Store:
    store: Store = request.app.state.store
    return store


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
    return show(request, "error.html", status_code=status_code, message=str(exc))


def int_param(request: Request, name: str, default: int | None = None) -> int:
    raw = request.query_params.get(name)
    if raw is None or raw == "":
        if default is None:
            raise ConfigurationError(f"missing {name}")
        return default
    try:
        return int(raw)
    except ValueError:
        raise ConfigurationError(f"{name} must be a number, not {raw!r}") from None


def actor_id_param(request: Request) -> str:
    actor_id = request.query_params.get("id")
    if not actor_id:
        raise ConfigurationError("missing id (the actor's id)")
    return actor_id
