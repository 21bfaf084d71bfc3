"""Compaction in SQLite (``actorlog.store.CompactingStore``; FORMAT.md [F16]).

One ``INSERT OR REPLACE`` into ``log_starts`` does it all: its triggers (``_sqlite_schema``)
refuse to remove the last entry, delete the entries before the new start and move
``actors.first_seq``, in that one statement's transaction. One statement also means it can
share the writer connection with group commit, which must never find itself inside another
caller's open transaction. Freed pages go back to the file with ``PRAGMA incremental_vacuum``
when the file is in incremental auto-vacuum mode (new files are; docs/tuning.md), and are
reused for new entries otherwise.
"""

from __future__ import annotations

import time
from typing import TYPE_CHECKING, Any

from actorlog.store import ConfigurationError, EntryRow, LogStartRow, entry_row

from ._sql import ENTRY_COLS, SqlConnection
from ._sqlite_pack import is_packed
from ._sqlite_schema3 import KEPT5, UNPACK_KEPT5

__all__ = ["SqliteCompaction"]


class SqliteCompaction(SqlConnection):
    """The compaction methods of ``SqliteStore``."""

    if TYPE_CHECKING:
        layout: int

        async def _unpacked(self, rows: list[EntryRow]) -> list[EntryRow]: ...

        async def _unpacked_values(self, rows: list[Any]) -> list[Any]: ...

    async def compact(self, actor_id: str, upto_seq: int, *, checksum: int) -> int:
        rows = await self._query(
            "SELECT first_seq, last_seq FROM actors WHERE actor_id = ?", (actor_id,)
        )
        if not rows:
            raise ConfigurationError(f"cannot compact {actor_id!r}: no such actor")
        first, last = int(rows[0][0]), int(rows[0][1])
        if not isinstance(upto_seq, int) or upto_seq >= last:
            raise ConfigurationError(
                f"cannot compact {actor_id!r} up to seq {upto_seq}: its last entry must stay"
            )
        first = max(1, first)
        if upto_seq < first:
            return 0
        if self.layout >= 4:
            await self._unpack_kept(actor_id, upto_seq + 1)
        # the WHERE makes a compaction that lost a race with another one a no-op
        await self._command(
            "INSERT OR REPLACE INTO log_starts (actor_id, first_seq, checksum, at) "
            "SELECT ?, ?, ?, ? WHERE ? > (SELECT max(first_seq, 1) FROM actors "
            "WHERE actor_id = ?)",
            (actor_id, upto_seq + 1, checksum, time.time(), upto_seq + 1, actor_id),
        )
        await self._command("PRAGMA incremental_vacuum")
        return upto_seq + 1 - first

    async def _unpack_kept(self, actor_id: str, first: int) -> None:
        """[F21] Before the entries up to ``first - 1`` go: store unpacked each kept entry
        packed against one of them (the first kept entry against the one before it, an
        intent against its step's message), so that every kept entry still reads without
        them. Each is its own statement (a crash in between leaves an entry stored
        unpacked: the same payload). The store checks no checksum: what it stores is what
        the entry read as before (damage included, for ``verify`` to report); one that does
        not unpack is left as it is (it reads as stored, before and after)."""
        if self.layout >= 5:
            await self._unpack_kept5(actor_id, first)
            return
        # the stored form from ``log``, the payload as read from the view (which unpacks)
        found = await self._query(
            f"SELECT {', '.join('e.' + c for c in ENTRY_COLS.split(', '))}, l.payload "
            "FROM log AS l JOIN entries AS e ON e.actor_id = ? AND e.seq = l.seq "
            "WHERE l.actor = (SELECT id FROM actors WHERE actor_id = ?) AND l.seq >= ? "
            "AND (l.seq = ? OR (l.kind = 2 AND l.ref < ?))",
            (actor_id, actor_id, first, first, first),
        )
        stored, rows = [], []
        for r in found:
            try:
                row = entry_row(tuple(r[:8]), actor_id=actor_id)
            except Exception:  # a damaged column: nothing to unpack (verify reports it)
                continue
            raw = r[8]
            if type(raw) is bytes and is_packed(raw):
                stored.append(raw)
                rows.append(row)
        # a row the view could not unpack (a view made before it unpacked): unpack here
        for raw, row in zip(stored, await self._unpacked(rows), strict=True):
            if not is_packed(row.payload):
                await self._command(
                    "UPDATE log SET payload = ? WHERE actor = "
                    "(SELECT id FROM actors WHERE actor_id = ?) AND seq = ? AND payload = ?",
                    (row.payload, actor_id, row.seq, raw),
                )

    async def _unpack_kept5(self, actor_id: str, first: int) -> None:
        """:meth:`_unpack_kept` in a format-5 file: the stored rows read from ``log`` and
        unpacked in Python, as a read unpacks them."""
        found = await self._query(KEPT5, (first - 1, actor_id, first, first))
        for stored, values in zip(found, await self._unpacked_values(found), strict=True):
            raw, payload = stored[6], values[6]
            # one that did not unpack (damage) is still packed: left as it is
            if type(raw) is bytes and is_packed(raw) and not is_packed(payload):
                await self._command(UNPACK_KEPT5, (payload, actor_id, stored[1], raw))

    async def log_start(self, actor_id: str) -> LogStartRow | None:
        if not await self._query(
            "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'log_starts'"
        ):
            return None  # a file no writer of this version has opened: never compacted
        rows = await self._query(
            "SELECT actor_id, first_seq, checksum, at FROM log_starts WHERE actor_id = ?",
            (actor_id,),
        )
        if not rows:
            return None
        aid, first, checksum, at = rows[0]
        # damage shows as a value of the wrong type: the runtime's checksum check reports it
        return LogStartRow(
            aid if isinstance(aid, str) else "",
            first if isinstance(first, int) else -1,
            checksum if isinstance(checksum, int) else -1,
            at if isinstance(at, int | float) else float("nan"),
        )
