"""One live actor: its journal, mailbox, recovery, and the step loop."""

from __future__ import annotations

import collections
import functools
import json
import time
from typing import TYPE_CHECKING, Any

import anyio
import anyio.to_thread
import attrs
from opentelemetry import trace
from opentelemetry.trace import Status, StatusCode

from . import _codec, _records, _recovery, _snapshots, _telemetry, _tools
from ._actor import Actor, accepted_messages, reply_type
from ._context import Context, Recorded, is_call_error
from ._errors import (
    ActorlogError,
    ActorQuarantinedError,
    ActorStoppedError,
    ConfigurationError,
    CorruptEntryError,
    EncodeError,
    HandlerError,
    LeaseLostError,
    RecoveryError,
    SequenceConflictError,
    StoreUnavailableError,
)
from ._snapshots import SnapshotPolicy, build_snapshot
from ._telemetry import ATTR, EVENT, SPAN, tracer
from ._wal import Journal

if TYPE_CHECKING:
    from opentelemetry.context import Context as OtelContext

    from ._system import ActorSystem

__all__ = ["Cell", "Reply", "Undecodable"]


class Moved(Exception):  # internal signal, never escapes the system
    """The cell passivated while a post was on its way: post to a fresh cell instead."""


class Reply:
    """Where one ``ask`` waits for its step to complete.

    Each caller gets its own slot, registered under the message's seq in the cell's
    ``waiters``; a caller that stops waiting (cancelled, timed out) withdraws its slot, so
    nothing is left behind for a later ask of the same message to wait on.
    """

    __slots__ = ("_seq", "_waiters", "error", "event", "value")

    def __init__(self, waiters: dict[int, list[Reply]] | None = None, seq: int = 0) -> None:
        self.event = anyio.Event()
        self.value: Any = None
        self.error: BaseException | None = None
        self._waiters = waiters
        self._seq = seq
        if waiters is not None:
            waiters.setdefault(seq, []).append(self)

    def set(self, value: Any = None, error: BaseException | None = None) -> None:
        if not self.event.is_set():
            self.value, self.error = value, error
            self.event.set()

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
            self.withdraw()
        if self.error is not None:
            raise self.error
        return self.value


def _settle(
    waiters: dict[int, list[Reply]], seq: int, value: Any, error: BaseException | None
) -> None:
    for slot in waiters.pop(seq, ()):
        slot._waiters = None
        slot.set(value, error)


class _Mailbox:
    """A cell's queue of envelopes: unbounded, one consumer. Cheaper per message than a
    memory object stream: no event and no checkpoint per receive, only an event when the
    consumer actually has to wait."""

    __slots__ = ("_items", "_waiter", "closed")

    def __init__(self) -> None:
        self._items: collections.deque[_Envelope | str | None] = collections.deque()
        self._waiter: anyio.Event | None = None
        self.closed = False

    def __len__(self) -> int:
        return len(self._items)

    def put(self, item: _Envelope | str | None) -> None:
        """Queue ``item``. Raises ``anyio.ClosedResourceError`` once the cell has closed."""
        if self.closed:
            raise anyio.ClosedResourceError
        self._items.append(item)
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.set()

    def get_nowait(self) -> _Envelope | str | None:
        """The next item. Raises ``anyio.WouldBlock`` if there is none."""
        if self._items:
            return self._items.popleft()
        raise anyio.WouldBlock

    async def get(self) -> _Envelope | str | None:
        while not self._items:
            if self.closed:
                raise anyio.ClosedResourceError
            self._waiter = anyio.Event()
            await self._waiter.wait()
        return self._items.popleft()

    def close(self) -> None:
        self.closed = True
        waiter, self._waiter = self._waiter, None
        if waiter is not None:
            waiter.set()


@attrs.define
class _Envelope:
    seq: int
    type_tag: str
    message: Any
    message_id: str | None
    trace: dict[str, str] | None
    recorded: list[Recorded] | None = None
    decode_error: BaseException | None = None
    parent: OtelContext | None = None


@attrs.frozen
class Undecodable:
    """A message from the store's inbox that this runtime cannot decode (a type it does not
    know yet, as in a rolling deploy): posted as it came, its step fails with ``error``."""

    type_tag: str
    body: Any
    error: BaseException


def _decode_failed(p: dict[str, Any]) -> bool:
    """A recorded step whose message could not be decoded: its handler never ran."""
    err = p.get("error") or {}
    return (
        not p.get("ok")
        and err.get("type") == "ConfigurationError"
        and str(err.get("message", "")).startswith(("unknown message type", "cannot decode"))
    )


@attrs.define
class _InDoubt:
    tool: str
    key: str
    event: anyio.Event = attrs.Factory(anyio.Event)
    decision: dict[str, Any] | None = None
    #: the decision being written: a second resolve is refused from the first one's start
    claimed: dict[str, Any] | None = None


class Cell:
    def __init__(
        self, system: ActorSystem, cls: type[Actor[Any]], actor_id: str, policy: SnapshotPolicy
    ) -> None:
        self.system = system
        self.store = system.store
        self.cls = cls
        self.actor_id = actor_id
        self.actor_type = _codec.type_tag(cls)
        self.where = f"{cls.__qualname__} (actor {actor_id!r})"  # for ToolCalledDirectlyError
        self.policy = policy
        # The spawn options in effect and those last saved in the store (an ``options``
        # event); None until recovery has read them.
        self.saved_options: dict[str, Any] | None = None
        self.actor: Actor[Any] = cls()
        self.actor.actor_id = actor_id
        self.journal = Journal(self.store, actor_id, 0)
        self.status = "starting"
        self.error: BaseException | None = None
        self.ready = anyio.Event()
        self.done = anyio.Event()
        self._mailbox = _Mailbox()
        #: message seq -> the slots of the asks waiting for its step
        self.waiters: dict[int, list[Reply]] = {}
        #: message id -> seq of messages logged here that are not yet both handled and
        #: durable, in seq order (a retry of one finds it here, not in the store)
        self.inflight_ids: collections.OrderedDict[str, int] = collections.OrderedDict()
        self._pruned = 0  # ids forgotten from inflight_ids so far (see _find_message)
        #: posts on their way into this cell (and starts made for one): not idle meanwhile
        self.holds = 0
        self.in_doubt: dict[int, _InDoubt] = {}
        self.handled_seq = 0
        self.steps_since_snapshot = 0
        self.last_snapshot_at = time.monotonic()
        self.accepts = accepted_messages(cls)
        self.reply_type = reply_type(cls)
        self.last_recovery: dict[str, Any] | None = None
        self.last_active = time.monotonic()
        self.passivating = False
        self.cost = system._recovery_cost(self.actor_type)
        self.replay_cpu = 0.0  # handler time of the steps since the last snapshot
        self.snapshot_bytes = 0
        self.snapshot_seq = 0
        own = system._ownership
        #: the fencing token of the lease this cell runs under (0 without leases)
        self.fencing_token = 0 if own is None else own.tokens.get(actor_id, 0)

    def check_lease(self) -> int:
        """Before a tool starts: the fencing token, if this runtime's lease of the actor is
        certain. Raises ``LeaseLostError`` if not (see ``Ownership.check_lease``)."""
        own = self.system._ownership
        if own is not None:
            own.check_lease(self.actor_id, self.fencing_token)
        return self.fencing_token

    # -- lifecycle -------------------------------------------------------------------------

    async def run(self) -> None:
        """The cell's task: recover, then handle messages until closed or quarantined."""
        try:
            try:
                await self._recover()
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
                error, status = self._stopping(exc)
                self.quarantine(error, status=status)
            except Exception as exc:
                self.quarantine(RecoveryError(self.actor_id, self.handled_seq, repr(exc)))
        finally:
            if self.status == "passivated":
                self.system._forget(self)
            elif self.status not in ("quarantined", "stopped"):
                self.status = "stopped"
            for seq in list(self.waiters):
                _settle(
                    self.waiters, seq, None, ActorStoppedError(f"actor {self.actor_id!r} stopped")
                )
            self.ready.set()
            self.done.set()
            self._mailbox.close()

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
            self._mailbox.put("passivate")
        except anyio.ClosedResourceError:
            pass

    def dispose(self) -> None:
        """Release the mailbox (idempotent)."""
        self._mailbox.close()

    def close(self) -> None:
        """Stop after the current step (pending messages stay in the log)."""
        try:
            self._mailbox.put(None)
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
        for seq in list(self.waiters):
            _settle(self.waiters, seq, None, err)
        for w in self.in_doubt.values():
            w.event.set()
        self.ready.set()
        if not isinstance(exc, LeaseLostError):
            # A runtime that lost the actor writes nothing for it, not even history: the
            # owner's history says how it is (the loss is logged and traced by Ownership).
            self.note_event(status, {"error_type": type(exc).__qualname__, "error": str(exc)})

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
        if self.status in ("quarantined", "stopped") and self.error is not None:
            raise self.failure()
        if self.passivating or self.status == "passivated":
            return  # usable: the next post moves to a fresh cell (``Moved``)
        if self.status == "stopped" or self.done.is_set():
            raise ActorStoppedError(f"actor {self.actor_id!r} is stopped")

    def note_event(self, kind: str, detail: dict[str, Any]) -> None:
        """Record an operator-history event, best effort, without blocking the caller."""
        self.system._spawn_task(self._record_event, kind, json.dumps(detail, default=str))

    async def _record_event(self, kind: str, detail: str) -> None:
        try:
            await self.store.record_event(self.actor_id, kind, detail)
        except Exception:
            pass  # history is best effort; the log is the truth

    # -- recovery --------------------------------------------------------------------------

    async def _load_options(self) -> None:
        """Take the spawn options last saved for this actor (``ActorSystem.spawn``), unless
        a ``spawn`` in this system gave some already. Damaged saved options are ignored
        (the class attributes hold), never fatal."""
        found = _records.saved_options(await self.store.read_events(self.actor_id))
        saved: dict[str, Any] = found[0] if found is not None else {}
        self.saved_options = saved
        if saved and self.actor_id not in self.system._spawn_options:
            try:
                self.policy = self.system._policy(self.cls, saved)
            except ConfigurationError:
                return
            self.system._spawn_options[self.actor_id] = saved

    async def _recover(self) -> None:
        await self._load_options()
        t0 = time.perf_counter()
        initial = self.actor.initial_state()
        state_type = type(initial)
        state_tag = _codec.type_tag(state_type)
        attributes = {ATTR.ACTOR_ID: self.actor_id, ATTR.ACTOR_TYPE: self.actor_type}
        with tracer.start_as_current_span(SPAN.RECOVER, attributes=attributes) as span:
            rejected_events: list[tuple[int, str]] = []

            def on_reject(info: Any, reason: str) -> None:
                rejected_events.append((info.seq, reason))
                span.add_event(
                    EVENT.SNAPSHOT_REJECTED,
                    {ATTR.SNAPSHOT_SEQ: info.seq, ATTR.REJECT_REASON: reason},
                )
                self.note_event("snapshot_rejected", {"seq": info.seq, "reason": reason})

            try:
                plan = await _recovery.plan(
                    self.store,
                    self.actor_id,
                    state_tag=state_tag,
                    schema_version=self.cls.schema_version,
                    on_reject=on_reject,
                    decode=lambda plain: _codec.converter.structure(plain, state_type),
                )
                self.journal = Journal(self.store, self.actor_id, plan.last_seq)
                self.actor.state = initial if plan.state_data is None else plan.state
                t_loaded = time.perf_counter()
                self.handled_seq = plan.handled_seq
                self.snapshot_seq, self.snapshot_bytes = plan.snapshot_seq, plan.snapshot_size
                replayed = 0
                for m in plan.messages:
                    if m.step is None:
                        break
                    t_step = time.perf_counter()
                    await self._replay(m)
                    self.replay_cpu += time.perf_counter() - t_step
                    replayed += 1
                pending = plan.messages[replayed:]
                # Count toward the next snapshot from the last one, not from this start: an
                # actor restarted more often than snapshot_every steps still snapshots.
                self.steps_since_snapshot = replayed
                age = max(time.time() - plan.snapshot_created_at, 0.0)
                self.last_snapshot_at = time.monotonic() - age
                in_doubt = 0
                parent = trace.set_span_in_context(span)
                for i, m in enumerate(pending):
                    env = self._envelope(m)
                    if i == 0 and m.recorded:
                        env.recorded = m.recorded
                        env.parent = parent
                        for rec in m.recorded:
                            if rec.kind == "intent" and not rec.outcomes:
                                in_doubt += 1
                                span.add_event(
                                    EVENT.IN_DOUBT,
                                    {
                                        ATTR.SEQ: m.seq,
                                        ATTR.INTENT_SEQ: rec.seq,
                                        ATTR.TOOL: rec.type_tag,
                                        ATTR.TOOL_EFFECT: str(rec.payload.get("effect")),
                                        ATTR.TOOL_POLICY: str(rec.payload.get("policy")),
                                        ATTR.IDEMPOTENCY_KEY: str(rec.payload.get("key")),
                                    },
                                )
                    self._mailbox.put(env)
                duration = time.perf_counter() - t0
                self.cost.observe(
                    duration=duration,
                    load_seconds=max(t_loaded - t0 - plan.entries_read * self.cost.per_entry, 0.0),
                    snapshot_bytes=plan.snapshot_size,
                    entries=plan.entries_read,
                    replay_cpu=self.replay_cpu,
                )
                span.set_attributes(
                    {
                        ATTR.SNAPSHOT_SEQ: plan.snapshot_seq,
                        ATTR.SNAPSHOTS_REJECTED: len(plan.rejected),
                        ATTR.ENTRIES_READ: plan.entries_read,
                        ATTR.ENTRIES_CUT: 0,
                        ATTR.STEPS_REPLAYED: replayed,
                        ATTR.IN_DOUBT: in_doubt,
                        ATTR.PENDING_MESSAGES: len(pending),
                        ATTR.RECOVER_DURATION: duration,
                    }
                )
                _telemetry.recovery_duration.record(duration, {ATTR.ACTOR_TYPE: self.actor_type})
                _telemetry.replayed_steps.add(replayed, {ATTR.ACTOR_TYPE: self.actor_type})
                self.last_recovery = {
                    "snapshot_seq": plan.snapshot_seq,
                    "snapshots_rejected": plan.rejected,
                    "entries_read": plan.entries_read,
                    "steps_replayed": replayed,
                    "pending_messages": len(pending),
                    "in_doubt": in_doubt,
                    "duration_s": duration,
                }
                if plan.entries_read or plan.snapshot_seq:
                    self.note_event("recovered", self.last_recovery)
            except ActorlogError as exc:
                _telemetry.record_failure(span, exc, self.actor_id)
                raise
        self.status = "running"
        self.ready.set()

    def _envelope(self, m: _recovery.PendingMessage) -> _Envelope:
        env = _Envelope(m.seq, m.type_tag, None, m.message_id, m.trace)
        try:
            env.message = self.system._decode_message(m.type_tag, m.body)
        except ActorlogError as exc:
            env.decode_error = exc
        return env

    async def _replay(self, m: _recovery.PendingMessage) -> None:
        try:
            msg = self.system._decode_message(m.type_tag, m.body)
        except ActorlogError:
            if m.step is not None and _decode_failed(m.step):
                self.handled_seq = m.seq  # live, the handler never ran either
                return
            raise
        ctx = Context(self, m.seq, m.recorded, complete=True)
        step = m.step or {}
        with tracer.start_as_current_span(
            SPAN.REPLAY_STEP,
            links=_telemetry.link_to(step.get("span")),
            attributes={
                ATTR.ACTOR_ID: self.actor_id,
                ATTR.ACTOR_TYPE: self.actor_type,
                ATTR.SEQ: m.seq,
                ATTR.MESSAGE_TYPE: m.type_tag,
                ATTR.MESSAGE_ID: m.message_id or "",
                ATTR.OUTCOME: "ok" if step.get("ok") else "error",
                ATTR.FINISHED_LIVE: False,
            },
        ) as span:
            try:
                with _tools.in_step(self.where):  # a tool called directly raises
                    await self.actor.receive(ctx, msg)
            except BaseException as exc:
                if not is_call_error(exc):
                    raise
                # the recorded outcome stands; only effects must match
            if ctx.fatal is None:
                try:
                    ctx.check_consumed()
                except ActorlogError:
                    pass
            span.set_attribute(ATTR.EFFECTS_FROM_LOG, ctx.effects_from_log)
            if ctx.fatal is not None:
                span.set_status(Status(StatusCode.ERROR, str(ctx.fatal)))
                raise ctx.fatal
        self.handled_seq = m.seq

    # -- messages in -----------------------------------------------------------------------

    async def post(
        self,
        msg: Any,
        *,
        message_id: str | None,
        sender: str | None,
        want_reply: bool,
    ) -> Reply | None:
        """Log a message durably and queue it. Returns the reply slot for ``ask``.

        With a ``message_id`` already in the log, nothing is written: ``ask`` gets the
        recorded (or pending) reply of that message, and ``send`` returns once that message
        is durable (raising the failure of the commit that should have carried it).

        A cancellation point: a cancelled post leaves no slot behind; the message may or
        may not be logged (posting again with the same ``message_id`` settles it).
        """
        if isinstance(msg, Undecodable):
            tag, body = msg.type_tag, msg.body
        else:
            _codec.check_attrs_instance(msg, "message")
            tag = _codec.type_tag(type(msg))
            body = _codec.to_plain(msg, "message", check=False)
        self.holds += 1  # not idle while a post is on its way in
        try:
            if not self.ready.is_set():
                await self.ready.wait()
            self.check_usable()
            if not isinstance(msg, Undecodable):
                self.system._learn_message_type(type(msg))
            if message_id is not None:
                _codec.validate_message_id(message_id)
                existing = await self._find_message(message_id)
                if existing is not None:
                    if want_reply:
                        return await self.reply_for(existing)
                    await self._durable(existing)
                    return None
            else:
                message_id = _codec.new_message_id()
            payload = _records.message_payload(body, sender=sender, trace=_telemetry.inject())
            if self.passivating or self.done.is_set():
                raise Moved  # checked with no await before the write: no post is lost
            try:
                seq = self.journal.write("message", tag, 0, payload, message_id=message_id)
            except EncodeError as exc:
                raise EncodeError("message", type(msg), exc.reason) from exc
            self.inflight_ids[message_id] = seq
            slot = Reply(self.waiters, seq) if want_reply else None
            # The handler gets the message decoded from the bytes just logged, as replay
            # will (live equals replay; the caller's object is not shared with the handler).
            # It may start before the commit completes: nothing it does escapes before the
            # journal is flushed, and every flush covers this entry.
            env = _Envelope(seq, tag, None, message_id, payload["trace"])
            if isinstance(msg, Undecodable):
                env.decode_error = msg.error
            else:
                try:
                    body = self.journal.last_payload()["body"]
                    env.message = self.system._decode_message(tag, body)
                except ActorlogError as exc:
                    env.decode_error = exc
            self._mailbox.put(env)
            if slot is not None:
                # ``ask`` returns only with the reply, which waits for the step's commit;
                # that commit (or the first intent's, earlier) covers this message.
                return slot
            await self._durable(seq)
            return None
        finally:
            self.holds -= 1
            self.last_active = time.monotonic()

    async def _durable(self, seq: int) -> None:
        """Wait until the entry ``seq`` of this log is committed.

        Raises the failure of the commit that should have carried it: the store's
        ``StoreUnavailableError`` (also for a caller whose entry rode on another caller's
        commit), or ``SequenceConflictError``.
        """
        if self.journal.durable_seq >= seq or seq > self.journal.last_seq:
            return  # committed already (or read back from the store)
        try:
            await self.journal.flush()
        except SequenceConflictError as exc:
            self.quarantine(exc, status="stopped")
            raise
        except ActorlogError as exc:
            if self.journal.durable_seq >= seq:
                return  # ours committed; a later commit failed
            raise self._commit_failure(exc) from exc.__cause__

    def _commit_failure(self, exc: ActorlogError) -> ActorlogError:
        """What a caller whose entry was in a failed commit gets: the store's error."""
        broken = self.journal.broken
        if isinstance(broken, StoreUnavailableError) and broken is not exc:
            err = StoreUnavailableError(str(broken))
            err.__cause__ = broken
            return err
        return exc

    async def _find_message(self, message_id: str) -> int | None:
        """The seq of the message logged with ``message_id``, or None.

        Looks in flight first, then in the store. An id forgotten from ``inflight_ids``
        while the store was being asked (its message became handled and durable meanwhile)
        may be missing from that answer, which was read before the commit: ask again.
        """
        while True:
            seq = self.inflight_ids.get(message_id)
            if seq is not None:
                return seq
            pruned = self._pruned
            row = await self.store.find_message(self.actor_id, message_id)
            if row is not None:
                _codec.verify_row(row, self.actor_id, row.seq)
                return row.seq
            seq = self.inflight_ids.get(message_id)
            if seq is not None or self._pruned == pruned:
                return seq

    async def reply_for(self, seq: int) -> Reply:
        """The reply slot of an already-logged message: resolved from its recorded step if it
        was handled, else when its step completes here.

        A handled message's reply is read back from the log (after the commit that carries
        its step): nothing is registered, so a caller cancelled meanwhile leaves nothing
        behind, and a cell that passivates meanwhile does not matter.
        """
        if self.handled_seq < seq <= self.journal.last_seq:
            self.check_usable()
            if self.done.is_set():
                raise Moved  # stopped under the caller: the retry meets the error
            return Reply(self.waiters, seq)
        failure: ActorlogError | None = None
        try:
            await self.journal.flush()  # its step may still be buffered (no-op if not)
        except ActorlogError as exc:
            failure = self._commit_failure(exc)
        for row in await self.store.find_ref(self.actor_id, "step", seq):
            _codec.verify_row(row, self.actor_id, row.seq)
            slot = Reply()
            slot.set(*self._outcome(seq, _records.decode(row)))
            return slot
        if failure is not None:
            raise failure
        raise CorruptEntryError(
            self.actor_id, seq, "reference", "a handled message has no step in the log"
        )

    def _outcome(self, seq: int, p: dict[str, Any]) -> tuple[Any, BaseException | None]:
        if p.get("ok"):
            value = p.get("reply")
            if self.reply_type is not Any and value is not None:
                try:
                    value = _codec.converter.structure(value, self.reply_type)
                except Exception:
                    pass
            return value, None
        err = p.get("error") or {}
        return None, HandlerError(self.actor_id, seq, str(err.get("type")), str(err.get("message")))

    # -- the step loop ---------------------------------------------------------------------

    async def _loop(self) -> None:
        while True:
            try:
                env = self._mailbox.get_nowait()
            except anyio.WouldBlock:
                self.status = "idle" if self.status == "running" else self.status
                await self.journal.flush()  # idle: make buffered steps durable
                self._prune_inflight()
                env = await self._mailbox.get()
            if env is None:
                await self.journal.flush()
                return
            if isinstance(env, str):  # "passivate"
                await self.journal.flush()
                if self.steps_since_snapshot:
                    await self.snapshot()
                self.status = "passivated"
                return
            self.status = "running"
            self.last_active = time.monotonic()
            await self._handle(env)

    async def _handle(self, env: _Envelope) -> None:
        ctx = Context(self, env.seq, env.recorded, complete=False)
        resumed = bool(env.recorded)
        name = SPAN.REPLAY_STEP if resumed else SPAN.STEP
        parent = env.parent if resumed else _telemetry.extract(env.trace)
        attributes: dict[str, Any] = {
            ATTR.ACTOR_ID: self.actor_id,
            ATTR.ACTOR_TYPE: self.actor_type,
            ATTR.SEQ: env.seq,
            ATTR.MESSAGE_TYPE: env.type_tag,
        }
        if env.message_id is not None:
            attributes[ATTR.MESSAGE_ID] = env.message_id
        if resumed:
            attributes[ATTR.FINISHED_LIVE] = True
        t0 = time.perf_counter()
        reply: Any = None
        error: BaseException | None = None
        with tracer.start_as_current_span(name, context=parent, attributes=attributes) as span:
            try:
                if env.decode_error is not None:
                    raise env.decode_error
                if self.accepts is not None and not isinstance(env.message, self.accepts):
                    raise TypeError(
                        f"{self.cls.__qualname__} does not accept messages of type {env.type_tag}"
                    )
                with _tools.in_step(self.where):  # a tool called directly raises
                    reply = await self.actor.receive(ctx, env.message)
                if ctx.fatal is None and resumed:
                    ctx.check_consumed()
                reply_plain = _codec.to_plain(reply, "reply", check=False)
            except BaseException as exc:
                if not is_call_error(exc):
                    raise  # a cancellation the runtime asked for, KeyboardInterrupt, ...
                if ctx.fatal is not None:
                    span.set_status(Status(StatusCode.ERROR, str(ctx.fatal)))
                    raise ctx.fatal from None
                if self.journal.broken is not None:
                    raise
                error = exc
                reply_plain = None
                span.set_status(Status(StatusCode.ERROR, _records.error_info(exc)["message"]))
            if ctx.fatal is not None:
                raise ctx.fatal
            ctx.settle_abandoned()
            span.set_attribute(ATTR.OUTCOME, "ok" if error is None else "error")
            if resumed:
                span.set_attribute(ATTR.EFFECTS_FROM_LOG, ctx.effects_from_log)
            try:
                step_seq = self.journal.write(
                    "step",
                    env.type_tag,
                    env.seq,
                    _records.step_payload(
                        reply=reply_plain,
                        error=None if error is None else _records.error_info(error),
                        span=_telemetry.span_ids(),
                        duration=time.perf_counter() - t0,
                    ),
                )
            except EncodeError as exc:
                # The reply cannot be encoded or is too large for one entry (or the error
                # text is): record the step as failed with that error instead of stopping.
                if error is None:
                    exc = EncodeError("reply", type(reply), exc.reason)
                error, reply_plain = exc, None
                span.set_attribute(ATTR.OUTCOME, "error")
                step_seq = self.journal.write(
                    "step",
                    env.type_tag,
                    env.seq,
                    _records.step_payload(
                        error=_records.error_info(exc),
                        span=_telemetry.span_ids(),
                        duration=time.perf_counter() - t0,
                    ),
                )
            wanted = env.seq in self.waiters
            # the callers get the decoded form of what was logged: what a re-ask gets, and
            # never a reference to the actor's state
            outcome = None
            if wanted:
                scalar = error is None and _codec.is_scalar(reply_plain)
                logged = {"ok": True, "reply": reply_plain} if scalar else None
                outcome = self._outcome(env.seq, logged or self.journal.last_payload())
        self.handled_seq = env.seq
        self.steps_since_snapshot += 1
        self.replay_cpu += max(time.perf_counter() - t0 - ctx.awaited, 0.0)
        due = self.policy.due(
            self.steps_since_snapshot,
            time.monotonic() - self.last_snapshot_at,
            self.recovery_parts(),
        )
        if wanted or due:
            # If this commit fails, the slots stay registered and quarantine() fails them.
            await self.journal.flush()
        self._prune_inflight()
        if outcome is not None:
            value, herr = outcome
            if herr is not None:
                herr.__cause__ = error
            _settle(self.waiters, env.seq, value, herr)
        if due:
            await self.snapshot(step_seq)

    def _prune_inflight(self) -> None:
        """Forget the ids of messages both handled and durable (a retry finds those in the
        store). ``inflight_ids`` is in seq order, so this looks only at its head."""
        bound = min(self.handled_seq, self.journal.durable_seq)
        ids = self.inflight_ids
        while ids:
            message_id, seq = next(iter(ids.items()))
            if seq > bound:
                break
            del ids[message_id]
            self._pruned += 1

    async def snapshot(self, seq: int | None = None) -> None:
        """Write a snapshot covering ``seq`` (default: the last durable entry). Never fatal."""
        await self.journal.flush()
        seq = self.journal.durable_seq if seq is None else seq
        t0 = time.perf_counter()
        with tracer.start_as_current_span(
            SPAN.SNAPSHOT,
            attributes={
                ATTR.ACTOR_ID: self.actor_id,
                ATTR.ACTOR_TYPE: self.actor_type,
                ATTR.SNAPSHOT_SEQ: seq,
                ATTR.SNAPSHOT_HANDLED_SEQ: self.handled_seq,
            },
        ) as span:
            try:
                build = functools.partial(
                    build_snapshot,
                    self.actor_id,
                    self.actor.state,
                    seq=seq,
                    handled_seq=self.handled_seq,
                    schema_version=self.cls.schema_version,
                )
                # The handler is not running meanwhile (this task is), so the state does
                # not change while a worker thread encodes it.
                if self.snapshot_bytes >= _snapshots.OFFLOAD_BYTES:
                    row = await anyio.to_thread.run_sync(build)
                else:
                    row = build()
                await self.store.save_snapshot(row)
                infos = await self.store.list_snapshots(self.actor_id)
                old = [i.seq for i in infos[self.policy.keep :]]
                if old:
                    await self.store.delete_snapshots(self.actor_id, old)
                span.set_attribute(ATTR.SNAPSHOT_BYTES, row.info.size)
                self.snapshot_bytes, self.snapshot_seq = row.info.size, seq
                self.replay_cpu = 0.0
            except Exception as exc:
                span.set_status(Status(StatusCode.ERROR, str(exc)))
                self.note_event("snapshot_failed", {"seq": seq, "error": str(exc)})
            finally:
                span.set_attribute(ATTR.SNAPSHOT_DURATION, time.perf_counter() - t0)
                self.steps_since_snapshot = 0
                self.last_snapshot_at = time.monotonic()

    # -- in doubt --------------------------------------------------------------------------

    def recovery_note_in_doubt(self, intent_seq: int, tool: str, policy: str) -> None:
        self.note_event("in_doubt", {"intent_seq": intent_seq, "tool": tool, "policy": policy})

    async def wait_in_doubt(self, intent_seq: int, tool: str, key: str) -> dict[str, Any]:
        """Escalate: wait (status ``in_doubt``) until an operator resolves the intent."""
        w = self.in_doubt[intent_seq] = _InDoubt(tool, key)
        self.status = "in_doubt"
        _telemetry.add_in_doubt(1)
        try:
            await self.journal.flush()
            await w.event.wait()
        finally:
            self.in_doubt.pop(intent_seq, None)
            _telemetry.add_in_doubt(-1)
        if w.decision is None:
            raise ActorStoppedError(f"actor {self.actor_id!r} stopped while in doubt")
        self.status = "running"
        return w.decision

    async def resolve(
        self,
        intent_seq: int,
        *,
        action: str,
        value: Any = None,
        error: dict[str, str] | None = None,
        by: str,
        reason: str,
    ) -> None:
        from . import _decisions  # local: the rule both resolve paths share

        def unless_taken() -> _InDoubt | None:
            # one decision per intent: what this runtime is writing or wrote, then the log
            w = self.in_doubt.get(intent_seq)
            taken = None if w is None else (w.claimed or w.decision)
            if taken is not None:
                raise _decisions.already_decided(self.actor_id, intent_seq, taken)
            return w

        def head() -> str:
            return (
                f"actor {self.actor_id!r} has no in-doubt intent at seq {intent_seq} "
                f"(in doubt: {sorted(self.in_doubt) or 'none'})"
            )

        unless_taken()
        await _decisions.check_decidable(self.store, self.actor_id, intent_seq, head=head())
        w = unless_taken()
        if w is None:
            raise ConfigurationError(head() + ": no step of this runtime waits for it")
        payload = _records.decision_payload(
            action=action, value=value, error=error, by=by, reason=reason
        )
        w.claimed = payload
        self.journal.write("decision", action, intent_seq, payload)
        await self.journal.flush()
        w.decision = payload
        w.event.set()
