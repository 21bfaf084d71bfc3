"""Span names, attribute keys and metrics (see docs/tracing.md). Uses only opentelemetry-api;
with no SDK configured every call here is a cheap no-op."""

from __future__ import annotations

from typing import Any

from opentelemetry import metrics, propagate, trace
from opentelemetry.context import Context as OtelContext
from opentelemetry.trace import Link, SpanContext, TraceFlags

__all__ = ["ATTR", "SPAN", "tracer"]

tracer = trace.get_tracer("actorlog")
meter = metrics.get_meter("actorlog")


class SPAN:
    RECOVER = "actorlog.recover"
    REPLAY_STEP = "actorlog.replay_step"
    STEP = "actorlog.step"
    TOOL_CALL = "actorlog.tool_call"
    SNAPSHOT = "actorlog.snapshot"


class ATTR:
    ACTOR_ID = "actorlog.actor.id"
    ACTOR_TYPE = "actorlog.actor.type"
    SEQ = "actorlog.seq"
    MESSAGE_TYPE = "actorlog.message.type"
    MESSAGE_ID = "actorlog.message.id"
    TOOL = "actorlog.tool.name"
    TOOL_EFFECT = "actorlog.tool.effect"
    TOOL_POLICY = "actorlog.tool.policy"
    IDEMPOTENCY_KEY = "actorlog.tool.idempotency_key"
    ATTEMPT = "actorlog.tool.attempt"
    INTENT_SEQ = "actorlog.intent.seq"
    SERVED_FROM_LOG = "actorlog.tool.served_from_log"
    SNAPSHOT_SEQ = "actorlog.snapshot.seq"
    SNAPSHOT_BYTES = "actorlog.snapshot.bytes"
    SNAPSHOTS_REJECTED = "actorlog.recover.snapshots_rejected"
    ENTRIES_READ = "actorlog.recover.entries_read"
    ENTRIES_CUT = "actorlog.recover.entries_cut"
    STEPS_REPLAYED = "actorlog.recover.steps_replayed"
    IN_DOUBT = "actorlog.recover.in_doubt"
    PENDING_MESSAGES = "actorlog.recover.pending_messages"
    DURATION = "actorlog.duration_s"
    EFFECTS_FROM_LOG = "actorlog.replay.effects_from_log"
    FINISHED_LIVE = "actorlog.replay.finished_live"
    OUTCOME = "actorlog.step.outcome"


recovery_duration = meter.create_histogram(
    "actorlog.recovery.duration", unit="s", description="Time to recover one actor"
)
replayed_steps = meter.create_counter(
    "actorlog.recovery.replayed_steps", unit="{step}", description="Steps re-run from the log"
)
append_latency = meter.create_histogram(
    "actorlog.append.duration", unit="s", description="Latency of a durable append (commit)"
)
commit_batch = meter.create_histogram(
    "actorlog.append.batch_size", unit="{entry}", description="Entries per durable append"
)

_in_doubt_count = 0


def _observe_in_doubt(_options: Any) -> list[metrics.Observation]:
    return [metrics.Observation(_in_doubt_count)]


meter.create_observable_gauge(
    "actorlog.in_doubt",
    callbacks=[_observe_in_doubt],
    unit="{intent}",
    description="Intents currently waiting for an operator",
)


def add_in_doubt(delta: int) -> None:
    global _in_doubt_count
    _in_doubt_count += delta


def record_append(seconds: float, rows: int) -> None:
    append_latency.record(seconds)
    commit_batch.record(rows)


def inject() -> dict[str, str] | None:
    """The W3C trace context of the caller, to store with a message (None if no span)."""
    if not trace.get_current_span().get_span_context().is_valid:
        return None
    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


def extract(carrier: dict[str, str] | None) -> OtelContext | None:
    if not carrier:
        return None
    return propagate.extract(carrier)


def span_ids() -> dict[str, str] | None:
    """The current span's ids (stored with a step so a replay can link to it)."""
    sc = trace.get_current_span().get_span_context()
    if not sc.is_valid:
        return None
    return {"trace_id": format(sc.trace_id, "032x"), "span_id": format(sc.span_id, "016x")}


def link_to(ids: Any) -> list[Link]:
    if not isinstance(ids, dict):
        return []
    try:
        sc = SpanContext(
            trace_id=int(ids["trace_id"], 16),
            span_id=int(ids["span_id"], 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    except (KeyError, ValueError, TypeError):
        return []
    return [Link(sc, {"actorlog.link": "original_run"})]
