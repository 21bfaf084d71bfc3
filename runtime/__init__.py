"""actorlog: durable async actors on a checksummed write-ahead log.

Every message an actor receives and every side effect it makes is logged before it happens;
after a crash the actor resumes from its newest valid snapshot plus the log tail, without
redoing completed steps or repeating side effects. See README.md and docs/.
"""

from __future__ import annotations

from ._actor import Actor
from ._context import Context, idempotency_key
from ._errors import (
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
    NonDeterminismError,
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
    TornTailError,
    UnstableNameWarning,
    UnsupportedFormatError,
    WALError,
)
from ._leases import Lease, OwnershipChange
from ._names import message
from ._ref import ActorRef
from ._system import ActorSystem
from ._tools import Happened, NotHappened, Tool, tool

__all__ = [
    "Actor",
    "ActorFinishedError",
    "ActorNotFoundError",
    "ActorQuarantinedError",
    "ActorRef",
    "ActorStoppedError",
    "ActorSystem",
    "ActorlogError",
    "AlreadyDecidedError",
    "ConfigurationError",
    "Context",
    "CorruptEntryError",
    "EncodeError",
    "Happened",
    "HandlerError",
    "InDoubtError",
    "Lease",
    "LeaseLostError",
    "LogCompactedError",
    "MemoryStore",
    "NonDeterminismError",
    "NotHappened",
    "OwnershipChange",
    "PostgresStore",
    "RecoveryError",
    "SequenceConflictError",
    "SnapshotError",
    "StepCancelledError",
    "SqliteStore",
    "StoreClosedError",
    "StoreCorruptError",
    "StoreError",
    "StoreLockedError",
    "StoreURLError",
    "StoreUnavailableError",
    "Tool",
    "ToolCallError",
    "ToolCalledDirectlyError",
    "TornTailError",
    "UnstableNameWarning",
    "UnsupportedFormatError",
    "WALError",
    "idempotency_key",
    "message",
    "tool",
]

__version__ = "0.1.0.dev0"


def __getattr__(name: str) -> object:
    # The stores live in actorlog.stores (which imports this package), so re-export lazily.
    if name in ("MemoryStore", "SqliteStore", "PostgresStore"):
        from actorlog import stores

        return getattr(stores, name)
    raise AttributeError(f"module 'actorlog' has no attribute {name!r}")


for _name in __all__:
    _obj = globals().get(_name)
    if _obj is not None and getattr(_obj, "__module__", "").startswith("actorlog._"):
        try:
            _obj.__module__ = "actorlog"
        except (AttributeError, TypeError):
            pass
del _name, _obj
