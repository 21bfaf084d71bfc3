"""What travels into a cell: envelopes in its mailbox, and the reply slots asks wait on.

Data and small queues only: nothing here knows the cell, the system or the store.
"""

from __future__ import annotations

import collections
import sys
from collections.abc import Awaitable, Callable, Generator
from typing import TYPE_CHECKING, Any, Final, Protocol

import anyio

from .._journal import codec as _codec
from .._journal.errors import ActorFinishedError, HandlerError, StepCancelledError
from .._journal.fields import Value
from .._journal.records import Recorded, StepRecord

if TYPE_CHECKING:
    import asyncio

    from opentelemetry.context import Context as OtelContext


__all__ = [
    "PASSIVATE",
    "STOP",
    "Envelope",
    "EventBuffer",
    "EventItem",
    "Mailbox",
    "Moved",
    "Primitives",
    "Reply",
    "settle",
    "reply_value",
    "step_outcome",
    "backend",
]


class _Signal:
    """A control item in the mailbox, queued behind the messages already in it."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name

    def __repr__(self) -> str:
        return f"<{self.name}>"


#: Stop after the steps queued before it (``Cell.close``).
STOP: Final = _Signal("stop")
#: Snapshot (if anything changed) and leave memory (``Cell.passivate``).
PASSIVATE: Final = _Signal("passivate")


class Flag:
    """An event with one waiter, on asyncio: a loop future made only when the waiter has
    to wait. What an ask's reply slot and the mailbox's wake-up need, for less than an
    ``anyio.Event`` (which wraps an ``asyncio.Event`` and finds its backend per
    instance). Cancelling the wait cancels only that future (anyio's cancel scopes cancel
    an asyncio task's awaited future like any other); ``is_set`` stays False."""

    __slots__ = ("_fut", "_set")

    def __init__(self) -> None:
        self._set = False
        self._fut: asyncio.Future[None] | None = None

    def is_set(self) -> bool:
        return self._set

    def set(self) -> None:
        if not self._set:
            self._set = True
            fut = self._fut
            if fut is not None and not fut.done():
                fut.set_result(None)

    def wait(self) -> Awaitable[None]:
        """Awaitable until set: the future itself (no coroutine around it)."""
        if self._set:
            return _READY
        fut = self._fut = _get_running_loop().create_future()
        return fut


def _first_get_running_loop() -> asyncio.AbstractEventLoop:
    """``asyncio.get_running_loop``, which ``_get_running_loop`` becomes at its first call:
    asyncio is not imported with actorlog (a run on trio never imports it); a ``Flag`` only
    waits on asyncio's loop, by which time asyncio is imported."""
    global _get_running_loop
    import asyncio

    _get_running_loop = asyncio.get_running_loop
    return _get_running_loop()


_get_running_loop: Callable[[], asyncio.AbstractEventLoop] = _first_get_running_loop


class _Ready:
    """Awaits to None at once, without suspending."""

    __slots__ = ()

    def __await__(self) -> Generator[Any, None, None]:
        yield from ()


_READY: Final = _Ready()


class Primitives:
    """A backend's event and cancel scope classes, resolved once (``backend``): an
    ``anyio.Event()`` or ``anyio.CancelScope()`` looks its backend up each
    time, which the hot path (a reply slot per ask, a shield per append) need not pay.
    ``event`` has one waiter (``Flag`` on asyncio)."""

    __slots__ = ("event", "scope")

    def __init__(self, event: Callable[[], Any], scope: Callable[..., anyio.CancelScope]) -> None:
        self.event = event
        self.scope = scope


#: what dispatches per call (outside an event loop, or an unknown library)
GENERIC: Final = Primitives(anyio.Event, anyio.CancelScope)
_RESOLVED: dict[str, Primitives] = {}


#: sniffio, imported on first use: the module, False when it is not installed (None: not yet)
_sniffio: Any = None


def _running_library() -> str | None:
    """The async library running this thread's event loop, as anyio finds it: sniffio's
    answer when sniffio is installed (trio and anyio's trio backend require it); without it
    only asyncio can be running (sniffio is not one of actorlog's dependencies)."""
    global _sniffio
    if _sniffio is None:
        try:
            import sniffio
        except ImportError:
            _sniffio = False
        else:
            _sniffio = sniffio
    if _sniffio is False:
        aio = sys.modules.get("asyncio")  # imported by whatever runs an asyncio loop
        return "asyncio" if aio is not None and aio._get_running_loop() is not None else None
    try:
        name: str = _sniffio.current_async_library()
    except _sniffio.AsyncLibraryNotFoundError:
        return None
    return name


def backend() -> Primitives:
    """The running async library's primitives (call it in the event loop's thread: once per
    cell). ``GENERIC`` when no library is running."""
    name = _running_library()
    if name is None:
        return GENERIC
    found = _RESOLVED.get(name)
    if found is None:
        scope = type(anyio.CancelScope())
        event = Flag if name == "asyncio" else type(anyio.Event())
        found = _RESOLVED[name] = Primitives(event, scope)
    return found


class Moved(Exception):  # internal signal, never escapes the system
    """The cell passivated while a post was on its way: post to a fresh cell instead."""


class Durable(Protocol):
    """What an event needs of its actor's journal (``_wal.Journal``)."""

    durable_seq: int

    async def flush(self) -> None: ...


class EventItem:
    """A buffered event: encoded once, decoded by each caller."""

    __slots__ = ("after", "data", "journal", "number", "replayed")

    def __init__(
        self, number: int, data: bytes, replayed: bool, after: int, journal: Durable | None
    ) -> None:
        self.number = number
        self.data = data
        self.replayed = replayed
        #: the last entry the step had written when it emitted this event, and the journal
        #: that makes it durable (None: it already was)
        self.after = after
        self.journal = journal

    async def durable(self) -> None:
        """Wait until the entries this event depends on are durable (committing them if
        no one is). Raises the journal's ``ActorlogError`` if that commit fails."""
        journal = self.journal
        if journal is not None and journal.durable_seq < self.after:
            await journal.flush()


class EventBuffer:
    """One streaming caller's undelivered events: at most ``limit``; more are dropped."""

    __slots__ = ("_wake", "dropped", "items", "limit")

    def __init__(self, limit: int) -> None:
        self.items: collections.deque[EventItem] = collections.deque()
        self.limit = limit
        self.dropped = 0
        self._wake: anyio.Event | None = None

    def put(self, item: EventItem) -> None:
        if len(self.items) >= self.limit:
            self.dropped += 1
        else:
            self.items.append(item)
        self.wake()

    def wake(self) -> None:
        waiter, self._wake = self._wake, None
        if waiter is not None:
            waiter.set()

    async def wait(self) -> None:
        """Wait for the next event or the reply. A cancellation point."""
        self._wake = anyio.Event()
        await self._wake.wait()


class Reply:
    """Where one ``ask`` waits for its step to complete.

    Each caller gets its own slot, registered under the message's seq in the cell's
    ``waiters``; a caller that stops waiting (cancelled, timed out) withdraws its slot, so
    nothing is left behind for a later ask of the same message to wait on.
    """

    __slots__ = ("_seq", "_waiters", "error", "event", "stream", "value")

    def __init__(
        self,
        waiters: dict[int, list[Reply]] | None = None,
        seq: int = 0,
        event: Callable[[], Any] = anyio.Event,
    ) -> None:
        #: set once the reply is in (one waiter: the caller's ``wait``)
        self.event = event()
        self.value: Any = None
        self.error: BaseException | None = None
        self._waiters = waiters
        self._seq = seq
        #: a streaming caller's buffer of the step's events (``_events``), else None
        self.stream: EventBuffer | None = None
        if waiters is not None:
            waiters.setdefault(seq, []).append(self)

    def set(self, value: Any = None, error: BaseException | None = None) -> None:
        if not self.event.is_set():
            self.value, self.error = value, error
            self.event.set()
            if self.stream is not None:
                self.stream.wake()

    def withdraw(self) -> None:
        """Leave the cell's waiters (idempotent)."""
        waiters, self._waiters = self._waiters, None
        if waiters is not None:
            slots = waiters.get(self._seq)
            if slots is not None and self in slots:
                slots.remove(self)
                if not slots:
                    del waiters[self._seq]

    async def wait(self) -> Any:
        """Wait for the reply. A cancellation point: a cancelled wait withdraws the slot
        (the message stays logged; ask again with its ``message_id`` for the reply)."""
        try:
            if not self.event.is_set():
                await self.event.wait()
        finally:
            if self._waiters is not None:  # (``settle`` took it out already)
                self.withdraw()
        if self.error is not None:
            raise self.error
        return self.value


def settle(
    waiters: dict[int, list[Reply]], seq: int, value: Any, error: BaseException | None
) -> None:
    for slot in waiters.pop(seq, ()):
        slot._waiters = None
        slot.set(value, error)


class Mailbox:
    """A cell's queue of envelopes: unbounded, one consumer. Cheaper per message than a
    memory object stream: no event and no checkpoint per receive, only an event when the
    consumer actually has to wait."""

    __slots__ = ("_event", "_waiter", "closed", "items")

    def __init__(self, event: Callable[[], Any] = anyio.Event) -> None:
        #: the queued items, oldest first (read it to ask "any queued?" without a call)
        self.items: collections.deque[Envelope | _Signal] = collections.deque()
        self._waiter: Any = None
        self._event = event
        self.closed = False

    def __len__(self) -> int:
        return len(self.items)

    def put(self, item: Envelope | _Signal) -> None:
        """Queue ``item``. Raises ``anyio.ClosedResourceError`` once the cell has closed."""
        if self.closed:
            raise anyio.ClosedResourceError
        self.items.append(item)
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.set()

    def get_nowait(self) -> Envelope | _Signal:
        """The next item. Raises ``anyio.WouldBlock`` if there is none."""
        if self.items:
            return self.items.popleft()
        raise anyio.WouldBlock

    def take(self) -> Envelope | _Signal | None:
        """The next item, or None if there is none."""
        items = self.items
        return items.popleft() if items else None

    async def get(self) -> Envelope | _Signal:
        while not self.items:
            if self.closed:
                raise anyio.ClosedResourceError
            self._waiter = waiter = self._event()
            await waiter.wait()
        return self.items.popleft()

    def close(self) -> None:
        self.closed = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.set()


class Envelope(Value):
    """A logged message on its way to its step (``_fields.Value``: made for every message)."""

    __slots__ = (
        "decode_error",
        "incarnation",
        "message",
        "message_id",
        "parent",
        "recorded",
        "seq",
        "trace",
        "type_tag",
    )

    seq: int
    type_tag: str
    message: Any
    message_id: str | None
    trace: dict[str, str] | None
    recorded: list[Recorded] | None
    decode_error: BaseException | None
    parent: OtelContext | None
    #: [F13] the incarnation id recorded in the message entry (None: logged before them)
    incarnation: str | None

    def __init__(
        self,
        seq: int,
        type_tag: str,
        message: Any,
        message_id: str | None,
        trace: dict[str, str] | None,
        recorded: list[Recorded] | None = None,
        decode_error: BaseException | None = None,
        parent: OtelContext | None = None,
        incarnation: str | None = None,
    ) -> None:
        self.seq = seq
        self.type_tag = type_tag
        self.message = message
        self.message_id = message_id
        self.trace = trace
        self.recorded = recorded
        self.decode_error = decode_error
        self.parent = parent
        self.incarnation = incarnation


def step_outcome(
    actor_id: str, seq: int, step: StepRecord, reply_type: Any
) -> tuple[Any, BaseException | None]:
    """What the ``ask`` of message ``seq`` gets from its recorded step: the reply decoded
    into the handler's annotated return type (as logged, if it does not fit), or the
    ``HandlerError`` the step recorded. Used live, on a re-ask, and for remote asks."""
    if step.ok:
        return reply_value(step.reply, reply_type), None
    err = step.error
    if err is not None and err.type == "ActorFinishedError":
        how, _, why = err.message.partition(": ")  # as _lifecycle.finished_info wrote it
        return None, ActorFinishedError(actor_id, how or "finished", why)
    if err is not None and err.type == "StepCancelledError":
        return None, StepCancelledError(actor_id, seq, err.type, err.message)
    return None, HandlerError(
        actor_id,
        seq,
        str(None if err is None else err.type),
        str(None if err is None else err.message),
    )


def reply_value(reply: Any, reply_type: Any) -> Any:
    """A recorded reply (plain) decoded into the handler's annotated return type, or as
    logged if it does not fit."""
    if reply_type is not Any and reply is not None:
        try:
            return _codec.structure(reply, reply_type)
        except Exception:
            pass
    return reply
