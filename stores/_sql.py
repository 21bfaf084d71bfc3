"""What the SQL stores (SQLite, PostgreSQL) share: column lists, the log query, row mappers,
and :class:`SqlConnection`, the one connection protocol of their mixins.

The column orders are ``actorlog.store``'s (the order its checked row builders take), so a
``SELECT`` of these lists feeds them directly. Only the placeholder style differs between the
two databases (``?`` and ``$n``), and how a list of kinds is passed.
"""

from __future__ import annotations

import itertools
import operator
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, Literal

from actorlog.store import (
    ACTOR_COLUMNS,
    ENTRY_COLUMNS,
    SNAPSHOT_INFO_COLUMNS,
    EntryRow,
    SnapshotRow,
    entry_row,
)

__all__ = [
    "ACTOR_COLS",
    "ENTRY_COLS",
    "SNAPSHOT_INFO_COLS",
    "Dialect",
    "SqlConnection",
    "entries",
    "entry_values",
    "flat_entry_values",
    "select_entries",
    "snapshot_values",
]

ENTRY_COLS = ", ".join(ENTRY_COLUMNS)
SNAPSHOT_INFO_COLS = ", ".join(SNAPSHOT_INFO_COLUMNS)
ACTOR_COLS = ", ".join(ACTOR_COLUMNS)

Dialect = Literal["sqlite", "postgres"]


class SqlConnection:
    """What the SQL stores' mixins (compaction, audit, timers) use of their store: one
    query and one command, each with its parameters as one sequence in the dialect's
    placeholders (``?`` in SQLite, ``$1`` ... in PostgreSQL). The store implements both
    and translates its driver's errors there (``StoreUnavailableError``,
    ``StoreCorruptError``, ``StoreClosedError`` for a store opened read-only)."""

    if TYPE_CHECKING:

        async def _query(self, sql: str, params: Sequence[Any] = ()) -> list[Any]:
            """Run one statement; its rows."""
            ...

        async def _command(self, sql: str, params: Sequence[Any] = ()) -> int:
            """Run one writing statement; how many rows it changed."""
            ...


def entries(rows: Sequence[Any], actor_id: str, after_seq: int = 0) -> list[EntryRow]:
    """Rows of a read in seq order, each type-checked (``actorlog.store.entry_row``): a
    damaged ``seq`` column is named by the seq it should have (the previous one + 1)."""
    out: list[EntryRow] = []
    for r in rows:
        seq = (out[-1].seq if out else after_seq) + 1
        out.append(entry_row(tuple(r), actor_id=actor_id, seq=seq))
    return out


def entry_values(row: EntryRow) -> tuple[Any, ...]:
    """An entry's column values, in :data:`ENTRY_COLS` order."""
    return (
        row.actor_id,
        row.seq,
        row.kind,
        row.type_tag,
        row.ref,
        row.message_id,
        row.payload,
        row.checksum,
    )


#: an entry's column values as a tuple, in :data:`ENTRY_COLS` order, in one C call
_ENTRY_GETTER = operator.attrgetter(*ENTRY_COLUMNS)


def flat_entry_values(rows: Sequence[EntryRow]) -> list[Any]:
    """The column values of ``rows``, one row after the other (the parameters of a multi-row
    ``INSERT``): what ``entry_values`` gives for each, flattened without a Python loop."""
    return list(itertools.chain.from_iterable(map(_ENTRY_GETTER, rows)))


def snapshot_values(snapshot: SnapshotRow) -> tuple[Any, ...]:
    """A snapshot's column values: :data:`SNAPSHOT_INFO_COLS` order, then ``data``."""
    i = snapshot.info
    return (
        i.actor_id,
        i.seq,
        i.handled_seq,
        i.type_tag,
        i.schema_version,
        i.digest,
        i.size,
        i.created_at,
        snapshot.data,
    )


def select_entries(
    dialect: Dialect,
    actor_id: str,
    after_seq: int,
    upto_seq: int | None,
    kinds: Sequence[str] | None,
    limit: int | None,
) -> tuple[str, list[Any]]:
    """The query of ``Store.read`` and its parameters: entries with ``after_seq < seq <=
    upto_seq`` (and kind in ``kinds``), by seq, at most ``limit``."""
    params: list[Any] = []

    def arg(value: Any) -> str:
        params.append(value)
        return "?" if dialect == "sqlite" else f"${len(params)}"

    sql = f"SELECT {ENTRY_COLS} FROM entries WHERE actor_id = {arg(actor_id)} AND seq > "
    sql += arg(after_seq)
    if upto_seq is not None:
        sql += f" AND seq <= {arg(upto_seq)}"
    if kinds is not None:
        if dialect == "sqlite":
            sql += " AND kind IN (" + ",".join(arg(k) for k in kinds) + ")"
        else:
            sql += f" AND kind = ANY({arg(list(kinds))}::text[])"
    sql += " ORDER BY seq"
    if limit is not None:
        sql += f" LIMIT {arg(limit)}"
    return sql, params
