"""asyncpg at the store's boundary: which exceptions are driver failures, and how to tell
a rejection or a value the driver refused from a transient failure."""

from __future__ import annotations

from typing import Any
from urllib.parse import urlsplit, urlunsplit

import anyio
import asyncpg

__all__ = [
    "DRIVER_ERRORS",
    "close_quietly",
    "is_bad_input",
    "is_corruption",
    "is_rejection",
    "redact",
]

#: Driver failures: server errors, client/protocol errors, network errors, timeouts.
DRIVER_ERRORS: tuple[type[BaseException], ...] = (
    asyncpg.PostgresError,
    asyncpg.InterfaceError,
    OSError,
    TimeoutError,
)


def is_bad_input(exc: BaseException) -> bool:
    """True for a value the driver refused to send: asyncpg raises its DataError (a server
    error class) from the encoding error, before anything reaches the server."""
    if isinstance(exc, asyncpg.InterfaceError) and isinstance(exc, ValueError):
        return True
    return isinstance(exc, asyncpg.DataError) and isinstance(
        exc.__cause__, (ValueError, OverflowError, TypeError)
    )


def is_rejection(exc: BaseException) -> bool:
    """True for a conflict the database enforced (SQLSTATE class 23)."""
    sqlstate = getattr(exc, "sqlstate", None)
    return isinstance(sqlstate, str) and sqlstate.startswith("23")


def is_corruption(exc: BaseException) -> bool:
    """True for damage the server found in its own files: SQLSTATE ``XX001``
    (data_corrupted: "invalid page in block ...") or ``XX002`` (index_corrupted)."""
    return getattr(exc, "sqlstate", None) in ("XX001", "XX002")


def redact(dsn: str) -> str:
    """The DSN without its password, for error messages."""
    try:
        parts = urlsplit(dsn)
        if parts.password is None:
            return dsn
        netloc = parts.netloc.replace(":" + parts.password + "@", ":***@", 1)
        return urlunsplit(parts._replace(netloc=netloc))
    except ValueError:
        return "<unparsable DSN>"


async def close_quietly(conn: Any) -> None:
    with anyio.move_on_after(5, shield=True):
        try:
            await conn.close()
            return
        except DRIVER_ERRORS:
            pass
    conn.terminate()
