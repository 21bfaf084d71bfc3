"""Durable timers: ``send_later``, recurring schedules and the one timer loop of a runtime.

A timer is a row in the store's timer index (``actorlog.store.TimerStore``), put before the
call that made it returns. The loop of each runtime reads the earliest due time through that
index (never the log), sleeps until then (or until a new timer is put here), and delivers
each due timer through the system's one delivery path with the timer's message id, so that a
firing repeated after a crash (delivered, not yet marked fired) is deduplicated by the
receiver's log: each timer is delivered exactly once. Then it marks the timer fired, or
moves a schedule to its next firing.

Schedules: ``every=`` (a ``timedelta``) or ``cron=`` (5-field cron, UTC, with the optional
``cronsim`` package: ``pip install 'actorlog[cron]'``). A firing the runtime finds more than
:data:`MISFIRE_GRACE` seconds late was *missed* (no runtime ran then): ``missed="skip"``
drops every missed firing and waits for the next one; ``missed="catch_up_once"`` delivers one
message for the latest missed firing, then goes on with the next. Each firing's message id is
``schedule:<name>@<firing time, ISO 8601 UTC>``.
"""

from __future__ import annotations

import datetime
import json
import logging
import time
import uuid
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, cast

import anyio

from . import _codec, _traceends
from ._errors import ConfigurationError
from ._telemetry import ATTR, set_error
from .store import Store, TimerRow, TimerStore

__all__ = [
    "MISFIRE_GRACE",
    "Timers",
    "due_time",
    "new_row",
    "next_firing",
    "recurrence_of",
    "schedule_id",
]

logger = logging.getLogger("actorlog")

#: Seconds late past which a schedule's firing counts as missed (see the module doc).
MISFIRE_GRACE = 60.0
#: Seconds between looks at the index when nothing woke the loop: on a store shared by
#: runtimes (PostgreSQL) another runtime may have put an earlier timer.
SHARED_LOOK = 1.0
#: Seconds a loop waits at most, whatever the next due time (a clock jump, a lost wake).
MAX_WAIT = 30.0
#: Seconds before a timer that could not be delivered is tried again.
RETRY_AFTER = 1.0
#: Fired and cancelled timers are kept this long after their due time (so that
#: ``cancel_timer`` can answer "fired"), then deleted by the loop, at most once an hour.
KEEP_ENDED = 7 * 24 * 3600.0
_PURGE_EVERY = 3600.0

Missed = Literal["skip", "catch_up_once"]
Deliver = Callable[..., Awaitable[Any]]

CRON_HINT = "pip install 'actorlog[cron]'"


class Classes(Protocol):
    """What the timer loop needs of the system's registry (``_registry.Registry``)."""

    def actor_class(self, tag: str) -> Any: ...

    def decode_message(self, tag: str, body: Any) -> Any: ...


def schedule_id(name: str) -> str:
    """The timer id of the schedule ``name``."""
    return f"schedule:{name}"


def due_time(
    *, delay: float | datetime.timedelta | None, at: datetime.datetime | None, what: str
) -> float:
    """The due time (seconds since the epoch) of ``delay=`` or ``at=`` (exactly one)."""
    if (delay is None) == (at is None):
        raise ConfigurationError(f"{what} takes exactly one of delay= or at=")
    if at is not None:
        if not isinstance(at, datetime.datetime) or at.tzinfo is None:
            raise ConfigurationError(
                f"{what}: at= must be a timezone-aware datetime (e.g. "
                "datetime.now(timezone.utc) + timedelta(minutes=5)), not "
                f"{at!r}"
            )
        return at.timestamp()
    if isinstance(delay, datetime.timedelta):
        delay = delay.total_seconds()
    if isinstance(delay, bool) or not isinstance(delay, int | float) or not delay >= 0:
        raise ConfigurationError(
            f"{what}: delay= must be seconds >= 0 or a timedelta, not {delay!r}"
        )
    return time.time() + float(delay)


def _cron(expr: str, after: float) -> float:
    try:
        from cronsim import CronSim, CronSimError
    except ImportError:
        raise ConfigurationError(
            f"cron= needs the optional cron parser: {CRON_HINT} (or use every=timedelta(...))"
        ) from None
    start = datetime.datetime.fromtimestamp(after, tz=datetime.UTC)
    try:
        return float(next(iter(CronSim(expr, start))).timestamp())
    except CronSimError as exc:
        raise ConfigurationError(f"bad cron expression {expr!r}: {exc}") from None


def next_firing(recurrence: dict[str, Any], after: float) -> float:
    """The first firing of a schedule strictly after ``after``."""
    every = recurrence.get("every")
    if every is not None:
        start = float(recurrence.get("start", after))
        if after < start:
            return start
        step = float(every)
        k = int((after - start) // step) + 1
        while start + k * step <= after:  # float rounding: always strictly after
            k += 1
        return start + k * step
    return _cron(str(recurrence["cron"]), after)


def recurrence_of(
    *,
    every: datetime.timedelta | float | None,
    cron: str | None,
    missed: str,
    start: float,
) -> dict[str, Any]:
    """A schedule's recurrence (as its timer row keeps it), checked."""
    if (every is None) == (cron is None):
        raise ConfigurationError("schedule() takes exactly one of every= or cron=")
    if missed not in ("skip", "catch_up_once"):
        raise ConfigurationError(f"missed= must be 'skip' or 'catch_up_once', not {missed!r}")
    if every is not None:
        if isinstance(every, datetime.timedelta):
            every = every.total_seconds()
        if isinstance(every, bool) or not isinstance(every, int | float) or not every > 0:
            raise ConfigurationError(f"every= must be a positive timedelta, not {every!r}")
        return {"every": float(every), "start": start, "missed": missed}
    if not isinstance(cron, str):
        raise ConfigurationError(f"cron= must be a cron expression string, not {cron!r}")
    _cron(cron, start)  # checks the expression (and that the parser is installed)
    return {"cron": cron, "missed": missed}


def _iso(ts: float) -> str:
    return datetime.datetime.fromtimestamp(ts, tz=datetime.UTC).isoformat()


def firing_message_id(prefix: str, at: float) -> str:
    """The message id of a schedule's firing at ``at``."""
    return f"{prefix}@{_iso(at)}"


def new_row(
    cls: type[Any],
    actor_id: str,
    msg: Any,
    *,
    due: float,
    timer_id: str | None = None,
    message_id: str | None = None,
    sender: str | None = None,
    recurrence: dict[str, Any] | None = None,
) -> TimerRow:
    """A pending timer delivering ``msg`` to ``actor_id`` (of class ``cls``) at ``due``;
    its message id is ``message_id`` or ``timer:<timer id>``."""
    _codec.validate_actor_id(actor_id)
    _codec.check_attrs_instance(msg, "message")
    _codec.validate_message_id(message_id)
    body = json.dumps(_codec.to_plain(msg, "message"))
    if timer_id is None:
        timer_id = f"{actor_id}/{message_id}" if message_id else uuid.uuid4().hex
    return TimerRow(
        timer_id=timer_id,
        actor_id=actor_id,
        actor_type=_codec.type_tag(cls),
        due=due,
        message_id=message_id or f"timer:{timer_id}",
        type_tag=_codec.type_tag(type(msg)),
        body=body,
        sender=sender,
        recurrence=None if recurrence is None else json.dumps(recurrence),
        state="pending",
        created_at=time.time(),
    )


class Timers:
    """The timers of one runtime: puts, cancels, schedules and the loop that fires them."""

    def __init__(
        self,
        store: Store,
        registry: Classes,
        deliver: Deliver,
        *,
        owner: str | None,
        shared: bool,
    ) -> None:
        self.store = store
        self.registry = registry
        self._deliver = deliver
        self.owner = owner
        self.shared = shared
        self._wake = anyio.Event()
        #: timers fired by this loop (for tests and metrics)
        self.fired = 0
        self._purged_at = 0.0

    @property
    def index(self) -> TimerStore:
        """The store as a ``TimerStore`` (checked)."""
        if not self.store.capabilities.timers:
            raise ConfigurationError(
                f"{type(self.store).__name__} keeps no timers (capabilities.timers is False): "
                "send_later and schedule need a store with a timer index (memory, SQLite, "
                "PostgreSQL)"
            )
        return cast("TimerStore", self.store)

    def wake(self) -> None:
        self._wake.set()

    async def put(self, row: TimerRow, *, replace: bool = False) -> bool:
        put = await self.index.put_timer(row, replace=replace)
        self.wake()
        return put

    # -- the loop --------------------------------------------------------------------------

    async def run(self) -> None:
        """Fire due timers until cancelled; sleep until the next due time in between."""
        while True:
            wait = MAX_WAIT
            try:
                wait = await self.fire_due()
                if time.monotonic() - self._purged_at > _PURGE_EVERY:
                    self._purged_at = time.monotonic()
                    await self.index.delete_timers_before(time.time() - KEEP_ENDED)
            except Exception:
                logger.warning("actorlog: the timer loop failed; trying again", exc_info=True)
                wait = RETRY_AFTER
            with anyio.move_on_after(wait):
                await self._wake.wait()
            self._wake = anyio.Event()

    async def fire_due(self) -> float:
        """Fire every due timer; return seconds until the next look."""
        failed = False
        while True:
            now = time.time()
            due = await self.index.due_timers(now, limit=100, owner=self.owner)
            if not due:
                break
            ok = 0
            for t in due:
                if await self._fire(t, now):
                    ok += 1
                else:
                    failed = True
            if ok == 0:
                break  # all of this batch failed: try again later, not in a tight loop
        nxt = await self.index.next_due()
        wait = MAX_WAIT if nxt is None else nxt - time.time()
        if wait <= 0 or failed:
            # every due timer of ours was tried: what is still due failed, or (shared store)
            # belongs to an actor another runtime owns: look again later, not in a tight loop
            wait = max(wait, SHARED_LOOK if self.shared else RETRY_AFTER)
        if self.shared:
            wait = min(wait, SHARED_LOOK)
        return min(wait, MAX_WAIT)

    async def _fire(self, t: TimerRow, now: float) -> bool:
        """Deliver one due timer and mark it fired (or move its schedule on)."""
        cls = self.registry.actor_class(t.actor_type)
        if cls is None:
            logger.warning(
                "actorlog: timer %r is due for actor %r, whose class %r is not registered "
                "here; it waits",
                t.timer_id,
                t.actor_id,
                t.actor_type,
            )
            return False
        with _traceends.timer_fire_span(t, now) as span:
            at: float | None = t.due
            next_due: float | None = None
            if t.recurrence is not None:
                rec = json.loads(t.recurrence)
                if now - t.due > MISFIRE_GRACE:  # missed while no runtime ran
                    latest = t.due
                    while (n := next_firing(rec, latest)) <= now:
                        latest = n
                    at = latest if rec.get("missed") == "catch_up_once" else None
                    next_due = next_firing(rec, latest)
                else:
                    next_due = next_firing(rec, t.due)
            if at is None:
                span.set_attribute(ATTR.TIMER_OUTCOME, "skipped")
            else:
                mid = t.message_id if t.recurrence is None else firing_message_id(t.message_id, at)
                if t.recurrence is not None:
                    span.set_attributes({ATTR.SCHEDULE_FIRING: at, ATTR.MESSAGE_ID: mid})
                try:
                    msg = self.registry.decode_message(t.type_tag, json.loads(t.body))
                    await self._deliver(
                        cls, t.actor_id, msg, message_id=mid, sender=t.sender, want_reply=False
                    )
                except Exception as exc:
                    logger.warning(
                        "actorlog: delivering timer %r failed", t.timer_id, exc_info=True
                    )
                    span.set_attribute(ATTR.TIMER_OUTCOME, "failed")
                    set_error(span, f"{type(exc).__name__}: {exc}")
                    return False
                span.set_attribute(ATTR.TIMER_OUTCOME, "delivered")
        await self.index.fire_timer(t.timer_id, t.due, next_due)
        self.fired += 1
        return True
