"""Running one tool call for a step: its attempt, the settling of an in-doubt intent by the
tool's policy (rerun, reconcile, or an operator's decision), and which errors are the
call's own. ``Context`` (``_context.py``) is the handler's door and the replay cursor; this
is the machinery behind ``ctx.call``, mixed into it as :class:`ToolCalls`. The step's actor
is reached through :class:`StepHost`.
"""

from __future__ import annotations

import asyncio
import math
import time
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, Protocol, TypeVar

import anyio
from opentelemetry.trace import Status, StatusCode

from . import _codec, _decisions, _records, _telemetry, _tools
from ._errors import ActorlogError, EncodeError, ToolCallError
from ._records import (
    DecisionAction,
    DecisionRecord,
    EntryKind,
    ErrorInfo,
    EventKind,
    Recorded,
    ResultRecord,
    SettledBy,
)
from ._telemetry import ATTR, SPAN, tracer
from ._tools import Happened, NotHappened, Tool

if TYPE_CHECKING:
    from ._ref import ActorRef
    from ._wal import Journal

__all__ = ["StepHost", "ToolCalls", "cancel_requested", "is_call_error"]

R = TypeVar("R")


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

    async def wait_in_doubt(self, intent_seq: int, tool: str, key: str) -> DecisionRecord:
        """Escalate an in-doubt intent and wait for the operator's decision."""
        ...

    async def deliver(self, ref: ActorRef[Any], msg: Any, *, message_id: str) -> None: ...

    async def spawn(self, cls: type[Any], actor_id: str, **options: Any) -> ActorRef[Any]: ...

    def ref(self, cls: type[Any], actor_id: str) -> ActorRef[Any]: ...


def cancel_requested() -> bool:
    """True if a cancel scope around the current task (the runtime's, or the handler's own
    timeout) has been cancelled, or (asyncio) someone cancelled the task itself."""
    deadline = anyio.current_effective_deadline()
    if deadline == -math.inf or deadline <= anyio.current_time():
        return True
    try:
        task = asyncio.current_task()
    except RuntimeError:  # not running on asyncio
        return False
    return task is not None and task.cancelling() > 0


def is_call_error(exc: BaseException) -> bool:
    """Is ``exc``, raised by a tool or a handler, that call's own error (to be recorded)?

    Every ``Exception`` is. So is a ``BaseException`` nobody asked for: ``GeneratorExit``,
    or a cancellation exception (``asyncio.CancelledError``, ``trio.Cancelled``) while no
    scope around the call is cancelled (a tool awaiting a future another task cancelled).
    A cancellation that was asked for, ``KeyboardInterrupt`` and ``SystemExit`` are not:
    they propagate. Call it in the ``except`` clause, before any checkpoint.
    """
    if isinstance(exc, Exception):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return all(is_call_error(e) for e in exc.exceptions)
    if isinstance(exc, (KeyboardInterrupt, SystemExit)):
        return False
    if isinstance(exc, anyio.get_cancelled_exc_class()):
        return not cancel_requested()
    return True


class ToolCalls:
    """The tool-call half of a step's ``Context`` (a mixin: ``Context`` provides the
    attributes declared here)."""

    _cell: StepHost
    step_seq: int
    #: an error that must stop the actor even if the handler swallows it
    fatal: BaseException | None
    #: intents of this step running (or waiting for an operator) now: seq -> tool name
    _open: dict[int, str]

    @property
    def actor_id(self) -> str:
        return self._cell.actor_id

    async def _guard(self, aw: Awaitable[R]) -> R:
        """Await infrastructure work; its failure stops the actor even if the handler
        catches the exception."""
        try:
            return await aw
        except ActorlogError as exc:
            if not isinstance(exc, ToolCallError):
                self.fatal = self.fatal or exc
            raise

    def _guard_now(self, check: Callable[[], R]) -> R:
        """``_guard`` for a synchronous check."""
        try:
            return check()
        except ActorlogError as exc:
            self.fatal = self.fatal or exc
            raise

    def _logged(self, plain: Any) -> Any:
        """The value (given as ``plain``) of the result or effect just written, decoded from
        its bytes: the live path hands out exactly what replay will read (DESIGN.md section
        10, live equals replay), and nothing that aliases the value given to the log. A
        scalar decodes to itself: no decode for it."""
        if _codec.is_scalar(plain):
            return plain
        return self._cell.journal.last_logged("value")

    def _value(self, t: Tool[Any, Any], plain: Any) -> Any:
        rt = t.return_type
        if rt is Any or rt is None or plain is None:
            return plain
        try:
            return _codec.converter.structure(plain, rt)
        except Exception:
            return plain

    async def _run(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
        *,
        attempt: int,
    ) -> Any:
        """Run the tool now (its intent is durable) and log the result."""
        cell = self._cell
        self._open[intent_seq] = t.name  # until its result is written (settle_abandoned)
        attributes: dict[str, Any] = {
            ATTR.ACTOR_ID: self.actor_id,
            ATTR.SEQ: self.step_seq,
            ATTR.TOOL: t.name,
            ATTR.TOOL_EFFECT: t.effect,
            ATTR.TOOL_POLICY: t.policy,
            ATTR.IDEMPOTENCY_KEY: key,
            ATTR.ATTEMPT: attempt,
            ATTR.INTENT_SEQ: intent_seq,
            ATTR.SERVED_FROM_LOG: False,
        }
        with tracer.start_as_current_span(SPAN.TOOL_CALL, attributes=attributes) as span:
            # Start no tool on a lease that may have expired (LeaseLostError stops the actor).
            token = self._guard_now(cell.check_lease)
            extra: dict[str, Any] = {"idempotency_key": key} if t.idempotent else {}
            if t.wants_fencing_token:
                extra["fencing_token"] = token
            t0 = time.perf_counter()
            failure: BaseException | None = None
            try:
                marked = _tools.STEP.set(None)  # a tool may call tools directly
                try:
                    value = await t.fn(*args, **kwargs, **extra)
                finally:
                    _tools.STEP.reset(marked)
            except BaseException as exc:
                if not is_call_error(exc):
                    raise  # a cancellation the runtime (or the handler) asked for
                failure = exc
            else:
                try:
                    plain = _codec.to_plain(value, "result", check=False)
                    # The entry's encode is the check (the result is encoded once). A
                    # result that cannot be logged settles the intent as an error, or
                    # replaying the completed step would run the tool again.
                    cell.journal.write(
                        EntryKind.RESULT,
                        t.name,
                        intent_seq,
                        _records.result_payload(
                            value=plain, attempt=attempt, duration=time.perf_counter() - t0
                        ),
                    )
                except EncodeError as exc:
                    failure = EncodeError(f"result of tool {t.name}", type(value), exc.reason)
                else:
                    del self._open[intent_seq]
                    return self._value(t, self._logged(plain))
            info = ErrorInfo.of(failure)  # always loggable: sanitized, truncated
            span.set_status(Status(StatusCode.ERROR, f"{info.type}: {info.message}"))
            cell.journal.write(
                EntryKind.RESULT,
                t.name,
                intent_seq,
                _records.result_payload(
                    error=info, attempt=attempt, duration=time.perf_counter() - t0
                ),
            )
            del self._open[intent_seq]
            raise ToolCallError(t.name, info.type, info.message) from failure

    def _served(self, t: Tool[Any, Any], outcome: ResultRecord | DecisionRecord) -> Any:
        """Return (or raise) a recorded outcome: a result, or an operator's decision."""
        err = outcome.error
        if isinstance(outcome, ResultRecord):
            if outcome.ok:
                return self._value(t, outcome.value)
            raise ToolCallError(t.name, str(err and err.type), str(err and err.message))
        if outcome.action == DecisionAction.RESULT:
            return self._value(t, outcome.value)
        raise ToolCallError(
            t.name,
            "OperatorFailed" if err is None else err.type,
            outcome.reason if err is None else err.message,
        )

    async def _settle(
        self,
        t: Tool[Any, Any],
        rec: Recorded,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        arguments: dict[str, Any],
        key: str,
    ) -> Any:
        """A recorded intent: serve its outcome, or settle it by its tool's in-doubt policy."""
        # attempts so far: the original run plus each authorized retry that started
        attempts = 1 + sum(
            1 for o in rec.outcomes if o.kind == EntryKind.DECISION and o.tag == "attempt"
        )
        if rec.outcomes:
            # the outcome that settled it is the one the live step used; a later decision
            # (only a store from before the one-decision rule holds one) is ignored
            settled = _decisions.settling(rec.outcomes)
            last = (settled or rec.outcomes[-1]).record
            if isinstance(last, ResultRecord) and last.settled_by == SettledBy.CANCELLED:
                # Live, the handler's own scope cancelled this call and the step went on
                # without its result: take the same path, waiting for the same scope.
                await anyio.sleep_forever()
            if settled is not None:
                with tracer.start_as_current_span(
                    SPAN.TOOL_CALL,
                    attributes={
                        ATTR.ACTOR_ID: self.actor_id,
                        ATTR.SEQ: self.step_seq,
                        ATTR.TOOL: t.name,
                        ATTR.TOOL_EFFECT: t.effect,
                        ATTR.TOOL_POLICY: t.policy,
                        ATTR.IDEMPOTENCY_KEY: key,
                        ATTR.ATTEMPT: last.attempt if isinstance(last, ResultRecord) else attempts,
                        ATTR.INTENT_SEQ: rec.seq,
                        ATTR.SERVED_FROM_LOG: True,
                    },
                ):
                    return self._served(t, last)
            assert isinstance(last, DecisionRecord)  # results always settle
            if last.action == DecisionAction.RETRY:
                # the operator authorized one more attempt; mark it started, then run
                _telemetry.settled(rec.seq, t.name, t.policy, "operator.retry", _by(last))
                return await self._authorized_retry(t, rec.seq, args, kwargs, key, attempts)
            # action == "attempt" with no result: the authorized retry was interrupted too
            return await self._escalate(t, rec, args, kwargs, key, attempts)
        # in doubt: intent logged, no outcome
        self._cell.note_event(
            EventKind.IN_DOUBT, {"intent_seq": rec.seq, "tool": t.name, "policy": t.policy}
        )
        policy = t.policy
        if policy in ("rerun", "rerun-same-key"):
            _telemetry.settled(rec.seq, t.name, policy, policy)
            return await self._run(t, args, kwargs, rec.seq, key, attempt=attempts + 1)
        if policy == "reconcile":
            assert t.reconcile is not None
            args_for = {
                k: v for k, v in arguments.items() if k not in ("idempotency_key", "fencing_token")
            }
            try:
                with _tools.running_tool():
                    answer = await t.reconcile(key, args_for)
            except BaseException as exc:
                if not is_call_error(exc):
                    raise
                answer = None
                self._cell.note_event(
                    EventKind.RECONCILE_FAILED,
                    {"intent_seq": rec.seq, "error": ErrorInfo.of(exc).message},
                )
            if isinstance(answer, Happened):
                _telemetry.settled(rec.seq, t.name, policy, "reconcile.happened")
                try:
                    plain = _codec.to_plain(answer.result, "result", check=False)
                    self._cell.journal.write(
                        EntryKind.RESULT,
                        t.name,
                        rec.seq,
                        _records.result_payload(
                            value=plain, attempt=attempts, settled_by="reconcile"
                        ),
                    )
                except EncodeError as exc:
                    # it happened, but its result cannot be logged: settle it as that error
                    err = EncodeError(
                        f"reconciled result of tool {t.name}", type(answer.result), exc.reason
                    )
                    info = ErrorInfo.of(err)
                    self._cell.journal.write(
                        EntryKind.RESULT,
                        t.name,
                        rec.seq,
                        _records.result_payload(
                            error=info, attempt=attempts, settled_by="reconcile"
                        ),
                    )
                    raise ToolCallError(t.name, info.type, info.message) from err
                return self._value(t, self._logged(plain))
            if isinstance(answer, NotHappened):
                _telemetry.settled(rec.seq, t.name, policy, "reconcile.not_happened")
                return await self._run(t, args, kwargs, rec.seq, key, attempt=attempts + 1)
        return await self._escalate(t, rec, args, kwargs, key, attempts)

    async def _authorized_retry(
        self,
        t: Tool[Any, Any],
        intent_seq: int,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        key: str,
        attempts: int,
    ) -> Any:
        """Run an operator-authorized retry: mark the attempt started (durably), then run.
        If this attempt is interrupted too, the call is in doubt again, never re-run blindly."""
        self._cell.journal.write(
            EntryKind.DECISION,
            DecisionAction.ATTEMPT,
            intent_seq,
            _records.decision_payload(action="attempt", by="runtime", reason="retry authorized"),
        )
        await self._guard(self._cell.journal.flush())
        return await self._run(t, args, kwargs, intent_seq, key, attempt=attempts + 1)

    async def _escalate(
        self,
        t: Tool[Any, Any],
        rec: Recorded,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        key: str,
        attempts: int,
    ) -> Any:
        self._open[rec.seq] = t.name
        # the decision as its entry was logged (and as replay will read it)
        decision = await self._guard(self._cell.wait_in_doubt(rec.seq, t.name, key))
        del self._open[rec.seq]
        action = decision.action
        _telemetry.settled(rec.seq, t.name, t.policy, f"operator.{action}", _by(decision))
        if action == DecisionAction.RETRY:
            return await self._authorized_retry(t, rec.seq, args, kwargs, key, attempts)
        return self._served(t, decision)


def _by(decision: DecisionRecord) -> dict[str, str | int]:
    """Who decided an in-doubt intent, and why (span event attributes)."""
    return {ATTR.DECIDED_BY: decision.by, ATTR.DECISION_REASON: decision.reason}
