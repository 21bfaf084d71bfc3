"""actorlog: durable async actors for AI agents, on a checksummed write-ahead log.

Every message an actor receives and every tool call it makes is logged before it happens;
after a crash the actor resumes from its newest valid snapshot plus the log tail, without
redoing completed steps or repeating side effects.

Start here::

    import anyio, attrs
    from actorlog import Actor, ActorSystem, Context, tool

    @attrs.define
    class Ask:
        question: str

    @attrs.define
    class Notes:
        answers: list[str] = attrs.Factory(list)

    @tool(effect="read")
    async def search(query: str) -> str:
        return f"results for {query}"

    class Researcher(Actor[Notes]):
        async def receive(self, ctx: Context, msg: Ask) -> str:
            found = await ctx.call(search, msg.question)  # logged before and after it runs
            self.state.answers.append(found)
            return found

    async def main() -> None:
        async with ActorSystem("sqlite:///agents.db", actors=[Researcher]) as system:
            ref = await system.spawn(Researcher, "run-42")  # resumes run-42 if it exists
            print(await ref.ask(Ask("hotels in Lisbon"), message_id="q-1"))

    anyio.run(main)

Where things are:

- ``ActorSystem``, ``Actor``, ``Context``, ``ActorRef``, ``tool``: this page.
- The exceptions and the warning: ``help(actorlog.errors)`` (each is importable from
  ``actorlog`` too, e.g. ``from actorlog import InDoubtError``).
- Stores: ``actorlog.stores`` (``SqliteStore``, ``PostgresStore``, ``MemoryStore``); writing
  one: ``actorlog.store`` and the contract kit ``actorlog.testing``.
- The operator API (history, verify, resolve, fork): ``actorlog.ops``; the same from a shell:
  the ``actorlog`` command.
- Guides and the API reference: https://github.com/actorlog/actorlog/tree/main/docs
"""

from __future__ import annotations

import logging as _logging

from . import errors
from ._actor import Actor
from ._context import Context
from ._events import AskStream, StepEvent
from ._ids import idempotency_key
from ._leases import Lease, OwnershipChange
from ._names import message
from ._recovery import RecoveryReport
from ._ref import ActorRef
from ._retry import Retry
from ._system import ActorSystem
from ._tools import Happened, NotHappened, Tool, tool

# the exceptions: documented in actorlog.errors, importable from here
from .errors import (
    ActorFinishedError as ActorFinishedError,
)
from .errors import (
    ActorlogError as ActorlogError,
)
from .errors import (
    ActorNotFoundError as ActorNotFoundError,
)
from .errors import (
    ActorQuarantinedError as ActorQuarantinedError,
)
from .errors import (
    ActorStoppedError as ActorStoppedError,
)
from .errors import (
    AlreadyDecidedError as AlreadyDecidedError,
)
from .errors import (
    ConfigurationError as ConfigurationError,
)
from .errors import (
    CorruptEntryError as CorruptEntryError,
)
from .errors import (
    EncodeError as EncodeError,
)
from .errors import (
    HandlerError as HandlerError,
)
from .errors import (
    InDoubtError as InDoubtError,
)
from .errors import (
    LeaseLostError as LeaseLostError,
)
from .errors import (
    LogCompactedError as LogCompactedError,
)
from .errors import (
    MessageIdReusedError as MessageIdReusedError,
)
from .errors import (
    NonDeterminismError as NonDeterminismError,
)
from .errors import (
    ReadOnlyQueryError as ReadOnlyQueryError,
)
from .errors import (
    RecoveryError as RecoveryError,
)
from .errors import (
    SequenceConflictError as SequenceConflictError,
)
from .errors import (
    SnapshotError as SnapshotError,
)
from .errors import (
    StepCancelledError as StepCancelledError,
)
from .errors import (
    StoreClosedError as StoreClosedError,
)
from .errors import (
    StoreCorruptError as StoreCorruptError,
)
from .errors import (
    StoreError as StoreError,
)
from .errors import (
    StoreLockedError as StoreLockedError,
)
from .errors import (
    StoreUnavailableError as StoreUnavailableError,
)
from .errors import (
    StoreURLError as StoreURLError,
)
from .errors import (
    ToolCalledDirectlyError as ToolCalledDirectlyError,
)
from .errors import (
    ToolCallError as ToolCallError,
)
from .errors import (
    ToolTimeoutError as ToolTimeoutError,
)
from .errors import (
    TornTailError as TornTailError,
)
from .errors import (
    UnstableNameWarning as UnstableNameWarning,
)
from .errors import (
    UnsupportedFormatError as UnsupportedFormatError,
)
from .errors import (
    WALError as WALError,
)

__all__ = [
    "Actor",
    "ActorRef",
    "ActorSystem",
    "AskStream",
    "Context",
    "Happened",
    "Lease",
    "MemoryStore",
    "NotHappened",
    "OwnershipChange",
    "PostgresStore",
    "RecoveryReport",
    "Retry",
    "SqliteStore",
    "StepEvent",
    "Tool",
    "idempotency_key",
    "message",
    "tool",
    # the exceptions (actorlog.errors.__all__) are importable from here too
]

__version__ = "0.1.0.dev0"


def __getattr__(name: str) -> object:
    # The stores live in actorlog.stores (which imports this package), so re-export lazily.
    if name in ("MemoryStore", "SqliteStore", "PostgresStore"):
        from actorlog import stores

        return getattr(stores, name)
    raise AttributeError(f"module 'actorlog' has no attribute {name!r}")


for _name in (*__all__, *errors.__all__):
    _obj = globals().get(_name)
    if _obj is not None and getattr(_obj, "__module__", "").startswith("actorlog._"):
        try:
            _obj.__module__ = "actorlog"
        except (AttributeError, TypeError):
            pass
del _name, _obj

# a library is quiet unless the application configures logging (docs/operators.md)
_logging.getLogger("actorlog").addHandler(_logging.NullHandler())
