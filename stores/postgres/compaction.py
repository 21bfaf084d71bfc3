"""Compaction in PostgreSQL (``actorlog.store.CompactingStore``; FORMAT.md [F16]).

One transaction takes the actor's row lock (as appends do), deletes the entries before the
new start, moves ``actors.first_seq`` and records the start in ``log_starts``. PostgreSQL
reuses the deleted rows' space after (auto)vacuum; ``VACUUM FULL`` gives it back to the OS.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from actorlog.store import ConfigurationError, LogStartRow, StoreError

from .._sql import SqlConnection
from .driver import DRIVER_ERRORS

__all__ = ["CompactionMethods"]


class CompactionMethods(SqlConnection):
    """The compaction methods of ``PostgresStore``: ``log_start`` through the connection
    protocol; ``compact`` in one transaction of its own (a row lock and three statements)."""

    if TYPE_CHECKING:

        def _writable_pool(self) -> Any: ...
        def _failure(self, what: str, exc: BaseException) -> StoreError | ConfigurationError: ...

    async def compact(self, actor_id: str, upto_seq: int, *, checksum: int) -> int:
        pool = self._writable_pool()
        try:
            async with pool.acquire() as conn, conn.transaction():
                row = await conn.fetchrow(
                    "SELECT first_seq, last_seq FROM actors WHERE actor_id = $1 FOR UPDATE",
                    actor_id,
                )
                if row is None:
                    raise ConfigurationError(f"cannot compact {actor_id!r}: no such actor")
                first, last = max(1, int(row[0])), int(row[1])
                if not isinstance(upto_seq, int) or upto_seq >= last:
                    raise ConfigurationError(
                        f"cannot compact {actor_id!r} up to seq {upto_seq}: "
                        "its last entry must stay"
                    )
                if upto_seq < first:
                    return 0
                status = await conn.execute(
                    "DELETE FROM entries WHERE actor_id = $1 AND seq <= $2", actor_id, upto_seq
                )
                await conn.execute(
                    "UPDATE actors SET first_seq = $2 WHERE actor_id = $1", actor_id, upto_seq + 1
                )
                await conn.execute(
                    "INSERT INTO log_starts (actor_id, first_seq, checksum, at) "
                    "VALUES ($1, $2, $3, $4) ON CONFLICT (actor_id) DO UPDATE SET "
                    "first_seq = EXCLUDED.first_seq, checksum = EXCLUDED.checksum, "
                    "at = EXCLUDED.at",
                    actor_id,
                    upto_seq + 1,
                    checksum,
                    time.time(),
                )
        except DRIVER_ERRORS as exc:
            raise self._failure("compact", exc) from exc
        return int(str(status).rsplit(" ", 1)[-1])

    async def log_start(self, actor_id: str) -> LogStartRow | None:
        if not (await self._query("SELECT to_regclass('log_starts') IS NOT NULL"))[0][0]:
            return None  # a store no writer of this version has migrated: never compacted
        rows = await self._query(
            "SELECT actor_id, first_seq, checksum, at FROM log_starts WHERE actor_id = $1",
            (actor_id,),
        )
        if not rows:
            return None
        aid, first, checksum, at = tuple(rows[0])
        return LogStartRow(str(aid), int(first), int(checksum), float(at))
