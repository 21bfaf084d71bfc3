"""Registering new actors in SQLite: one ``INSERT OR IGNORE`` per batch of registrations.

``SqliteStore.register_actor`` queues each new actor's row for a group commit (spawning many
new actors shares one transaction). The statement returns the ids it inserted (``RETURNING``,
SQLite 3.35 and later), so a registration knows that its call created the row
(``ActorRow.created``): the store held nothing of that actor, and the runtime starts it
without recovery's reads. With an older SQLite no row is marked, and every registration reads
its row back as before.
"""

from __future__ import annotations

import sqlite3
from collections.abc import Sequence
from typing import Any

from actorlog.store import ActorRow

__all__ = ["RETURNING", "Registration", "insert_sql", "mark_inserted"]

#: whether this SQLite has ``INSERT ... RETURNING`` (3.35.0)
RETURNING = sqlite3.sqlite_version_info >= (3, 35, 0)


class Registration:
    """One queued registration; ``inserted`` once its batch's statement inserted its row."""

    __slots__ = ("actor_id", "actor_type", "at", "inserted")

    def __init__(self, actor_id: str, actor_type: str, at: float) -> None:
        self.actor_id = actor_id
        self.actor_type = actor_type
        self.at = at
        self.inserted = False

    def row(self) -> ActorRow:
        """The row this registration inserted, as ``get_actor`` reads it (an empty log)."""
        return ActorRow(self.actor_id, self.actor_type, 0, 0, 0, 0, self.at, created=True)


def insert_sql(chunk: Sequence[Registration]) -> tuple[str, list[Any]]:
    """The statement inserting ``chunk``'s rows (returning the ids inserted, if it can)."""
    sql = "INSERT OR IGNORE INTO actors (actor_id, actor_type, created_at) VALUES " + ",".join(
        ["(?,?,?)"] * len(chunk)
    )
    values = [v for r in chunk for v in (r.actor_id, r.actor_type, r.at)]
    return (sql + " RETURNING actor_id" if RETURNING else sql), values


def mark_inserted(chunk: Sequence[Registration], rows: Sequence[Any]) -> None:
    """Mark the registrations whose rows the statement returned. Of two registrations of
    one id in a batch, the first inserted it (the rows are inserted in order)."""
    inserted = {r[0] for r in rows}
    for reg in chunk:
        if reg.actor_id in inserted:
            inserted.discard(reg.actor_id)
            reg.inserted = True
