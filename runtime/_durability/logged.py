"""A message already in a cell's log: finding it by its message id, its reply, and waiting
until it is durable (``_durable``).

A retry of a message (the same ``message_id``) is answered from its first delivery: the cell
finds where it was logged (:meth:`LoggedMessages._find_message`) and waits for, or reads back,
the reply of its step (:meth:`LoggedMessages.reply_for`). Mixed into ``_cell.Cell``, whose
attributes it uses (declared below).
"""

from __future__ import annotations

import contextlib
from typing import TYPE_CHECKING, Any

from .._journal import codec as _codec
from .._journal.errors import (
    ActorlogError,
    CorruptEntryError,
    SequenceConflictError,
    StoreCorruptError,
    StoreUnavailableError,
)
from .._journal.records import EntryKind, StepRecord, decode_entry
from . import reuse as _reuse
from .mailbox import Moved, Reply, settle, step_outcome
from .seenids import load_seen_ids

if TYPE_CHECKING:
    import collections
    from collections.abc import Callable, Coroutine

    import anyio

    from ..store import Store
    from .escalation import Escalations
    from .wal import Journal

__all__ = ["LoggedMessages"]


class LoggedMessages:
    """The lookups of already-logged messages of a cell (a mixin of ``Cell``)."""

    store: Store
    actor_id: str
    journal: Journal
    done: anyio.Event
    waiters: dict[int, list[Reply]]
    inflight_ids: collections.OrderedDict[str, int]
    inflight_messages: dict[str, tuple[str, Any]]
    _pruned: int
    _loading_ids: bool
    escalations: Escalations
    handled_seq: int
    reply_type: Any

    if TYPE_CHECKING:

        def spawn_task(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None: ...

        def check_usable(self) -> None: ...

        def quarantine(self, exc: BaseException, *, status: str = ...) -> None: ...

    async def _find_message(self, message_id: str) -> tuple[int, tuple[str, Any]] | None:
        """The seq of the message logged with ``message_id`` and that message (type tag,
        plain body), or None.

        Looks in flight first, then in the filter of the log's ids (``_seenids``: a fresh
        id is answered without a read), then in the store. The filter is loaded in the
        background, started by the first message with an id: that message, and those until
        the load completes, are answered by the store's index (one lookup each), so the
        first ask after a start costs the same for a log of 250 steps as of 25,000 (issue 24
        item 23). An id forgotten from
        ``inflight_ids`` while the store was being asked (its message became handled and
        durable meanwhile) may be missing from that answer, which was read before the
        commit: ask again.
        """
        seen = self.journal.seen
        if seen.state == "unloaded" and not self._loading_ids:
            self._loading_ids = True
            self.spawn_task(self._load_seen_ids)
        while True:
            seq = self.inflight_ids.get(message_id)
            if seq is not None:
                return seq, self.inflight_messages[message_id]
            if seen.surely_new(message_id):
                return None
            pruned = self._pruned
            row = await self.store.find_message(self.actor_id, message_id)
            if row is not None:
                _codec.verify_row(row, self.actor_id, row.seq)
                if row.message_id != message_id:  # an intact entry, found by a damaged index
                    raise StoreCorruptError(
                        self.store.url,
                        f"its message-id index finds {message_id!r} at seq {row.seq} of "
                        f"actor {self.actor_id!r}, whose message id is {row.message_id!r}",
                    )
                return row.seq, _reuse.logged_message(row)
            seq = self.inflight_ids.get(message_id)
            if seq is not None:
                return seq, self.inflight_messages[message_id]
            if self._pruned == pruned:
                return None

    async def _load_seen_ids(self) -> None:
        """Load the log's message ids into the filter (a background task; a failed load
        leaves it ``unloaded``, and the next message with an id starts another)."""
        try:
            await load_seen_ids(self.journal.seen, self.store, self.actor_id)
        finally:
            self._loading_ids = False

    async def reply_for(self, seq: int) -> Reply:
        """The reply slot of an already-logged message: resolved from its recorded step if it
        was handled, else when its step completes here.

        A handled message's reply is read back from the log (after the commit that carries
        its step): nothing is registered, so a caller cancelled meanwhile leaves nothing
        behind, and a cell that passivates meanwhile does not matter.
        """
        if self.handled_seq < seq <= self.journal.last_seq:
            self.check_usable()
            if self.done.is_set():
                raise Moved  # stopped under the caller: the retry meets the error
            slot = Reply(self.waiters, seq)
            if seq in self.escalations.escalated:  # its step waits for an operator
                settle(self.waiters, seq, None, self.escalations.escalated[seq])
            return slot
        failure: ActorlogError | None = None
        try:
            await self.journal.flush()  # its step may still be buffered (no-op if not)
        except ActorlogError as exc:
            failure = self._commit_failure(exc)
        for row in await self.store.find_ref(self.actor_id, EntryKind.STEP, seq):
            _codec.verify_row(row, self.actor_id, row.seq)
            slot = Reply()
            step = decode_entry(row)
            if not isinstance(step, StepRecord):
                raise CorruptEntryError(self.actor_id, row.seq, "decode", "not a step")
            slot.set(*self.outcome(seq, step))
            return slot
        if failure is not None:
            raise failure
        raise CorruptEntryError(
            self.actor_id, seq, "reference", "a handled message has no step in the log"
        )

    def outcome(self, seq: int, step: StepRecord) -> tuple[Any, BaseException | None]:
        return step_outcome(self.actor_id, seq, step, self.reply_type)

    async def _commit_queued(self, seq: int) -> None:
        """Commit a message queued behind a running step (see ``post``). A failed commit is
        the step's to meet and report: this one only asks for it earlier."""
        with contextlib.suppress(ActorlogError):
            await self._durable(seq)

    async def _durable(self, seq: int) -> None:
        """Wait until the entry ``seq`` of this log is committed.

        Raises the failure of the commit that should have carried it: the store's
        ``StoreUnavailableError`` (also for a caller whose entry rode on another caller's
        commit), or ``SequenceConflictError``.
        """
        if self.journal.durable_seq >= seq or seq > self.journal.last_seq:
            return  # committed already (or read back from the store)
        try:
            await self.journal.flush()
        except SequenceConflictError as exc:
            self.quarantine(exc, status="stopped")
            raise
        except ActorlogError as exc:
            if self.journal.durable_seq >= seq:
                return  # ours committed; a later commit failed
            raise self._commit_failure(exc) from exc.__cause__

    def _commit_failure(self, exc: ActorlogError) -> ActorlogError:
        """What a caller whose entry was in a failed commit gets: the store's error."""
        broken = self.journal.broken
        if isinstance(broken, StoreUnavailableError) and broken is not exc:
            err = StoreUnavailableError(str(broken))
            err.__cause__ = broken
            return err
        return exc
