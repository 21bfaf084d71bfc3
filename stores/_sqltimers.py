"""The timer index of the SQL stores (``actorlog.store.TimerStore``): the columns, the row
mapper, and the SQLite methods (PostgreSQL's are in ``postgres/timers.py``)."""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from actorlog.store import CorruptEntryError, TimerRow

__all__ = ["TIMER_COLS", "SqliteTimers", "timer_row", "timer_values"]

TIMER_COLS = ", ".join(TimerRow._fields)

_TYPES: tuple[tuple[type, ...], ...] = (
    (str,),  # timer_id
    (str,),  # actor_id
    (str,),  # actor_type
    (float, int),  # due
    (str,),  # message_id
    (str,),  # type_tag
    (str,),  # body
    (str, type(None)),  # sender
    (str, type(None)),  # recurrence
    (str,),  # state
    (float, int),  # created_at
)


def timer_row(r: Sequence[Any]) -> TimerRow:
    """A stored timer row, its column types checked (a damaged one raises
    ``CorruptEntryError`` naming the timer)."""
    values = tuple(r)
    for name, v, types in zip(TimerRow._fields, values, _TYPES, strict=True):
        if type(v) not in types:
            raise CorruptEntryError(
                f"timer {values[0]!r}", 0, "column type", f"{name} holds {type(v).__name__}"
            )
    t = TimerRow(*values)
    return t._replace(due=float(t.due), created_at=float(t.created_at))


def timer_values(t: TimerRow) -> tuple[Any, ...]:
    return tuple(t)


class SqliteTimers:
    """``TimerStore`` for ``SqliteStore`` (mixed in; the table is in ``_sqlite_schema``).
    ``SqliteStore`` provides the connection methods declared here."""

    async def _fetch(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
        raise NotImplementedError

    def _writer(self) -> Any:
        raise NotImplementedError

    def _error(self, what: str, exc: Exception) -> Exception:
        raise NotImplementedError

    async def _changed(self, sql: str, params: Sequence[Any]) -> int:
        try:
            return int(await self._writer().changes(sql, params))
        except (sqlite3.Error, ValueError, OverflowError) as exc:
            raise self._error("timer write", exc) from exc

    async def put_timer(self, timer: TimerRow, *, replace: bool = False) -> bool:
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        values = timer_values(timer._replace(state="pending"))
        n = await self._changed(
            f"{verb} INTO timers ({TIMER_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            values,
        )
        return n > 0

    async def get_timer(self, timer_id: str) -> TimerRow | None:
        rows = await self._fetch(f"SELECT {TIMER_COLS} FROM timers WHERE timer_id = ?", (timer_id,))
        return timer_row(rows[0]) if rows else None

    async def cancel_timer(self, timer_id: str) -> str | None:
        t = await self.get_timer(timer_id)
        if t is None or t.state != "pending":
            return None if t is None else t.state
        n = await self._changed(
            "UPDATE timers SET state = 'cancelled' WHERE timer_id = ? AND state = 'pending'",
            (timer_id,),
        )
        if n:
            return "pending"
        t = await self.get_timer(timer_id)
        return None if t is None else t.state

    async def fire_timer(self, timer_id: str, due: float, next_due: float | None) -> bool:
        if next_due is None:
            sql = (
                "UPDATE timers SET state = 'fired' "
                "WHERE timer_id = ? AND due = ? AND state = 'pending'"
            )
            params: tuple[Any, ...] = (timer_id, due)
        else:
            sql = "UPDATE timers SET due = ? WHERE timer_id = ? AND due = ? AND state = 'pending'"
            params = (next_due, timer_id, due)
        n = await self._changed(sql, params)
        return n > 0

    async def due_timers(
        self, before: float, *, limit: int = 100, owner: str | None = None
    ) -> list[TimerRow]:
        rows = await self._fetch(
            f"SELECT {TIMER_COLS} FROM timers WHERE state = 'pending' AND due <= ? "
            "ORDER BY due, timer_id LIMIT ?",
            (before, limit),
        )
        return [timer_row(r) for r in rows]

    async def next_due(self) -> float | None:
        rows = await self._fetch("SELECT min(due) FROM timers WHERE state = 'pending'")
        v = rows[0][0] if rows else None
        return None if v is None else float(v)

    async def list_timers(self, actor_id: str | None = None) -> list[TimerRow]:
        if actor_id is None:
            rows = await self._fetch(f"SELECT {TIMER_COLS} FROM timers ORDER BY due, timer_id")
        else:
            rows = await self._fetch(
                f"SELECT {TIMER_COLS} FROM timers WHERE actor_id = ? ORDER BY due, timer_id",
                (actor_id,),
            )
        return [timer_row(r) for r in rows]

    async def delete_timers_before(self, before: float) -> int:
        return await self._changed(
            "DELETE FROM timers WHERE state != 'pending' AND due < ?",
            (before,),
        )
