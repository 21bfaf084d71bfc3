"""The timer API of ``ActorSystem`` (mixed into it): ``send_later``, ``cancel_timer``,
``schedule``, ``unschedule`` and ``timers``. The loop and the rules are in ``_timers``."""

from __future__ import annotations

import datetime
from typing import TYPE_CHECKING, Any, Literal

from .._durability import timers as _timers
from .._durability.timers import Timers
from .._effects.ctxtimers import check_ref
from .._journal import codec as _codec
from .._journal.door import admit_message
from ..store import TimerRow

if TYPE_CHECKING:
    from anyio.abc import TaskGroup

    from .._effects.ref import ActorRef
    from .._effects.registry import Registry
    from ..store import Store
    from .host import Host

__all__ = ["SystemTimers", "TimerCancel"]

#: What :meth:`SystemTimers.cancel_timer` found: ``cancelled`` (by this call, or before:
#: never delivered), ``fired`` (too late: delivered or being delivered), ``failed`` (settled
#: as undeliverable: never delivered), ``unknown`` (no such timer).
TimerCancel = Literal["cancelled", "fired", "failed", "unknown"]


class SystemTimers:
    """Durable timers and schedules of an :class:`~actorlog.ActorSystem`."""

    if TYPE_CHECKING:
        store: Store
        registry: Registry
        _host: Host

        def _check_open(self) -> TaskGroup: ...
        async def _deliver(self, *args: Any, **kwargs: Any) -> Any: ...

    def _init_timers(self, owner: str | None, shared: bool) -> None:
        self._timers = Timers(
            self.store, self.registry, self._deliver, owner=owner if shared else None, shared=shared
        )
        self._host.timers = self._timers

    def _start_timers(self, tg: TaskGroup, client: bool) -> None:
        if self.store.capabilities.timers and not client:
            tg.start_soon(self._timers.run, name="actorlog:timers")

    async def send_later(
        self,
        ref: ActorRef[Any],
        msg: Any,
        /,
        *,
        delay: float | datetime.timedelta | None = None,
        at: datetime.datetime | None = None,
        message_id: str | None = None,
    ) -> str:
        """Deliver ``msg`` to ``ref`` once, after ``delay`` seconds (or at ``at``, a
        timezone-aware datetime). The timer is durable before this returns: it fires after
        restarts of the runtime (at once if its time passed meanwhile). With ``message_id``
        the call is idempotent (the same id: the same timer, one delivery) and the message
        is logged under that id. Returns the timer id (:meth:`cancel_timer`).

        Raises:
            ConfigurationError: bad arguments, or a store without timers; nothing stored.
        """
        self._check_open()
        check_ref(ref, "send_later()")
        due = _timers.due_time(delay=delay, at=at, what="send_later()")
        letter = admit_message(self.registry, msg)
        row = _timers.new_row(ref.cls, ref.actor_id, letter, due=due, message_id=message_id)
        await self._timers.put(row)
        return row.timer_id

    async def cancel_timer(self, timer_id: str) -> TimerCancel:
        """Cancel a timer (``send_later``) before it fires. The answer is exact, also when
        the cancel races the firing (one atomic decision in the store): ``"cancelled"`` (it
        is never delivered; also if it was cancelled before), ``"fired"`` (too late: its
        message was delivered; a delivery under way in this runtime is waited for, so the
        message is logged when this returns, unless that delivery failed for a passing
        reason and is tried again), ``"failed"`` (it was settled as
        undeliverable, its state says why: never delivered) or ``"unknown"`` (no such timer,
        or its record was purged). A schedule is removed with :meth:`unschedule`."""
        self._check_open()
        _codec.validate_name(timer_id, "timer_id")
        was = await self._timers.index.cancel_timer(timer_id)
        await self._timers.settled(timer_id)  # a delivery under way here ends first
        if was is None:
            return "unknown"
        # one atomic decision with the loop's claim: "pending" was cancelled by this call
        # and is never delivered; a claimed one ("firing") was delivered (waited for above)
        if was in ("pending", "cancelled"):
            return "cancelled"
        return "failed" if was.startswith("failed") else "fired"

    async def schedule(
        self,
        name: str,
        ref: ActorRef[Any],
        msg: Any,
        /,
        *,
        every: datetime.timedelta | None = None,
        cron: str | None = None,
        missed: Literal["skip", "catch_up_once"] = "skip",
        start: datetime.datetime | None = None,
    ) -> datetime.datetime:
        """Deliver ``msg`` to ``ref`` at every firing of a recurring schedule, stored under
        ``name`` (scheduling the same name again replaces it). ``every=timedelta(...)``
        fires at ``start`` (default: now + every) and every interval after; ``cron="0 9 *
        * *"`` fires at the cron times, in UTC (needs ``pip install 'actorlog[cron]'``).
        Each firing is delivered exactly once, with message id
        ``schedule:<name>@<firing time, ISO 8601 UTC>``. Firings missed while no runtime
        ran (found more than a minute late): ``missed="skip"`` drops them;
        ``"catch_up_once"`` delivers one message for the latest of them. Returns the first
        firing time, once a firing of an earlier definition under way here is delivered.

        Raises:
            ConfigurationError: bad arguments, a bad cron expression, cron without the
                ``cron`` extra, or a store without timers; nothing stored.
        """
        self._check_open()
        _codec.validate_name(name, "schedule name")
        check_ref(ref, "schedule()")
        now = _timers.now()
        begin = now if start is None else _timers.timestamp(start, "schedule(): start=")
        rec = _timers.recurrence_of(every=every, cron=cron, missed=missed, start=begin)
        if start is None and every is not None:
            begin = rec["start"] = now + float(rec["every"])  # default: now + every
        due = begin if every is not None else _timers.next_firing(rec, now)
        row = _timers.new_row(
            ref.cls,
            ref.actor_id,
            admit_message(self.registry, msg),
            due=due,
            timer_id=_timers.schedule_id(name),
            message_id=_timers.schedule_id(name),
            recurrence=rec,
        )
        await self._timers.put(row, replace=True)
        await self._timers.settled(row.timer_id)  # a firing of the old definition ends first
        return datetime.datetime.fromtimestamp(due, tz=datetime.UTC)

    async def unschedule(self, name: str) -> bool:
        """Stop the schedule ``name``: True if it was scheduled, False if unknown. A firing
        this runtime had claimed before the call is delivered before it returns; none is
        delivered after (on PostgreSQL, one that another runtime claimed first may be).
        A cancellation point; a cancel leaves the schedule stopped if the store was."""
        self._check_open()
        _codec.validate_name(name, "schedule name")
        timer_id = _timers.schedule_id(name)
        was = await self._timers.index.cancel_timer(timer_id)
        await self._timers.settled(timer_id)  # a firing under way here is delivered first
        return was in ("pending", "firing")

    async def timers(self, actor_id: str | None = None) -> list[TimerRow]:
        """The timers and schedules in the store (of one addressee, or all), any state, by
        due time (``actorlog timers STORE`` shows the same)."""
        self._check_open()
        if actor_id is not None:
            _codec.validate_actor_id(actor_id)
        return list(await self._timers.index.list_timers(actor_id))
