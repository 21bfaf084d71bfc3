"""Helpers of a tool's retry policy at run time (``ToolCalls`` in ``_effects/calls.py`` runs the
attempts): counting attempts in a recorded intent's outcomes, and the span event of a
failed attempt."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from .._journal.fields import FrozenValue
from .._journal.records import DecisionAction, DecisionRecord, IntentRecord, Outcome
from .._tracing.telemetry import ATTR, EVENT

if TYPE_CHECKING:
    from opentelemetry import trace

__all__ = [
    "Settled",
    "attempt_event",
    "attempts_so_far",
    "in_doubt_attempt",
    "in_doubt_event",
    "policy_attempt",
]


class Settled(FrozenValue):
    """What settled a call between attempts (a reconcile answer, an operator's result)."""

    __slots__ = ("value",)

    value: Any

    def __init__(self, value: Any) -> None:
        object.__setattr__(self, "value", value)


def attempts_so_far(outcomes: list[Outcome]) -> int:
    """The number of the attempt an intent's last outcome is about: 1, +1 for each attempt
    marked started (``attempt`` decision), or the number an ``attempt_failed`` names."""
    n = 1
    for o in outcomes:
        d = o.record
        if isinstance(d, DecisionRecord):
            if d.action == DecisionAction.ATTEMPT:
                n += 1
            elif d.action == DecisionAction.ATTEMPT_FAILED:
                n = max(n, d.attempt)
    return n


def policy_attempt(outcomes: list[Outcome], policy: str) -> bool:
    """Is the last outcome an ``attempt`` that the tool's own policies go on from when it
    was interrupted? Yes after an ``attempt_failed`` (the retry policy started it: in doubt
    like a first attempt, its in-doubt policy decides), and for a tool whose in-doubt
    policy settles it without an operator (a read, an idempotent write, ``reconcile=``),
    whatever started it (the retry policy, an earlier re-run, an operator's retry): a read
    runs again as the next attempt after any number of interruptions. An operator-authorized
    attempt of any other write waits for an operator again."""
    if not outcomes or outcomes[-1].tag != DecisionAction.ATTEMPT:
        return False
    if policy != "escalate":
        return True
    return len(outcomes) >= 2 and outcomes[-2].tag == DecisionAction.ATTEMPT_FAILED


def in_doubt_attempt(outcomes: list[Outcome]) -> int | None:
    """The attempt an unsettled intent is in doubt about, or None if nothing is.

    In doubt: no outcome at all (the first attempt ran and left no trace); an ``attempt``
    decision last (a further attempt, of the retry policy or authorized by an operator, was
    started and left no outcome); an ``attempt_failed`` last that says ``in_doubt`` (a
    write timed out: it may have happened). Not in doubt: a settled intent, an
    ``attempt_failed`` of an attempt that failed (the back-off between attempts: the
    failure is recorded), a ``retry`` authorized and not started (nothing ran)."""
    if any(o.settles for o in outcomes):
        return None
    if not outcomes:
        return 1
    last = outcomes[-1].record
    if not isinstance(last, DecisionRecord):
        return None
    if last.action == DecisionAction.ATTEMPT:
        return attempts_so_far(outcomes)
    if last.action == DecisionAction.ATTEMPT_FAILED and last.in_doubt:
        return last.attempt
    return None


def attempt_event(span: trace.Span, failed: DecisionRecord) -> None:
    """The span event of a failed attempt (``attempt_failed`` decision), live or served."""
    if failed.action != DecisionAction.ATTEMPT_FAILED:
        return
    err = failed.error
    span.add_event(
        EVENT.ATTEMPT_FAILED,
        {
            ATTR.ATTEMPT: failed.attempt,
            ATTR.ERROR_TYPE: err.type if err else "",
            ATTR.ERROR_MESSAGE: err.message if err else "",
            ATTR.RETRY_DELAY: failed.delay,
            ATTR.ATTEMPT_IN_DOUBT: failed.in_doubt,
        },
    )


def in_doubt_event(
    span: trace.Span, seq: int, intent_seq: int, tool: str, intent: IntentRecord, attempt: int
) -> None:
    """On the recover span: an intent of the interrupted step (message seq ``seq``) found in
    doubt, about attempt ``attempt``."""
    span.add_event(
        EVENT.IN_DOUBT,
        {
            ATTR.SEQ: seq,
            ATTR.INTENT_SEQ: intent_seq,
            ATTR.TOOL: tool,
            ATTR.TOOL_EFFECT: intent.effect,
            ATTR.TOOL_POLICY: intent.policy,
            ATTR.IDEMPOTENCY_KEY: intent.key,
            ATTR.ATTEMPT: attempt,
            ATTR.TASK: intent.task,
        },
    )
