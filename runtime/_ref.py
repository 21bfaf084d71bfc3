"""``ActorRef``: a handle on an actor by its stable id, and the door it sends through."""

from __future__ import annotations

from typing import Any, Generic, Protocol, TypeVar

from . import _codec

__all__ = ["ActorRef", "Messenger"]

A = TypeVar("A")


class Messenger(Protocol):
    """What a reference sends through: the ``ActorSystem`` that made it."""

    async def _deliver(
        self,
        cls: type[Any],
        actor_id: str,
        msg: Any,
        *,
        message_id: str | None,
        sender: str | None,
        want_reply: bool,
        timeout: float | None = None,
    ) -> Any: ...

    def status(self, actor_id: str) -> str: ...


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
        """
        _codec.validate_message_id(message_id)
        await self.system._deliver(
            self.cls, self.actor_id, msg, message_id=message_id, sender=None, want_reply=False
        )

    async def ask(
        self, msg: Any, *, message_id: str | None = None, timeout: float | None = None
    ) -> Any:
        """Deliver ``msg`` and wait for the handler's reply.

        With ``message_id``, asking again (after any crash) returns the recorded reply, or
        re-raises the recorded ``HandlerError``, without running the step again.

        Raises:
            ConfigurationError: a bad ``message_id`` (see ``send``); nothing was written.
            HandlerError: the handler raised (carries the original type and message).
            ActorQuarantinedError: the actor's log is damaged or it hit non-determinism.
            StoreUnavailableError: the store failed (disk full, I/O error, the database went
                away): possibly transient. The actor stopped; the next call starts it again
                from its log, and asking again with the same ``message_id`` is safe.
            TimeoutError: no reply within ``timeout`` (the message stays logged and will be
                handled; ask again with the same ``message_id`` to get the reply).
        """
        _codec.validate_message_id(message_id)
        return await self.system._deliver(
            self.cls,
            self.actor_id,
            msg,
            message_id=message_id,
            sender=None,
            want_reply=True,
            timeout=timeout,
        )

    @property
    def status(self) -> str:
        return self.system.status(self.actor_id)

    def __repr__(self) -> str:
        return f"<ActorRef {self.cls.__qualname__} {self.actor_id!r}>"

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ActorRef) and other.actor_id == self.actor_id

    def __hash__(self) -> int:
        return hash(self.actor_id)
