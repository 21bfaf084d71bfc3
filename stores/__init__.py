"""Log stores for actorlog: ``MemoryStore``, ``SqliteStore`` and ``PostgresStore``.

``open_store(url)`` builds one from a URL: ``memory://``, ``sqlite:///relative/path.db``,
``sqlite:////absolute/path.db``, ``postgresql://user@host:port/dbname``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .sqlite import SqliteStore
from .url import open_store

if TYPE_CHECKING:
    from .memory import MemoryStore
    from .postgres import PostgresStore

__all__ = ["MemoryStore", "PostgresStore", "SqliteStore", "open_store"]


def __getattr__(name: str) -> Any:
    # PostgresStore needs the optional asyncpg dependency: import it only when asked for.
    if name == "PostgresStore":
        from .postgres import PostgresStore

        return PostgresStore
    if name == "MemoryStore":  # imported when first asked for (a run on SQLite needs none)
        from .memory import MemoryStore

        return MemoryStore
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
