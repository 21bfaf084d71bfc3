"""The timer index in PostgreSQL (``actorlog.store.TimerStore``; the table is schema
version 4). ``PostgresStore`` gets these methods from :class:`TimerMethods`.

Only the owner of an actor fires its timers: :meth:`TimerMethods.due_timers` with ``owner``
returns the timers of actors whose live lease that owner holds, or that no runtime holds (the
runtime that fires one places the actor). :meth:`TimerMethods.fire_timer` is fenced like an
append: a runtime that lost the actor's lease cannot mark its timer fired.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from actorlog.store import TimerRow

from .._sql import SqlConnection
from .._sqltimers import TIMER_COLS, readable_row, timer_row, timer_values

__all__ = ["TimerMethods"]


class TimerMethods(SqlConnection):
    """``TimerStore`` for :class:`~actorlog.stores.PostgresStore`."""

    if TYPE_CHECKING:
        _fences: dict[str, int]

    async def put_timer(self, timer: TimerRow, *, replace: bool = False) -> bool:
        conflict = (
            "ON CONFLICT (timer_id) DO UPDATE SET "
            + ", ".join(f"{c} = EXCLUDED.{c}" for c in TimerRow._fields[1:])
            if replace
            else "ON CONFLICT (timer_id) DO NOTHING"
        )
        n = await self._command(
            f"INSERT INTO timers ({TIMER_COLS}) VALUES "
            "($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11) " + conflict,
            timer_values(timer._replace(state="pending")),
        )
        return n > 0

    async def get_timer(self, timer_id: str) -> TimerRow | None:
        rows = await self._query(
            f"SELECT {TIMER_COLS} FROM timers WHERE timer_id = $1", (timer_id,)
        )
        return timer_row(rows[0]) if rows else None

    async def cancel_timer(self, timer_id: str) -> str | None:
        # the row lock makes this one decision with claim_timer's conditional update
        rows = await self._query(
            "WITH old AS (SELECT timer_id, state, recurrence FROM timers WHERE timer_id = $1 "
            "FOR UPDATE), "
            "upd AS (UPDATE timers t SET state = 'cancelled' FROM old "
            "WHERE t.timer_id = old.timer_id AND (old.state = 'pending' "
            "OR (old.state = 'firing' AND old.recurrence IS NOT NULL)) RETURNING 1) "
            "SELECT state FROM old",
            (timer_id,),
        )
        return None if not rows else str(rows[0][0])

    async def claim_timer(self, timer_id: str, due: float) -> bool:
        n = await self._command(
            "UPDATE timers SET state = 'firing' "
            "WHERE timer_id = $1 AND due = $2 AND state IN ('pending', 'firing')",
            (timer_id, due),
        )
        return n > 0

    async def fire_timer(self, timer_id: str, due: float, next_due: float | None) -> bool:
        return await self._settle(timer_id, due, next_due, None)

    async def fail_timer(self, timer_id: str, due: float, reason: str) -> bool:
        return await self._settle(timer_id, due, None, f"failed: {reason}")

    async def _settle(
        self, timer_id: str, due: float, next_due: float | None, state: str | None
    ) -> bool:
        t = await self.get_timer(timer_id)
        if t is None:
            return False
        fence = self._fences.get(t.actor_id)
        # fenced like an append: only while this instance's token is the actor's current one
        n = await self._command(
            "UPDATE timers SET due = coalesce($3, due), "
            "state = CASE WHEN $6::text IS NOT NULL THEN $6::text "
            "WHEN $3::float8 IS NULL THEN 'fired' ELSE 'pending' END "
            "WHERE timer_id = $1 AND due = $2 AND state IN ('pending', 'firing') AND "
            "($4::bigint IS NULL "
            "OR EXISTS (SELECT 1 FROM leases l WHERE l.actor_id = $5 AND l.token = $4 FOR SHARE))",
            (timer_id, due, next_due, fence, t.actor_id, state),
        )
        return n > 0

    async def due_timers(
        self, before: float, *, limit: int = 100, owner: str | None = None
    ) -> list[TimerRow]:
        due = "t.state IN ('pending', 'firing') AND t.due <= $1"
        cols = ", ".join(f"t.{c}" for c in TimerRow._fields)
        if owner is None:
            rows = await self._query(
                f"SELECT {cols} FROM timers t WHERE {due} ORDER BY t.due, t.timer_id LIMIT $2",
                (before, limit),
            )
        else:
            rows = await self._query(
                f"SELECT {cols} FROM timers t LEFT JOIN leases l ON l.actor_id = t.actor_id "
                f"WHERE {due} "
                "AND (l.actor_id IS NULL OR l.owner IS NULL OR l.expires_at <= now() "
                "     OR l.owner = $3) "
                "ORDER BY t.due, t.timer_id LIMIT $2",
                (before, limit, owner),
            )
        return [readable_row(r) for r in rows]

    async def next_due(self) -> float | None:
        rows = await self._query("SELECT min(due) FROM timers WHERE state IN ('pending', 'firing')")
        v = rows[0][0] if rows else None
        return None if v is None else float(v)

    async def list_timers(self, actor_id: str | None = None) -> list[TimerRow]:
        if actor_id is None:
            rows = await self._query(f"SELECT {TIMER_COLS} FROM timers ORDER BY due, timer_id")
        else:
            rows = await self._query(
                f"SELECT {TIMER_COLS} FROM timers WHERE actor_id = $1 ORDER BY due, timer_id",
                (actor_id,),
            )
        return [readable_row(r) for r in rows]

    async def delete_timers_before(self, before: float) -> int:
        return await self._command(
            "DELETE FROM timers WHERE state NOT IN ('pending', 'firing') AND due < $1", (before,)
        )
