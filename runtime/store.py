"""The store protocol: what a log store must do, and the rows it stores.

This module is public API. Third parties write stores against it (like Akka's journal plugin
API). A store sees only encoded rows: bytes plus checksum, never message or state classes.
It never computes or checks checksums itself; the runtime does (``actorlog._codec``), so a
store cannot "repair" damage by accident.

Contract (every store; ``tests/stores/test_contract.py`` checks it):

* **Atomic appends.** ``append`` writes all rows of the call or none of them, and returns only
  when they are durable to the store's promised level.
* **Conditional appends.** ``append(actor_id, expected_last_seq, rows)`` succeeds only if the
  actor's last stored seq is ``expected_last_seq`` and ``rows`` continue it without gaps
  (``expected_last_seq + 1, + 2, ...``); otherwise it raises
  :class:`~actorlog.SequenceConflictError` and writes nothing.
* **Order.** Two appends to one actor that are both awaited concurrently may be committed in
  one transaction, but never reordered.
* **Message ids are unique per actor** (``append`` raises ``SequenceConflictError`` on a
  duplicate); ``find_message`` looks one up through an index.
* **Reads return rows as stored**, damage included: verification is the runtime's job.
* **Failure vs rejection.** An I/O failure raises ``StoreUnavailableError`` (nothing may be
  assumed written unless a later read shows it); a rejection (conflict) raises
  ``SequenceConflictError`` and certainly wrote nothing.

Optional: **consistent reads.** A store may offer ``reading()``, an async context manager
yielding a read-only view of itself (same read methods) whose reads all see one consistent
state of the store, e.g. one read transaction (SQLite: a connection of its own in one
``BEGIN``; PostgreSQL: ``REPEATABLE READ, READ ONLY``). Operators' tools (``actorlog verify``,
``actors``, ``history``, ...) read each actor through it, so that a runtime writing meanwhile
is never mistaken for damage (a log ending past its summary row, a snapshot beyond the log).
A store without it is read directly: fine when nothing writes it, and ``verify`` then
re-reads an actor's summary after scanning its log before it calls a difference damage.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

import attrs

__all__ = [
    "ActorRow",
    "EntryRow",
    "EventRow",
    "SnapshotInfo",
    "SnapshotRow",
    "Store",
    "StoreCapabilities",
    "FORMAT_VERSION",
    "KINDS",
]

#: The on-disk format version stores write into their metadata (FORMAT.md [F1]). A store
#: that finds a higher version raises ``UnsupportedFormatError`` and changes nothing.
FORMAT_VERSION = 1

#: The entry kinds, in the order of their one-byte codes in the checksum frame (FORMAT.md [F4]).
KINDS: tuple[str, ...] = ("message", "intent", "result", "step", "effect", "decision")


@attrs.frozen(slots=True)
class EntryRow:
    """One log entry as stored.

    Attributes:
        actor_id: the actor whose log this is.
        seq: position in the actor's log, 1, 2, 3, ... without gaps.
        kind: one of :data:`KINDS`.
        type_tag: message class tag (message, step), tool name (intent, result),
            effect name (effect) or decision action (decision).
        ref: the seq this entry refers to: for ``step``/``intent``/``effect`` the message seq
            of the step; for ``result``/``decision`` the intent seq. ``0`` for messages.
        message_id: the caller's message id (``message`` entries only), unique per actor.
        payload: the encoded body (UTF-8 JSON, see FORMAT.md).
        checksum: CRC-32 over the frame of all fields above (FORMAT.md [F6]).
    """

    actor_id: str
    seq: int
    kind: str
    type_tag: str
    ref: int
    message_id: str | None
    payload: bytes
    checksum: int


@attrs.frozen(slots=True)
class SnapshotInfo:
    """A snapshot's metadata, without its bytes.

    Attributes:
        actor_id: the actor.
        seq: the log seq the snapshot covers (every entry <= seq is reflected in it).
        handled_seq: the seq of the last message whose step is reflected in it.
        type_tag: the state class tag.
        schema_version: the state class's schema version.
        digest: SHA-256 of ``data`` (32 bytes).
        size: ``len(data)``.
        created_at: Unix time in seconds when it was written.
    """

    actor_id: str
    seq: int
    handled_seq: int
    type_tag: str
    schema_version: int
    digest: bytes
    size: int
    created_at: float


@attrs.frozen(slots=True)
class SnapshotRow:
    """A whole snapshot: metadata and the encoded state."""

    info: SnapshotInfo
    data: bytes


@attrs.frozen(slots=True)
class ActorRow:
    """One actor as the store knows it.

    Attributes:
        actor_id: the actor's stable id.
        actor_type: the registered class tag.
        last_seq: the last seq in its log (0 if empty).
        last_message_seq: the seq of the last ``message`` entry (0 if none).
        handled_seq: the highest ``ref`` of its ``step`` entries: the last message handled.
        first_seq: the first seq still stored (1 unless compacted; 0 if empty).
        created_at: Unix time of registration.
    """

    actor_id: str
    actor_type: str
    last_seq: int
    last_message_seq: int
    handled_seq: int
    first_seq: int
    created_at: float


@attrs.frozen(slots=True)
class EventRow:
    """An operator-history event (recoveries, corruption found, quarantines). Not part of
    the checksummed log: it is an audit trail about the log."""

    actor_id: str
    at: float
    kind: str
    detail: str  # JSON object


@attrs.frozen(slots=True)
class StoreCapabilities:
    """What a store can and cannot promise; tests and recovery read these.

    Attributes:
        torn_writes: True if a crash can leave a partially written last entry (plain files).
            Transactional stores are False: every damaged entry is corruption.
        multi_process: True if several processes may open the store at once.
        durable: True if an acknowledged append survives a process crash.
        leases: True if the store arbitrates ownership of actors between runtimes: it
            offers ``acquire_lease(actor_id, owner, ttl) -> token | None``,
            ``renew_leases(owner, {actor_id: token}, ttl) -> renewed ids``,
            ``release_lease(actor_id, owner, token)`` and ``set_fence(actor_id, token)``, and
            rejects an append fenced with a token older than the actor's current one
            (raising :class:`~actorlog.LeaseLostError`). Expiry is measured on the store's
            clock. ``ActorSystem(owner=...)`` uses them only when this is True
            (``docs/scaling.md``). Default False: single-runtime stores need none of it.
            Optionally such a store also offers ``notify_replies([(actor_id, message_id)])``
            (called once those messages' steps are durable) and ``listen_replies(callback)
            -> stop`` (``callback(actor_id, message_id)``; ``message_id`` None: any of the
            actor's; ``(None, None)``: notifications may have been lost), so that a remote
            ``ask`` is woken when its reply is durable instead of polling the log.
    """

    torn_writes: bool = False
    multi_process: bool = False
    durable: bool = True
    leases: bool = False


@runtime_checkable
class Store(Protocol):
    """An async log store. All methods are cancellation points; a cancelled ``append``
    may or may not have been committed (a later read tells)."""

    @property
    def capabilities(self) -> StoreCapabilities: ...

    @property
    def url(self) -> str:
        """A URL that reopens this store (``sqlite:///...``, ``memory://``, ...)."""
        ...

    async def open(self) -> None:
        """Create or migrate the schema. Raises ``UnsupportedFormatError`` for a newer format."""

    async def close(self) -> None:
        """Flush and release resources. Idempotent."""

    async def register_actor(self, actor_id: str, actor_type: str) -> ActorRow:
        """Insert the actor if new; return its row (with the type it was first registered as)."""
        ...

    async def get_actor(self, actor_id: str) -> ActorRow | None:
        """The actor's row, or None if never registered."""
        ...

    async def list_actors(self) -> list[ActorRow]:
        """Every registered actor, ordered by id."""
        ...

    async def append(self, actor_id: str, expected_last_seq: int, rows: Sequence[EntryRow]) -> None:
        """Atomically and durably append ``rows`` (seqs ``expected_last_seq+1 ...``).

        Raises:
            SequenceConflictError: the log's last seq is not ``expected_last_seq``, the seqs do
                not continue it, or a message id is already used. Nothing was written.
            StoreUnavailableError: I/O failed; the rows may or may not be written.
            StoreClosedError: the store is closed.
        """

    async def read(
        self,
        actor_id: str,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[EntryRow]:
        """Entries with ``after_seq < seq <= upto_seq`` (and kind in ``kinds``), by seq."""
        ...

    async def find_message(self, actor_id: str, message_id: str) -> EntryRow | None:
        """The ``message`` entry with this message id, through an index."""
        ...

    async def find_ref(self, actor_id: str, kind: str, ref: int) -> list[EntryRow]:
        """Entries of ``kind`` whose ``ref`` is ``ref`` (e.g. the step of a message), by seq."""
        ...

    async def save_snapshot(self, snapshot: SnapshotRow) -> None:
        """Durably store a snapshot (replacing one with the same actor and seq)."""

    async def list_snapshots(self, actor_id: str) -> list[SnapshotInfo]:
        """The actor's snapshots, newest (highest seq) first."""
        ...

    async def load_snapshot(self, actor_id: str, seq: int) -> SnapshotRow | None:
        """One snapshot with its bytes, or None."""
        ...

    async def delete_snapshots(self, actor_id: str, seqs: Sequence[int]) -> None:
        """Delete these snapshots (no error for missing ones)."""

    async def record_event(self, actor_id: str, kind: str, detail: str) -> None:
        """Append an operator-history event (``detail`` is a JSON object)."""

    async def read_events(self, actor_id: str) -> list[EventRow]:
        """The actor's operator-history events, oldest first."""
        ...
