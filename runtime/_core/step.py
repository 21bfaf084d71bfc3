"""One step of a live actor: the handler run in its ``Context``, the step entry, the replies.

The cell's step loop calls :func:`handle` for each envelope; the cell is reached through
:class:`Stepping` (what recovery needs of it, plus the step's own bookkeeping).
"""

from __future__ import annotations

import contextlib
import functools
import json
import time
from collections.abc import Callable, Coroutine
from typing import Any, Protocol

from .._durability import (
    decisions as _decisions,
    lifecycle as _lifecycle,
    retention as _retention,
    snapshots as _snapshots,
)
from .._durability.mailbox import Envelope, Reply, reply_value, settle
from .._durability.snapshots import SnapshotPolicy
from .._effects import tasks as _tasks, tools as _tools
from .._effects.cancelling import is_call_error
from .._effects.context import Context
from .._effects.ctxtasks import by_task
from .._journal import codec as _codec, records as _records
from .._journal.entrykinds import EventKind
from .._journal.errors import ActorlogError, EncodeError, RecoveryError, StepCancelledError
from .._journal.records import EntryKind, ErrorInfo, IntentRecord, StepRecord
from .._tracing import telemetry as _telemetry, traceends as _traceends
from .._tracing.telemetry import ATTR, SPAN, tracer
from .recovery import Recovering

__all__ = ["Stepping", "handle", "unrunnable"]


class Stepping(Recovering, _lifecycle.Endable, Protocol):
    """What a step needs of its cell beyond what recovery does (``Cell``)."""

    accepts: tuple[type, ...] | None
    policy: SnapshotPolicy
    #: message seq -> the slots of the asks waiting for its step
    waiters: dict[int, list[Reply]]
    #: the handler's annotated return type (``Any`` if none)
    reply_type: Any

    def recovery_parts(self) -> tuple[float, float]: ...

    def more_queued(self) -> bool: ...

    def commit_burst(self) -> None: ...

    def prune_inflight(self) -> None: ...

    def outcome(self, seq: int, step: StepRecord) -> tuple[Any, BaseException | None]: ...

    async def snapshot(self, seq: int | None = None, *, trigger: str = ...) -> None: ...

    def estimated_recovery(self) -> float: ...

    def spawn_task(self, fn: Callable[..., Coroutine[Any, Any, Any]], *args: Any) -> None: ...

    async def record_event(self, kind: str, detail: str) -> None: ...


async def handle(cell: Stepping, env: Envelope) -> None:
    """Run one step: the handler in its ``Context`` (live, or finishing an interrupted step
    from its recorded effects), traced; then the step entry, and the reply to its asks once
    that entry is durable; then a snapshot if one is due."""
    resumed = bool(env.recorded)
    name = SPAN.REPLAY_STEP if resumed else SPAN.STEP
    parent = env.parent if resumed else (_telemetry.extract(env.trace) if env.trace else None)
    attributes: dict[str, Any] | None = None
    traced = _telemetry.enabled()
    if traced:  # no SDK: no span, and no attributes built for one
        attributes = {
            ATTR.ACTOR_ID: cell.actor_id,
            ATTR.ACTOR_TYPE: cell.actor_type,
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
    cannot: BaseException | None = None
    span_cm = (
        tracer.start_as_current_span(name, context=parent, attributes=attributes)
        if traced
        else _telemetry.NO_SPAN  # (asked once a step)
    )
    with span_cm as span:
        ctx = Context(cell, env.seq, env.recorded, complete=False, incarnation=env.incarnation)
        ctx._emits = (cell.waiters, cell.journal, span)  # its Emitter: at the first emit
        try:
            accepts = cell.accepts  # ``_cannot_run``'s question, asked inline first
            if env.decode_error is not None or (
                accepts is not None and not isinstance(env.message, accepts)
            ):
                cannot = _cannot_run(cell, env)
            if cannot is not None:
                if resumed:
                    ctx.fatal = _unsettled(cell, env, cannot)
                raise cannot
            with cell.journal.scope() as scope:
                cell.step_scope = scope  # an operator's cancel (Cell.cancel_step)
                if resumed and cell.cancel_pending is not None:
                    ctx.cancel_replay = scope  # asked while it was down: cut where its log ends
                # ``_tools.in_step(cell.where)`` and ``ctx._handler_task()``, inlined (once
                # a step): a tool called directly in here is refused, the handler runs as the
                # step's root task, the tasks it spawns are counted, and the step ends (its
                # effects are refused) when it returns
                in_step = _tools.STEP.set(cell.where)
                try:
                    _tasks.install()
                    root = _tasks.NODE.set(ctx.root)
                    try:
                        reply = await cell.actor.receive(ctx, env.message)
                    finally:
                        _tasks.NODE.reset(root)
                        ctx.ended = True
                finally:
                    _tools.STEP.reset(in_step)
            cell.step_scope = None
            if scope.cancel_called:
                why = (cell.cancel_pending or {}).get("reason") or "cancelled by an operator"
                raise StepCancelledError(cell.actor_id, env.seq, "StepCancelledError", why)
            if ctx.fatal is None and resumed:
                ctx.check_consumed()
            reply_plain = (
                reply
                if type(reply) in _codec.PRIMITIVES  # ``to_plain``'s answer, asked inline
                else _codec.to_plain(reply, "reply", check=False)
            )
        except BaseException as exc:
            if not is_call_error(exc):
                raise  # a cancellation the runtime asked for, KeyboardInterrupt, ...
            if resumed and cannot is None and not isinstance(exc, StepCancelledError):
                # the handler raised before asking for every recorded effect: recording the
                # step failed would leave a recorded call unsettled; it is non-determinism
                with contextlib.suppress(ActorlogError):
                    ctx.check_consumed(exc)
            if ctx.fatal is not None:
                _telemetry.set_error(span, str(ctx.fatal))
                raise ctx.fatal from None
            if cell.journal.broken is not None:
                raise
            error = exc
            reply_plain = None
            _telemetry.set_error(span, ErrorInfo.of(exc).message)
        cell.step_scope = None
        if ctx.emitter is not None:
            ctx.emitter.end()
        if ctx.fatal is not None:
            raise ctx.fatal
        cancel = cell.cancel_pending if isinstance(error, StepCancelledError) else None
        calls = ctx.settle_abandoned(
            None if cancel is None else _lifecycle.cancelled_call(ctx.open_tools)
        )
        if traced:
            span.set_attribute(ATTR.OUTCOME, "ok" if error is None else "error")
        if cancel is not None:
            _traceends.step_cancelled(cancel, calls)
        if ctx.stopped is not None:
            _traceends.finished(ctx.stopped)
        if resumed and traced:
            span.set_attribute(ATTR.EFFECTS_FROM_LOG, ctx.effects_from_log)
        try:
            step_seq = cell.journal.write(
                EntryKind.STEP,
                env.type_tag,
                env.seq,
                _records.step_payload(
                    reply=reply_plain,
                    error=None if error is None else _lifecycle.error_info(error),
                    span=_telemetry.span_ids() if traced else None,  # no step span: no ids
                    duration=time.perf_counter() - t0,
                ),
            )
        except EncodeError as exc:
            # The reply cannot be encoded or is too large for one entry (or the error
            # text is): record the step as failed with that error instead of stopping.
            if error is None:
                exc = EncodeError("reply", type(reply), exc.reason)
            error, reply_plain = exc, None
            if traced:
                span.set_attribute(ATTR.OUTCOME, "error")
            step_seq = cell.journal.write(
                EntryKind.STEP,
                env.type_tag,
                env.seq,
                _records.step_payload(
                    error=ErrorInfo.of(exc),
                    span=_telemetry.span_ids() if traced else None,  # no step span: no ids
                    duration=time.perf_counter() - t0,
                ),
            )
        wanted = env.seq in cell.waiters
        # the callers get the decoded form of what was logged: what a re-ask gets, and
        # never a reference to the actor's state
        outcome: tuple[Any, BaseException | None] | None = None
        if wanted:
            if error is None:  # a scalar decodes to itself
                rt = cell.reply_type
                if type(reply_plain) not in _codec.SCALARS:  # ``is_scalar``, inline
                    outcome = (reply_value(cell.journal.last_logged("reply"), rt), None)
                elif rt is Any or reply_plain is None or type(reply_plain) is rt:
                    outcome = (reply_plain, None)  # what ``reply_value`` gives it
                else:
                    outcome = (reply_value(reply_plain, rt), None)
            else:
                logged = cell.journal.last_record()
                assert isinstance(logged, StepRecord)
                outcome = cell.outcome(env.seq, logged)
    cell.handled_seq = env.seq
    if ctx.stopped is not None:
        cell.ended = ("finished", ctx.stopped)  # refuse what follows; snapshots stop
    cell.steps_since_snapshot += 1
    cell.replay_cpu += max(time.perf_counter() - t0 - ctx.awaited, 0.0)
    policy = cell.policy
    due = policy.trigger(
        cell.steps_since_snapshot,
        time.monotonic() - cell.last_snapshot_at,
        (0.0, 0.0) if policy.recovery_budget is None else cell.recovery_parts(),
    )
    # A burst: with more messages queued, the reply waits for the commit of a later step
    # (its first intent's, its end's, or the loop's when the mailbox is empty): one commit
    # for the step ends of a burst, each reply still released only once its step is durable.
    burst = wanted and due is None and ctx.stopped is None and cancel is None and cell.more_queued()
    if not burst and (wanted or due is not None or ctx.stopped is not None or cancel is not None):
        # If this commit fails, the slots stay registered and quarantine() fails them.
        await cell.journal.flush()
    if cancel is not None:
        cell.cancel_pending = None
        detail = {"seq": env.seq, **cancel, "calls": calls}
        await _lifecycle.note(cell.store, cell.actor_id, EventKind.CANCELLED, detail)
    if ctx.stopped is not None:
        detail = {"seq": env.seq, "reason": ctx.stopped}
        await _lifecycle.note(cell.store, cell.actor_id, EventKind.FINISHED, detail)
    cell.prune_inflight()
    if outcome is not None:
        value, herr = outcome
        if herr is not None:
            herr.__cause__ = error
        if burst:
            reply_later = functools.partial(settle, cell.waiters, env.seq, value, herr)
            cell.journal.when_durable(step_seq, reply_later)
            cell.commit_burst()
        else:
            settle(cell.waiters, env.seq, value, herr)
    if due is not None:
        await cell.snapshot(step_seq, trigger=due)


def unrunnable(cell: Stepping, env: Envelope) -> BaseException | None:
    """The error that quarantines the actor if ``env`` (an interrupted step, recovered)
    cannot run now and left a call unsettled (see ``_unsettled``), else None. Recovery asks
    it before the actor is ready, so no message is logged for an actor it quarantines."""
    cannot = _cannot_run(cell, env)
    return None if cannot is None else _unsettled(cell, env, cannot)


def _cannot_run(cell: Stepping, env: Envelope) -> BaseException | None:
    """Why the handler cannot take this message (it did not decode, or ``receive`` does
    not accept its class), or None."""
    if env.decode_error is not None:
        return env.decode_error
    if cell.accepts is not None and not isinstance(env.message, cell.accepts):
        # (the text ``_durability.plan.decode_failed`` knows: replay skips such a step)
        return TypeError(f"{cell.cls.__qualname__} does not accept messages of type {env.type_tag}")
    return None


def _unsettled(cell: Stepping, env: Envelope, cannot: BaseException) -> BaseException | None:
    """An interrupted step whose handler cannot run now: if it left a call unsettled (an
    intent without an outcome, or a ``send`` that may not have been delivered), its outcome
    must not be recorded (a completed step never holds an unsettled intent, and only its
    handler can settle the call): the error that quarantines the actor, nothing written.
    None if every recorded effect is settled (the step is recorded failed)."""
    open_: list[str] = []
    for rec in env.recorded or ():
        if isinstance(rec.record, IntentRecord) and _decisions.settling(rec.outcomes) is None:
            open_.append(f"intent seq {rec.seq} (tool {rec.type_tag!r})")
    for recorded in by_task(env.recorded or []).values():  # the last effect of each task
        last = recorded[-1] if recorded else None
        if last is not None and last.kind == EntryKind.EFFECT and last.type_tag == "send":
            open_.append(f"the send at seq {last.seq}")
    if not open_:
        return None
    return RecoveryError(
        cell.actor_id,
        env.seq,
        f"its step was interrupted with {', '.join(open_)} unsettled, and the code running "
        f"now cannot run its handler ({type(cannot).__name__}: {cannot}); only the handler "
        "can settle that call, so the step is left unrecorded. Run code that handles this "
        "message (the version that started the step), then restart the actor",
    )


async def snapshot(cell: Stepping, seq: int | None, trigger: str) -> None:
    """Write a snapshot covering ``seq`` (default: the last durable entry), noted in the
    actor's history with its ``trigger``. Never fatal: a failure is traced and noted.
    None once it ended (recovery must see its finish effect)."""
    await cell.journal.flush()
    if cell.ended is not None:
        return
    seq = cell.journal.durable_seq if seq is None else seq
    estimate = cell.estimated_recovery()
    try:
        size = await _snapshots.write_snapshot(
            cell.store,
            cell.actor_id,
            cell.actor_type,
            cell.actor.state,
            seq=seq,
            handled_seq=cell.handled_seq,
            schema_version=cell.cls.schema_version,
            keep=cell.policy.keep,
            offload=cell.snapshot_bytes >= _snapshots.OFFLOAD_BYTES,
            trigger=trigger,
            recovery_estimate=estimate,
        )
    except Exception as exc:
        cell.note_event(EventKind.SNAPSHOT_FAILED, {"seq": seq, "error": str(exc)})
    else:
        cell.snapshot_bytes, cell.snapshot_seq = size, seq
        # awaited (the reply is already out): counted even when the system stops next
        detail = {"seq": seq, "trigger": str(trigger), "bytes": size}
        await cell.record_event(
            EventKind.SNAPSHOT, json.dumps({**detail, "recovery_estimate": estimate})
        )
        cell.replay_cpu = 0.0
        if cell.policy.retention != "all":  # in the background, off the step's path
            cell.spawn_task(
                _retention.after_snapshot,
                cell.store,
                cell.actor_id,
                cell.policy.retention,
                cell.cls.schema_version,
            )
    finally:
        cell.steps_since_snapshot = 0
        cell.last_snapshot_at = time.monotonic()
