"""Message-id lookups that share one statement: concurrent :meth:`PostgresStore.find_message`
calls (one per ``ask`` or ``send`` with a caller's ``message_id``: the runtime's duplicate
check) are answered by one ``SELECT ... FROM unnest(...) JOIN entries`` per batch, as
appends share one ``INSERT`` (group commit, the same leader/follower scheme).

A lookup waits only for a statement that starts after it was made (requests that arrive
while one is in flight go into the next), so its answer is never older than the call: a
message committed before ``find_message`` was called is found.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import Any

import anyio.lowlevel
from actorlog.store import (
    ENTRY_COLUMNS,
    ConfigurationError,
    CorruptEntryError,
    EntryRow,
    StoreClosedError,
    StoreError,
    entry_row,
)

from .._groupcommit import GroupCommitter, Request
from .driver import DRIVER_ERRORS

__all__ = ["MessageLookups"]

_E_COLS = ", ".join(f"e.{c}" for c in ENTRY_COLUMNS)

# One statement per batch: each (actor_id, message_id) pair probes the unique
# entries_message_id index (a nested loop); ord says which request a row answers.
_FIND_MESSAGES = f"""
SELECT u.ord, {_E_COLS}
FROM unnest($1::text[], $2::text[]) WITH ORDINALITY AS u(actor_id, message_id, ord)
JOIN entries e ON e.actor_id = u.actor_id AND e.message_id = u.message_id
"""
# A batch of one (no concurrency) keeps the plain index lookup: cheaper for the server to
# plan and run than the join over a one-element array.
_FIND_MESSAGE = f"""
SELECT 1, {_E_COLS} FROM entries e WHERE e.actor_id = $1 AND e.message_id = $2
"""


class _Find:
    __slots__ = ("actor_id", "message_id", "row")

    def __init__(self, actor_id: str, message_id: str) -> None:
        self.actor_id = actor_id
        self.message_id = message_id
        self.row: EntryRow | None = None


def _no_telemetry(_: int) -> None:
    """Lookups are not commits: the commit metric does not count them."""


class MessageLookups:
    """Batches concurrent message-id lookups of one store.

    Args:
        pool: returns the store's pool (None once closed).
        fail: turns a driver error into the store's error (``PostgresStore._failure``).
        closed: the error for a lookup made on a closed store.

    Attributes:
        batch_sizes: lookups per statement of the recent batches (bounded), for tests and
            benchmarks.
    """

    def __init__(
        self,
        pool: Callable[[], Any],
        fail: Callable[[str, BaseException], StoreError | ConfigurationError],
        closed: Callable[[], StoreClosedError],
    ) -> None:
        self._pool = pool
        self._fail = fail
        self._closed = closed
        self._batcher: GroupCommitter[_Find] = GroupCommitter(self._run, on_batch=_no_telemetry)
        self.batch_sizes: list[int] = []

    async def find(self, actor_id: str, message_id: str) -> EntryRow | None:
        """The entry logged with ``message_id``, or None (see ``Store.find_message``)."""
        item = _Find(actor_id, message_id)
        await self._batcher.submit(item)
        await anyio.lowlevel.checkpoint_if_cancelled()
        return item.row

    async def _run(self, batch: Sequence[Request[_Find]]) -> None:
        self.batch_sizes.append(len(batch))
        if len(self.batch_sizes) > 1024:
            del self.batch_sizes[:512]
        pool = self._pool()
        if pool is None:
            err: BaseException = self._closed()
            for req in batch:
                req.error = err
            return
        try:
            if len(batch) == 1:
                item = batch[0].item
                rows = await pool.fetch(_FIND_MESSAGE, item.actor_id, item.message_id)
            else:
                rows = await pool.fetch(
                    _FIND_MESSAGES,
                    [req.item.actor_id for req in batch],
                    [req.item.message_id for req in batch],
                )
        except DRIVER_ERRORS as exc:
            err = self._fail("read", exc)
            err.__cause__ = exc
            for req in batch:
                req.error = err
            return
        for r in rows:
            req = batch[r[0] - 1]
            try:
                req.item.row = entry_row(tuple(r)[1:], actor_id=req.item.actor_id)
            except CorruptEntryError as exc:  # a damaged row fails only its own lookup
                req.error = exc
