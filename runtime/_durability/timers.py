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
import math
import time
from collections.abc import Awaitable, Callable
from typing import Any, Literal, Protocol, cast

import anyio
import anyio.lowlevel

from .._journal import codec as _codec
from .._journal.door import Letter, admit_message
from .._journal.errors import (
    ActorFinishedError,
    ActorNotFoundError,
    ActorQuarantinedError,
    ActorStoppedError,
    ConfigurationError,
    StoreCorruptError,
    StoreError,
    WALError,
)
from .._tracing import traceends as _traceends
from .._tracing.telemetry import ATTR, set_error
from ..store import Store, TimerRow, TimerStore

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
#: Seconds before a timer that could not be delivered (for now) is tried again.
RETRY_AFTER = 1.0
#: Due timers read per look at the index.
BATCH = 100
#: Fired and cancelled timers are kept this long after their due time (so that
#: ``cancel_timer`` can answer "fired"), then deleted by the loop, at most once an hour.
KEEP_ENDED = 7 * 24 * 3600.0
_PURGE_EVERY = 3600.0

#: The range of a timer's times (docs/recovery.md "Bounds"): delays, sleeps and schedule
#: intervals are finite and at most :data:`MAX_DELAY` seconds (100 years); ``every=`` is at
#: least :data:`MIN_EVERY`; datetimes (``at=``, ``start=``, ``sleep_until``) lie in
#: [:data:`EARLIEST`, :data:`LATEST`) UTC.
MAX_DELAY = 100 * 365.25 * 86400.0
MIN_EVERY = 0.001
EARLIEST = datetime.datetime(1970, 1, 1, tzinfo=datetime.UTC)
LATEST = datetime.datetime(2200, 1, 1, tzinfo=datetime.UTC)

Missed = Literal["skip", "catch_up_once"]
Deliver = Callable[..., Awaitable[Any]]

CRON_HINT = "pip install 'actorlog[cron]'"
NO_TIMERS = (
    "keeps no timers (capabilities.timers is False): send_later and schedule need a store "
    "with a timer index (memory, SQLite, PostgreSQL)"
)


class Clock:
    """Wall time for timers and sleeps: the one place they read it. Tests replace
    ``actorlog._durability.timers.CLOCK`` (private; a fake clock) to drive timers
    without waiting."""

    def time(self) -> float:
        """Seconds since the epoch (UTC)."""
        return time.time()

    async def sleep_until(self, until: float) -> None:
        """Wait until :meth:`time` reaches ``until`` (at once if it has passed)."""
        remaining = until - self.time()
        if remaining > 0:
            await anyio.sleep(remaining)


#: The clock of every timer, schedule and sleep (see :class:`Clock`).
CLOCK = Clock()


def now() -> float:
    """The timers' wall time, through :data:`CLOCK`."""
    return CLOCK.time()


def seconds(value: object, what: str, *, minimum: float = 0.0) -> float:
    """``value`` (seconds or a ``timedelta``) as a float in [``minimum``, :data:`MAX_DELAY`],
    or a ``ConfigurationError`` naming ``what`` (inf, nan, bools and other types too)."""
    if isinstance(value, datetime.timedelta):
        # total_seconds() of timedelta.max is finite (about 8.6e13) and refused below
        value = value.total_seconds()
    if (
        isinstance(value, bool)
        or not isinstance(value, int | float)
        or not math.isfinite(value)  # inf, nan
        or not minimum <= value <= MAX_DELAY
    ):
        raise ConfigurationError(
            f"{what} takes seconds (a finite number, or a timedelta) from {minimum:g} up to "
            f"{MAX_DELAY:.0f} (100 years), not {_codec.shown(value)}"
        )
    return float(value)


def timestamp(value: object, what: str) -> float:
    """A timezone-aware datetime in [:data:`EARLIEST`, :data:`LATEST`) as seconds since the
    epoch, or a ``ConfigurationError`` naming ``what``."""
    if not isinstance(value, datetime.datetime) or value.utcoffset() is None:
        raise ConfigurationError(
            f"{what} must be a timezone-aware datetime (e.g. "
            f"datetime.now(timezone.utc) + timedelta(minutes=5)), not {_codec.shown(value)}"
        )
    try:
        ok = EARLIEST <= value < LATEST
    except (OverflowError, ValueError):  # an offset that pushes it out of datetime's range
        ok = False
    if not ok:
        raise ConfigurationError(
            f"{what} must lie from {EARLIEST.isoformat()} to {LATEST.isoformat()}, "
            f"not {_codec.shown(value)}"
        )
    return value.timestamp()


class Classes(Protocol):
    """What the timer loop needs of the system's registry (``_registry.Registry``)."""

    def actor_class(self, tag: str) -> Any: ...

    def decode_message(self, tag: str, body: Any) -> Any: ...

    def learn(self, cls: type) -> None: ...


def schedule_id(name: str) -> str:
    """The timer id of the schedule ``name``."""
    return f"schedule:{name}"


def due_time(
    *, delay: float | datetime.timedelta | None, at: datetime.datetime | None, what: str
) -> float:
    """The due time (seconds since the epoch) of ``delay=`` or ``at=`` (exactly one), within
    the bounds (:data:`MAX_DELAY`, :data:`EARLIEST`, :data:`LATEST`)."""
    if (delay is None) == (at is None):
        raise ConfigurationError(f"{what} takes exactly one of delay= or at=")
    if at is not None:
        return timestamp(at, f"{what}: at=")
    return now() + seconds(delay, f"{what}: delay=")


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
        raise ConfigurationError(f"bad cron expression {_codec.shown(expr)}: {exc}") from None


def next_firing(recurrence: dict[str, Any], after: float) -> float:
    """The first firing of a schedule strictly after ``after`` (O(1) for ``every=``)."""
    every = recurrence.get("every")
    if every is not None:
        start = float(recurrence.get("start", after))
        if after < start:
            return start
        step = float(every)
        k = int((after - start) // step) + 1
        if start + k * step <= after:  # float rounding: always strictly after
            k += 1
        return start + k * step
    return _cron(str(recurrence["cron"]), after)


def latest_firing(recurrence: dict[str, Any], first: float, upto: float) -> float:
    """The latest firing of a schedule in [``first``, ``upto``] (``first`` is a firing, due
    at or before ``upto``). Computed, not walked: catching up after any outage costs O(1)
    for ``every=`` and one backwards cron step for ``cron=``."""
    every = recurrence.get("every")
    if every is not None:
        start = float(recurrence.get("start", first))
        step = float(every)
        if upto < start:
            return first
        k = int((upto - start) // step)
        if start + k * step > upto:  # float rounding: never after ``upto``
            k -= 1
        return max(first, start + k * step)
    from cronsim import CronSim  # a cron row was put, so the parser is installed

    end = datetime.datetime.fromtimestamp(upto, tz=datetime.UTC)
    latest = float(next(iter(CronSim(str(recurrence["cron"]), end, reverse=True))).timestamp())
    return max(first, latest) if latest <= upto else first


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
    if not isinstance(missed, str) or missed not in ("skip", "catch_up_once"):
        raise ConfigurationError(
            f"missed= must be 'skip' or 'catch_up_once', not {_codec.shown(missed)}"
        )
    if every is not None:
        step = seconds(every, "every=", minimum=MIN_EVERY)
        return {"every": step, "start": start, "missed": missed}
    if not isinstance(cron, str):
        raise ConfigurationError(
            f"cron= must be a cron expression string, not {_codec.shown(cron)}"
        )
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
    letter: Letter,
    *,
    due: float,
    timer_id: str | None = None,
    message_id: str | None = None,
    sender: str | None = None,
    recurrence: dict[str, Any] | None = None,
) -> TimerRow:
    """A pending timer delivering a message past the door (``letter``) to ``actor_id`` (of
    class ``cls``) at ``due``; its message id is ``message_id`` or ``timer:<timer id>``.

    Raises:
        ConfigurationError: a bad ``actor_id`` or ``message_id``.
        EncodeError: the message does not encode within the payload limit.
    """
    _codec.validate_actor_id(actor_id)
    _codec.validate_message_id(message_id)
    body = letter.encoded()
    if timer_id is None:
        import uuid

        timer_id = f"{actor_id}/{message_id}" if message_id else uuid.uuid4().hex
    return TimerRow(
        timer_id=timer_id,
        actor_id=actor_id,
        actor_type=_codec.type_tag(cls),
        due=due,
        message_id=message_id or f"timer:{timer_id}",
        type_tag=letter.type_tag,
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
        #: timer id -> monotonic time until which a timer that failed for now is passed over
        self._later: dict[str, float] = {}
        self._firing = anyio.Lock()
        #: timer id -> set when this runtime's firing of it under way (claimed, being
        #: delivered) has finished (see :meth:`settled`)
        self._inflight: dict[str, anyio.Event] = {}

    @property
    def index(self) -> TimerStore:
        """The store as a ``TimerStore`` (checked)."""
        if not self.store.capabilities.timers:
            raise ConfigurationError(f"{type(self.store).__name__} {NO_TIMERS}")
        return cast("TimerStore", self.store)

    def wake(self) -> None:
        self._wake.set()

    async def settled(self, timer_id: str) -> None:
        """Wait until a firing of ``timer_id`` under way in this runtime (claimed, being
        delivered) has finished: its message is logged, or the delivery gave up. Called
        after the store cancelled or replaced the timer, so no firing of it starts after
        this returns: ``unschedule``/``cancel_timer``/``schedule`` return only when nothing
        of the old timer is still on its way (in this runtime). A cancellation point."""
        done = self._inflight.get(timer_id)
        if done is not None:
            await done.wait()

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
                    await self.index.delete_timers_before(now() - KEEP_ENDED)
            except Exception:
                logger.warning("actorlog: the timer loop failed; trying again", exc_info=True)
                wait = RETRY_AFTER
            with anyio.move_on_after(wait):
                await self._wake.wait()
            self._wake = anyio.Event()

    async def fire_due(self) -> float:
        """Fire every due timer; return seconds until the next look. A timer that failed
        for a passing reason (the store, a lease) is passed over for :data:`RETRY_AFTER`
        seconds, so that it never holds up the timers due after it."""
        async with self._firing:  # one pass at a time (the loop, or a test driving it)
            return await self._fire_due()

    async def _fire_due(self) -> float:
        mono = time.monotonic()
        self._later = {k: v for k, v in self._later.items() if v > mono}
        tried: set[tuple[str, float]] = set()  # (timer, due) fired in this pass
        # a pass fires what is due when it begins: a schedule whose firings take longer
        # than its period is due again after each one, and re-reading the clock here
        # would keep the pass (and, on a store that never suspends, the loop) going forever
        at = now()
        while True:
            limit = BATCH + len(self._later) + len(tried)
            due = await self.index.due_timers(at, limit=limit, owner=self.owner)
            todo = [
                t for t in due if t.timer_id not in self._later and (t.timer_id, t.due) not in tried
            ]
            if not todo:
                break  # every due timer was tried (or is passed over for now)
            for t in todo:
                tried.add((t.timer_id, t.due))
                if not await self._fire(t, at):
                    self._later[t.timer_id] = time.monotonic() + RETRY_AFTER
                await anyio.lowlevel.checkpoint()  # the rest of the runtime gets its turns
        limit = BATCH + len(self._later) + len(tried)
        came = await self.index.due_timers(now(), limit=limit, owner=self.owner)
        if any(t.timer_id not in self._later and (t.timer_id, t.due) not in tried for t in came):
            return 0.0  # came due during this pass: the next pass at once (the loop yields)
        nxt = await self.index.next_due()
        wait = MAX_WAIT if nxt is None else nxt - now()
        if wait <= 0 or self._later:
            # what is still due failed for now, or (shared store) belongs to an actor
            # another runtime owns: look again later, not in a tight loop
            wait = max(wait, SHARED_LOOK if self.shared else RETRY_AFTER)
        if self.shared:
            wait = min(wait, SHARED_LOOK)
        return min(wait, MAX_WAIT)

    async def _fire(self, t: TimerRow, at_now: float) -> bool:
        """Claim one due timer, deliver it and mark it fired (or move its schedule on); an
        undeliverable one is settled as ``failed: <reason>``. False: a passing failure,
        try again later."""
        if t.state.startswith("damaged"):  # a reader's view of a damaged row: settle it
            await self._settle_failed(t, t.state)
            return True
        cls = self.registry.actor_class(t.actor_type)
        if cls is None and self.shared:
            # another runtime sharing the store may have the class: not ours to settle
            logger.info(
                "actorlog: timer %r is due for actor %r, whose class %r is not registered "
                "here; it waits for a runtime that has it",
                t.timer_id,
                t.actor_id,
                t.actor_type,
            )
            return False
        # registered before the claim: a cancel that lost to the claim finds it and waits
        done = self._inflight[t.timer_id] = anyio.Event()
        try:
            return await self._claim_and_deliver(t, cls, at_now)
        finally:
            del self._inflight[t.timer_id]
            done.set()

    async def _claim_and_deliver(self, t: TimerRow, cls: Any, at_now: float) -> bool:
        if not await self.index.claim_timer(t.timer_id, t.due):
            return True  # cancelled, fired or moved meanwhile: nothing to deliver
        with _traceends.timer_fire_span(t, at_now) as span:
            firing: float | None = t.due
            next_due: float | None = None
            try:
                if cls is None:
                    raise _Undeliverable(f"actor class {t.actor_type!r} is not registered")
                if t.recurrence is not None:
                    rec = json.loads(t.recurrence)
                    if at_now - t.due > MISFIRE_GRACE:  # missed while no runtime ran
                        latest = latest_firing(rec, t.due, at_now)
                        firing = latest if rec.get("missed") == "catch_up_once" else None
                        next_due = next_firing(rec, latest)
                    else:
                        next_due = next_firing(rec, t.due)
                if firing is None:
                    span.set_attribute(ATTR.TIMER_OUTCOME, "skipped")
                else:
                    mid = t.message_id
                    if t.recurrence is not None:
                        mid = firing_message_id(t.message_id, firing)
                        span.set_attributes({ATTR.SCHEDULE_FIRING: firing, ATTR.MESSAGE_ID: mid})
                    msg = self.registry.decode_message(t.type_tag, json.loads(t.body))
                    letter = admit_message(self.registry, msg)
                    await self._deliver(
                        cls, t.actor_id, letter, message_id=mid, sender=t.sender, want_reply=False
                    )
                    span.set_attribute(ATTR.TIMER_OUTCOME, "delivered")
            except Exception as exc:
                span.set_attribute(ATTR.TIMER_OUTCOME, "failed")
                set_error(span, f"{type(exc).__name__}: {exc}")
                if not _undeliverable(exc):
                    logger.warning(
                        "actorlog: delivering timer %r failed; trying again",
                        t.timer_id,
                        exc_info=True,
                    )
                    return False
                await self._settle_failed(t, _reason(exc))
                return True
        await self.index.fire_timer(t.timer_id, t.due, next_due)
        self.fired += 1
        return True

    async def _settle_failed(self, t: TimerRow, reason: str) -> None:
        """Settle ``t`` as undeliverable: its state says why (``actorlog timers``) and the
        addressee's history has a ``timer_failed`` event."""
        logger.warning(
            "actorlog: timer %r for actor %r cannot be delivered: %s; it is settled as failed",
            t.timer_id,
            t.actor_id,
            reason,
        )
        if not await self.index.fail_timer(t.timer_id, t.due, reason):
            return  # cancelled or settled meanwhile
        detail = {"timer_id": t.timer_id, "message_type": t.type_tag, "reason": reason}
        try:
            await self.store.record_event(t.actor_id, "timer_failed", json.dumps(detail))
        except Exception:  # the history is best effort; the timer's state says it
            logger.warning("actorlog: recording timer %r failed", t.timer_id, exc_info=True)


class _Undeliverable(Exception):
    """A timer that can never be delivered here (its reason is the message)."""


def _undeliverable(exc: Exception) -> bool:
    """True if ``exc`` means the timer can never be delivered (settle it), False if it may
    pass (the store, a lease, a timeout: try again)."""
    if isinstance(exc, StoreError | TimeoutError | OSError) and not isinstance(
        exc, StoreCorruptError
    ):
        return False
    if isinstance(exc, ActorStoppedError) and not isinstance(exc, ActorFinishedError):
        return False  # the runtime (or the actor's cell) is stopping: not the timer's fault
    return isinstance(
        exc,
        _Undeliverable
        | ActorFinishedError
        | ActorQuarantinedError
        | ActorNotFoundError
        | ConfigurationError
        | WALError
        | StoreCorruptError
        | ValueError
        | TypeError
        | KeyError
        | OverflowError,
    )


def _reason(exc: Exception) -> str:
    text = str(exc) if isinstance(exc, _Undeliverable) else f"{type(exc).__name__}: {exc}"
    return " ".join(text.split())[:300]
