"""Open a store from a URL (used by the CLI and by ``ActorSystem.from_url``)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Literal

from actorlog.store import StoreURLError, shown

if TYPE_CHECKING:
    from actorlog.store import Store

__all__ = ["open_store"]

_NO_ASYNCPG = (
    "PostgreSQL needs the asyncpg driver, which is not installed here: "
    "pip install 'actorlog[postgres]'"
)


#: every parameter of a sqlite:// URL and the values it takes (docs/stores.md)
_SQLITE_PARAMS: dict[str, tuple[str, ...]] = {
    "durability": ("fsync", "survive-process-crash"),
    "commit_on_loop": ("auto", "1", "0"),
}


#: the values of ``commit_on_loop=`` in a sqlite:// URL
_ON_LOOP: dict[str, bool | Literal["auto"]] = {"auto": "auto", "1": True, "0": False}


def _params(url: str, query: str) -> dict[str, str]:
    """The query's parameters; a repeated one is refused (which would count?)."""
    from urllib.parse import parse_qsl

    pairs = parse_qsl(query, keep_blank_values=True)
    found: dict[str, str] = {}
    repeated = []
    for name, value in pairs:
        if name in found and name not in repeated:
            repeated.append(name)
        found[name] = value
    if repeated:
        raise StoreURLError(
            url, f"parameter given more than once: {', '.join(map(repr, repeated))} (give it once)"
        )
    return found


def _sqlite_params(url: str, query: str) -> dict[str, str]:
    found = _params(url, query)
    takes = " and ".join(f"{k}={'|'.join(v)}" for k, v in _SQLITE_PARAMS.items())
    unknown = [k for k in found if k not in _SQLITE_PARAMS]
    if unknown:
        raise StoreURLError(
            url, f"unknown parameter {', '.join(map(repr, unknown))}: a sqlite:// URL takes {takes}"
        )
    durability = found.get("durability", "fsync")
    if durability not in _SQLITE_PARAMS["durability"]:
        raise StoreURLError(
            url, f"unknown durability {shown(durability)}: durability=fsync|survive-process-crash"
        )
    on_loop = found.get("commit_on_loop", "auto")
    if on_loop not in _SQLITE_PARAMS["commit_on_loop"]:
        raise StoreURLError(url, f"commit_on_loop must be auto, 1 or 0, not {shown(on_loop)}")
    return {"durability": durability, "commit_on_loop": on_loop}


def open_store(url: str, *, read_only: bool = False) -> Store:
    """Build (but do not open) the store a URL names.

    ``sqlite:///agents.db`` is relative to the working directory, ``sqlite:////var/agents.db``
    absolute. ``?durability=survive-process-crash`` selects SQLite's faster mode,
    ``?commit_on_loop=1`` commits lone appends on the event loop's thread, ``0`` on the
    writer's thread, ``auto`` on the loop's while they are fast (docs/tuning.md); no other
    parameter, and no other value (``fsync``, ``auto``: the defaults). A
    ``postgresql://`` URL takes ``?schema=NAME`` and asyncpg's parameters (``sslmode``, ...);
    any other is a server setting (``search_path``, ...), checked by the server.

    Raises:
        StoreURLError: the URL does not parse, names an unknown scheme, has an unknown,
            repeated or misvalued parameter, or its driver is not installed (a
            ``postgresql://`` URL without asyncpg).
    """
    if not isinstance(url, str):
        raise StoreURLError(shown(url), f"a store URL is a str, not {type(url).__qualname__}")
    if not url:
        raise StoreURLError(url, "the URL is empty")
    try:
        from urllib.parse import urlsplit  # only when a URL is opened

        parts = urlsplit(url)
    except ValueError as exc:
        raise StoreURLError(url, str(exc)) from exc
    scheme = parts.scheme.lower()
    if scheme == "memory":
        if parts.query:
            raise StoreURLError(
                url, f"a memory:// URL takes no parameters, not {shown(parts.query)}"
            )
        from .memory import MemoryStore

        return MemoryStore()
    if scheme == "sqlite":
        if parts.netloc:
            raise StoreURLError(
                url,
                f"unexpected host {shown(parts.netloc)}: a SQLite URL has three slashes "
                f"(did you mean sqlite:///{parts.netloc}{parts.path}?)",
            )
        path = parts.path[1:] if parts.path.startswith("/") else parts.path
        if not path:
            raise StoreURLError(url, "no database path")
        params = _sqlite_params(url, parts.query)
        from .sqlite import SqliteStore

        return SqliteStore(
            path,
            durability=params["durability"],  # type: ignore[arg-type]  # checked above
            read_only=read_only,
            commit_on_loop=_ON_LOOP[params["commit_on_loop"]],
        )
    if scheme in ("postgresql", "postgres"):
        if not parts.hostname and not parts.path.strip("/"):
            raise StoreURLError(url, "no host or database")
        found = _params(url, parts.query)
        misplaced = [k for k in found if k in _SQLITE_PARAMS or not k]
        if misplaced:
            raise StoreURLError(
                url,
                f"unknown parameter {', '.join(map(repr, misplaced))}: a postgresql:// URL "
                "takes schema=NAME and the driver's (asyncpg) connection parameters; any "
                "other is a server setting, which the server checks when the store opens",
            )
        try:
            from .postgres import PostgresStore
        except ModuleNotFoundError as exc:
            if exc.name != "asyncpg":
                raise
            raise StoreURLError(url, _NO_ASYNCPG, expected=False) from None
        return PostgresStore(url, read_only=read_only)
    if not scheme:
        raise StoreURLError(url, f"no scheme (for a SQLite file: sqlite:///{url})")
    raise StoreURLError(url, f"unknown scheme {shown(parts.scheme)}")
