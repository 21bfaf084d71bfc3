"""The durable waits of a step's ``Context``: ``sleep``, ``sleep_until`` and ``send_later``
(mixed into ``Context``; FORMAT.md [F5] effect tags ``sleep`` and ``send_later``).

``sleep`` logs its wake time before it starts waiting. A step interrupted during the wait
(a crash, a shutdown) is finished after recovery by replaying it: the logged ``sleep`` is its
last effect, so the replay waits for the time that is left (at once if it has passed). A
replayed step that went on after the sleep never waits. ``send_later`` logs the timer
(addressee, message type, timer id, due time) and then puts it into the store's timer index;
a replay of an interrupted step puts it again (a no-op if it is there, also once fired).
"""

from __future__ import annotations

import datetime
import time
from typing import TYPE_CHECKING, Any

import anyio

from . import _codec, _records, _timers, _traceends
from ._errors import ConfigurationError
from ._records import EffectRecord, EntryKind

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from typing import TypeVar

    from ._calls import StepHost
    from ._records import Recorded
    from ._ref import ActorRef

    R = TypeVar("R")

__all__ = ["TimerEffects"]


class TimerEffects:
    """``sleep``, ``sleep_until`` and ``send_later`` of :class:`~actorlog.Context`."""

    if TYPE_CHECKING:
        _cell: StepHost
        _index: int
        _recorded: list[Recorded]
        _complete: bool
        step_seq: int
        effects_from_log: int
        awaited: float

        @property
        def actor_id(self) -> str: ...
        def _expect(
            self, index: int, kind: str, tag: str, args: Any, kwargs: Any = None
        ) -> Recorded | None: ...
        async def _guard(self, aw: Awaitable[R]) -> R: ...
        def _effect_id(self, index: int) -> str: ...

    async def sleep(self, seconds: float | datetime.timedelta, /) -> None:
        """Wait ``seconds`` durably: the wake time is logged before the wait starts. After
        a crash the step resumes the wait with the time that is left (at once if it has
        passed); a replayed step that went on after it never waits. Other messages to this
        actor wait behind the sleeping step, as behind any step.

        Raises:
            ConfigurationError: ``seconds`` is negative or not a number; nothing was logged.
        """
        if isinstance(seconds, datetime.timedelta):
            seconds = seconds.total_seconds()
        if isinstance(seconds, bool) or not isinstance(seconds, int | float) or not seconds >= 0:
            raise ConfigurationError(
                f"ctx.sleep() takes seconds >= 0 or a timedelta, not {seconds!r}"
            )
        await self._sleep(lambda: time.time() + float(seconds))

    async def sleep_until(self, when: datetime.datetime, /) -> None:
        """``sleep`` until ``when`` (a timezone-aware datetime); at once if it has passed."""
        if not isinstance(when, datetime.datetime) or when.tzinfo is None:
            raise ConfigurationError(
                f"ctx.sleep_until() takes a timezone-aware datetime, not {when!r}"
            )
        await self._sleep(when.timestamp)

    async def _sleep(self, until_of: Any) -> None:
        index = self._index
        self._index += 1
        rec = self._expect(index, EntryKind.EFFECT, "sleep", None)
        if rec is not None:
            self.effects_from_log += 1
            if self._complete or self._index < len(self._recorded):
                return  # the step went on after this sleep: it is over
            until = _until(rec)
        else:
            until = float(until_of())
            self._cell.journal.write(
                EntryKind.EFFECT,
                "sleep",
                self.step_seq,
                _records.effect_payload(index=index, value={"until": until}),
            )
            await self._guard(self._cell.journal.flush())
        t0 = time.perf_counter()
        self._cell.sleeping = True
        try:
            remaining = until - time.time()
            _traceends.sleep(until, remaining, resumed=rec is not None)
            if remaining > 0:
                await anyio.sleep(remaining)
        finally:
            self._cell.sleeping = False
            self.awaited += time.perf_counter() - t0

    async def send_later(
        self,
        ref: ActorRef[Any],
        msg: Any,
        /,
        *,
        delay: float | datetime.timedelta | None = None,
        at: datetime.datetime | None = None,
    ) -> str:
        """Send ``msg`` to ``ref`` after ``delay`` seconds (or at ``at``, a timezone-aware
        datetime), exactly once: the timer is logged as an effect of this step, then kept
        in the store's timer index until it fires, through restarts of this actor, the
        receiver and the runtime. Returns the timer id (``ActorSystem.cancel_timer``).

        Raises:
            ConfigurationError: bad ``delay``/``at``, or the store keeps no timers; nothing
                was logged.
        """
        _codec.check_attrs_instance(msg, "message")
        _codec.to_plain(msg, "message")
        due = _timers.due_time(delay=delay, at=at, what="ctx.send_later()")
        index = self._index
        self._index += 1
        timer_id = self._effect_id(index)
        rec = self._expect(index, EntryKind.EFFECT, "send_later", None)
        if rec is not None:
            self.effects_from_log += 1
            value = rec.record.value if isinstance(rec.record, EffectRecord) else None
            if isinstance(value, dict):
                timer_id = str(value.get("timer_id", timer_id))
                due = float(value.get("due", due))
            if self._complete or self._index < len(self._recorded):
                return timer_id  # put before the step went on
        row = _timers.new_row(
            ref.cls, ref.actor_id, msg, due=due, timer_id=timer_id, sender=self.actor_id
        )
        if rec is None:
            value = {
                "target": ref.actor_id,
                "message_type": row.type_tag,
                "timer_id": timer_id,
                "due": due,
            }
            self._cell.journal.write(
                EntryKind.EFFECT,
                "send_later",
                self.step_seq,
                _records.effect_payload(index=index, value=value),
            )
            await self._guard(self._cell.journal.flush())
        await self._guard(self._cell.put_timer(row))
        return timer_id


def _until(rec: Recorded) -> float:
    value = rec.record.value if isinstance(rec.record, EffectRecord) else None
    until = value.get("until") if isinstance(value, dict) else None
    return float(until) if isinstance(until, int | float) else 0.0
