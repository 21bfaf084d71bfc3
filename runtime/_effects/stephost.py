"""What a step's ``Context`` needs of the actor it runs in: :class:`StepHost` (the ``Cell``;
the replay tester and read-only queries give their own)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Protocol

if TYPE_CHECKING:
    from .._durability.wal import Journal
    from .._journal.door import Learner, Letter
    from .._journal.records import DecisionRecord
    from ..store import TimerRow
    from .ref import ActorRef

__all__ = ["StepHost"]


class StepHost(Protocol):
    """What a step's ``Context`` needs of the actor it runs in (the ``Cell``)."""

    @property
    def actor_id(self) -> str: ...

    @property
    def fencing_token(self) -> int: ...

    @property
    def journal(self) -> Journal: ...

    @property
    def closing(self) -> bool:
        """The runtime is shutting down."""
        ...

    def check_lease(self) -> int:
        """Before a tool starts: the fencing token; ``LeaseLostError`` if not certain."""
        ...

    def note_event(self, kind: str, detail: dict[str, Any]) -> None:
        """Record an operator-history event, best effort."""
        ...

    async def wait_in_doubt(
        self, intent_seq: int, tool: str, key: str, *, step_seq: int
    ) -> DecisionRecord:
        """Escalate an in-doubt intent of the step of message ``step_seq`` and wait for the
        operator's decision (its asks get ``InDoubtError`` meanwhile)."""
        ...

    @property
    def registry(self) -> Learner:
        """Where ``ctx.send`` and ``ctx.send_later`` admit their messages (``_door``)."""
        ...

    async def deliver(self, ref: ActorRef[Any], letter: Letter, *, message_id: str) -> None:
        """``ctx.send``: deliver a message past the door."""
        ...

    #: a step of this actor waits in ``ctx.sleep`` (shutdown does not wait for it)
    sleeping: bool

    async def put_timer(self, row: TimerRow) -> None:
        """``ctx.send_later``: put the timer into the runtime's timer index."""

    def timers_kept(self) -> bool:
        """The store keeps timers (``capabilities.timers``): checked before logging one."""
        ...

    async def spawn(self, cls: type[Any], actor_id: str, **options: Any) -> ActorRef[Any]: ...

    def ref(self, cls: type[Any], actor_id: str) -> ActorRef[Any]: ...
