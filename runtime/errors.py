"""The exceptions actorlog raises, and its one warning. Every error is an
:class:`ActorlogError`; each is also importable from ``actorlog`` itself.

::

    ActorlogError
      ConfigurationError            bad arguments to an actorlog call (nothing was written)
        EncodeError                 a message/state/argument the codec cannot encode
        AlreadyDecidedError         an intent already has its one decision (nothing written)
        MessageIdReusedError        a message id already names another message (nothing written)
        StoreURLError               a store URL that does not parse (or whose driver is missing)
        ToolCalledDirectlyError     a tool awaited directly inside a handler, not via ctx.call
      ActorNotFoundError            no such actor / actor class not registered
      ActorStoppedError             the actor (or the whole system) is stopped or closed
        ActorFinishedError          the actor finished (ctx.stop) or was terminated
      ActorQuarantinedError         the actor was stopped because its log cannot be trusted
      HandlerError                  the handler raised; carries the original type and message
        StepCancelledError          an operator cancelled the step
      ToolCallError                 a tool raised (live or as recorded in the log)
      ToolTimeoutError              a tool attempt ran past its timeout (also a TimeoutError)
      NonDeterminismError           replay asked for a different effect than the log recorded
      InDoubtError                  the asked step waits for an operator's decision on a call
      ReadOnlyQueryError            a query (ref.query) tried to change the state or to act
      WALError
        CorruptEntryError           an entry fails its checksum, seq chain or decode check
        TornTailError               a torn last write in a store whose writes can tear
        UnsupportedFormatError      the store was written by a newer format version
        LogCompactedError           the entries needed for recovery were compacted away
      SnapshotError                 a snapshot could not be written or verified
      RecoveryError                 recovery of one actor failed
      StoreError
        StoreUnavailableError       transient: the store could not be reached
        StoreClosedError            the store is closed
        SequenceConflictError       another writer appended to this actor's log
        StoreCorruptError           the store's file is damaged below the log (the database
                                    engine cannot read it); names the file
        StoreLockedError            a SQLite file already has a runtime (names pid, host, since)

Errors carry their fields as attributes and build their message in ``__init__``.

Warnings: ``UnstableNameWarning`` (a class recorded under a ``__main__.`` tag).
"""

from __future__ import annotations

from ._journal.errors import (
    ActorFinishedError,
    ActorlogError,
    ActorNotFoundError,
    ActorQuarantinedError,
    ActorStoppedError,
    AlreadyDecidedError,
    ConfigurationError,
    CorruptEntryError,
    EncodeError,
    HandlerError,
    InDoubtError,
    LeaseLostError,
    LogCompactedError,
    MessageIdReusedError,
    NonDeterminismError,
    ReadOnlyQueryError,
    RecoveryError,
    SequenceConflictError,
    SnapshotError,
    StepCancelledError,
    StoreClosedError,
    StoreCorruptError,
    StoreError,
    StoreLockedError,
    StoreUnavailableError,
    StoreURLError,
    ToolCalledDirectlyError,
    ToolCallError,
    ToolTimeoutError,
    TornTailError,
    UnstableNameWarning,
    UnsupportedFormatError,
    WALError,
)

__all__ = [
    "ActorFinishedError",
    "StepCancelledError",
    "LeaseLostError",
    "AlreadyDecidedError",
    "ActorNotFoundError",
    "ActorQuarantinedError",
    "ActorStoppedError",
    "ActorlogError",
    "ConfigurationError",
    "CorruptEntryError",
    "EncodeError",
    "HandlerError",
    "InDoubtError",
    "LogCompactedError",
    "MessageIdReusedError",
    "NonDeterminismError",
    "ReadOnlyQueryError",
    "RecoveryError",
    "SequenceConflictError",
    "SnapshotError",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreURLError",
    "StoreUnavailableError",
    "ToolCallError",
    "ToolCalledDirectlyError",
    "ToolTimeoutError",
    "TornTailError",
    "UnstableNameWarning",
    "UnsupportedFormatError",
    "WALError",
]
