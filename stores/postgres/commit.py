"""Group commit into PostgreSQL: each batch of appends is one ``INSERT ... SELECT FROM
unnest(...)`` statement per chunk (one round trip, one transaction); a chunk the database
rejects is committed again append by append, so that only the conflicting appends fail."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

from actorlog.store import (
    ConfigurationError,
    CorruptEntryError,
    EntryRow,
    LeaseLostError,
    SequenceConflictError,
    StoreError,
)

from .._groupcommit import Request
from .._sql import ENTRY_COLS
from .driver import DRIVER_ERRORS, is_bad_input, is_rejection

__all__ = ["Append", "Fail", "commit_batch"]

#: SQLSTATE of a fenced append rejected by the trigger (class 23: a rejection).
_FENCED_SQLSTATE = "23AL1"


# One statement per batch whatever its size: the rows travel as nine arrays. ORDER BY
# ordinality keeps the insertion order, which the trigger's seq check depends on.
_INSERT_ENTRIES = f"""
INSERT INTO entries ({ENTRY_COLS}, fence)
SELECT {ENTRY_COLS}, fence
FROM unnest($1::text[], $2::bigint[], $3::text[], $4::text[], $5::bigint[], $6::text[],
            $7::bytea[], $8::bigint[], $9::bigint[])
     WITH ORDINALITY AS u({ENTRY_COLS}, fence, ord)
ORDER BY ord
"""

# deadlock_detected, serialization_failure: the statement was rolled back; try again.
_RETRY_SQLSTATES = frozenset({"40P01", "40001"})
_MAX_ATTEMPTS = 3

# Bound the size of one statement (payloads can be up to 8 MiB each).
_MAX_ROWS_PER_STATEMENT = 10_000
_MAX_BYTES_PER_STATEMENT = 64 * 1024 * 1024

Append = tuple[str, int, Sequence[EntryRow], int | None]  # actor, expected, rows, fence

#: Turns a driver error into the store's error (``PostgresStore._failure``).
Fail = Callable[[str, BaseException], StoreError | ConfigurationError]


async def commit_batch(conn: Any, batch: Sequence[Request[Append]], fail: Fail) -> None:
    """Commit ``batch`` on ``conn``: one statement (one transaction) per chunk of requests,
    setting ``error`` on each request that failed."""
    chunk: list[Request[Append]] = []
    n_rows = n_bytes = 0
    for req in batch:
        rows = req.item[2]
        size = sum(len(r.payload) for r in rows)
        if chunk and (
            n_rows + len(rows) > _MAX_ROWS_PER_STATEMENT
            or n_bytes + size > _MAX_BYTES_PER_STATEMENT
        ):
            await _commit_chunk(conn, chunk, fail)
            chunk, n_rows, n_bytes = [], 0, 0
        chunk.append(req)
        n_rows += len(rows)
        n_bytes += size
    if chunk:
        await _commit_chunk(conn, chunk, fail)


async def _commit_chunk(conn: Any, chunk: Sequence[Request[Append]], fail: Fail) -> None:
    # Lock actors' rows in one global order (by actor id) so that two runtimes
    # committing overlapping batches cannot deadlock; the sort is stable, so each
    # actor's rows keep their order.
    rows = sorted(
        ((row, req.item[3]) for req in chunk for row in req.item[2]),
        key=lambda rf: rf[0].actor_id,
    )
    for attempt in range(1, _MAX_ATTEMPTS + 1):
        try:
            await _insert_entries(conn, rows)
            return
        except DRIVER_ERRORS as exc:
            if is_rejection(exc) or (is_bad_input(exc) and len(chunk) > 1):
                await _isolate(conn, chunk, exc, fail)  # bad input: only its own append fails
                return
            # A writer that locks in another order can still deadlock with us; the
            # statement was rolled back as a whole, so trying again is safe.
            if getattr(exc, "sqlstate", None) in _RETRY_SQLSTATES and attempt < _MAX_ATTEMPTS:
                continue
            err = fail("commit", exc)
            err.__cause__ = exc
            for req in chunk:
                req.error = err
            return


async def _isolate(
    conn: Any, chunk: Sequence[Request[Append]], exc: BaseException, fail: Fail
) -> None:
    """The database rejected ``chunk``: fail the conflicting requests, commit the rest."""
    if len(chunk) == 1:
        actor_id, expected, _, fence = chunk[0].item
        conflict: SequenceConflictError | CorruptEntryError
        if getattr(exc, "sqlstate", None) == _FENCED_SQLSTATE:
            conflict = LeaseLostError(actor_id, fence, await _token(conn, actor_id))
        elif is_bad_input(exc):
            chunk[0].error = fail("append", exc)
            return
        else:
            conflict = await _conflict(conn, actor_id, expected)
        conflict.__cause__ = exc
        chunk[0].error = conflict
        return
    # Someone in the batch lost a race; find out who by committing one by one.
    for req in chunk:
        await _commit_chunk(conn, [req], fail)


async def _insert_entries(conn: Any, rows: Sequence[tuple[EntryRow, int | None]]) -> None:
    """Insert ``rows`` (with their fencing tokens) in one statement: one round trip, one
    atomic transaction. The single place rows reach the database."""
    await conn.execute(
        _INSERT_ENTRIES,
        [r.actor_id for r, _ in rows],
        [r.seq for r, _ in rows],
        [r.kind for r, _ in rows],
        [r.type_tag for r, _ in rows],
        [r.ref for r, _ in rows],
        [r.message_id for r, _ in rows],
        [r.payload for r, _ in rows],
        [r.checksum for r, _ in rows],
        [f for _, f in rows],
    )


async def _token(conn: Any, actor_id: str) -> int | None:
    try:
        value = await conn.fetchval("SELECT token FROM leases WHERE actor_id = $1", actor_id)
    except DRIVER_ERRORS:
        return None
    return None if value is None else int(value)


async def _conflict(
    conn: Any, actor_id: str, expected: int
) -> SequenceConflictError | CorruptEntryError:
    """A conflict, unless the actor's summary (``actors.last_seq``, which the trigger
    checks) disagrees with its log: that is damage, not another runtime (one statement,
    so both are read at one moment)."""
    try:
        row = await conn.fetchrow(
            "SELECT a.last_seq, (SELECT max(e.seq) FROM entries e WHERE e.actor_id = $1) "
            "FROM actors a WHERE a.actor_id = $1",
            actor_id,
        )
    except DRIVER_ERRORS:
        row = None
    if row is None:
        return SequenceConflictError(actor_id, expected, None)
    found, real = row[0], row[1] or 0
    if found != real:
        return CorruptEntryError(
            actor_id,
            found,
            "seq chain",
            f"the actor's summary (actors.last_seq) says {found} but the log ends at seq "
            f"{real}; nothing was written",
        )
    return SequenceConflictError(actor_id, expected, found)
