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
import typing as _typing

from . import errors
from ._core.recovery import RecoveryReport
from ._durability.events import AskStream, StepEvent
from ._effects.actor import Actor
from ._effects.context import Context
from ._effects.ref import ActorRef
from ._effects.retry import Retry
from ._effects.tools import Happened, NotHappened, Tool, tool
from ._journal.ids import idempotency_key
from ._journal.names import message
from ._runtime.system import ActorSystem

if _typing.TYPE_CHECKING:  # loaded on first use (__getattr__): a run without leases never does
    from ._cluster.leases import OwnershipChange
    from ._journal.leases import Lease
    from .stores import MemoryStore, PostgresStore, SqliteStore

# the exceptions: documented in actorlog.errors, importable from here
from .errors import (
    ActorFinishedError as ActorFinishedError,
    ActorlogError as ActorlogError,
    ActorNotFoundError as ActorNotFoundError,
    ActorQuarantinedError as ActorQuarantinedError,
    ActorStoppedError as ActorStoppedError,
    AlreadyDecidedError as AlreadyDecidedError,
    ConfigurationError as ConfigurationError,
    CorruptEntryError as CorruptEntryError,
    EncodeError as EncodeError,
    HandlerError as HandlerError,
    InDoubtError as InDoubtError,
    LeaseLostError as LeaseLostError,
    LogCompactedError as LogCompactedError,
    MessageIdReusedError as MessageIdReusedError,
    NonDeterminismError as NonDeterminismError,
    ReadOnlyQueryError as ReadOnlyQueryError,
    RecoveryError as RecoveryError,
    SequenceConflictError as SequenceConflictError,
    SnapshotError as SnapshotError,
    StepCancelledError as StepCancelledError,
    StoreClosedError as StoreClosedError,
    StoreCorruptError as StoreCorruptError,
    StoreError as StoreError,
    StoreLockedError as StoreLockedError,
    StoreUnavailableError as StoreUnavailableError,
    StoreURLError as StoreURLError,
    ToolCalledDirectlyError as ToolCalledDirectlyError,
    ToolCallError as ToolCallError,
    ToolTimeoutError as ToolTimeoutError,
    TornTailError as TornTailError,
    UnstableNameWarning as UnstableNameWarning,
    UnsupportedFormatError as UnsupportedFormatError,
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


#: names loaded on first use: (module, whether ``dir()`` lists them before that)
_LAZY = {
    # the leases of shared stores (docs/scaling.md): a system without them never imports them
    "OwnershipChange": ("actorlog._cluster.leases", True),
    "Lease": ("actorlog._journal.leases", True),
    # the stores live in actorlog.stores (which imports this package)
    "MemoryStore": ("actorlog.stores", False),
    "SqliteStore": ("actorlog.stores", False),
    "PostgresStore": ("actorlog.stores", False),
}


def __getattr__(name: str) -> object:
    where = _LAZY.get(name)
    if where is None:
        raise AttributeError(f"module 'actorlog' has no attribute {name!r}")
    import importlib

    obj = getattr(importlib.import_module(where[0]), name)
    if where[1]:
        obj.__module__ = "actorlog"
        globals()[name] = obj
    return obj


def __dir__() -> list[str]:
    return sorted({*globals(), *(n for n, (_, listed) in _LAZY.items() if listed)})


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
