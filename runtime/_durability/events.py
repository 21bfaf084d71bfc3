"""Events from a running step to the callers waiting on it (``ctx.emit``, ``ask_stream``).

Events are not logged. ``ctx.emit`` encodes the value once and puts it, with its number
among the step's emits, into the bounded buffer of every streaming caller waiting on that
step (:class:`EventBuffer`, hung on the caller's reply slot); nothing waits, so an emit never
blocks the actor. A full buffer drops the event (the caller sees the gap in the numbers and in
``AskStream.dropped``). The caller's side (:class:`AskStream`) decodes each event, after the
entries the step wrote before that emit are durable: an event a caller received is one a
resumed run emits again (docs/streaming.md).
"""

from __future__ import annotations

import collections
import weakref
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Final

import attrs

from .._journal import codec as _codec
from .._journal.checks import shown
from .._journal.errors import ActorlogError, ConfigurationError, EncodeError
from .._tracing.telemetry import ATTR, EVENT
from .mailbox import EventBuffer, EventItem, Reply

if TYPE_CHECKING:
    from opentelemetry.trace import Span

__all__ = [
    "DEFAULT_BUFFER",
    "MAX_EVENT_BYTES",
    "AskStream",
    "Emitter",
    "StepEvent",
    "check_buffer",
    "not_here",
]

#: the largest encoded event (UTF-8 JSON bytes)
MAX_EVENT_BYTES: Final = 1024 * 1024
#: how many undelivered events a streaming caller holds by default
DEFAULT_BUFFER: Final = 1000
#: the most a caller may ask to hold
MAX_BUFFER: Final = 1_000_000
#: the most (encoded bytes) a running step keeps of its recent events for late joiners
MAX_HISTORY_BYTES: Final = 4 * 1024 * 1024


@attrs.frozen
class StepEvent:
    """One event a step emitted (``ctx.emit``), as a streaming caller receives it.

    Attributes:
        number: its position among the emits of this run of the step: 1, 2, 3, ... A run
            resumed after a crash numbers its emits from 1 again.
        data: the emitted value in its decoded plain form (what JSON gives back: str, int,
            float, bool, None, lists, dicts; an attrs instance arrives as a dict); the
            caller's own copy.
        replayed: True if a resumed run emitted it while its handler was still being served
            effects recorded by the interrupted run (it repeats an event of that run).
    """

    number: int
    data: Any
    replayed: bool = False


#: the emitters of the steps running now, by (id of their cell's waiters, message seq): a
#: caller that starts streaming a running step gets the events it emitted so far from here
_RUNNING: weakref.WeakValueDictionary[tuple[int, int], Emitter] = weakref.WeakValueDictionary()


class Emitter:
    """The emits of one step (one per ``_step.handle``): numbers them, keeps the recent ones
    for callers that join later, hands each to the streaming callers waiting on the step,
    and traces them as span events, one per batch (the emits between two entries the step
    writes)."""

    __slots__ = (
        "__weakref__",
        "_batch",
        "_held",
        "_journal",
        "_key",
        "_seq",
        "_span",
        "_waiters",
        "count",
        "history",
    )

    def __init__(
        self, waiters: dict[int, list[Reply]], seq: int, journal: Any, span: Span | None
    ) -> None:
        self._waiters = waiters
        self._seq = seq
        self._journal = journal
        self._span = span if span is not None and span.is_recording() else None
        #: (first number, count, bytes, last entry seq) of the batch not yet traced
        self._batch: list[int] | None = None
        self.count = 0
        #: the most recent events (at most ``DEFAULT_BUFFER`` and ``MAX_HISTORY_BYTES``)
        self.history: collections.deque[EventItem] = collections.deque()
        self._held = 0
        self._key = (id(waiters), seq)

    def emit(self, data: bytes, replayed: bool) -> None:
        self.count += 1
        if self.count == 1:  # a step that emits nothing costs no registration
            _RUNNING[self._key] = self
        journal = self._journal
        after = journal.last_seq
        pending = None if journal.durable_seq >= after else journal
        item = EventItem(self.count, data, replayed, after, pending)
        history = self.history
        history.append(item)
        self._held += len(data)
        while len(history) > DEFAULT_BUFFER or self._held > MAX_HISTORY_BYTES:
            self._held -= len(history.popleft().data)
        for slot in self._waiters.get(self._seq, ()):
            if slot.stream is not None:
                slot.stream.put(item)
        if self._span is not None:
            batch = self._batch
            if batch is not None and batch[3] == after:
                batch[1] += 1
                batch[2] += len(data)
            else:
                self._trace()
                self._batch = [self.count, 1, len(data), after]

    def end(self) -> None:
        """The handler is done: trace the last batch; no caller joins from now on."""
        if not self.count:
            return  # nothing emitted: no batch, no registration, no history
        self._trace()
        if self.count and _RUNNING.get(self._key) is self:
            del _RUNNING[self._key]
        self.history.clear()

    def _trace(self) -> None:
        batch, self._batch = self._batch, None
        if batch is not None and self._span is not None:
            self._span.add_event(
                EVENT.EMITTED,
                {
                    ATTR.EVENT_FIRST: batch[0],
                    ATTR.EVENT_COUNT: batch[1],
                    ATTR.EVENT_BYTES: batch[2],
                },
            )


def join(slot: Reply, limit: int) -> None:
    """Make ``slot`` (an ask's, just registered) a streaming caller's: its buffer, holding
    the events its step (if running) emitted so far."""
    buf = slot.stream = EventBuffer(limit)
    emitter = _RUNNING.get((id(slot._waiters), slot._seq)) if slot._waiters is not None else None
    if emitter is not None:
        for item in emitter.history:
            buf.put(item)


def encode_event(obj: Any) -> bytes:
    """``obj`` as the UTF-8 JSON a caller decodes ([F9]'s encoding, with the codec's one
    compiled encoder: an emit is on the handler's path). Raises ``EncodeError`` (a
    ``ConfigurationError``) if the codec cannot encode it or it is too large."""
    try:
        data = _codec._encode(_codec.unstructure_to_encode(obj)).encode()
    except _codec._ENCODE_ERRORS as exc:
        raise EncodeError("event", type(obj), str(exc)) from exc
    if len(data) > MAX_EVENT_BYTES:
        raise EncodeError(
            "event", type(obj), f"encoded size {len(data)} bytes exceeds {MAX_EVENT_BYTES}"
        )
    return data


def not_here(actor_id: str) -> ConfigurationError:
    """``ask_stream``'s error for an actor that runs in another process."""
    return ConfigurationError(
        f"ask_stream(): actor {actor_id!r} runs in another process (this system is a client, "
        "or another runtime holds its lease); events reach only callers in the process that "
        "runs the actor. Use ask() for the reply; nothing was written"
    )


def check_buffer(buffer: object) -> int:
    if type(buffer) is not int or not 1 <= buffer <= MAX_BUFFER:
        raise ConfigurationError(
            f"buffer must be an int from 1 to {MAX_BUFFER} (events held for a slow "
            f"caller), not {shown(buffer)}"
        )
    return buffer


class AskStream:
    """The events of an asked message's step, then its reply: what ``ref.ask_stream``
    returns. Iterate it (``async for ev in stream``) to get :class:`StepEvent` records; when
    the iteration ends, ``reply`` holds the step's reply (an error the step recorded is
    raised by the iteration instead, as ``ask`` raises it).

    The message is logged when the iteration starts (or on ``async with``). Leave early with
    ``aclose()`` or an ``async with`` block: a stream abandoned without either holds its
    bounded buffer until the step ends.
    """

    def __init__(self, opener: Callable[[], Awaitable[Reply | None]], buffer: int) -> None:
        self._open = opener
        self._limit = buffer
        self._slot: Reply | None = None
        self._done = False
        self._reply: Any = None
        self._has_reply = False

    @property
    def reply(self) -> Any:
        """The step's reply, once the iteration has ended.

        Raises:
            ConfigurationError: the iteration has not ended yet.
        """
        if not self._has_reply:
            raise ConfigurationError(
                "the reply is there once the iteration over ask_stream() has ended"
            )
        return self._reply

    @property
    def dropped(self) -> int:
        """How many events this caller missed because its buffer was full."""
        slot = self._slot
        return 0 if slot is None or slot.stream is None else slot.stream.dropped

    def __aiter__(self) -> AskStream:
        return self

    async def __aenter__(self) -> AskStream:
        await self._start()
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self.aclose()

    async def aclose(self) -> None:
        """Stop listening (idempotent): the step goes on; asking again with the same
        ``message_id`` gets its reply."""
        self._done = True
        slot, self._slot = self._slot, None
        if slot is not None:
            slot.withdraw()
            self._slot = slot  # ``dropped`` stays readable

    async def _start(self) -> Reply:
        if self._done:
            raise StopAsyncIteration
        if self._slot is None:
            slot = await self._open()
            assert slot is not None  # an ask's post gives its reply slot
            join(slot, self._limit)  # no await since the post: no event is missed
            self._slot = slot
        return self._slot

    async def __anext__(self) -> StepEvent:
        try:
            return await self._next()
        except StopAsyncIteration:
            raise
        except BaseException:
            await self.aclose()
            raise

    async def _next(self) -> StepEvent:
        if self._done:
            raise StopAsyncIteration
        slot = await self._start()
        buf = slot.stream
        assert buf is not None
        while True:
            if buf.items:
                item = buf.items.popleft()
                try:
                    # the entries it depends on: durable first (also once the slot is
                    # settled: a failed step's error settles it with those entries lost)
                    await item.durable()
                except ActorlogError:
                    buf.items.clear()  # they are lost; the reply says what happened
                    continue
                return StepEvent(item.number, _codec.decode_json(item.data), item.replayed)
            if slot.event.is_set():
                self._done = True
                slot.withdraw()
                value = await slot.wait()  # raises the step's error
                self._reply, self._has_reply = value, True
                raise StopAsyncIteration
            await buf.wait()
