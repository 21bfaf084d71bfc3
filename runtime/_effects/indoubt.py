"""A recorded call a step asks for again (replay, or the step a crash interrupted): its
outcome served from the log, or, when the log holds none that settles it, the call settled
live: by its tool's in-doubt policy (re-run, reconcile, an operator's ruling) or an
operator-authorized retry. Mixed into ``Context`` as :class:`InDoubtCalls`, over the
machinery that runs a tool's attempts (``_calls``).

While it is settled live the call is open (``_settling``): a cancel of the handler's own
scope (a race's loser, a deadline) settles it as cancelled, by its in-doubt policy if its
last attempt may have taken effect, whatever it was doing (issue 25).
"""

from __future__ import annotations

from collections.abc import Awaitable
from typing import Any, TypeVar

import anyio

from .._durability import decisions as _decisions
from .._durability.attempts import attempt_event, attempts_so_far, policy_attempt
from .._journal.errors import ToolCallError
from .._journal.records import (
    DecisionAction,
    DecisionRecord,
    EventKind,
    Recorded,
    ResultRecord,
    SettledBy,
)
from .._tracing import telemetry as _telemetry
from .._tracing.telemetry import ATTR, SPAN, tracer
from .calls import ToolCalls, _by
from .tools import Happened, NotHappened, Tool

__all__ = ["InDoubtCalls"]

R = TypeVar("R")


class InDoubtCalls(ToolCalls):
    """Recorded calls of a step's ``Context``: served, or settled live (a mixin:
    ``Context`` provides the attributes ``ToolCalls`` declares)."""

    async def _settle(
        self,
        t: Tool[Any, Any],
        rec: Recorded,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        key: str,
    ) -> Any:
        """A recorded intent: serve its outcome, or settle it by its tool's in-doubt policy."""
        # the attempt the last outcome is about: the original run, +1 for each attempt
        # marked started, and the number an ``attempt_failed`` names
        attempts = attempts_so_far(rec.outcomes)
        if rec.outcomes:
            # the outcome that settled it is the one the live step used; a later decision
            # (only a store from before the one-decision rule holds one) is ignored
            settled = _decisions.settling(rec.outcomes)
            last = (settled or rec.outcomes[-1]).record
            if isinstance(last, ResultRecord) and last.settled_by == SettledBy.CANCELLED:
                why = last.error
                if self.cancel_replay is not None and why and why.type == "StepCancelledError":
                    self.cancel_replay.cancel()  # an operator's cancel cut it short here
                # Live, the handler's own scope cancelled this call and the step went on
                # without its result: take the same path, waiting for the same scope.
                await anyio.sleep_forever()
            if settled is not None and not _telemetry.enabled():
                # served from the log with no tracer provider set: no span to describe it in
                self.effects_from_log += 1
                return self._served(t, last)
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
                        ATTR.TASK: _telemetry.CALL_TASK.get(),
                    },
                ) as span:
                    for o in rec.outcomes:  # the recorded attempts, never slept again
                        if o.record is last:
                            break
                        if isinstance(o.record, DecisionRecord):
                            attempt_event(span, o.record)
                    self.effects_from_log += 1
                    return self._served(t, last)
            assert isinstance(last, DecisionRecord)  # results always settle
            if last.action == DecisionAction.RETRY:
                # the operator authorized one more attempt; mark it started, then run
                _telemetry.settled(rec.seq, t.name, t.policy, "operator.retry", _by(last))
                live = self._authorized_retry(t, rec.seq, args, kwargs, key, attempts)
                return await self._settling(t, args, kwargs, rec.seq, key, live)
            if last.action == DecisionAction.ATTEMPT_FAILED or policy_attempt(
                rec.outcomes, t.policy
            ):
                # between attempts of the retry policy (a back-off), or an attempt that was
                # running and that the tool's in-doubt policy settles: go on from there
                return await self._run(
                    t, args, kwargs, rec.seq, key, attempt=attempts, resume=rec.outcomes[-1]
                )
            # action == "attempt" with no result: the authorized retry of a write that
            # escalates was interrupted too
            live = self._escalate(t, rec, args, kwargs, key, attempts)
            return await self._settling(t, args, kwargs, rec.seq, key, live, doubtful=True)
        # in doubt: intent logged, no outcome
        if self.cancel_replay is not None:  # an operator cancelled the step while it was down
            self._open[rec.seq], self.open_tools[t.name] = t.name, (t.effect, t.policy)
            self.cancel_replay.cancel()  # settled as cancelled (in doubt) by the step
            await anyio.sleep_forever()
        live = self._in_doubt(t, rec, args, kwargs, key, attempts)
        return await self._settling(t, args, kwargs, rec.seq, key, live, doubtful=True)

    async def _settling(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
        live: Awaitable[R],
        *,
        doubtful: bool = False,
    ) -> R:
        """Settle recorded call ``intent_seq`` live (``live``: by its in-doubt policy, an
        operator, or an authorized retry). The call is open meanwhile: a cancel of the
        handler's own scope (a race's loser) settles it, as cancelled, whatever it was
        doing (marking an attempt started, asking a reconcile function, waiting for an
        operator; issue 25). ``doubtful``: its last attempt may have taken effect, until
        its policy says otherwise (``_in_flight``)."""
        self._open[intent_seq] = t.name
        self.open_tools[t.name] = (t.effect, t.policy)
        if doubtful:
            self._in_flight.add(intent_seq)
        try:
            value = await live
        except ToolCallError:  # settled as an error
            self._open.pop(intent_seq, None)
            raise
        except anyio.get_cancelled_exc_class():
            await self._abandon(t, args, kwargs, intent_seq, key)
            raise
        finally:
            self._in_flight.discard(intent_seq)
        self._open.pop(intent_seq, None)
        return value

    async def _in_doubt(
        self,
        t: Tool[Any, Any],
        rec: Recorded,
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        key: str,
        attempts: int,
    ) -> Any:
        """An intent with no outcome: its tool's in-doubt policy settles it."""
        self._cell.note_event(
            EventKind.IN_DOUBT, {"intent_seq": rec.seq, "tool": t.name, "policy": t.policy}
        )
        policy = t.policy
        if policy in ("rerun", "rerun-same-key"):
            _telemetry.settled(rec.seq, t.name, policy, policy)
            return await self._rerun(t, args, kwargs, rec.seq, key, attempts)
        if policy == "reconcile":
            answer = await self._ask_reconcile(t, args, kwargs, rec.seq, key)
            if isinstance(answer, Happened):
                _telemetry.settled(rec.seq, t.name, policy, "reconcile.happened")
                return self._reconciled(t, rec.seq, answer, attempts)
            if isinstance(answer, NotHappened):
                _telemetry.settled(rec.seq, t.name, policy, "reconcile.not_happened")
                return await self._rerun(t, args, kwargs, rec.seq, key, attempts)
        return await self._escalate(t, rec, args, kwargs, key, attempts)

    async def _rerun(
        self,
        t: Tool[Any, Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        intent_seq: int,
        key: str,
        attempts: int,
    ) -> Any:
        """Re-run attempt ``attempts`` (interrupted, its in-doubt policy said go on) as the
        next attempt, marked started first like every attempt after the first: killed in its
        turn, the count goes on from it (a call never runs more attempts than its policy
        allows because of a crash; docs/retries.md)."""
        self._in_flight.discard(intent_seq)  # its policy said: go on
        await self._start_attempt(
            intent_seq, attempts + 1, f"re-run of interrupted attempt {attempts}"
        )
        return await self._run(t, args, kwargs, intent_seq, key, attempt=attempts + 1)

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
        self._in_flight.discard(intent_seq)  # the operator said: it did not happen
        await self._start_attempt(intent_seq, attempts + 1, "retry authorized")
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
        # the decision as its entry was logged (and as replay will read it); the call is
        # open meanwhile (``_settling``)
        decision = await self._guard(
            self._cell.wait_in_doubt(rec.seq, t.name, key, step_seq=self.step_seq)
        )
        self._in_flight.discard(rec.seq)  # the operator ruled
        action = decision.action
        _telemetry.settled(rec.seq, t.name, t.policy, f"operator.{action}", _by(decision))
        if action == DecisionAction.RETRY:
            return await self._authorized_retry(t, rec.seq, args, kwargs, key, attempts)
        return self._served(t, decision)
