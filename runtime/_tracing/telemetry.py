"""Span names, attribute keys, event names and metrics (the stable table is docs/tracing.md).

Uses only opentelemetry-api: the application chooses and configures the SDK. With no SDK
configured every call here is a cheap no-op (benchmarks/telemetry_overhead.py measures it).
Names follow the OpenTelemetry semantic-convention style: namespaced, lowercase, dotted.
"""

from __future__ import annotations

import contextvars
import functools
import logging
import os
import sys
from typing import TYPE_CHECKING, Any, cast

from .. import store as _store
from .._journal.errors import CorruptEntryError, TornTailError

if TYPE_CHECKING:
    from collections.abc import Callable, Mapping, Sequence
    from contextlib import AbstractContextManager

    from opentelemetry import trace
    from opentelemetry.context import Context as OtelContext
    from opentelemetry.trace import Link
    from opentelemetry.util.types import Attributes

__all__ = ["ATTR", "EVENT", "METRIC", "SPAN", "current_span", "set_error", "tracer"]

# OpenTelemetry is imported only once the application uses it. A TracerProvider or a
# MeterProvider can only be set through ``opentelemetry.trace`` / ``opentelemetry.metrics``;
# so while those modules are not in ``sys.modules`` no provider can be set, no span can be
# current, and every call here is a no-op that imports nothing (``import actorlog`` then
# costs no OpenTelemetry import; tests/runtime/test_lazy_imports.py). Once the application
# imports them (to configure an SDK, before or after ``import actorlog``), everything goes
# through the API exactly as before.
_modules = sys.modules

# With no SDK, the API's no-op span still costs three nested context managers and a context
# attach/detach (about 5-20 us per span, most of actorlog's per-step overhead). So until the
# application sets a global TracerProvider, spans are skipped entirely. The check reads the
# API's module global (one dict lookup, one attribute load); should a future API drop it, or
# should the provider come from the OTEL_PYTHON_TRACER_PROVIDER variable (loaded lazily by
# the API), every span goes through the API as usual.
_ALWAYS_API = "OTEL_PYTHON_TRACER_PROVIDER" in os.environ
_ALWAYS_METRICS = "OTEL_PYTHON_METER_PROVIDER" in os.environ

#: [F18] the task of the step whose ``ctx.call`` runs now (``""``: the handler's own): set by
#: :class:`calling` around each call, read into the tool_call span's ``ATTR.TASK``
CALL_TASK: contextvars.ContextVar[str] = contextvars.ContextVar("actorlog_call_task", default="")


class calling:  # used like a function: ``with calling(task):``
    """Around one ``ctx.call``: the task of the step that made it, for its spans."""

    __slots__ = ("_task", "_token")

    def __init__(self, task: str) -> None:
        self._task = task

    def __enter__(self) -> None:
        self._token = CALL_TASK.set(self._task)

    def __exit__(self, *exc: object) -> None:
        CALL_TASK.reset(self._token)


#: seconds an ``ActorSystem``'s exit waits for the application's exporters (``flush``)
FLUSH_TIMEOUT = 5.0


_trace: Any = None  # the module opentelemetry.trace, once seen loaded


def enabled() -> bool:
    """True once a global TracerProvider is set (by the application's SDK setup)."""
    global _trace
    t = _trace
    if t is None:
        t = _trace = _modules.get("opentelemetry.trace")
        if t is None:
            return _ALWAYS_API
    # a missing global (a future API) counts as set: go through the API
    return _ALWAYS_API or getattr(t, "_TRACER_PROVIDER", True) is not None


class _NoopSpan:
    """The span of every actorlog span while no provider is set: records nothing. (With
    ``opentelemetry.trace`` loaded the API's own ``INVALID_SPAN`` is used instead.)"""

    __slots__ = ()

    def is_recording(self) -> bool:
        return False

    def set_attribute(self, key: str, value: object) -> None:
        return None

    def set_attributes(self, attributes: object) -> None:
        return None

    def add_event(self, name: str, attributes: object = None, timestamp: object = None) -> None:
        return None

    def set_status(self, status: object, description: object = None) -> None:
        return None

    def record_exception(self, exception: BaseException, *args: object, **kw: object) -> None:
        return None

    def update_name(self, name: str) -> None:
        return None

    def end(self, end_time: object = None) -> None:
        return None


_NOOP_SPAN = _NoopSpan()


def current_span() -> trace.Span:
    """``trace.get_current_span()``, without importing OpenTelemetry while the application
    has not (no span can be current then)."""
    t = _modules.get("opentelemetry.trace")
    if t is None:
        return cast("trace.Span", _NOOP_SPAN)
    return cast("trace.Span", t.get_current_span())


def set_error(span: trace.Span, description: str) -> None:
    """``span.set_status(Status(StatusCode.ERROR, description))``."""
    if span is _NOOP_SPAN:  # type: ignore[comparison-overlap]
        return
    from opentelemetry.trace import Status, StatusCode

    span.set_status(Status(StatusCode.ERROR, description))


class _NoSpan:
    """What ``start_as_current_span`` returns while no provider is set: a span that records
    nothing, without touching the context."""

    __slots__ = ()

    def __enter__(self) -> trace.Span:
        t = _modules.get("opentelemetry.trace")
        if t is None:  # (no ``typing.cast``: a Python call, twice an ask)
            return _NOOP_SPAN  # type: ignore[return-value]  # a Span by duck typing
        return t.INVALID_SPAN  # type: ignore[no-any-return]  # the API's, a trace.Span

    def __exit__(self, *exc: object) -> None:
        return None


_NO_SPAN = _NoSpan()
#: ``tracer.start_as_current_span(...)`` for a caller that has just seen ``enabled()`` False
#: (a step, a tool call): the same no-op, without asking again
NO_SPAN: AbstractContextManager[trace.Span] = _NO_SPAN

#: ``context_with`` for a span that is not recording while OpenTelemetry is not loaded: the
#: API's context holding ``INVALID_SPAN``, made when (if ever) a span starts under it.
_INVALID_PARENT: Any = object()


def context_with(span: trace.Span) -> OtelContext:
    """``trace.set_span_in_context(span)`` (lazily, for the no-op span)."""
    if span is _NOOP_SPAN:  # type: ignore[comparison-overlap]
        return cast("OtelContext", _INVALID_PARENT)
    from opentelemetry import trace

    return trace.set_span_in_context(span)


_api_tracer: Any = None


class _Tracer:
    """The ``actorlog`` tracer: the API's, with a fast path while no SDK is configured."""

    __slots__ = ()

    def start_as_current_span(
        self,
        name: str,
        context: OtelContext | None = None,
        attributes: Attributes = None,
        links: Sequence[Link] | None = None,
    ) -> AbstractContextManager[trace.Span]:
        if not enabled():
            return _NO_SPAN
        global _api_tracer
        from opentelemetry import trace

        if _api_tracer is None:
            # a ProxyTracer while no provider is set (it follows the provider once set)
            _api_tracer = trace.get_tracer("actorlog")
        if context is _INVALID_PARENT:
            context = trace.set_span_in_context(trace.INVALID_SPAN)
        return cast(
            "AbstractContextManager[trace.Span]",
            _api_tracer.start_as_current_span(
                name, context=context, attributes=attributes, links=links
            ),
        )


tracer = _Tracer()


class SPAN:
    """Span names."""

    RECOVER = "actorlog.recover"
    REPLAY_STEP = "actorlog.replay_step"
    STEP = "actorlog.step"
    TOOL_CALL = "actorlog.tool_call"
    SNAPSHOT = "actorlog.snapshot"
    #: one compaction of one actor's log (docs/recovery.md, "Retention and compaction")
    COMPACT = "actorlog.compact"
    #: a change of an actor's owner seen by this runtime (one ``EVENT.LEASE_*`` on it)
    OWNERSHIP = "actorlog.ownership"
    #: one due timer (``send_later``) or schedule firing delivered by the timer loop
    TIMER_FIRE = "actorlog.timer.fire"
    #: an operator's cancel, terminate, delete or restart through the system or ``ops`` API
    LIFECYCLE = "actorlog.lifecycle"


class EVENT:
    """Span event names."""

    #: on ``actorlog.ownership``: this runtime acquired, took over, lost or released an
    #: actor's lease
    LEASE_ACQUIRED = "actorlog.lease.acquired"
    LEASE_TAKEN_OVER = "actorlog.lease.taken_over"
    LEASE_LOST = "actorlog.lease.lost"
    LEASE_RELEASED = "actorlog.lease.released"

    #: on ``actorlog.recover``: a snapshot failed verification and was skipped
    SNAPSHOT_REJECTED = "actorlog.snapshot.rejected"
    #: on ``actorlog.recover``: an intent with no recorded outcome was found
    IN_DOUBT = "actorlog.intent.in_doubt"
    #: on the step span that finishes the interrupted step: how an in-doubt intent was settled
    SETTLED = "actorlog.intent.settled"
    #: on ``actorlog.recover`` (status ERROR): a damaged log entry stopped recovery
    CORRUPTION = "actorlog.corruption"
    #: on ``actorlog.recover`` (status ERROR): recovery stopped for another reason
    RECOVERY_FAILED = "actorlog.recovery.failed"
    #: on ``actorlog.tool_call``: one per attempt that failed (attempt, error, the delay
    #: chosen before the next one; served from the log too)
    ATTEMPT_FAILED = "actorlog.tool.attempt_failed"
    #: on the step span: a durable sleep starts (its wake time), or a step interrupted
    #: during one resumes it after recovery (the time left)
    SLEEP = "actorlog.timer.sleep"
    SLEEP_RESUMED = "actorlog.timer.sleep_resumed"
    #: on the step span: ``ctx.stop()`` finished the actor with this step
    FINISHED = "actorlog.actor.finished"
    #: on the step span: an operator's cancel cut the step short
    STEP_CANCELLED = "actorlog.step.cancelled"
    #: on the step span: a batch of events the handler emitted (``ctx.emit``) between two
    #: entries it wrote: the first event's number, how many, their encoded bytes
    EMITTED = "actorlog.step.emitted"


class ATTR:
    """Attribute keys (span attributes, event attributes, metric attributes)."""

    ACTOR_ID = "actorlog.actor.id"
    OWNER = "actorlog.lease.owner"
    FENCING_TOKEN = "actorlog.lease.token"
    REASON = "actorlog.lease.reason"
    ACTOR_TYPE = "actorlog.actor.type"
    SEQ = "actorlog.seq"
    MESSAGE_TYPE = "actorlog.message.type"
    MESSAGE_ID = "actorlog.message.id"
    OUTCOME = "actorlog.step.outcome"
    # tool calls
    TOOL = "actorlog.tool.name"
    TOOL_EFFECT = "actorlog.tool.effect"
    TOOL_POLICY = "actorlog.tool.policy"
    IDEMPOTENCY_KEY = "actorlog.tool.idempotency_key"
    ATTEMPT = "actorlog.tool.attempt"
    #: the retry policy's most attempts; the back-off before the next attempt (seconds);
    #: the per-attempt timeout (seconds); a timed-out write attempt is in doubt
    MAX_ATTEMPTS = "actorlog.tool.max_attempts"
    RETRY_DELAY = "actorlog.tool.retry_delay"
    TIMEOUT = "actorlog.tool.timeout"
    ATTEMPT_IN_DOUBT = "actorlog.tool.attempt_in_doubt"
    SERVED_FROM_LOG = "actorlog.tool.served_from_log"
    #: [F18] the task of the step that made the call (dot-joined spawn path, ``"1.0"``);
    #: ``""``: the handler's own task
    TASK = "actorlog.step.task"
    INTENT_SEQ = "actorlog.intent.seq"
    SETTLEMENT = "actorlog.intent.settlement"
    DECIDED_BY = "actorlog.decision.by"
    DECISION_REASON = "actorlog.decision.reason"
    # compaction
    COMPACT_FIRST_SEQ = "actorlog.compact.first_seq"
    COMPACT_REMOVED = "actorlog.compact.removed"
    COMPACT_RETENTION = "actorlog.compact.retention"
    # snapshots
    SNAPSHOT_SEQ = "actorlog.snapshot.seq"
    SNAPSHOT_HANDLED_SEQ = "actorlog.snapshot.handled_seq"
    SNAPSHOT_BYTES = "actorlog.snapshot.bytes"
    SNAPSHOT_DURATION = "actorlog.snapshot.duration"
    #: what made the runtime write it (``SnapshotTrigger``: every_steps, every_seconds,
    #: recovery_budget, passivation, manual)
    SNAPSHOT_TRIGGER = "actorlog.snapshot.trigger"
    #: seconds recovering the actor would have taken right before this snapshot (the
    #: ``RecoveryCost`` estimate that ``recovery_budget`` compares against)
    SNAPSHOT_RECOVERY_ESTIMATE = "actorlog.snapshot.recovery_estimate"
    REJECT_REASON = "actorlog.snapshot.reject_reason"
    # recovery
    SNAPSHOTS_REJECTED = "actorlog.recover.snapshots_rejected"
    ENTRIES_READ = "actorlog.recover.entries_read"
    ENTRIES_CUT = "actorlog.recover.entries_cut"
    STEPS_REPLAYED = "actorlog.recover.steps_replayed"
    IN_DOUBT = "actorlog.recover.in_doubt"
    PENDING_MESSAGES = "actorlog.recover.pending_messages"
    RECOVER_DURATION = "actorlog.recover.duration"
    # events of a step (``ctx.emit``), on ``EVENT.EMITTED``
    EVENT_FIRST = "actorlog.events.first"
    EVENT_COUNT = "actorlog.events.count"
    EVENT_BYTES = "actorlog.events.bytes"
    # replayed steps
    EFFECTS_FROM_LOG = "actorlog.replay.effects_from_log"
    FINISHED_LIVE = "actorlog.replay.finished_live"
    # failures (events)
    ERROR_TYPE = "error.type"
    ERROR_MESSAGE = "actorlog.error.message"
    CHECK = "actorlog.corruption.check"
    # timers
    TIMER_ID = "actorlog.timer.id"
    TIMER_UNTIL = "actorlog.timer.until"
    TIMER_REMAINING = "actorlog.timer.remaining"
    TIMER_DUE = "actorlog.timer.due"
    TIMER_LATENESS = "actorlog.timer.lateness"
    TIMER_OUTCOME = "actorlog.timer.outcome"
    SCHEDULE_NAME = "actorlog.schedule.name"
    SCHEDULE_MISSED = "actorlog.schedule.missed"
    SCHEDULE_FIRING = "actorlog.schedule.firing"
    # lifecycle
    LIFECYCLE_ACTION = "actorlog.lifecycle.action"
    LIFECYCLE_BY = "actorlog.lifecycle.by"
    LIFECYCLE_REASON = "actorlog.lifecycle.reason"
    #: on a cancel span: no step ran here to cancel, the request was recorded for the owner
    LIFECYCLE_REQUESTED = "actorlog.lifecycle.requested"
    #: on the step-cancelled event: the calls the cancel cut short
    CANCELLED_CALLS = "actorlog.step.cancelled_calls"
    # span links
    LINK_TYPE = "actorlog.link.type"


class METRIC:
    """Metric names."""

    RECOVERY_DURATION = "actorlog.recovery.duration"
    REPLAYED_STEPS = "actorlog.recovery.replayed_steps"
    APPEND_DURATION = "actorlog.append.duration"
    APPEND_BATCH_SIZE = "actorlog.append.batch_size"
    IN_DOUBT = "actorlog.intents.in_doubt"
    COMMIT_APPENDS = "actorlog.store.commit.appends"


class _Instruments:
    """actorlog's metric instruments, made on the meter of the global MeterProvider (a proxy
    until one is set) once ``opentelemetry.metrics`` is loaded: at an ``ActorSystem``'s start
    or at the first recording after the application imported it."""

    def __init__(self) -> None:
        from opentelemetry import metrics

        meter = metrics.get_meter("actorlog")
        self.recovery_duration = meter.create_histogram(
            METRIC.RECOVERY_DURATION, unit="s", description="Time to recover one actor"
        )
        self.replayed_steps = meter.create_counter(
            METRIC.REPLAYED_STEPS, unit="{step}", description="Steps re-run from the log"
        )
        self.append_latency = meter.create_histogram(
            METRIC.APPEND_DURATION,
            unit="s",
            description="Latency of one durable append of an actor's buffered entries (its commit)",
        )
        self.commit_batch = meter.create_histogram(
            METRIC.APPEND_BATCH_SIZE,
            unit="{entry}",
            description="Entries made durable by one append (one commit from the actor's view)",
        )
        self.store_commit_appends = meter.create_histogram(
            METRIC.COMMIT_APPENDS,
            unit="{append}",
            description="Actor appends that shared one store transaction (group commit)",
        )
        meter.create_observable_gauge(
            METRIC.IN_DOUBT,
            callbacks=[_observe_in_doubt],
            unit="{intent}",
            description="Intents in this process waiting for an operator's decision",
        )


_instruments: _Instruments | None = None


def instruments() -> _Instruments | None:
    """The instruments, made now if ``opentelemetry.metrics`` is loaded; else None (no
    MeterProvider can be set, so there is nothing to record to)."""
    global _instruments
    if _instruments is None and (_ALWAYS_METRICS or "opentelemetry.metrics" in _modules):
        _instruments = _Instruments()
    return _instruments


_in_doubt_count = 0


def _observe_in_doubt(_options: Any) -> list[Any]:
    from opentelemetry import metrics

    return [metrics.Observation(_in_doubt_count)]


def add_in_doubt(delta: int) -> None:
    global _in_doubt_count
    _in_doubt_count += delta


def record_recovery(seconds: float, replayed: int, actor_type: str) -> None:
    """One recovery of an actor of this class: its duration and the steps it replayed."""
    m = _instruments or instruments()
    if m is not None:
        m.recovery_duration.record(seconds, {ATTR.ACTOR_TYPE: actor_type})
        m.replayed_steps.add(replayed, {ATTR.ACTOR_TYPE: actor_type})


def record_commit(appends: int) -> None:
    """Called once per shared transaction of a store's group commit, through
    ``actorlog.store.report_commit`` (stores import no telemetry)."""
    m = _instruments
    if m is None:
        if not _ALWAYS_METRICS and "opentelemetry.metrics" not in _modules:
            return  # (no MeterProvider can be set)
        m = instruments()
    if m is not None:
        m.store_commit_appends.record(appends)


_store.set_commit_observer(record_commit)


def record_append(seconds: float, rows: int) -> None:
    m = _instruments
    if m is None:
        if not _ALWAYS_METRICS and "opentelemetry.metrics" not in _modules:
            return  # (no MeterProvider can be set)
        m = instruments()
    if m is not None:
        m.append_latency.record(seconds)
        m.commit_batch.record(rows)


def inject() -> dict[str, str] | None:
    """The W3C trace context of the caller, to store with a message (None if no span)."""
    t = _modules.get("opentelemetry.trace")
    if t is None or not t.get_current_span().get_span_context().is_valid:
        return None  # (no span can be current while OpenTelemetry is not loaded)
    from opentelemetry import propagate  # lazily: it loads the configured propagators

    carrier: dict[str, str] = {}
    propagate.inject(carrier)
    return carrier or None


def extract(carrier: dict[str, str] | None) -> OtelContext | None:
    if not carrier:
        return None
    from opentelemetry import propagate

    return propagate.extract(carrier)


def span_ids() -> dict[str, str] | None:
    """The current span's ids (stored with a step so a replay can link to it)."""
    if not enabled():
        return None  # no step span was started: the current span is someone else's
    sc = current_span().get_span_context()
    if not sc.is_valid:
        return None
    return {"trace_id": format(sc.trace_id, "032x"), "span_id": format(sc.span_id, "016x")}


def link_to(ids: Any) -> list[Link]:
    """A link to the span of a step's original run (from the ids stored with the step)."""
    if not isinstance(ids, dict) or not enabled():
        return []  # (without a provider, no span is started to carry the link)
    from opentelemetry.trace import Link, SpanContext, TraceFlags

    try:
        sc = SpanContext(
            trace_id=int(ids["trace_id"], 16),
            span_id=int(ids["span_id"], 16),
            is_remote=True,
            trace_flags=TraceFlags(TraceFlags.SAMPLED),
        )
    except (KeyError, ValueError, TypeError):
        return []
    if not sc.is_valid:
        return []
    return [Link(sc, {ATTR.LINK_TYPE: "original_run"})]


def record_failure(span: trace.Span, exc: BaseException, actor_id: str) -> None:
    """Mark a recover span failed: status ERROR and an event naming actor, seq and check."""
    set_error(span, str(exc))
    event: dict[str, Any] = {
        ATTR.ACTOR_ID: str(getattr(exc, "actor_id", None) or actor_id),
        ATTR.ERROR_TYPE: type(exc).__qualname__,
        ATTR.ERROR_MESSAGE: str(exc),
    }
    seq = getattr(exc, "seq", None)
    if seq is None:
        seq = getattr(exc, "step_seq", None)
    if isinstance(seq, int):
        event[ATTR.SEQ] = seq
    check = getattr(exc, "check", None)
    if isinstance(check, str):
        event[ATTR.CHECK] = check
    damaged = isinstance(exc, CorruptEntryError | TornTailError)
    span.add_event(EVENT.CORRUPTION if damaged else EVENT.RECOVERY_FAILED, event)


def settled(
    intent_seq: int,
    tool: str,
    policy: str,
    settlement: str,
    extra: Mapping[str, str | int] | None = None,
) -> None:
    """Record on the current (step) span how an in-doubt intent was settled.

    ``settlement`` is one of ``rerun``, ``rerun-same-key``, ``reconcile.happened``,
    ``reconcile.not_happened``, ``operator.result``, ``operator.retry``, ``operator.fail``.
    """
    span = current_span()
    if not span.is_recording():
        return
    attributes: dict[str, str | int] = {
        ATTR.INTENT_SEQ: intent_seq,
        ATTR.TOOL: tool,
        ATTR.TOOL_POLICY: policy,
        ATTR.SETTLEMENT: settlement,
    }
    attributes.update(extra or {})
    span.add_event(EVENT.SETTLED, attributes)


def ownership_changed(kind: str, actor_id: str, owner: str, token: int | None, reason: str) -> None:
    """One short ``actorlog.ownership`` span with an ``actorlog.lease.<kind>`` event."""
    attributes: dict[str, str | int] = {ATTR.ACTOR_ID: actor_id, ATTR.OWNER: owner}
    if token is not None:
        attributes[ATTR.FENCING_TOKEN] = token
    if reason:
        attributes[ATTR.REASON] = reason
    with tracer.start_as_current_span(SPAN.OWNERSHIP, attributes=attributes) as span:
        span.add_event(f"actorlog.lease.{kind}", attributes)  # EVENT.LEASE_<KIND>


def _flushers() -> list[Callable[..., object]]:
    """The ``force_flush`` of the global TracerProvider and MeterProvider, where the
    application set ones that have it (an SDK); none while OpenTelemetry is not loaded (no
    provider can be set then) or only the API's proxies are there."""
    found: list[Callable[..., object]] = []
    for name, getter in (
        ("opentelemetry.trace", "get_tracer_provider"),
        ("opentelemetry.metrics", "get_meter_provider"),
    ):
        module = _modules.get(name)
        if module is None:
            continue
        fn = getattr(getattr(module, getter)(), "force_flush", None)
        if callable(fn):
            found.append(fn)
    return found


async def flush(timeout: float = FLUSH_TIMEOUT) -> None:
    """Export what the application's span and metric processors still buffer: called when
    an ``ActorSystem`` exits. A batching processor exports every few seconds and at
    interpreter exit (``atexit``); a process that does not reach ``atexit`` loses the rest.
    uvicorn does not: after its graceful shutdown it raises the SIGTERM it caught again,
    with the default handler, which ends the process at once. So the system's last spans
    (and those of the steps before them) are exported here, before the server goes.

    Runs each ``force_flush`` in a worker thread (an exporter may block on the network),
    shielded, for at most ``timeout`` seconds in all; an exporter's error is logged, not
    raised. Imports nothing: with no SDK set it returns at once.
    """
    fns = _flushers()
    if not fns:
        return
    import anyio.to_thread

    with anyio.move_on_after(timeout, shield=True):
        for fn in fns:
            try:
                await anyio.to_thread.run_sync(
                    functools.partial(fn, timeout_millis=int(timeout * 1000)),
                    abandon_on_cancel=True,
                )
            except Exception:  # an exporter's failure must not fail the system's exit
                logging.getLogger("actorlog").warning(
                    "flushing OpenTelemetry spans and metrics failed", exc_info=True
                )
