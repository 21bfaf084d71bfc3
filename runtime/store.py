"""The store protocol: what a log store must do, and the rows it stores.

This module is public API. Third parties write stores against it (like Akka's journal plugin
API). A store sees only encoded rows: bytes plus checksum, never message or state classes.
It never computes or checks checksums itself; the runtime does (``actorlog._journal.codec``), so a
store cannot "repair" damage by accident.

Contract (every store; the public kit ``actorlog.testing`` checks it, docs/stores.md):

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
  A store does check the *type* of every column it reads (a bit flipped in a SQLite record
  header turns a BLOB into TEXT, an INTEGER into a REAL): build rows with
  :func:`entry_row`, :func:`actor_row`, :func:`snapshot_info` and :func:`event_row`, which
  raise :class:`~actorlog.CorruptEntryError` (check ``"column type"``) for an entry or a
  single actor row, and mark rows of listings (``damage``) so that one damaged row does not
  hide the others.
* **Writers and readers.** ``open`` without ``read_only`` opens for writing (a runtime, or an
  offline writer such as ``actorlog resolve``); ``read_only=True`` for reading (operators'
  read commands). A store whose database admits one writing process
  (``capabilities.multi_process`` False, e.g. ``SqliteStore``) refuses a second writer at
  ``open`` with :class:`~actorlog.StoreLockedError` naming the holder, and keeps admitting
  readers. A store may also offer ``verify_limits`` (a tuple of sentences): what
  ``actorlog verify`` cannot see in it, printed with its report.
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

from collections.abc import Awaitable, Callable, Mapping, Sequence
from typing import NamedTuple, Protocol, runtime_checkable

import attrs

from ._journal import rows as _rows
from ._journal.checks import shown, validate_seconds

# The errors a store raises and the rows it keeps, re-exported so that stores import only
# this module.
from ._journal.errors import (
    ConfigurationError,
    CorruptEntryError,
    LeaseLostError,
    SequenceConflictError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
    StoreURLError,
    UnsupportedFormatError,
)
from ._journal.rows import (
    ACTOR_COLUMNS,
    ENTRY_COLUMNS,
    EVENT_COLUMNS,
    SNAPSHOT_INFO_COLUMNS,
    ActorRow,
    EntryRow,
    EventRow,
    SnapshotInfo,
    SnapshotRow,
    actor_row,
    entry_row,
    event_row,
    snapshot_data,
    snapshot_info,
)
from ._journal.storetimers import TimerRow, TimerStore

__all__ = [
    "ACTOR_COLUMNS",
    "ENTRY_COLUMNS",
    "EVENT_COLUMNS",
    "FORMAT_VERSION",
    "KINDS",
    "SNAPSHOT_INFO_COLUMNS",
    "ActorRow",
    "AuditRow",
    "AuditStore",
    "CommitObserver",
    "CompactingStore",
    "InboxRow",
    "IntegrityCheckingStore",
    "LeaseStore",
    "LogStartRow",
    "MessageIdIndex",
    "OrphanRow",
    "ReplyStore",
    "ConfigurationError",
    "CorruptEntryError",
    "EntryRow",
    "EventRow",
    "LeaseLostError",
    "SequenceConflictError",
    "SnapshotInfo",
    "SnapshotRow",
    "Store",
    "StoreCapabilities",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreURLError",
    "StoreUnavailableError",
    "TimerRow",
    "TimerStore",
    "UnfinishedStore",
    "UnsupportedFormatError",
    "actor_row",
    "entry_row",
    "event_row",
    "report_commit",
    "set_commit_observer",
    "snapshot_data",
    "shown",
    "snapshot_info",
    "validate_seconds",
]

#: The on-disk format version stores write into their metadata (FORMAT.md [F1]). A store
#: that finds a higher version raises ``UnsupportedFormatError`` and changes nothing.
FORMAT_VERSION = 5

#: The entry kinds, in the order of their one-byte codes in the checksum frame (FORMAT.md [F4]).
KINDS: tuple[str, ...] = ("message", "intent", "result", "step", "effect", "decision")


@attrs.frozen(slots=True)
class StoreCapabilities:
    """What a store can and cannot promise; tests and recovery read these.

    Attributes:
        torn_writes: True if a crash can leave a partially written last entry (plain files).
            Transactional stores are False: every damaged entry is corruption.
        multi_process: True if several processes may write the store at once (and so run
            runtimes on it). ``SqliteStore`` is False: one writer per file, enforced by a
            lock; other processes may still open it ``read_only``.
        durable: True if an acknowledged append survives a process crash.
        leases: True if the store arbitrates ownership of actors between runtimes: it
            implements :class:`LeaseStore` (leases with fencing tokens, the inbox) and
            rejects an append fenced with a token older than the actor's current one
            (raising :class:`~actorlog.LeaseLostError`). Expiry is measured on the store's
            clock. ``ActorSystem(owner=...)`` uses them only when this is True
            (``docs/scaling.md``). Default False: single-runtime stores need none of it.
            Optionally such a store also implements :class:`ReplyStore`, so that a remote
            ``ask`` is woken when its reply is durable instead of polling the log.
        timers: True if the store implements :class:`TimerStore`: an index of pending
            timers (``send_later``, schedules) by due time. Without it the runtime refuses
            ``send_later`` and ``schedule`` with a ``ConfigurationError``.
    """

    torn_writes: bool = False
    multi_process: bool = False
    durable: bool = True
    leases: bool = False
    #: the store implements :class:`TimerStore` (durable timers, ``send_later``, schedules)
    timers: bool = False


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
        """Insert the actor if new; return its row (with the type it was first registered as).

        ``created`` may be True only when this call inserted the row (see ``ActorRow``)."""
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


# -- deleting actors, with a store-level audit trail ----------------------------------------


class AuditRow(NamedTuple):
    """A store-level audit event (:meth:`AuditStore.read_audit`): it outlives the actor.

    Attributes:
        id: increasing per store.
        at: when it was written (seconds since the epoch, the store's clock).
        kind: ``"deleted"`` (the only kind so far).
        actor_id: the actor it is about.
        detail: a JSON object (who, why, the actor's type and last seq, ...).
    """

    id: int
    at: float
    kind: str
    actor_id: str
    detail: str


@runtime_checkable
class AuditStore(Protocol):
    """Optional: delete an actor, leaving an audit row (``system.delete``, ``actorlog
    delete``). The contract kit checks it for stores that have these methods."""

    async def delete_actor(self, actor_id: str, detail: str) -> AuditRow:
        """In one transaction: remove the actor's entries, snapshots, events, summary row
        (with leases, its lease and inbox), cancel its pending and claimed (``firing``)
        timers, append a ``deleted`` audit row with ``detail`` (JSON); return that row.
        Deleting an absent actor still writes the row. The id may be registered again."""
        ...

    async def read_audit(self, actor_id: str | None = None) -> list[AuditRow]:
        """Audit rows (of one actor, or all), oldest first."""
        ...


# -- ownership across runtimes: leases, fencing, inbox, replies ---------------------------


class OrphanRow(NamedTuple):
    """An actor with unfinished work and no live lease (:meth:`LeaseStore.orphans`)."""

    actor_id: str
    actor_type: str


class InboxRow(NamedTuple):
    """A message queued for an actor owned by another runtime (:meth:`LeaseStore.inbox_for`).

    Attributes:
        actor_id: the addressee.
        message_id: the caller's message id (unique per actor: queued once).
        type_tag: the message class tag.
        body: the message, cattrs-unstructured, as a JSON text.
        sender: the sending actor's id, or None.
    """

    actor_id: str
    message_id: str
    type_tag: str
    body: str
    sender: str | None


class LeaseStore(Protocol):
    """The ownership operations of a store with ``capabilities.leases`` (``docs/scaling.md``).

    ``ActorSystem(owner=...)`` uses them only when ``capabilities.leases`` is True. All
    expiry is measured on the store's clock (one clock for every runtime). Every async method
    is a cancellation point; a cancelled write may or may not have happened.
    """

    def set_fence(self, actor_id: str, token: int | None) -> None:
        """Carry ``token`` with every later append to ``actor_id`` from this store instance;
        the store rejects an append whose token is older than the actor's current lease
        token with :class:`~actorlog.LeaseLostError` (``None``: stop fencing)."""

    async def acquire_lease(self, actor_id: str, owner: str, ttl: float) -> int | None:
        """Take the actor's lease for ``ttl`` seconds if it is free, expired or already
        ``owner``'s; return the new fencing token (the previous one + 1), or None if another
        owner holds a live lease. Atomic with respect to the actor's appends: an append
        fenced with the old token that commits after this returns is rejected."""
        ...

    async def renew_leases(self, owner: str, tokens: Mapping[str, int], ttl: float) -> set[str]:
        """Extend every lease ``owner`` still holds with the given token to now + ``ttl``;
        return the ids renewed (a missing id was taken over)."""
        ...

    async def release_lease(self, actor_id: str, owner: str, token: int) -> None:
        """Give the lease up at once if ``owner`` holds it with ``token`` (the token stays:
        the next owner gets token + 1)."""

    async def orphans(self, limit: int = 100, owner: str | None = None) -> list[OrphanRow]:
        """Actors with unfinished work (unhandled messages or inbox messages) and no live
        lease; with ``owner``, also those whose live lease ``owner`` holds. At most
        ``limit``."""
        ...

    async def inbox_put(
        self, actor_id: str, message_id: str, type_tag: str, body: str, sender: str | None
    ) -> tuple[str, str] | None:
        """Durably queue a message for the actor's owner (once per message id; a repeat is
        not an error) and wake the owner's :meth:`listen_inbox` callback. Returns None, or,
        when a message with this id is queued already (nothing was written), that one's
        ``(type_tag, body)``: the runtime refuses an id reused for another message. A store
        may always return None (the reuse is then found once the first is logged)."""

    async def inbox_for(self, owner: str, limit: int = 500) -> list[InboxRow]:
        """Queued messages of actors whose lease ``owner`` holds, oldest first."""
        ...

    async def inbox_delete(self, actor_id: str, message_id: str) -> None:
        """Drop a queued message once it is in the actor's log (no error if missing)."""

    async def listen_inbox(self, callback: Callable[[str], None]) -> Callable[[], Awaitable[None]]:
        """Call ``callback(actor_id)`` when a message is queued for that actor; return an
        async function that stops listening. Notifications may be lost: owners also poll."""
        ...


class ReplyStore(Protocol):
    """Optional, for stores with leases: announce durable replies across runtimes, so that a
    remote ``ask`` is woken when its reply is durable. Without these methods a remote ``ask``
    polls the actor's log."""

    async def notify_replies(self, replies: Sequence[tuple[str, str]]) -> None:
        """Announce that the steps of these ``(actor_id, message_id)`` messages are durable
        (called only once they are)."""

    async def listen_replies(
        self, callback: Callable[[str | None, str | None], None]
    ) -> Callable[[], Awaitable[None]]:
        """Call ``callback(actor_id, message_id)`` for each announced reply (``message_id``
        None: any of the actor's; ``(None, None)``: notifications may have been lost, look
        again). Returns an async function that stops listening."""
        ...


# -- the start's one query (optional) -------------------------------------------------------


@runtime_checkable
class UnfinishedStore(Protocol):
    """Optional: the actors a runtime must recover at start, found by the store in one query
    instead of listing every actor (``list_actors``) and filtering in Python."""

    async def unfinished_actors(self) -> list[ActorRow]:
        """The summary rows, in actor id order and read like ``list_actors`` (lenient), of
        every actor with unfinished work (``handled_seq < last_message_seq``) and of every
        actor whose summary row has a column of the wrong type (``damage`` set: whether it
        has work is unknown). The other actors may be left out."""
        ...


@runtime_checkable
class MessageIdIndex(Protocol):
    """Optional: every message id of one actor's log, read at once. The runtime loads them
    into a filter the first time the actor gets a message with an explicit id, and from then
    on checks a fresh id without a read (``find_message`` stays the authority for an id the
    filter may have seen: docs/architecture.md "The message-id filter")."""

    async def message_ids(self, actor_id: str, *, limit: int) -> list[str] | None:
        """The message ids of the actor's stored entries (any order), or None if there are
        more than ``limit`` (the runtime then asks ``find_message`` for every id)."""
        ...


@runtime_checkable
class IntegrityCheckingStore(Protocol):
    """Optional: the database engine's own check of the store's files (SQLite: ``PRAGMA
    integrity_check``). ``actorlog verify`` runs it after checking the rows, because damage
    below the rows (an index page, a b-tree page no row read happened to touch) is invisible
    to the log's checksums until some other read meets it."""

    async def check_integrity(self) -> list[str]:
        """One line per problem the engine finds, ``[]`` when it finds none. A file so
        damaged that the check itself fails is one problem line, not an exception.

        Raises:
            StoreUnavailableError: the check could not run (I/O failed, the store is busy).
        """
        ...


# -- compaction (optional; docs/recovery.md "Retention and compaction") ---------------------


class LogStartRow(NamedTuple):
    """Where an actor's compacted log starts (FORMAT.md [F16]).

    Attributes:
        actor_id: whose log.
        first_seq: the first seq still stored; every entry before it was removed.
        checksum: CRC-32 of the start frame (``actor_id``, ``first_seq``), computed by the
            runtime; a store never computes or checks it.
        at: Unix time of the compaction that wrote it.
    """

    actor_id: str
    first_seq: int
    checksum: int
    at: float


@runtime_checkable
class CompactingStore(Protocol):
    """Optional: a store that can remove the start of an actor's log.

    The runtime decides *what* may go (it never removes what recovery, ``verify``,
    ``history``, an in-doubt intent or message-id deduplication still needs); the store only
    removes it, atomically with the record of where the log now starts.
    """

    async def compact(self, actor_id: str, upto_seq: int, *, checksum: int) -> int:
        """Atomically remove the actor's entries with ``seq <= upto_seq`` and record
        ``LogStartRow(actor_id, upto_seq + 1, checksum, now)`` (replacing the previous one);
        the summary row's ``first_seq`` becomes ``upto_seq + 1``. Appends are not blocked
        beyond one short transaction, and never conflict with it (they touch the log's end).

        Returns the number of entries removed. A ``upto_seq`` before the log's current start
        removes nothing and changes nothing (returns 0), so two compactions racing are safe.

        Raises:
            ConfigurationError: ``upto_seq`` is not below the actor's last seq (the log is
                never emptied: its last entry stays), or the actor does not exist. Nothing
                was changed.
            StoreUnavailableError: I/O failed; the compaction may or may not have happened
                (a later :meth:`log_start` tells); either way the log is whole.
        """
        ...

    async def log_start(self, actor_id: str) -> LogStartRow | None:
        """The actor's log start record, or None if its log was never compacted."""
        ...


# -- commit telemetry -----------------------------------------------------------------------

#: Called with the number of appends a store committed in one shared transaction.
CommitObserver = Callable[[int], None]

_commit_observer: CommitObserver | None = None


def set_commit_observer(observer: CommitObserver | None) -> None:
    """Install the function :func:`report_commit` calls (the runtime installs its metric;
    ``None`` removes it). Stores never import telemetry: they call :func:`report_commit`."""
    global _commit_observer
    _commit_observer = observer


def report_commit(appends: int) -> None:
    """A store calls this once per transaction that committed ``appends`` appends together
    (group commit). The observer must not raise."""
    observer = _commit_observer
    if observer is not None:
        observer(appends)


for _name in _rows.__all__:
    _obj = getattr(_rows, _name)
    if callable(_obj):  # the row classes and builders: shown (and pickled) as actorlog.store.X
        _obj.__module__ = __name__
for _timers in (TimerRow, TimerStore):  # likewise the timer index (_storetimers)
    _timers.__module__ = __name__
