"""The read-only host of a replayed step: a step re-run from its log with nothing acting on
the world. ``ReadOnlyHost`` is the ``StepHost`` that ``read_state`` (``_runtime/query.py``)
and the replay tester (``actorlog.testing.replay``) give the replaying ``Context``: every
effect is served from the log, and where the step would go live (write to the log, start a
tool, settle an in-doubt call, send, spawn, set a timer) it raises :class:`ReachedLive`.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._durability.wal import Journal
from .._journal.door import Learner, Letter
from .._journal.records import DecisionRecord, EventKind
from ..store import Store, TimerRow

if TYPE_CHECKING:
    from .._effects.ref import ActorRef

__all__ = ["ReachedLive", "ReadOnlyHost"]


class ReachedLive(BaseException):
    """The replayed step went past its log: a live run would act here. Stop (a
    ``BaseException``: a handler's ``except Exception`` does not swallow it)."""


class _ReadOnlyJournal(Journal):
    def write(self, *args: Any, **kwargs: Any) -> int:
        raise ReachedLive


class ReadOnlyHost:
    """The ``StepHost`` of a replayed step: nothing it offers acts on the world."""

    def __init__(self, store: Store, actor_id: str, registry: Learner) -> None:
        self.actor_id = actor_id
        self.registry = registry
        self.fencing_token = 0
        self.closing = False
        self.sleeping = False
        self.journal: Journal = _ReadOnlyJournal(store, actor_id, 0)

    def check_lease(self) -> int:
        raise ReachedLive  # a tool would start here

    def note_event(self, kind: str, detail: dict[str, Any]) -> None:
        if kind == EventKind.IN_DOUBT:
            raise ReachedLive  # settling an in-doubt call acts (rerun, reconcile, operator)

    async def wait_in_doubt(
        self, intent_seq: int, tool: str, key: str, *, step_seq: int
    ) -> DecisionRecord:
        raise ReachedLive

    async def deliver(self, ref: ActorRef[Any], letter: Letter, *, message_id: str) -> None:
        raise ReachedLive

    async def put_timer(self, row: TimerRow) -> None:
        raise ReachedLive  # a replayed send_later is served from the log; a new one acts

    def timers_kept(self) -> bool:
        return True  # a new send_later reaches put_timer: live, where the check stops

    async def spawn(self, cls: type[Any], actor_id: str, **options: Any) -> ActorRef[Any]:
        raise ReachedLive

    def ref(self, cls: type[Any], actor_id: str) -> ActorRef[Any]:
        from .._effects.ref import ActorRef

        return ActorRef(_NoMessenger(self.registry), cls, actor_id)


class _NoMessenger:
    def __init__(self, registry: Learner) -> None:
        self.registry = registry

    async def _deliver(self, *args: Any, **kwargs: Any) -> Any:
        raise ReachedLive

    async def _query(self, *args: Any, **kwargs: Any) -> Any:
        raise ReachedLive

    async def _stream(self, *args: Any, **kwargs: Any) -> Any:
        raise ReachedLive

    def status(self, actor_id: str) -> str:
        return "unknown"
