"""The timer index of the SQL stores (``actorlog.store.TimerStore``): the columns, the row
mapper, and the SQLite methods (PostgreSQL's are in ``postgres/timers.py``)."""

from __future__ import annotations

import math
from collections.abc import Sequence
from typing import Any

from actorlog.store import CorruptEntryError, TimerRow

from ._sql import SqlConnection

__all__ = [
    "TIMER_COLS",
    "SqliteTimers",
    "cancellable",
    "readable_row",
    "timer_row",
    "timer_values",
]

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


def readable_row(r: Sequence[Any]) -> TimerRow:
    """A stored timer row for the readers (operators, the timer loop): a damaged one comes
    back as itself with ``state`` ``damaged: <what>`` (its bad values as text, its bad times
    NaN) instead of failing the whole read."""
    try:
        return timer_row(r)
    except CorruptEntryError as exc:
        values: list[Any] = []
        for v, types in zip(tuple(r), _TYPES, strict=True):
            if float in types:
                values.append(float(v) if type(v) in (int, float) else math.nan)
            elif type(v) in types:
                values.append(v)
            else:
                values.append(repr(v)[:200])
        if values[_STATE] in ("pending", "firing"):  # a settled one keeps its state
            values[_STATE] = f"damaged: {exc.detail}"
        return TimerRow(*values)


def cancellable(t: TimerRow) -> bool:
    """True if ``cancel_timer`` cancels ``t``: pending, or a schedule being fired (a one-off
    timer being fired is past cancelling: it is delivered or being delivered)."""
    return t.state == "pending" or (t.state == "firing" and t.recurrence is not None)


_STATE = TimerRow._fields.index("state")


def timer_values(t: TimerRow) -> tuple[Any, ...]:
    return tuple(t)


class SqliteTimers(SqlConnection):
    """``TimerStore`` for ``SqliteStore`` (mixed in; the table is in ``_sqlite_schema``)."""

    async def put_timer(self, timer: TimerRow, *, replace: bool = False) -> bool:
        verb = "INSERT OR REPLACE" if replace else "INSERT OR IGNORE"
        values = timer_values(timer._replace(state="pending"))
        n = await self._command(
            f"{verb} INTO timers ({TIMER_COLS}) VALUES (?,?,?,?,?,?,?,?,?,?,?)",
            values,
        )
        return n > 0

    async def get_timer(self, timer_id: str) -> TimerRow | None:
        rows = await self._query(f"SELECT {TIMER_COLS} FROM timers WHERE timer_id = ?", (timer_id,))
        return timer_row(rows[0]) if rows else None

    async def cancel_timer(self, timer_id: str) -> str | None:
        # one conditional UPDATE: atomic with claim_timer's (the writer runs one at a time)
        while True:
            t = await self.get_timer(timer_id)
            if t is None:
                return None
            if not cancellable(t):
                return t.state
            n = await self._command(
                "UPDATE timers SET state = 'cancelled' WHERE timer_id = ? AND state = ? "
                "AND (state = 'pending' OR recurrence IS NOT NULL)",
                (timer_id, t.state),
            )
            if n:
                return t.state
            # it changed between the read and the update (claimed, fired, replaced): again

    async def claim_timer(self, timer_id: str, due: float) -> bool:
        n = await self._command(
            "UPDATE timers SET state = 'firing' "
            "WHERE timer_id = ? AND due = ? AND state IN ('pending', 'firing')",
            (timer_id, due),
        )
        return n > 0

    async def fire_timer(self, timer_id: str, due: float, next_due: float | None) -> bool:
        if next_due is None:
            sql = (
                "UPDATE timers SET state = 'fired' "
                "WHERE timer_id = ? AND due = ? AND state IN ('pending', 'firing')"
            )
            params: tuple[Any, ...] = (timer_id, due)
        else:
            sql = (
                "UPDATE timers SET due = ?, state = 'pending' "
                "WHERE timer_id = ? AND due = ? AND state IN ('pending', 'firing')"
            )
            params = (next_due, timer_id, due)
        n = await self._command(sql, params)
        return n > 0

    async def fail_timer(self, timer_id: str, due: float, reason: str) -> bool:
        n = await self._command(
            "UPDATE timers SET state = ? "
            "WHERE timer_id = ? AND due = ? AND state IN ('pending', 'firing')",
            (f"failed: {reason}", timer_id, due),
        )
        return n > 0

    async def due_timers(
        self, before: float, *, limit: int = 100, owner: str | None = None
    ) -> list[TimerRow]:
        # two indexed reads (partial indexes on pending and firing), merged by due time
        rows = await self._query(
            f"SELECT * FROM (SELECT {TIMER_COLS} FROM timers WHERE state = 'pending' AND "
            f"due <= ? ORDER BY due, timer_id LIMIT ?) UNION ALL SELECT * FROM (SELECT "
            f"{TIMER_COLS} FROM timers WHERE state = 'firing' AND due <= ? ORDER BY due, "
            "timer_id LIMIT ?) ORDER BY due, timer_id LIMIT ?",
            (before, limit, before, limit, limit),
        )
        return [readable_row(r) for r in rows]

    async def next_due(self) -> float | None:
        rows = await self._query(
            "SELECT min(due) FROM (SELECT min(due) AS due FROM timers WHERE state = 'pending' "
            "UNION ALL SELECT min(due) FROM timers WHERE state = 'firing')"
        )
        v = rows[0][0] if rows else None
        return None if v is None else float(v)

    async def list_timers(self, actor_id: str | None = None) -> list[TimerRow]:
        if actor_id is None:
            rows = await self._query(f"SELECT {TIMER_COLS} FROM timers ORDER BY due, timer_id")
        else:
            rows = await self._query(
                f"SELECT {TIMER_COLS} FROM timers WHERE actor_id = ? ORDER BY due, timer_id",
                (actor_id,),
            )
        return [readable_row(r) for r in rows]

    async def delete_timers_before(self, before: float) -> int:
        return await self._command(
            "DELETE FROM timers WHERE state NOT IN ('pending', 'firing') AND due < ?",
            (before,),
        )
