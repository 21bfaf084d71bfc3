"""``ActorRef``: a handle on an actor by its stable id, and the door it sends through."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

import attrs

from .._durability import events as _events
from .._durability.events import AskStream
from .._durability.mailbox import Reply
from .._journal import codec as _codec
from .._journal.door import Learner, Letter, admit_message
from .._journal.errors import ConfigurationError
from .tools import QUERY, refuse_in_query, refuse_query_in_step

__all__ = ["ActorRef", "Messenger"]

A = TypeVar("A")


class Messenger(Protocol):
    """What a reference sends through: the ``ActorSystem`` that made it."""

    @property
    def registry(self) -> Learner:
        """Where the door records message classes (``_door.admit_message``)."""
        ...

    async def _deliver(
        self,
        cls: type[Any],
        actor_id: str,
        letter: Letter,
        *,
        message_id: str | None,
        sender: str | None,
        want_reply: bool,
        timeout: float | None = None,
    ) -> Any: ...

    def status(self, actor_id: str) -> str: ...

    async def _stream(
        self, cls: type[Any], actor_id: str, letter: Letter, message_id: str | None
    ) -> Reply | None: ...

    async def _query(
        self, cls: type[Any], actor_id: str, query: Any, *, timeout: float | None
    ) -> Any: ...


class ActorRef(Generic[A]):
    """A handle on an actor by its stable id. Cheap to create; holds no resources."""

    __slots__ = ("actor_id", "cls", "system")

    def __init__(self, system: Messenger, cls: type[A], actor_id: str) -> None:
        self.system = system
        self.cls = cls
        self.actor_id = actor_id

    async def send(self, msg: Any, *, message_id: str | None = None) -> None:
        """Deliver ``msg``; returns once it is durable in the actor's log.

        With a ``message_id`` already used for this actor, nothing is written (exactly once).
        A cancellation point: if cancelled, the message may or may not have been logged;
        send again with the same ``message_id`` to be sure.

        Raises:
            ConfigurationError: ``message_id`` is not a non-empty str that UTF-8 can encode
                (no lone surrogates), holds a NUL character (PostgreSQL text cannot), or is
                too long; nothing was written.
            EncodeError: ``msg`` is not an instance of an attrs class, a dataclass or a
                pydantic model, or it cannot be encoded (or is over the payload limit);
                nothing was written.
            MessageIdReusedError: ``message_id`` already names another message of this
                actor (logged, in flight, or queued in a PostgreSQL inbox); nothing was
                written.
        """
        _codec.validate_message_id(message_id)
        if QUERY.get() is not None:  # (no call, no text, outside a query)
            refuse_in_query(f"sent a message to actor {self.actor_id!r}")
        letter = admit_message(self.system.registry, msg)
        await self.system._deliver(
            self.cls, self.actor_id, letter, message_id=message_id, sender=None, want_reply=False
        )

    async def ask(
        self, msg: Any, *, message_id: str | None = None, timeout: float | None = None
    ) -> Any:
        """Deliver ``msg`` and wait for the handler's reply.

        With ``message_id``, asking again (after any crash) returns the recorded reply, or
        re-raises the recorded ``HandlerError``, without running the step again. The id
        names one message: asking with it and a different message (another type, or other
        field values in their canonical encoded form) raises ``MessageIdReusedError``.

        Raises:
            ConfigurationError: a bad ``message_id`` (see ``send``); nothing was written.
            EncodeError: a ``msg`` that cannot be a message (see ``send``); nothing was
                written.
            MessageIdReusedError: ``message_id`` already names another message of this
                actor; nothing was written.
            HandlerError: the handler raised (carries the original type and message).
            ActorQuarantinedError: the actor's log is damaged or it hit non-determinism.
            StoreUnavailableError: the store failed (disk full, I/O error, the database went
                away): possibly transient. The actor stopped; the next call starts it again
                from its log, and asking again with the same ``message_id`` is safe.
            TimeoutError: no reply within ``timeout`` (the message stays logged and will be
                handled; ask again with the same ``message_id`` to get the reply).
        """
        _codec.validate_message_id(message_id)
        if timeout is not None:
            _codec.validate_seconds(timeout, "timeout")
        if QUERY.get() is not None:  # (no call, no text, outside a query)
            refuse_in_query(f"asked actor {self.actor_id!r}")
        letter = admit_message(self.system.registry, msg)
        return await self.system._deliver(
            self.cls,
            self.actor_id,
            letter,
            message_id=message_id,
            sender=None,
            want_reply=True,
            timeout=timeout,
        )

    def ask_stream(
        self,
        msg: Any,
        *,
        message_id: str | None = None,
        buffer: int = _events.DEFAULT_BUFFER,
    ) -> AskStream:
        """Deliver ``msg`` and stream its step: the events its handler emits
        (``ctx.emit``) as :class:`StepEvent` records, live and in order, then the reply
        (``stream.reply`` once the iteration ends)::

            stream = ref.ask_stream(Ask("..."), message_id="q-1")
            async for ev in stream:
                print(ev.number, ev.data)
            answer = stream.reply

        The message is logged when the iteration starts, exactly as ``ask`` logs it (the
        same ``message_id`` rules). A step that emits nothing streams no events; a step
        already completed streams only its reply. A caller joining a running step (the
        same ``message_id``) gets the events emitted from then on: the first number tells
        where it joined. After a crash, the resumed run emits again from number 1 (see
        docs/streaming.md). At most ``buffer`` events wait for a slow caller; more are
        dropped for that caller (a gap in the numbers, counted in ``stream.dropped``); the
        actor never waits for a caller, and the reply always arrives.

        Only here in the process that runs the actor: on PostgreSQL, a client-mode system
        or a runtime that does not own the actor raises ``ConfigurationError`` (use
        ``ask``).

        Raises:
            ConfigurationError: a bad ``message_id`` or ``buffer`` (raised here, at the
                call; nothing was written), or the actor runs in another process (raised by
                the iteration, before anything is written).
            EncodeError: a ``msg`` that cannot be a message (see ``send``; raised here, at
                the call); nothing was written.
            Exception: the iteration raises what ``ask`` raises (``HandlerError``,
                ``MessageIdReusedError``, ``ActorQuarantinedError``, ...).
        """
        _codec.validate_message_id(message_id)
        _events.check_buffer(buffer)
        refuse_in_query(f"asked actor {self.actor_id!r}")
        letter = admit_message(self.system.registry, msg)

        async def open_() -> Reply | None:
            return await self.system._stream(self.cls, self.actor_id, letter, message_id)

        return AskStream(open_, buffer)

    async def query(self, query: Any, /, *, timeout: float | None = None) -> Any:
        """Read the actor's state without changing it: logs nothing, runs no tool.

        ``query`` is a query message (an attrs instance), answered by the actor class's
        ``async def on_query(self, query)``, or a function of the state (``lambda state:
        state.answers[-3:]``, sync or async), called with a copy of it. Either runs between
        two steps of the actor (never during one: it waits for a running step to end, and
        goes before messages still waiting), on a copy of its current state; what it
        returns is returned here. The actor is started (recovered) here if it is not
        loaded. When another runtime owns the actor (PostgreSQL with leases, or a client-mode
        system) the query runs here on the actor's last durable state instead (see
        ``ActorSystem.read_state``): it may lag the owner by steps not yet committed.

        A cancellation point; a cancelled query leaves nothing behind.

        Raises:
            ReadOnlyQueryError: the query changed its copy of the state, called a tool, or
                sent or asked through a reference. Nothing was logged; the state is as it
                was.
            ConfigurationError: ``query`` is neither a message instance nor callable, or a
                message and the class declares no ``on_query`` or annotates it to take
                another class.
            ActorQuarantinedError: the actor's log cannot be trusted.
            ActorNotFoundError: the store holds no actor ``actor_id`` (a query creates none).
            TimeoutError: no answer within ``timeout`` seconds (a running step is slow).
            Exception: whatever the query itself raised, as it raised it.
        """
        if not (attrs.has(type(query)) or callable(query)):
            raise ConfigurationError(
                "ref.query() takes a query message (an attrs instance, handled by the actor's "
                f"on_query) or a function of the state, not {type(query).__qualname__}"
            )
        if timeout is not None:
            _codec.validate_seconds(timeout, "timeout")
        refuse_in_query(f"queried actor {self.actor_id!r}")
        refuse_query_in_step(self.actor_id)
        return await self.system._query(self.cls, self.actor_id, query, timeout=timeout)

    @property
    def status(self) -> str:
        return self.system.status(self.actor_id)

    def __repr__(self) -> str:
        return f"<ActorRef {self.cls.__qualname__} {self.actor_id!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorRef) and other.actor_id == self.actor_id

    def __hash__(self) -> int:
        return hash(self.actor_id)
