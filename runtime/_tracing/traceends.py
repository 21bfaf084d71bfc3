"""Spans and span events of timers and of an actor's lifecycle (names in ``_telemetry``,
the stable table in docs/tracing.md).

* a durable sleep is an event on the step span: ``actorlog.timer.sleep`` when it starts
  (its wake time), ``actorlog.timer.sleep_resumed`` when a step interrupted during it
  resumes the wait after recovery (the time left);
* each timer the loop fires is one ``actorlog.timer.fire`` span; the step that handles its
  message is a child of it (the message carries the span's trace context);
* ``ctx.stop()`` and an operator's cancel are events on the step span; terminate, delete,
  cancel and restart through the system or ``ops`` API are one ``actorlog.lifecycle`` span.
"""

from __future__ import annotations

import contextlib
import json
from typing import TYPE_CHECKING, Any

from .telemetry import ATTR, EVENT, SPAN, current_span, set_error, tracer

if TYPE_CHECKING:
    from collections.abc import Iterator

    from opentelemetry import trace

    from ..store import TimerRow

__all__ = ["finished", "lifecycle_span", "sleep", "step_cancelled", "timer_fire_span"]


def _event(name: str, attributes: dict[str, Any]) -> None:
    span = current_span()
    if span.is_recording():
        span.add_event(name, attributes)


def sleep(until: float, remaining: float, *, resumed: bool) -> None:
    """On the step span: a durable sleep starts (or, after recovery, resumes)."""
    _event(
        EVENT.SLEEP_RESUMED if resumed else EVENT.SLEEP,
        {ATTR.TIMER_UNTIL: until, ATTR.TIMER_REMAINING: max(remaining, 0.0)},
    )


def finished(reason: str) -> None:
    """On the step span: ``ctx.stop()`` finished the actor with this step."""
    _event(EVENT.FINISHED, {ATTR.LIFECYCLE_REASON: reason})


def step_cancelled(detail: dict[str, Any], calls: list[str]) -> None:
    """On the step span: an operator's cancel cut the step short."""
    _event(
        EVENT.STEP_CANCELLED,
        {
            ATTR.LIFECYCLE_BY: str(detail.get("by") or ""),
            ATTR.LIFECYCLE_REASON: str(detail.get("reason") or ""),
            ATTR.CANCELLED_CALLS: [str(c) for c in calls],
        },
    )


@contextlib.contextmanager
def lifecycle_span(action: str, actor_id: str, by: str | None, reason: str) -> Iterator[trace.Span]:
    """One ``actorlog.lifecycle`` span around an operator's cancel, terminate, delete or
    restart; a refusal (an exception) sets its status ERROR."""
    attributes = {
        ATTR.ACTOR_ID: actor_id,
        ATTR.LIFECYCLE_ACTION: action,
        ATTR.LIFECYCLE_BY: by or "",
        ATTR.LIFECYCLE_REASON: reason or "",
    }
    with tracer.start_as_current_span(SPAN.LIFECYCLE, attributes=attributes) as span:
        try:
            yield span
        except Exception as exc:
            set_error(span, f"{type(exc).__name__}: {exc}")
            raise


@contextlib.contextmanager
def timer_fire_span(t: TimerRow, now: float) -> Iterator[trace.Span]:
    """One ``actorlog.timer.fire`` span around the delivery of a due timer; the caller sets
    ``actorlog.timer.outcome`` (and, for a schedule, ``actorlog.schedule.firing``)."""
    attributes: dict[str, Any] = {
        ATTR.ACTOR_ID: t.actor_id,
        ATTR.ACTOR_TYPE: t.actor_type,
        ATTR.TIMER_ID: t.timer_id,
        ATTR.MESSAGE_TYPE: t.type_tag,
        ATTR.MESSAGE_ID: t.message_id,
        ATTR.TIMER_DUE: t.due,
        ATTR.TIMER_LATENESS: max(now - t.due, 0.0),
    }
    if t.recurrence is not None:
        attributes[ATTR.SCHEDULE_NAME] = t.timer_id.removeprefix("schedule:")
        try:
            rec = json.loads(t.recurrence)
        except ValueError:
            rec = {}
        if isinstance(rec, dict):
            attributes[ATTR.SCHEDULE_MISSED] = str(rec.get("missed", "skip"))
    with tracer.start_as_current_span(SPAN.TIMER_FIRE, attributes=attributes) as span:
        yield span
