"""One actor's append-before-execute log over a Store.

``write`` assigns the next seq and buffers the row (synchronous, so seqs follow program order);
``flush`` makes everything written so far durable. Flushes of one actor are serialized, so
its appends reach the store in seq order; flushes of different actors run concurrently and
the store's group commit merges them into shared transactions.

If an append fails, the journal is *broken*: the in-memory seq may be ahead of the store, so
nothing more may be written. The owner stops the actor; re-spawning reads the truth back.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import anyio

from .._journal import codec as _codec, compact as _compact, records as _records
from .._journal.errors import ActorStoppedError
from .._journal.records import Record
from .._tracing import telemetry as _telemetry
from ..store import EntryRow, Store
from .seenids import SeenIds

__all__ = ["Journal", "append_never_suspends"]


def append_never_suspends(store: object) -> bool:
    """Does ``store.append`` complete without ever suspending (``MemoryStore``)? Declared by
    the class that defines the ``append`` in use (``_append_never_suspends = True``), so a
    subclass that overrides ``append`` (a test's faulty store that sleeps) is shielded
    again. Such an append reaches no checkpoint: no cancellation can interrupt it, and
    the shield around it (an anyio cancel scope per append) would protect nothing."""
    for klass in type(store).__mro__:
        if "append" in vars(klass):
            return vars(klass).get("_append_never_suspends") is True
    return False


class Journal:
    def __init__(
        self,
        store: Store,
        actor_id: str,
        last_seq: int,
        scope: Callable[..., anyio.CancelScope] = anyio.CancelScope,
    ) -> None:
        self.store = store
        #: the backend's cancel scope class (``mailbox.backend``): the shield per append
        self.scope = scope
        #: the store's append never suspends: no cancellation can reach it, no shield
        self._unshielded = append_never_suspends(store)
        self.actor_id = actor_id
        self.last_seq = last_seq  # last seq written (buffered or durable)
        self.durable_seq = last_seq  # last seq known durable
        self._buffer: list[EntryRow] = []
        self._flushing = False
        self._flush_done: anyio.Event | None = None
        self.broken: BaseException | None = None
        #: every message id this log holds (loaded by the cell) and every id written here
        self.seen = SeenIds()
        #: (seq, fn): called once entry ``seq`` is durable, by the flush that commits it
        #: (the replies of a burst's steps: ``when_durable``)
        self._on_durable: list[tuple[int, Callable[[], None]]] = []

    def when_durable(self, seq: int, fn: Callable[[], None]) -> None:
        """Call ``fn`` (synchronous, must not raise) once entry ``seq`` is durable: at once
        if it is, else right after the flush that commits it. Dropped if the journal breaks
        first (the owner then fails whatever ``fn`` would have settled)."""
        if self.durable_seq >= seq:
            fn()
        else:
            self._on_durable.append((seq, fn))

    @property
    def deferred(self) -> int:
        """How many ``when_durable`` calls wait for a commit."""
        return len(self._on_durable)

    def _release(self) -> None:
        due = self._on_durable
        durable = self.durable_seq
        keep = [(seq, fn) for seq, fn in due if seq > durable]
        self._on_durable = keep
        for seq, fn in due:
            if seq <= durable:
                fn()

    def write(
        self,
        kind: str,
        type_tag: str,
        ref: int,
        payload: dict[str, Any] | list[Any],
        *,
        message_id: str | None = None,
    ) -> int:
        """Buffer one entry; return its seq. Raises ``EncodeError`` (nothing buffered)."""
        if self.broken is not None:
            raise ActorStoppedError(
                f"actor {self.actor_id!r} stopped after a failed append: {self.broken}"
            )
        if type(payload) is list:  # a builder's compact array (``encode_entry``'s first case)
            data = _codec.encode_plain(payload, f"{kind} entry")
        else:
            data = _compact.encode_entry(kind, payload)
        seq = self.last_seq + 1
        row = _codec.make_row(self.actor_id, seq, kind, type_tag, ref, message_id, data)
        self._buffer.append(row)
        self.last_seq = seq
        if message_id is not None:
            self.seen.add(message_id)
        return seq

    def last_record(self) -> Record:
        """The entry ``write`` just buffered, decoded from its bytes (call it right after
        ``write``, with no await between): exactly what replay will read."""
        return _records.decode_entry(self._buffer[-1])

    def last_logged(self, field: _records.LoggedField) -> Any:
        """One field of the entry ``write`` just buffered, decoded from its bytes (the hot
        path: a message's body, a result's or effect's value, a step's reply)."""
        return _records.logged(self._buffer[-1], field)

    def seal(self, exc: BaseException) -> None:
        """The actor is quarantined: drop what is written but not yet committing, and
        refuse every later write and flush with ``exc``. A quarantined actor writes nothing
        (a message posted just before the quarantine is refused to its caller, so it must
        not be committed later, e.g. by the system's final flush). Rows a flush already
        took are committing and stay (their callers learn their outcome from it)."""
        if self.broken is None:
            self.broken = exc
        self._buffer = []
        self._on_durable = []

    async def flush(self) -> None:
        """Make every written entry durable. A cancellation point; if cancelled, the
        entries may or may not be durable (the journal stays consistent either way)."""
        target = self.last_seq
        while self.durable_seq < target:
            if self.broken is not None:
                raise ActorStoppedError(f"actor {self.actor_id!r} stopped: {self.broken}")
            if self._flushing:
                # Another flush of this actor is committing; it may cover us. The event is
                # made only when someone has to wait: most flushes meet no contention.
                if self._flush_done is None:
                    self._flush_done = anyio.Event()
                await self._flush_done.wait()
                continue
            self._flushing = True
            rows, self._buffer = self._buffer, []
            t0 = time.perf_counter()
            try:
                if self._unshielded:
                    await self.store.append(self.actor_id, self.durable_seq, rows)
                else:
                    with self.scope(shield=True):
                        await self.store.append(self.actor_id, self.durable_seq, rows)
                self.durable_seq = rows[-1].seq
            except BaseException as exc:
                self.broken = exc
                self._on_durable = []
                raise
            finally:
                self._flushing = False
                done, self._flush_done = self._flush_done, None
                if done is not None:
                    done.set()
            if self._on_durable:
                self._release()
            _telemetry.record_append(time.perf_counter() - t0, len(rows))
        if self.broken is not None and self.durable_seq < self.last_seq:
            raise ActorStoppedError(f"actor {self.actor_id!r} stopped: {self.broken}")
