"""Recovery: the newest valid snapshot plus the verified log tail (docs/recovery.md).

``recover`` drives recovery's plan (``_durability/plan.py``: what to start from, read and
verified, writing nothing) for a cell: it re-runs the completed steps' handlers with their
effects served from the log, queues the interrupted step and the pending messages, and
traces it all as one ``actorlog.recover`` span. It reaches the cell through
:class:`Recovering`.
"""

from __future__ import annotations

import time
from typing import Any, Protocol

import anyio
import attrs

from .._durability.attempts import in_doubt_attempt, in_doubt_event
from .._durability.mailbox import Envelope
from .._durability.plan import PendingMessage, plan
from .._durability.snapshots import RecoveryCost
from .._durability.wal import Journal
from .._effects.actor import Actor
from .._effects.calls import StepHost
from .._effects.context import Context
from .._effects.registry import Registry
from .._journal import codec as _codec
from .._journal.errors import (
    ActorlogError,
    ActorNotFoundError,
    CorruptEntryError,
)
from .._journal.records import (
    EventKind,
    IntentRecord,
)
from .._tracing import logs as _logs, telemetry as _telemetry
from .._tracing.telemetry import ATTR, EVENT, SPAN, tracer
from ..store import Store, UnfinishedStore
from .replay import handler_never_ran, run_recorded

__all__ = ["Recovering", "RecoveryReport", "recover", "unfinished"]


@attrs.frozen
class RecoveryReport:
    """What the last recovery of an actor did (``ActorSystem.last_recovery``).

    Also readable by key, as the dict it replaces (``report["entries_read"]``);
    ``as_dict()`` gives that dict (the detail of the ``recovered`` history event).
    """

    #: seq of the snapshot recovery started from (0: none, the initial state)
    snapshot_seq: int
    #: the snapshots tried and not used, newest first: ``(seq, reason)``
    snapshots_rejected: list[tuple[int, str]]
    #: log entries read and verified
    entries_read: int
    #: completed steps whose handlers were re-run with their effects served from the log
    steps_replayed: int
    #: messages logged but not yet handled (the interrupted step included), queued again
    pending_messages: int
    #: tool calls of the interrupted step with an intent and no outcome
    in_doubt: int
    #: seconds the recovery took
    duration_s: float

    def as_dict(self) -> dict[str, Any]:
        return {f.name: getattr(self, f.name) for f in attrs.fields(RecoveryReport)}

    def __getitem__(self, key: str) -> Any:
        if key not in attrs.fields_dict(RecoveryReport):
            raise KeyError(key)
        return getattr(self, key)

    def get(self, key: str, default: Any = None) -> Any:
        return self[key] if key in attrs.fields_dict(RecoveryReport) else default


# -- the replay driver ------------------------------------------------------------------


class Recovering(StepHost, Protocol):
    """What the replay driver needs of the cell it recovers (``Cell``)."""

    cls: type[Actor[Any]]
    actor: Actor[Any]
    actor_type: str
    store: Store
    journal: Journal  # replaced here, once the log's last seq is known
    cost: RecoveryCost
    handled_seq: int
    snapshot_seq: int
    snapshot_bytes: int
    replay_cpu: float
    steps_since_snapshot: int
    last_snapshot_at: float
    last_recovery: RecoveryReport | None
    status: str
    #: (finished | terminated, reason) once the actor ended (``_lifecycle``)
    ended: tuple[str, str] | None
    ready: anyio.Event
    #: ``ready.is_set()``, as a plain attribute (set with it)
    is_ready: bool
    #: [F13] the incarnation id of this actor's log, written into every new message
    incarnation: str | None
    #: its registration inserted it just now (``ActorRow.created``): nothing to read
    new: bool
    saved_options: dict[str, Any] | None

    async def load_options(self) -> None: ...

    def decode_message(self, tag: str, body: Any) -> Any: ...

    def queue(self, env: Envelope) -> None: ...

    @property
    def where(self) -> str:
        """The actor, as error messages name it."""
        ...


async def recover(cell: Recovering) -> None:
    """Recover the cell's actor: the newest valid snapshot, the verified tail replayed,
    the interrupted step and pending messages queued (traced as ``actorlog.recover``).

    A new actor (``cell.new``) starts without reading the store: ``_start_new``."""
    if cell.new:
        _start_new(cell)
        return
    await cell.load_options()
    t0 = time.perf_counter()
    initial = cell.actor.initial_state()
    state_type = type(initial)
    state_tag = _codec.type_tag(state_type)
    attributes = {ATTR.ACTOR_ID: cell.actor_id, ATTR.ACTOR_TYPE: cell.actor_type}
    with tracer.start_as_current_span(SPAN.RECOVER, attributes=attributes) as span:
        rejected_events: list[tuple[int, str]] = []

        def on_reject(info: Any, reason: str) -> None:
            rejected_events.append((info.seq, reason))
            span.add_event(
                EVENT.SNAPSHOT_REJECTED,
                {ATTR.SNAPSHOT_SEQ: info.seq, ATTR.REJECT_REASON: reason},
            )
            cell.note_event(EventKind.SNAPSHOT_REJECTED, {"seq": info.seq, "reason": reason})

        try:
            found = await plan(
                cell.store,
                cell.actor_id,
                state_tag=state_tag,
                schema_version=cell.cls.schema_version,
                on_reject=on_reject,
                decode=lambda plain: _codec.structure(plain, state_type),
            )
            cell.journal = Journal(cell.store, cell.actor_id, found.last_seq, cell.journal.scope)
            # a new log (or one from before incarnations) starts its incarnation here
            cell.incarnation = found.incarnation or _codec.new_incarnation()
            cell.actor.state = initial if found.state_data is None else found.state
            t_loaded = time.perf_counter()
            cell.handled_seq = found.handled_seq
            cell.snapshot_seq, cell.snapshot_bytes = found.snapshot_seq, found.snapshot_size
            replayed = 0
            for m in found.messages:
                if m.step is None:
                    break
                t_step = time.perf_counter()
                await _replay(cell, m)
                cell.replay_cpu += time.perf_counter() - t_step
                replayed += 1
            pending = found.messages[replayed:]
            # Count toward the next snapshot from the last one, not from this start: an
            # actor restarted more often than snapshot_every steps still snapshots.
            cell.steps_since_snapshot = replayed
            age = max(time.time() - found.snapshot_created_at, 0.0)
            cell.last_snapshot_at = time.monotonic() - age
            in_doubt = 0
            parent = _telemetry.context_with(span)
            for i, m in enumerate(pending):
                env = _envelope(cell, m)
                if i == 0 and m.recorded:
                    env.recorded = m.recorded
                    env.parent = parent
                    for rec in m.recorded:
                        intent = rec.record
                        if not isinstance(intent, IntentRecord):
                            continue
                        # no outcome, or an attempt of a retry that left none (ToolCalls._run)
                        attempt = in_doubt_attempt(rec.outcomes)
                        if attempt is not None:
                            in_doubt += 1
                            in_doubt_event(span, m.seq, rec.seq, rec.type_tag, intent, attempt)
                cell.queue(env)
            duration = time.perf_counter() - t0
            cell.cost.observe(
                duration=duration,
                load_seconds=max(t_loaded - t0 - found.entries_read * cell.cost.per_entry, 0.0),
                snapshot_bytes=found.snapshot_size,
                entries=found.entries_read,
                replay_cpu=cell.replay_cpu,
            )
            span.set_attributes(
                {
                    ATTR.SNAPSHOT_SEQ: found.snapshot_seq,
                    ATTR.SNAPSHOTS_REJECTED: len(found.rejected),
                    ATTR.ENTRIES_READ: found.entries_read,
                    ATTR.ENTRIES_CUT: 0,
                    ATTR.STEPS_REPLAYED: replayed,
                    ATTR.IN_DOUBT: in_doubt,
                    ATTR.PENDING_MESSAGES: len(pending),
                    ATTR.RECOVER_DURATION: duration,
                }
            )
            _telemetry.record_recovery(duration, replayed, cell.actor_type)
            report = cell.last_recovery = RecoveryReport(
                snapshot_seq=found.snapshot_seq,
                snapshots_rejected=found.rejected,
                entries_read=found.entries_read,
                steps_replayed=replayed,
                pending_messages=len(pending),
                in_doubt=in_doubt,
                duration_s=duration,
            )
            if found.entries_read or found.snapshot_seq:
                cell.note_event(EventKind.RECOVERED, report.as_dict())
                _log_recovered(cell, report)
        except ActorlogError as exc:
            _telemetry.record_failure(span, exc, cell.actor_id)
            raise
    cell.status = "running"
    cell.is_ready = True
    cell.ready.set()


def _start_new(cell: Recovering) -> None:
    """``recover`` for a new actor (its registration inserted its row: the store holds
    nothing of it), without reading the store: no saved options, no end, no snapshot; the
    initial state, an empty log (the journal the cell was made with) whose message ids are
    all known (none), a new incarnation. Traced as an ``actorlog.recover`` span that read
    nothing, when an OpenTelemetry SDK is configured (without one the span records nothing
    and is not made)."""
    t0 = time.perf_counter()
    cell.saved_options = {}
    if not _telemetry.enabled():
        _new_state(cell, t0)
    else:
        _traced_new_state(cell, t0)
    cell.status = "running"
    cell.is_ready = True
    cell.ready.set()


def _traced_new_state(cell: Recovering, t0: float) -> None:
    attributes = {ATTR.ACTOR_ID: cell.actor_id, ATTR.ACTOR_TYPE: cell.actor_type}
    with tracer.start_as_current_span(SPAN.RECOVER, attributes=attributes) as span:
        try:
            duration = _new_state(cell, t0)
        except ActorlogError as exc:
            _telemetry.record_failure(span, exc, cell.actor_id)
            raise
        span.set_attributes(
            {
                ATTR.SNAPSHOT_SEQ: 0,
                ATTR.SNAPSHOTS_REJECTED: 0,
                ATTR.ENTRIES_READ: 0,
                ATTR.ENTRIES_CUT: 0,
                ATTR.STEPS_REPLAYED: 0,
                ATTR.IN_DOUBT: 0,
                ATTR.PENDING_MESSAGES: 0,
                ATTR.RECOVER_DURATION: duration,
            }
        )


def _new_state(cell: Recovering, t0: float) -> float:
    cell.actor.state = initial = cell.actor.initial_state()
    _codec.type_tag(type(initial))  # (its snapshots' tag: a bad one fails here)
    cell.journal.seen.start_empty()  # every id is new until written
    cell.incarnation = _codec.new_incarnation()
    cell.last_snapshot_at = time.monotonic()
    duration = time.perf_counter() - t0
    _telemetry.record_recovery(duration, 0, cell.actor_type)
    cell.last_recovery = RecoveryReport(0, [], 0, 0, 0, 0, duration)
    return duration


def _log_recovered(cell: Recovering, r: RecoveryReport) -> None:
    _logs.recovery.info(
        "recovered actor %s (%s) in %.3fs: snapshot seq %d%s, %d entries read, %d steps "
        "replayed, %d messages pending, %d tool calls in doubt",
        cell.actor_id,
        cell.actor_type,
        r.duration_s,
        r.snapshot_seq,
        f" ({len(r.snapshots_rejected)} rejected)" if r.snapshots_rejected else "",
        r.entries_read,
        r.steps_replayed,
        r.pending_messages,
        r.in_doubt,
    )


def _envelope(cell: Recovering, m: PendingMessage) -> Envelope:
    env = Envelope(m.seq, m.type_tag, None, m.message_id, m.trace, incarnation=m.incarnation)
    try:
        env.message = cell.decode_message(m.type_tag, m.body)
    except ActorlogError as exc:
        env.decode_error = exc
    return env


async def _replay(cell: Recovering, m: PendingMessage) -> None:
    if handler_never_ran(m):
        cell.handled_seq = m.seq
        return
    msg = cell.decode_message(m.type_tag, m.body)
    ctx = Context(cell, m.seq, m.recorded, complete=True, incarnation=m.incarnation)
    step = m.step
    with tracer.start_as_current_span(
        SPAN.REPLAY_STEP,
        links=_telemetry.link_to(None if step is None else step.span),
        attributes={
            ATTR.ACTOR_ID: cell.actor_id,
            ATTR.ACTOR_TYPE: cell.actor_type,
            ATTR.SEQ: m.seq,
            ATTR.MESSAGE_TYPE: m.type_tag,
            ATTR.MESSAGE_ID: m.message_id or "",
            ATTR.OUTCOME: "ok" if step is not None and step.ok else "error",
            ATTR.FINISHED_LIVE: False,
        },
    ) as span:
        raised = await run_recorded(cell.actor, ctx, msg, m, cell.where)
        if ctx.stopped is not None:
            if cell.ended is None:  # the history missed it (a crash right after the step)
                cell.note_event(EventKind.FINISHED, {"seq": m.seq, "reason": ctx.stopped})
            cell.ended = ("finished", ctx.stopped)
        if ctx.fatal is None:
            try:
                ctx.check_consumed(raised)
            except ActorlogError:
                pass
        span.set_attribute(ATTR.EFFECTS_FROM_LOG, ctx.effects_from_log)
        if ctx.fatal is not None:
            _telemetry.set_error(span, str(ctx.fatal))
            raise ctx.fatal
    cell.handled_seq = m.seq


async def unfinished(
    store: Store, registry: Registry
) -> tuple[list[tuple[type[Actor[Any]], str]], dict[str, BaseException]]:
    """At start (without leases): the actors with unfinished work to recover, as (class,
    id), and those that cannot be: a summary row that cannot be read (whether it has work is
    unknown), or a class this runtime does not run (recorded as a ``quarantined`` event).
    Spawning one of those with its class raises the same error or recovers it."""
    starts: list[tuple[type[Actor[Any]], str]] = []
    quarantined: dict[str, BaseException] = {}
    # one query where the store offers it (the others: every summary row, filtered here)
    rows = await (
        store.unfinished_actors() if isinstance(store, UnfinishedStore) else store.list_actors()
    )
    for row in rows:
        if row.damage is not None:
            err = CorruptEntryError(row.actor_id, 0, "column type", row.damage)
            quarantined[row.actor_id] = err
            continue
        if row.handled_seq >= row.last_message_seq:
            continue
        cls = registry.actor_class(row.actor_type)
        if cls is None:
            quarantined[row.actor_id] = ActorNotFoundError(
                f"actor {row.actor_id!r} has unfinished work but its class "
                f"{row.actor_type!r} is not registered with this system; spawn it with "
                "its class (or add it to actors=[...]) to recover it"
            )
            try:
                await store.record_event(
                    row.actor_id,
                    EventKind.QUARANTINED,
                    f'{{"error": "class {row.actor_type} not registered"}}',
                )
            except Exception:
                pass
            continue
        starts.append((cls, row.actor_id))
    return starts, quarantined
