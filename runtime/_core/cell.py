"""One live actor: its lifecycle, the posts into it, and the step loop.

A cell reaches the runtime around it only through :class:`CellHost` (implemented by the
``ActorSystem``), and is itself the host its steps' ``Context`` talks to (``StepHost``).
"""

from __future__ import annotations

import collections
import json
import time
from typing import TYPE_CHECKING, Any, Protocol

import anyio
import anyio.to_thread

from .._durability import lifecycle as _lifecycle, reuse as _reuse, snapshots as _snapshots
from .._durability.escalation import Escalations
from .._durability.logged import LoggedMessages
from .._durability.mailbox import PASSIVATE, STOP, Envelope, Mailbox, Moved, Reply, backend, settle
from .._durability.snapshots import SnapshotPolicy
from .._durability.wal import Journal
from .._effects.actor import Actor, accepted_messages, reply_type
from .._journal import codec as _codec, records as _records
from .._journal.door import Letter
from .._journal.errors import (
    ActorFinishedError,
    ActorlogError,
    ActorQuarantinedError,
    ActorStoppedError,
    EncodeError,
    LeaseLostError,
    RecoveryError,
    SequenceConflictError,
    StoreUnavailableError,
)
from .._journal.records import DecisionRecord, EntryKind
from .._tracing import logs as _logs, telemetry as _telemetry
from . import recovery as _recovery, step as _step

if TYPE_CHECKING:
    from collections.abc import Callable, Coroutine

    from .._durability.snapshots import RecoveryCost
    from .._effects.ref import ActorRef
    from .._effects.registry import Registry
    from ..store import Store, TimerRow

#: at most this many replies of a burst wait for its one commit
BURST_MAX = 64

__all__ = ["Cell", "CellHost"]


class CellHost(Protocol):
    """What a cell needs of the runtime that runs it."""

    store: Store
    registry: Registry

    @property
    def closing(self) -> bool:
        """The runtime is shutting down (a failed delivery then stops the step)."""
        ...

    def recovery_cost(self, actor_type: str) -> RecoveryCost: ...

    def lease_token(self, actor_id: str) -> int:
        """The fencing token this runtime holds the actor's lease with (0: no leases)."""
        ...

    def check_lease(self, actor_id: str, token: int) -> None:
        """Raise ``LeaseLostError`` unless the lease is certain (no-op without leases)."""
        ...

    def adopt_options(
        self, cls: type[Actor[Any]], actor_id: str, saved: dict[str, Any]
    ) -> SnapshotPolicy | None:
        """Spawn options read back from the store: the policy they give, unless a ``spawn``
        in this runtime gave options already (or they are invalid): then None."""
        ...

    def forget(self, cell: Cell) -> None:
        """The cell passivated: drop it from memory."""
        ...

    def spawn_task(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None: ...

    async def deliver(
        self, ref: ActorRef[Any], letter: Letter, *, message_id: str, sender: str
    ) -> None:
        """``ctx.send``: the runtime's one delivery path."""
        ...

    async def spawn(self, cls: type[Any], actor_id: str, **options: Any) -> ActorRef[Any]: ...

    def ref(self, cls: type[Any], actor_id: str) -> ActorRef[Any]: ...

    async def put_timer(self, row: TimerRow) -> None:
        """``ctx.send_later``: the runtime's timer index (``_timers.Timers``)."""
        ...


class Cell(LoggedMessages):
    def __init__(
        self, host: CellHost, cls: type[Actor[Any]], actor_id: str, policy: SnapshotPolicy
    ) -> None:
        self.host = host
        self.store = host.store
        self.cls = cls
        self.actor_id = actor_id
        self.actor_type = _codec.type_tag(cls)
        self.policy = policy
        # The spawn options in effect and those last saved in the store (an ``options``
        # event); None until recovery has read them.
        self.saved_options: dict[str, Any] | None = None
        self.actor: Actor[Any] = cls()
        self.actor.actor_id = actor_id
        #: the event loop's event and cancel scope classes, resolved once
        self.io = backend()
        self.journal = Journal(self.store, actor_id, 0, self.io.scope)
        #: [F13] this log's incarnation id (recovery reads it back, or starts one)
        self.incarnation: str | None = None
        self.new = False  # its registration inserted it: nothing to recover (_recovery)
        self.step_lock = anyio.Lock()  # held by each step and each query (_query.Queryable)
        self.status = "starting"
        self.error: BaseException | None = None
        self.ready = anyio.Event()
        self.done = anyio.Event()
        #: ``ready.is_set()`` and ``done.is_set()`` as plain attributes, set with them (an
        #: ask reads them three times: two Python calls each through anyio's Event)
        self.is_ready = False
        self.is_done = False
        self._mailbox = Mailbox(self.io.event)
        #: message seq -> the slots of the asks waiting for its step
        self.waiters: dict[int, list[Reply]] = {}
        #: message id -> seq of messages logged here that are not yet both handled and
        #: durable, in seq order (a retry of one finds it here, not in the store)
        self.inflight_ids: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._pruned = 0  # ids forgotten from inflight_ids so far (see _find_message)
        self._loading_ids = False  # the filter's load is on its way (``_find_message``)
        #: message id -> (type tag, plain body as logged) of each id in ``inflight_ids``
        self.inflight_messages: dict[str, tuple[str, Any]] = {}
        #: posts on their way into this cell (and starts made for one): not idle meanwhile
        self.holds = 0
        self._burst_commit = False  # a background commit of a burst's replies is pending
        self.escalations = Escalations(self.store, actor_id)
        #: intent seq -> the step waiting for an operator's decision on it
        self.in_doubt = self.escalations.waiting
        self.handled_seq = 0
        self.steps_since_snapshot = 0
        self.last_snapshot_at = time.monotonic()
        self.accepts = accepted_messages(cls)
        self.reply_type = reply_type(cls)
        self.last_recovery: _recovery.RecoveryReport | None = None
        self.last_active = time.monotonic()
        self.passivating = False
        self.sleeping = False  # a step waits in ctx.sleep (shutdown does not wait for it)
        self.cost = host.recovery_cost(self.actor_type)
        self.replay_cpu = 0.0  # handler time of the steps since the last snapshot
        self.snapshot_bytes = 0
        self.snapshot_seq = 0
        #: the fencing token of the lease this cell runs under (0 without leases)
        self.fencing_token = host.lease_token(actor_id)
        self.where = f"{cls.__qualname__} (actor {actor_id!r})"  # for ToolCalledDirectlyError
        # lifecycle (_lifecycle.py): how it ended, the running step's scope, a cancel asked
        self.ended: tuple[str, str] | None = None
        self.step_scope: anyio.CancelScope | None = None
        self.cancel_pending: dict[str, Any] | None = None

    def check_lease(self) -> int:
        """Before a tool starts: the fencing token, if this runtime's lease of the actor is
        certain. Raises ``LeaseLostError`` if not (see ``Ownership.check_lease``)."""
        self.host.check_lease(self.actor_id, self.fencing_token)
        return self.fencing_token

    # -- what its steps' Context reaches (StepHost) ----------------------------------------

    @property
    def closing(self) -> bool:
        return self.host.closing

    @property
    def registry(self) -> Registry:
        return self.host.registry

    async def deliver(self, ref: ActorRef[Any], letter: Letter, *, message_id: str) -> None:
        await self.host.deliver(ref, letter, message_id=message_id, sender=self.actor_id)

    async def spawn(self, cls: type[Any], actor_id: str, **options: Any) -> ActorRef[Any]:
        return await self.host.spawn(cls, actor_id, **options)

    def ref(self, cls: type[Any], actor_id: str) -> ActorRef[Any]:
        return self.host.ref(cls, actor_id)

    async def put_timer(self, row: TimerRow) -> None:
        await self.host.put_timer(row)

    def timers_kept(self) -> bool:
        return self.store.capabilities.timers

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self) -> None:
        """The cell's task: recover, then handle messages until closed or quarantined."""
        try:
            try:
                await _recovery.recover(self)
            except ActorlogError as exc:
                error, status = self._stopping(exc)
                self.quarantine(error, status=status)
                return
            except Exception as exc:
                self.quarantine(RecoveryError(self.actor_id, self.handled_seq, repr(exc)))
                return
            try:
                await self._loop()
            except ActorlogError as exc:
                if self._shut_down(exc):
                    return  # stopped, not quarantined: the step resumes at the next start
                error, status = self._stopping(exc)
                self.quarantine(error, status=status)
            except Exception as exc:
                self.quarantine(RecoveryError(self.actor_id, self.handled_seq, repr(exc)))
        finally:
            if self.status == "passivated":
                self.host.forget(self)
            elif self.status not in ("quarantined", "stopped"):
                self.status = "stopped"
            for seq in list(self.waiters):
                settle(
                    self.waiters, seq, None, ActorStoppedError(f"actor {self.actor_id!r} stopped")
                )
            self.is_ready = self.is_done = True
            self.ready.set()
            self.done.set()
            self._mailbox.close()

    def _shut_down(self, exc: BaseException) -> bool:
        """The system closing stopped the step (a ``ctx.send``/``ctx.spawn``/timer effect
        reached while it shuts down: "the ActorSystem is not running"). A clean shutdown
        never quarantines: the step is left unrecorded, as a cancelled one is, and resumes
        in the next runtime (its effect logged, so it is done once)."""
        return self.closing and isinstance(exc, ActorStoppedError) and self.journal.broken is None

    def _stopping(self, exc: BaseException) -> tuple[BaseException, str]:
        """Why the actor ends, and as what. A rejected append (a conflict, or a lease lost
        to another runtime) stops it, also when what surfaces is a later failure of the
        journal that rejection broke: another writer owns the log, which is not damaged."""
        if isinstance(exc, SequenceConflictError):
            return exc, "stopped"
        if isinstance(self.journal.broken, SequenceConflictError):
            return self.journal.broken, "stopped"
        return exc, self._stop_status(exc)

    def _stop_status(self, exc: BaseException) -> str:
        """A store failure stops the actor (spawning it again retries); anything else
        means its log cannot be trusted: quarantine."""
        failed = isinstance(exc, StoreUnavailableError) or isinstance(
            self.journal.broken, StoreUnavailableError
        )
        return "stopped" if failed else "quarantined"

    def recovery_parts(self) -> tuple[float, float]:
        """Estimated (floor, tail) seconds of recovering this actor now (``RecoveryCost``)."""
        return self.cost.parts(
            self.snapshot_bytes, self.journal.last_seq - self.snapshot_seq, self.replay_cpu
        )

    def estimated_recovery(self) -> float:
        """Seconds recovering this actor would take now (see ``RecoveryCost``)."""
        return sum(self.recovery_parts())

    def is_idle(self) -> bool:
        """Between steps with nothing queued or awaited: safe to passivate."""
        return (
            self.status == "idle"
            and not self.passivating
            and not self.done.is_set()
            and not self.holds
            and not self.waiters
            and not self.inflight_ids
            and not self.in_doubt
            and not self._mailbox
        )

    def passivate(self) -> None:
        """Leave memory after writing a snapshot (if anything changed since the last one).
        A post that arrives meanwhile goes to a fresh cell (``Moved``)."""
        if self.passivating:
            return
        self.passivating = True
        try:
            self._mailbox.put(PASSIVATE)
        except anyio.ClosedResourceError:
            pass

    def dispose(self) -> None:
        """Release the mailbox (idempotent)."""
        self._mailbox.close()

    def close(self) -> None:
        """Stop after the current step (pending messages stay in the log)."""
        try:
            self._mailbox.put(STOP)
        except anyio.ClosedResourceError:
            pass  # already stopped

    def quarantine(self, exc: BaseException, *, status: str = "quarantined") -> None:
        if self.error is not None and self.status in ("quarantined", "stopped"):
            # already stopped: what follows (a step waiting in doubt woken by the stop with
            # ActorStoppedError) is a consequence, not a second cause to record
            return
        self.status = status
        self.error = exc
        err = self.failure()
        if status == "quarantined":
            self.journal.seal(err)  # nothing more reaches its log
        for seq in list(self.waiters):
            settle(self.waiters, seq, None, err)
        self.escalations.wake_all()
        self.is_ready = True
        self.ready.set()
        if not isinstance(exc, LeaseLostError):
            # A runtime that lost the actor writes nothing for it, not even history: the
            # owner's history says how it is (the loss is logged and traced by Ownership).
            self.note_event(status, {"error_type": type(exc).__qualname__, "error": str(exc)})
            _logs.stopped(self.actor_id, self.actor_type, status, exc)

    def failure(self) -> BaseException:
        """What a caller of this stopped or quarantined actor gets: the conflict itself for
        the loser of a conflicting append; the store's error when a store failure (possibly
        transient: the next spawn/send/ask starts the actor again) stopped it; else
        ``ActorQuarantinedError`` (its log cannot be trusted until an operator acts)."""
        exc = self.error
        assert exc is not None
        if isinstance(exc, SequenceConflictError):
            return exc
        if self.status == "stopped":
            broken = exc if isinstance(exc, StoreUnavailableError) else self.journal.broken
            if isinstance(broken, StoreUnavailableError):
                return broken
        err = ActorQuarantinedError(self.actor_id, exc)
        err.__cause__ = exc
        return err

    def check_usable(self) -> None:
        if self.ended is not None:
            raise ActorFinishedError(self.actor_id, *self.ended)
        if self.status in ("quarantined", "stopped") and self.error is not None:
            raise self.failure()
        if self.passivating or self.status == "passivated":
            return  # usable: the next post moves to a fresh cell (``Moved``)
        if self.status == "stopped" or self.is_done:
            raise ActorStoppedError(f"actor {self.actor_id!r} is stopped")

    def note_event(self, kind: str, detail: dict[str, Any]) -> None:
        """Record an operator-history event, best effort, without blocking the caller."""
        self.host.spawn_task(self.record_event, kind, json.dumps(detail, default=str))

    async def record_event(self, kind: str, detail: str) -> None:
        try:
            await self.store.record_event(self.actor_id, kind, detail)
        except Exception:
            pass  # history is best effort; the log is the truth

    async def load_options(self) -> None:
        """Take the spawn options last saved for this actor (``ActorSystem.spawn``), unless
        a ``spawn`` in this system gave some already. Damaged saved options are ignored
        (the class attributes hold), never fatal."""
        events = await self.store.read_events(self.actor_id)
        self.ended, self.cancel_pending = (
            _lifecycle.ended(events),
            _lifecycle.pending_cancel(events),
        )
        found = _records.saved_options(events)
        saved: dict[str, Any] = found[0] if found is not None else {}
        self.saved_options = saved
        if saved:
            policy = self.host.adopt_options(self.cls, self.actor_id, saved)
            if policy is not None:
                self.policy = policy

    def decode_message(self, tag: str, body: Any) -> Any:
        return self.host.registry.decode_message(tag, body)

    def queue(self, env: Envelope) -> None:
        """Queue a recovered message for its step. An interrupted step whose handler cannot
        run now (``_step.unrunnable``) raises here, so recovery quarantines the actor before
        it is ready: no message posted meanwhile is logged."""
        if env.recorded:
            cannot = _step.unrunnable(self, env)
            if cannot is not None:
                raise cannot
        self._mailbox.put(env)

    # -- messages in -----------------------------------------------------------------------

    async def post(
        self,
        letter: Letter,
        *,
        message_id: str | None,
        sender: str | None,
        want_reply: bool,
    ) -> Reply | None:
        """Log a message durably and queue it. Returns the reply slot for ``ask``.

        With a ``message_id`` already in the log, nothing is written: ``ask`` gets the
        recorded (or pending) reply of that message, and ``send`` returns once that message
        is durable (raising the failure of the commit that should have carried it); if that
        message is not this one, ``MessageIdReusedError`` (``_reuse``).

        A cancellation point: a cancelled post leaves no slot behind; the message may or
        may not be logged (posting again with the same ``message_id`` settles it).
        """
        tag, body = letter.type_tag, letter.body  # checked, tagged and learned at the door
        self.holds += 1  # not idle while a post is on its way in
        try:
            if not self.is_ready:
                await self.ready.wait()
            self.check_usable()
            if message_id is not None:
                # checked at the door (ref.send/ask, a timer's schedule) or made by the
                # runtime (ctx.send), and again by the entry's row (make_row) before a write
                found = None
                seen = self.journal.seen
                # ``_find_message``'s first answers, inline: not in flight, and the filter
                # complete and sure the id is new (most asks): nothing to look up
                if (
                    message_id in self.inflight_ids
                    or seen.state != "complete"
                    or seen.maybe_seen(message_id)
                ):
                    found = await self._find_message(message_id)
                if found is not None:
                    existing, recorded = found
                    _reuse.check_same_message(
                        self.host.registry,
                        self.actor_id,
                        message_id,
                        existing,
                        recorded,
                        (tag, body),
                    )
                    if want_reply:
                        return await self.reply_for(existing)
                    await self._durable(existing)
                    return None
            else:
                message_id = _codec.new_message_id()
            trace = _telemetry.inject()
            inc = self.incarnation
            payload = _records.message_payload(body, sender=sender, trace=trace, incarnation=inc)
            if self.passivating or self.is_done:
                raise Moved  # checked with no await before the write: no post is lost
            try:
                seq = self.journal.write(EntryKind.MESSAGE, tag, 0, payload, message_id=message_id)
            except EncodeError as exc:
                raise EncodeError("message", letter.cls or Letter, exc.reason) from exc
            self.inflight_ids[message_id] = seq
            slot = Reply(self.waiters, seq, self.io.event) if want_reply else None
            # The handler gets the message decoded from the bytes just logged, as replay
            # will (live equals replay; the caller's object is not shared with the handler).
            # It may start before the commit completes: nothing it does escapes before the
            # journal is flushed, and every flush covers this entry.
            env = Envelope(seq, tag, None, message_id, trace, incarnation=self.incarnation)
            if letter.error is not None:
                env.decode_error = letter.error
            else:
                try:
                    if not _codec.is_flat(body):  # else it decodes to itself (is_flat)
                        body = self.journal.last_logged("body")
                    env.message = self.host.registry.decode_message(tag, body)
                except ActorlogError as exc:
                    env.decode_error = exc
            # what a retry of this id is compared with while the message is in flight: the
            # body as logged (the caller's object may change after this call)
            self.inflight_messages[message_id] = (tag, body)
            self._mailbox.put(env)
            if slot is not None:
                # ``ask`` returns only with the reply, which waits for the step's commit;
                # that commit (or the first intent's, earlier) covers this message. While a
                # step waits for an operator nothing commits until a decision, so the
                # message is made durable now: an offline decision written meanwhile
                # surfaces as this write's SequenceConflictError instead of a hang.
                if self.escalations.waiting:
                    await self._durable(seq)
                # Queued behind a running step, whose next commit may be far off (a long
                # tool), it is committed now: an ask that times out or is abandoned left
                # it logged.
                elif self.step_scope is not None:
                    self.host.spawn_task(self._commit_queued, seq)
                return slot
            await self._durable(seq)
            return None
        finally:
            self.holds -= 1
            self.last_active = time.monotonic()

    def more_queued(self) -> bool:
        """Another message waits in the mailbox, and the burst holds fewer than
        ``BURST_MAX`` replies: the step just handled may leave its commit to the next."""
        return bool(self._mailbox.items) and self.journal.deferred < BURST_MAX

    def commit_burst(self) -> None:
        """A reply waits for a later commit (a burst, ``_step.handle``): make sure one
        comes even if the next step waits long before its first commit."""
        if not self._burst_commit:
            self._burst_commit = True
            self.host.spawn_task(self._commit_burst)

    async def _commit_burst(self) -> None:
        self._burst_commit = False
        await self._commit_queued(self.journal.last_seq)

    # -- the step loop ---------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            env = self._mailbox.take()  # None: empty (no exception raised per idle turn)
            if env is None:
                if self.status == "running":
                    self.status = "idle" if self.ended is None else self.ended[0]
                journal = self.journal
                if journal.durable_seq < journal.last_seq:  # else flush() is a no-op
                    await journal.flush()  # idle: make buffered steps durable
                if self.inflight_ids:  # (else nothing to prune)
                    self.prune_inflight()
                env = await self._mailbox.get()
            if env is STOP:
                await self.journal.flush()
                return
            if env is PASSIVATE:
                await self.journal.flush()
                if self.steps_since_snapshot:
                    await self.snapshot(trigger=_snapshots.SnapshotTrigger.PASSIVATION)
                self.status = "passivated"
                return
            assert isinstance(env, Envelope)
            if self.ended is not None:
                await _lifecycle.refuse(self, env)  # logged before it ended: refused
                continue
            self.status = "running"
            self.last_active = time.monotonic()
            # Queries run between steps, never during one. Taken without a checkpoint when
            # free (the usual case): a step starts in the same turn as it is dequeued, as it
            # did before queries existed, so a post cannot slip in between.
            try:
                self.step_lock.acquire_nowait()
            except anyio.WouldBlock:
                await self.step_lock.acquire()
            try:
                await _step.handle(self, env)
            finally:
                self.step_lock.release()

    def prune_inflight(self) -> None:
        """Forget the ids of messages both handled and durable (a retry finds those in the
        store). ``inflight_ids`` is in seq order, so this looks only at its head."""
        bound = min(self.handled_seq, self.journal.durable_seq)
        ids = self.inflight_ids
        while ids:
            message_id, seq = next(iter(ids.items()))
            if seq > bound:
                break
            del ids[message_id]
            self.inflight_messages.pop(message_id, None)
            self._pruned += 1

    async def snapshot(
        self, seq: int | None = None, *, trigger: str = _snapshots.SnapshotTrigger.MANUAL
    ) -> None:
        """Write a snapshot covering ``seq`` (default: the last durable entry); see
        ``_step.snapshot``. Never fatal."""
        await _step.snapshot(self, seq, trigger)

    def spawn_task(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None:
        self.host.spawn_task(fn, *args)

    # -- in doubt --------------------------------------------------------------------------

    async def wait_in_doubt(
        self, intent_seq: int, tool: str, key: str, *, step_seq: int
    ) -> DecisionRecord:
        """Escalate: wait (status ``in_doubt``) until an operator resolves the intent; the
        asks of the step's message get ``InDoubtError`` meanwhile. A cancellation point
        (the handler's own scope may cancel the call: the step settles it)."""
        self.status = "in_doubt"
        try:
            return await self.escalations.wait(
                self.journal, intent_seq, tool, key, step_seq=step_seq, waiters=self.waiters
            )
        finally:
            if self.status == "in_doubt" and not self.escalations.waiting:
                self.status = "running"

    async def resolve(self, intent_seq: int, decision: DecisionRecord) -> None:
        """An operator's decision (see ``Escalations.resolve``)."""
        await self.escalations.resolve(self.journal, intent_seq, decision)
