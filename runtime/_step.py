"""One step of a live actor: the handler run in its ``Context``, the step entry, the replies.

The cell's step loop calls :func:`handle` for each envelope; the cell is reached through
:class:`Stepping` (what recovery needs of it, plus the step's own bookkeeping).
"""

from __future__ import annotations

import time
from typing import Any, Protocol

from opentelemetry.trace import Status, StatusCode

from . import _codec, _records, _telemetry, _tools
from ._calls import is_call_error
from ._context import Context
from ._errors import EncodeError
from ._mailbox import Envelope, Reply, reply_value, settle
from ._records import EntryKind, ErrorInfo, StepRecord
from ._recovery import Recovering
from ._snapshots import SnapshotPolicy
from ._telemetry import ATTR, SPAN, tracer

__all__ = ["Stepping", "handle"]


class Stepping(Recovering, Protocol):
    """What a step needs of its cell beyond what recovery does (``Cell``)."""

    accepts: tuple[type, ...] | None
    policy: SnapshotPolicy
    #: message seq -> the slots of the asks waiting for its step
    waiters: dict[int, list[Reply]]
    #: the handler's annotated return type (``Any`` if none)
    reply_type: Any

    def recovery_parts(self) -> tuple[float, float]: ...

    def prune_inflight(self) -> None: ...

    def outcome(self, seq: int, step: StepRecord) -> tuple[Any, BaseException | None]: ...

    async def snapshot(self, seq: int | None = None) -> None: ...


async def handle(cell: Stepping, env: Envelope) -> None:
    """Run one step: the handler in its ``Context`` (live, or finishing an interrupted step
    from its recorded effects), traced; then the step entry, and the reply to its asks once
    that entry is durable; then a snapshot if one is due."""
    ctx = Context(cell, env.seq, env.recorded, complete=False)
    resumed = bool(env.recorded)
    name = SPAN.REPLAY_STEP if resumed else SPAN.STEP
    parent = env.parent if resumed else _telemetry.extract(env.trace)
    attributes: dict[str, Any] = {
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
    with tracer.start_as_current_span(name, context=parent, attributes=attributes) as span:
        try:
            if env.decode_error is not None:
                raise env.decode_error
            if cell.accepts is not None and not isinstance(env.message, cell.accepts):
                raise TypeError(
                    f"{cell.cls.__qualname__} does not accept messages of type {env.type_tag}"
                )
            marked = _tools.STEP.set(cell.where)  # a tool called directly raises
            try:
                reply = await cell.actor.receive(ctx, env.message)
            finally:
                _tools.STEP.reset(marked)
            if ctx.fatal is None and resumed:
                ctx.check_consumed()
            reply_plain = _codec.to_plain(reply, "reply", check=False)
        except BaseException as exc:
            if not is_call_error(exc):
                raise  # a cancellation the runtime asked for, KeyboardInterrupt, ...
            if ctx.fatal is not None:
                span.set_status(Status(StatusCode.ERROR, str(ctx.fatal)))
                raise ctx.fatal from None
            if cell.journal.broken is not None:
                raise
            error = exc
            reply_plain = None
            span.set_status(Status(StatusCode.ERROR, ErrorInfo.of(exc).message))
        if ctx.fatal is not None:
            raise ctx.fatal
        ctx.settle_abandoned()
        span.set_attribute(ATTR.OUTCOME, "ok" if error is None else "error")
        if resumed:
            span.set_attribute(ATTR.EFFECTS_FROM_LOG, ctx.effects_from_log)
        try:
            step_seq = cell.journal.write(
                EntryKind.STEP,
                env.type_tag,
                env.seq,
                _records.step_payload(
                    reply=reply_plain,
                    error=None if error is None else ErrorInfo.of(error),
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
            step_seq = cell.journal.write(
                EntryKind.STEP,
                env.type_tag,
                env.seq,
                _records.step_payload(
                    error=ErrorInfo.of(exc),
                    span=_telemetry.span_ids(),
                    duration=time.perf_counter() - t0,
                ),
            )
        wanted = env.seq in cell.waiters
        # the callers get the decoded form of what was logged: what a re-ask gets, and
        # never a reference to the actor's state
        outcome: tuple[Any, BaseException | None] | None = None
        if wanted:
            if error is None:  # a scalar decodes to itself
                reply = reply_plain
                if not _codec.is_scalar(reply_plain):
                    reply = cell.journal.last_logged("reply")
                outcome = (reply_value(reply, cell.reply_type), None)
            else:
                logged = cell.journal.last_record()
                assert isinstance(logged, StepRecord)
                outcome = cell.outcome(env.seq, logged)
    cell.handled_seq = env.seq
    cell.steps_since_snapshot += 1
    cell.replay_cpu += max(time.perf_counter() - t0 - ctx.awaited, 0.0)
    due = cell.policy.due(
        cell.steps_since_snapshot,
        time.monotonic() - cell.last_snapshot_at,
        cell.recovery_parts(),
    )
    if wanted or due:
        # If this commit fails, the slots stay registered and quarantine() fails them.
        await cell.journal.flush()
    cell.prune_inflight()
    if outcome is not None:
        value, herr = outcome
        if herr is not None:
            herr.__cause__ = error
        settle(cell.waiters, env.seq, value, herr)
    if due:
        await cell.snapshot(step_seq)
