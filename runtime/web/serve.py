"""``actorlog serve``: the console under uvicorn, with its token and warnings printed."""

from __future__ import annotations

import sys
from typing import TextIO
from urllib.parse import quote

import uvicorn

from .app import create_app
from .config import TOKEN_ENV, ServeConfig, is_loopback, resolve_token

#: the names a browser may use for a console bound to loopback (DNS rebinding guard)
LOOPBACK_HOSTS = ("127.0.0.1", "localhost", "[::1]", "::1")


def _loopback_names(host: str) -> tuple[str, ...]:
    """The Host names a console bound to loopback ``host`` accepts: the usual loopback
    names and the address it serves (``--host 127.0.0.2`` prints and serves that one)."""
    bare = host.strip("[]")
    extra = [h for h in (host, bare, f"[{bare}]" if ":" in bare else bare) if h]
    return tuple(dict.fromkeys([*LOOPBACK_HOSTS, *extra]))


def _base(host: str, port: int) -> str:
    shown = f"[{host}]" if ":" in host and not host.startswith("[") else host
    return f"http://{shown}:{port}"


def build(
    store_url: str,
    source: str,
    *,
    host: str,
    port: int,
    allow_writes: bool,
    token: str | None,
    trace_url: str | None,
    err: TextIO = sys.stderr,
) -> ServeConfig:
    """The configuration for ``actorlog serve``; prints how to sign in and any warning."""
    token, generated = resolve_token(token, allow_writes)
    loopback = is_loopback(host)
    cfg = ServeConfig(
        store_url=store_url,
        source=source,
        allow_writes=allow_writes,
        token=token,
        trace_url=trace_url,
        allowed_hosts=_loopback_names(host) if loopback else None,
    )
    base = _base(host, port)
    print(f"actorlog console for {source} at {base}/", file=err)
    if allow_writes:
        where = "generated for this run" if generated else "as given"
        print(f"writes allowed with the token ({where}); sign in at:", file=err)
        print(f"  {base}/login?token={quote(token or '')}", file=err)
        if generated:
            print(f"  (set {TOKEN_ENV} to choose the token)", file=err)
    else:
        print(
            "read-only (start with --allow-writes to resolve, fork, cancel, terminate and "
            "delete from the browser)",
            file=err,
        )
    if not loopback:
        if token is None:
            print(
                f"warning: bound to {host} without a token: anyone who can reach port {port} "
                "can read every actor's log (messages, tool arguments, results)",
                file=err,
            )
        else:
            print(
                f"warning: bound to {host}: anyone who can reach port {port} can read every "
                "actor's log; writes need the token, which travels in clear over plain HTTP "
                "(put TLS in front)",
                file=err,
            )
    return cfg


async def serve(cfg: ServeConfig, *, host: str, port: int) -> None:
    """Run until interrupted (Ctrl-C)."""
    server = uvicorn.Server(
        uvicorn.Config(
            create_app(cfg),
            host=host,
            port=port,
            log_level="warning",
            # open live pages would otherwise hold a shutdown until their streams end
            timeout_graceful_shutdown=2,
        )
    )
    await server.serve()
