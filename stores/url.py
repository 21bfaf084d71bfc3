"""Open a store from a URL (used by the CLI and by ``ActorSystem.from_url``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorlog.store import StoreURLError

if TYPE_CHECKING:
    from actorlog.store import Store

__all__ = ["open_store"]

_NO_ASYNCPG = (
    "PostgreSQL needs the asyncpg driver, which is not installed here: "
    "pip install 'actorlog[postgres]'"
)


_FLAGS = {"1": True, "true": True, "yes": True, "0": False, "false": False, "no": False}


def open_store(url: str, *, read_only: bool = False) -> Store:
    """Build (but do not open) the store a URL names.

    ``sqlite:///agents.db`` is relative to the working directory, ``sqlite:////var/agents.db``
    absolute. ``?durability=survive-process-crash`` selects SQLite's faster mode,
    ``?commit_on_loop=1`` commits lone appends on the event loop's thread (docs/tuning.md).

    Raises:
        StoreURLError: the URL does not parse or names an unknown scheme, or its driver is
            not installed (a ``postgresql://`` URL without asyncpg).
    """
    if not isinstance(url, str) or not url:
        raise StoreURLError(str(url), "the URL is empty")
    try:
        from urllib.parse import parse_qs, urlsplit  # only when a URL is opened

        parts = urlsplit(url)
    except ValueError as exc:
        raise StoreURLError(url, str(exc)) from exc
    scheme = parts.scheme.lower()
    if scheme == "memory":
        from .memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        if parts.netloc:
            raise StoreURLError(
                url,
                f"unexpected host {parts.netloc!r}: a SQLite URL has three slashes "
                f"(did you mean sqlite:///{parts.netloc}{parts.path}?)",
            )
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise StoreURLError(url, "no database path")
        query = parse_qs(parts.query)
        durability = query.get("durability", ["fsync"])[0]
        if durability not in ("fsync", "survive-process-crash"):
            raise StoreURLError(url, f"unknown durability {durability!r}")
        on_loop = query.get("commit_on_loop", ["0"])[0].lower()
        if on_loop not in _FLAGS:
            raise StoreURLError(url, f"commit_on_loop must be 1 or 0, not {on_loop!r}")
        from .sqlite import SqliteStore

        return SqliteStore(
            path,
            durability=durability,  # type: ignore[arg-type]  # checked above
            read_only=read_only,
            commit_on_loop=_FLAGS[on_loop],
        )
    if scheme in ("postgresql", "postgres"):
        if not parts.hostname and not parts.path.strip("/"):
            raise StoreURLError(url, "no host or database")
        try:
            from .postgres import PostgresStore
        except ModuleNotFoundError as exc:
            if exc.name != "asyncpg":
                raise
            raise StoreURLError(url, _NO_ASYNCPG, expected=False) from None
        return PostgresStore(url, read_only=read_only)
    if not scheme:
        raise StoreURLError(url, f"no scheme (for a SQLite file: sqlite:///{url})")
    raise StoreURLError(url, f"unknown scheme {parts.scheme!r}")
