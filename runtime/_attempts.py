"""Helpers of a tool's retry policy at run time (``ToolCalls`` in ``_calls.py`` runs the
attempts): counting attempts in a recorded intent's outcomes, and the span event of a
failed attempt."""

from __future__ import annotations

from typing import Any

import attrs
from opentelemetry import trace

from ._records import DecisionAction, DecisionRecord, Outcome
from ._telemetry import ATTR, EVENT

__all__ = ["Settled", "attempt_event", "attempts_so_far", "policy_attempt"]


@attrs.frozen
class Settled:
    """What settled a call between attempts (a reconcile answer, an operator's result)."""

    value: Any


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


def policy_attempt(outcomes: list[Outcome]) -> bool:
    """Is the last outcome an ``attempt`` the retry policy started (after an
    ``attempt_failed``), rather than one an operator authorized?"""
    return (
        len(outcomes) >= 2
        and outcomes[-1].tag == DecisionAction.ATTEMPT
        and outcomes[-2].tag == DecisionAction.ATTEMPT_FAILED
    )


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
