"""``delete_actor`` and ``read_audit`` (``actorlog.store.AuditStore``) for the SQL stores:
one ``INSERT`` into ``store_audit`` whose trigger deletes the actor's rows in the same
statement, so the deletion and its audit row commit together or not at all."""

from __future__ import annotations

import time
from typing import Any

from actorlog.store import AuditRow, StoreCorruptError

from ._sql import SqlConnection

__all__ = ["PostgresAudit", "SqliteAudit"]

_COLS = "SELECT id, at, kind, actor_id, detail FROM store_audit"


def _row(r: Any) -> AuditRow:
    try:
        return AuditRow(int(r[0]), float(r[1]), str(r[2]), str(r[3]), str(r[4]))
    except (TypeError, ValueError, IndexError) as exc:
        raise StoreCorruptError("store_audit", f"an audit row cannot be read: {exc}") from exc


class _SqlAudit(SqlConnection):
    _marks: tuple[str, str, str, str, str] = ("?", "?", "?", "?", "?")

    async def delete_actor(self, actor_id: str, detail: str) -> AuditRow:
        m = self._marks
        await self._command(
            f"INSERT INTO store_audit (at, kind, actor_id, detail) "
            f"VALUES ({m[0]}, {m[1]}, {m[2]}, {m[3]})",
            (time.time(), "deleted", actor_id, detail),
        )
        return (await self.read_audit(actor_id))[-1]

    _exists_sql = "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'store_audit'"

    async def read_audit(self, actor_id: str | None = None) -> list[AuditRow]:
        # a store written before the table existed, opened read-only: no deletions yet
        if not await self._query(self._exists_sql):
            return []
        if actor_id is None:
            rows = await self._query(f"{_COLS} ORDER BY id")
        else:
            sql = f"{_COLS} WHERE actor_id = {self._marks[0]} ORDER BY id"
            rows = await self._query(sql, (actor_id,))
        return [_row(tuple(r)) for r in rows]


class SqliteAudit(_SqlAudit):
    """Mixed into ``SqliteStore``."""


class PostgresAudit(_SqlAudit):
    """Mixed into ``PostgresStore``."""

    _marks = ("$1", "$2", "$3", "$4", "$5")
    _exists_sql = "SELECT 1 WHERE to_regclass('store_audit') IS NOT NULL"
