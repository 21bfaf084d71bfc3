"""In-doubt intents escalated to an operator: the steps waiting, and the decisions that
wake them (``ActorSystem.resolve``). One decision per intent (``_decisions``)."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio

from .._journal.errors import ActorStoppedError, ConfigurationError, InDoubtError
from .._journal.fields import Value
from .._journal.records import DecisionRecord, EntryKind
from .._tracing import logs as _logs, telemetry as _telemetry
from . import decisions as _decisions
from .mailbox import Reply, settle

if TYPE_CHECKING:
    from ..store import Store
    from .wal import Journal

__all__ = ["Escalations", "Waiting"]


class Waiting(Value):
    """One step waiting for the operator's decision on its intent."""

    __slots__ = ("claimed", "decision", "event", "key", "step_seq", "tool")

    tool: str
    key: str
    #: seq of the message whose step waits
    step_seq: int
    event: anyio.Event
    #: the decision as its entry was logged (and as replay will read it)
    decision: DecisionRecord | None
    #: the decision being written: a second resolve is refused from the first one's start
    claimed: DecisionRecord | None

    def __init__(
        self,
        tool: str,
        key: str,
        step_seq: int = 0,
        event: anyio.Event | None = None,
        decision: DecisionRecord | None = None,
        claimed: DecisionRecord | None = None,
    ) -> None:
        self.tool = tool
        self.key = key
        self.step_seq = step_seq
        self.event = anyio.Event() if event is None else event
        self.decision = decision
        self.claimed = claimed


class Escalations:
    """The intents of one actor waiting for an operator, by intent seq."""

    __slots__ = ("actor_id", "escalated", "store", "waiting")

    def __init__(self, store: Store, actor_id: str) -> None:
        self.store = store
        self.actor_id = actor_id
        self.waiting: dict[int, Waiting] = {}
        #: message seq -> what its asks get while its step waits for an operator
        self.escalated: dict[int, InDoubtError] = {}

    def wake_all(self) -> None:
        """The actor stopped: every waiting step ends (``ActorStoppedError``)."""
        for w in self.waiting.values():
            w.event.set()

    async def wait(
        self,
        journal: Journal,
        intent_seq: int,
        tool: str,
        key: str,
        *,
        step_seq: int,
        waiters: dict[int, list[Reply]],
    ) -> DecisionRecord:
        """Wait until an operator decides the intent. Its entry is made durable first;
        then the asks of message ``step_seq`` (in ``waiters``, and those that come while it
        waits) get ``InDoubtError``, and the escalation is logged. A cancellation point:
        cancelled before an operator's decision started to be logged, it raises and nothing
        waits for a decision any more (the step settles the call); once one did, it waits
        for that decision's commit and returns it (one decision per intent; the caller's
        next checkpoint is cancelled)."""
        w = self.waiting[intent_seq] = Waiting(tool, key, step_seq)
        _telemetry.add_in_doubt(1)
        try:
            try:
                await journal.flush()
                if w.decision is None:
                    err = InDoubtError(
                        self.actor_id,
                        intent_seq,
                        tool,
                        key,
                        store=_logs.shown_store(self.store),
                        step_seq=step_seq,
                    )
                    self.escalated[step_seq] = err
                    settle(waiters, step_seq, None, err)
                    _logs.in_doubt.warning("%s", err)
                await w.event.wait()
            except anyio.get_cancelled_exc_class():
                if w.claimed is None:
                    raise  # abandoned by the handler's own scope: the step settles it
                # an operator's decision was logged first: it settles the call, and the call
                # returns it as replay will (the scope's cancel comes at the next checkpoint)
                with anyio.CancelScope(shield=True):
                    await w.event.wait()
        finally:
            self.waiting.pop(intent_seq, None)
            self.escalated.pop(step_seq, None)
            _telemetry.add_in_doubt(-1)
        if w.decision is None:
            raise ActorStoppedError(f"actor {self.actor_id!r} stopped while in doubt")
        return w.decision

    async def resolve(self, journal: Journal, intent_seq: int, decision: DecisionRecord) -> None:
        """Log the decision and wake the step waiting on it.

        Raises:
            AlreadyDecidedError: the intent has a decision (here or in the log).
            ConfigurationError: no step of this runtime waits on the intent.
        """

        def unless_taken() -> Waiting | None:
            # one decision per intent: what this runtime is writing or wrote, then the log
            w = self.waiting.get(intent_seq)
            taken = None if w is None else (w.claimed or w.decision)
            if taken is not None:
                raise _decisions.already_decided(self.actor_id, intent_seq, taken)
            return w

        def head() -> str:
            return (
                f"actor {self.actor_id!r} has no in-doubt intent at seq {intent_seq} "
                f"(in doubt: {sorted(self.waiting) or 'none'})"
            )

        unless_taken()
        await _decisions.check_decidable(self.store, self.actor_id, intent_seq, head=head())
        w = unless_taken()
        if w is None:
            raise ConfigurationError(head() + ": no step of this runtime waits for it")
        w.claimed = decision
        journal.write(EntryKind.DECISION, decision.action, intent_seq, decision.payload())
        logged = journal.last_record()
        assert isinstance(logged, DecisionRecord)
        await journal.flush()
        w.decision = logged
        self.escalated.pop(w.step_seq, None)  # decided: its asks wait for the step again
        w.event.set()
