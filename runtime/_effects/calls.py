"""Running one tool call for a step: its attempt, the settling of an in-doubt intent by the
tool's policy (rerun, reconcile, or an operator's decision), and which errors are the
call's own. ``Context`` (``_effects/context.py``) is the handler's door and the replay cursor; this
is the machinery behind ``ctx.call``, mixed into it as :class:`ToolCalls`. The step's actor
is reached through :class:`StepHost`.
"""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import anyio
import anyio.lowlevel

from .._durability.attempts import Settled, attempt_event
from .._journal import codec as _codec, records as _records
from .._journal.errors import ActorlogError, EncodeError, ToolCallError, ToolTimeoutError
from .._journal.records import (
    DecisionAction,
    DecisionRecord,
    EntryKind,
    ErrorInfo,
    EventKind,
    Outcome,
    ResultRecord,
)
from .._tracing import telemetry as _telemetry
from .._tracing.telemetry import ATTR, SPAN, tracer
from . import tools as _tools
from .cancelling import is_call_error
from .cancelwrite import abandoned_error, not_started_error, settle_cancelled
from .stephost import StepHost
from .tools import Happened, NotHappened, Tool

__all__ = ["StepHost", "ToolCalls", "abandoned_error", "not_started_error"]

R = TypeVar("R")


class ToolCalls:
    """The tool-call half of a step's ``Context`` (a mixin: ``Context`` provides the
    attributes declared here)."""

    _cell: StepHost
    step_seq: int
    #: an error that must stop the actor even if the handler swallows it
    fatal: BaseException | None
    #: intents of this step running (or waiting for an operator) now: seq -> tool name
    _open: dict[int, str]
    #: intents whose current attempt may have taken effect: its tool runs, or its in-doubt
    #: policy (a reconcile function, an operator) is settling it
    _in_flight: set[int]
    open_tools: dict[str, tuple[str, str]]
    #: replaying a step an operator cancelled: its scope (see ``Context.stop``/``_expect``)
    cancel_replay: Any
    #: effects of this step answered from the log (``actorlog.replay.effects_from_log``)
    effects_from_log: int
    #: task path -> node, of every task of the step seen so far (``_ctxtasks``)
    nodes: dict[str, Any]

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

    async def _flush_before_tool(self) -> None:
        """Make the step's log durable before a tool runs. A step that spawned tasks first
        lets the tasks ready in the same turn of the event loop (the calls of a fan-out,
        just started) write their entries, so that one commit carries them all instead of
        the first alone and the rest in the next (issue 25). A step of one task does not
        wait. Not a new cancellation point (the turn is shielded)."""
        if len(self.nodes) > 1:
            await anyio.lowlevel.cancel_shielded_checkpoint()
        try:  # ``_guard``, inlined: once a call
            await self._cell.journal.flush()
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
        its bytes: the live path hands out exactly what replay will read (live equals replay,
        docs/recovery.md), and nothing that aliases the value given to the log. A
        scalar decodes to itself: no decode for it."""
        if _codec.is_scalar(plain):
            return plain
        return self._cell.journal.last_logged("value")

    def _value(self, t: Tool[Any, Any], plain: Any) -> Any:
        rt = t.return_type
        if rt is Any or rt is None or plain is None:
            return plain
        try:
            return _codec.structure(plain, rt)
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
        resume: Outcome | None = None,
        policy: str | None = None,
    ) -> Any:
        """Run the tool now (its intent is durable) and log the result; after a failure its
        retry policy may run it again (docs/retries.md): one span for all the attempts.
        ``resume``: recovery found the call between attempts (this is its last outcome, about
        attempt ``attempt``): go on from there instead of starting attempt ``attempt``.
        ``policy``: ``t.policy``, if the caller has it."""
        self._open[intent_seq] = t.name  # until its result is written (settle_abandoned)
        self.open_tools[t.name] = (t.effect, t.policy if policy is None else policy)
        traced = _telemetry.enabled()
        if traced:  # no SDK: no span, and no attributes built for one
            attributes = _call_attributes(self, t, key, attempt, intent_seq)
            cm = tracer.start_as_current_span(SPAN.TOOL_CALL, attributes=attributes)
        else:
            cm = _telemetry.NO_SPAN
        with cm as span:
            try:
                step: int | Settled | None = None
                if resume is not None:
                    step = await self._resume(t, args, kwargs, intent_seq, key, attempt, resume)
                while True:  # the attempts
                    if isinstance(step, Settled):
                        self._open.pop(intent_seq, None)
                        return step.value
                    if step is not None:
                        attempt = step
                    if traced:  # (the no-op span's call, skipped: once a call)
                        span.set_attribute(ATTR.ATTEMPT, attempt)
                    ok, value, t0 = await self._attempt(t, args, kwargs, intent_seq, key, attempt)
                    if ok:
                        del self._open[intent_seq]
                        return value
                    step = await self._failed(
                        t, args, kwargs, intent_seq, key, attempt, value, t0, span
                    )
            except ToolCallError as exc:  # settled as an error: no longer open
                self._open.pop(intent_seq, None)
                _telemetry.set_error(span, f"{exc.error_type}: {exc.message}")
                raise
            except anyio.get_cancelled_exc_class():
                if await self._abandon(t, args, kwargs, intent_seq, key):
                    _telemetry.set_error(span, "Cancelled")
                raise
            finally:
                self._in_flight.discard(intent_seq)

    async def _abandon(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
    ) -> bool:
        """A cancellation reached open call ``intent_seq``: if it is the handler's own (a
        race's loser, a deadline), settle the call now, as cancelled, by its in-doubt policy
        if its current attempt may have taken effect (``_in_flight``). True if settled."""
        if intent_seq not in self._open or not self._handler_cancelled():
            return False
        del self._open[intent_seq]
        await settle_cancelled(
            self._cell,
            t,
            intent_seq,
            lambda: self._ask_reconcile(t, args, kwargs, intent_seq, key),
            doubtful=intent_seq in self._in_flight,
        )
        return True

    def settle_abandoned(self, cancelled: Callable[[str], ErrorInfo] | None = None) -> list[str]:
        """Before the step entry: settle every call of this step the handler cancelled with
        its own scope (a timeout) and went on without, or (``cancelled``: the error to
        record for a tool, by name) that an operator's cancel cut short. A completed step
        never holds an unsettled intent; replay takes the same path (see ``_settle``).
        Returns the names of the calls settled."""
        if not self._open:
            return []  # every call settled (a step's usual end)
        names = []
        for intent_seq, name in sorted(self._open.items()):
            error = abandoned_error()
            self._cell.journal.write(
                EntryKind.RESULT,
                name,
                intent_seq,
                _records.result_payload(
                    error=error if cancelled is None else cancelled(name),
                    settled_by="cancelled",
                ),
            )
            names.append(name)
        self._open.clear()
        return names

    def _handler_cancelled(self) -> bool:
        """Is the cancellation now the handler's own (a task group's, a deadline's), not
        the runtime's (shutdown, an operator's cancel, a fatal error)?"""
        cell = self._cell
        if self.fatal is not None or cell.closing or self.cancel_replay is not None:
            return False
        if cell.journal.broken is not None:
            return False
        scope = getattr(cell, "step_scope", None)  # the operator's cancel scope
        return not (scope is not None and scope.cancel_called)

    async def _failed(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
        attempt: int,
        failure: BaseException,
        t0: float,
        span: Any,
    ) -> int | Settled:
        """Attempt ``attempt`` (started at ``t0``) failed with ``failure``: by the tool's
        retry policy, the next attempt's number (or what settled the call meanwhile), else
        the error result is logged and raised as ``ToolCallError``."""
        info = ErrorInfo.of(failure)  # always loggable: sanitized, truncated
        if (
            attempt < t.retry.attempts
            and t.retry.retries(failure)
            and not isinstance(failure, EncodeError)  # it ran: running it again is no cure
        ):
            failed = DecisionRecord(
                DecisionAction.ATTEMPT_FAILED.value,
                error=info,
                by="runtime",
                reason=f"retry policy: attempt {attempt} of {t.retry.attempts} failed",
                at=time.time(),
                attempt=attempt,
                delay=t.retry.delay(attempt),
                in_doubt=isinstance(failure, ToolTimeoutError) and t.effect == "write",
            )
            self._cell.journal.write(
                EntryKind.DECISION, DecisionAction.ATTEMPT_FAILED, intent_seq, failed.payload()
            )
            # durable before the wait: a crash during the back-off resumes it
            await self._guard(self._cell.journal.flush())
            attempt_event(span, failed)
            out = Outcome(failed, DecisionAction.ATTEMPT_FAILED.value)
            return await self._resume(t, args, kwargs, intent_seq, key, attempt, out)
        self._cell.journal.write(
            EntryKind.RESULT,
            t.name,
            intent_seq,
            _records.result_payload(error=info, attempt=attempt, duration=time.perf_counter() - t0),
        )
        raise ToolCallError(t.name, info.type, info.message) from failure

    async def _resume(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
        attempt: int,
        last: Outcome,
    ) -> int | Settled:
        """Between attempts (live, or found so by recovery): ``last`` is the call's last
        outcome, about attempt number ``attempt``. Settle that attempt if it is in doubt (by
        the tool's in-doubt policy), wait out what is left of the logged back-off, mark the
        next attempt started (durably); return its number, or what settled the call."""
        rec = last.record
        if isinstance(rec, DecisionRecord) and rec.action == DecisionAction.ATTEMPT_FAILED:
            if rec.in_doubt:
                doubt = await self._attempt_in_doubt(t, args, kwargs, intent_seq, key, attempt)
                if doubt is not None:
                    return doubt
            # the back-off counts from the failure's logged time: after a restart only what
            # is left of it is waited, and it is never drawn again
            left = (rec.at if rec.at is not None else 0.0) + rec.delay - time.time()
            if left > 0:
                await anyio.sleep(left)
        else:  # an attempt marked started that never finished: in doubt
            doubt = await self._attempt_in_doubt(t, args, kwargs, intent_seq, key, attempt)
            if doubt is not None:
                return doubt
        return await self._start_attempt(
            intent_seq, attempt + 1, f"retry policy: attempt {attempt + 1} of {t.retry.attempts}"
        )

    async def _attempt_in_doubt(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
        attempt: int,
    ) -> int | Settled | None:
        """Attempt ``attempt`` may have taken effect (a write that timed out, or one running
        at a crash): its tool's in-doubt policy decides. ``None``: go on with the next
        attempt (after the back-off); a number: an operator authorized it, start it now.
        Until its policy answers, a cancel of the handler's own settles the call by that
        policy (``_in_flight``; the cancel is caught in ``_run``)."""
        policy = t.policy
        self._in_flight.add(intent_seq)
        self._cell.note_event(
            EventKind.IN_DOUBT,
            {"intent_seq": intent_seq, "tool": t.name, "policy": policy, "attempt": attempt},
        )
        if policy in ("rerun", "rerun-same-key"):
            _telemetry.settled(intent_seq, t.name, policy, policy)
            self._in_flight.discard(intent_seq)
            return None
        if policy == "reconcile":
            answer = await self._ask_reconcile(t, args, kwargs, intent_seq, key)
            if isinstance(answer, Happened):
                _telemetry.settled(intent_seq, t.name, policy, "reconcile.happened")
                return Settled(self._reconciled(t, intent_seq, answer, attempt))
            if isinstance(answer, NotHappened):
                _telemetry.settled(intent_seq, t.name, policy, "reconcile.not_happened")
                self._in_flight.discard(intent_seq)
                return None
        decision = await self._guard(
            self._cell.wait_in_doubt(intent_seq, t.name, key, step_seq=self.step_seq)
        )
        self._in_flight.discard(intent_seq)  # the operator ruled
        _telemetry.settled(intent_seq, t.name, policy, f"operator.{decision.action}", _by(decision))
        if decision.action == DecisionAction.RETRY:
            return await self._start_attempt(intent_seq, attempt + 1, "retry authorized")
        return Settled(self._served(t, decision))

    async def _start_attempt(self, intent_seq: int, attempt: int, reason: str) -> int:
        """Mark attempt ``attempt`` (> 1) started, durably, before it runs: if it is
        interrupted it is in doubt, never re-run blindly, and the count goes on from it."""
        self._cell.journal.write(
            EntryKind.DECISION,
            DecisionAction.ATTEMPT,
            intent_seq,
            _records.decision_payload(action="attempt", by="runtime", reason=reason),
        )
        await self._flush_before_tool()
        return attempt

    async def _attempt(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
        attempt: int,
    ) -> tuple[bool, Any, float]:
        """One attempt: (True, the logged value, start) after writing its result, or
        (False, the error, start) with nothing written."""
        cell = self._cell
        # Start no tool on a lease that may have expired (LeaseLostError stops the actor).
        try:  # ``_guard_now``, inlined: once a call
            token = cell.check_lease()
        except ActorlogError as exc:
            self.fatal = self.fatal or exc
            raise
        extra: dict[str, Any] = {"idempotency_key": key} if t.idempotent else {}
        if t.wants_fencing_token:
            extra["fencing_token"] = token
        t0 = time.perf_counter()
        self._in_flight.add(intent_seq)  # until it returns (kept if a cancel ends it)
        # ``_tools.running_tool()``, inlined: a tool may call tools directly
        running = _tools.STEP.set(None)
        try:
            if t.timeout is None:
                value = await t.fn(*args, **kwargs, **extra)
            else:
                with anyio.move_on_after(t.timeout) as scope:
                    value = await t.fn(*args, **kwargs, **extra)
                if scope.cancelled_caught:
                    _tools.STEP.reset(running)
                    self._in_flight.discard(intent_seq)
                    return False, ToolTimeoutError(t.name, t.timeout), t0
        except BaseException as exc:
            _tools.STEP.reset(running)
            if not is_call_error(exc):
                raise  # a cancellation the runtime (or the handler) asked for
            self._in_flight.discard(intent_seq)
            return False, exc, t0
        _tools.STEP.reset(running)
        self._in_flight.discard(intent_seq)
        try:
            plain = (
                value
                if type(value) in _codec.PRIMITIVES  # ``to_plain``'s answer, asked inline
                else _codec.to_plain(value, "result", check=False)
            )
            # The entry's encode is the check (the result is encoded once). A result that
            # cannot be logged settles the intent as an error, or replaying the completed
            # step would run the tool again.
            cell.journal.write(
                EntryKind.RESULT,
                t.name,
                intent_seq,
                _records.result_payload(
                    value=plain, attempt=attempt, duration=time.perf_counter() - t0
                ),
            )
        except EncodeError as exc:
            return False, EncodeError(f"result of tool {t.name}", type(value), exc.reason), t0
        # ``self._value(t, self._logged(plain))``, inlined (once a call)
        if type(plain) not in _codec.SCALARS:
            plain = cell.journal.last_logged("value")
        rt = t.return_type
        if rt is Any or rt is None or plain is None:
            return True, plain, t0
        if type(plain) is rt and rt in _codec.EXACT:  # what ``structure`` gives it
            return True, plain, t0
        return True, self._value(t, plain), t0

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

    async def _ask_reconcile(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
    ) -> Happened | NotHappened | None:
        """Ask the tool's reconcile function whether the call happened (None: don't know)."""
        assert t.reconcile is not None
        arguments = t.bind(args, kwargs).arguments
        args_for = {
            k: v for k, v in arguments.items() if k not in ("idempotency_key", "fencing_token")
        }
        try:
            with _tools.running_tool():
                return await t.reconcile(key, args_for)
        except BaseException as exc:
            if not is_call_error(exc):
                raise
            self._cell.note_event(
                EventKind.RECONCILE_FAILED,
                {"intent_seq": intent_seq, "error": ErrorInfo.of(exc).message},
            )
            return None

    def _reconciled(
        self, t: Tool[Any, Any], intent_seq: int, answer: Happened, attempt: int
    ) -> Any:
        """Settle the intent with the result its reconcile function said it had."""
        try:
            plain = _codec.to_plain(answer.result, "result", check=False)
            self._cell.journal.write(
                EntryKind.RESULT,
                t.name,
                intent_seq,
                _records.result_payload(value=plain, attempt=attempt, settled_by="reconcile"),
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
                intent_seq,
                _records.result_payload(error=info, attempt=attempt, settled_by="reconcile"),
            )
            raise ToolCallError(t.name, info.type, info.message) from err
        return self._value(t, self._logged(plain))


def _by(decision: DecisionRecord) -> dict[str, str | int]:
    """Who decided an in-doubt intent, and why (span event attributes)."""
    return {ATTR.DECIDED_BY: decision.by, ATTR.DECISION_REASON: decision.reason}


def _call_attributes(
    calls: ToolCalls, t: Tool[Any, Any], key: str, attempt: int, intent_seq: int
) -> dict[str, Any]:
    """The attributes of a tool call's span."""
    attributes: dict[str, Any] = {
        ATTR.ACTOR_ID: calls.actor_id,
        ATTR.SEQ: calls.step_seq,
        ATTR.TOOL: t.name,
        ATTR.TOOL_EFFECT: t.effect,
        ATTR.TOOL_POLICY: t.policy,
        ATTR.IDEMPOTENCY_KEY: key,
        ATTR.ATTEMPT: attempt,
        ATTR.INTENT_SEQ: intent_seq,
        ATTR.SERVED_FROM_LOG: False,
        ATTR.TASK: _telemetry.CALL_TASK.get(),
    }
    if t.retry.attempts > 1:
        attributes[ATTR.MAX_ATTEMPTS] = t.retry.attempts
    if t.timeout is not None:
        attributes[ATTR.TIMEOUT] = t.timeout
    return attributes
