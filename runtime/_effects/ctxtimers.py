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

from .._durability import timers as _timers
from .._journal import records as _records
from .._journal.door import admit_message
from .._journal.errors import ConfigurationError
from .._journal.records import EffectRecord, EntryKind
from .._tracing import traceends as _traceends
from . import tasks as _tasks
from .ref import ActorRef

if TYPE_CHECKING:
    from collections.abc import Awaitable
    from typing import TypeVar

    from .._journal.records import Recorded
    from ..store import TimerRow
    from .calls import StepHost
    from .sequencer import Sequencer
    from .tasks import Node

    R = TypeVar("R")

__all__ = ["TimerEffects", "check_ref"]


class TimerEffects:
    """``sleep``, ``sleep_until`` and ``send_later`` of :class:`~actorlog.Context`."""

    if TYPE_CHECKING:
        _cell: StepHost
        _tasks: dict[str, list[Recorded]]
        _complete: bool
        step_seq: int
        effects_from_log: int
        awaited: float

        @property
        def actor_id(self) -> str: ...
        def _expect(
            self, node: Node, index: int, kind: str, tag: str, args: Any, kwargs: Any = None
        ) -> Recorded | None: ...
        async def _guard(self, aw: Awaitable[R]) -> R: ...
        def _effect_id(self, node: Node, index: int) -> str: ...
        def _task(self, what: str) -> Node: ...

        _seq: Sequencer | None

    async def sleep(self, seconds: float | datetime.timedelta, /) -> None:
        """Wait ``seconds`` durably: the wake time is logged before the wait starts. After
        a crash the step resumes the wait with the time that is left (at once if it has
        passed); a replayed step that went on after it never waits. Other messages to this
        actor wait behind the sleeping step, as behind any step.

        Raises:
            ConfigurationError: ``seconds`` is negative, not finite, more than 100 years or
                not a number; nothing was logged and the step's effects are as before.
        """
        wait = _timers.seconds(seconds, "ctx.sleep()")  # before any state changes
        node = self._task("ctx.sleep()")
        with _tasks.outside():
            await self._sleep(node, lambda: _timers.now() + wait)

    async def sleep_until(self, when: datetime.datetime, /) -> None:
        """``sleep`` until ``when`` (a timezone-aware datetime); at once if it has passed.

        Raises:
            ConfigurationError: ``when`` is naive, not a datetime or out of the bounds
                (docs/recovery.md "Bounds"); nothing was logged.
        """
        until = _timers.timestamp(when, "ctx.sleep_until()")  # before any state changes
        node = self._task("ctx.sleep_until()")
        with _tasks.outside():
            await self._sleep(node, lambda: until)

    async def _sleep(self, node: Node, until_of: Any) -> None:
        index = node.index
        node.index += 1
        rec = self._expect(node, index, EntryKind.EFFECT, "sleep", None)
        if rec is not None:
            self.effects_from_log += 1
            if self._complete or node.index < len(self._tasks.get(node.task, ())):
                if self._seq is not None and self._seq.ordered(rec.seq):
                    await self._seq.turn(rec.seq, node)  # its wake-up, in its place
                return  # the task went on after this sleep: it is over
            if self._seq is not None:
                await self._seq.drained(node)
            until = _until(rec)
        else:
            if self._seq is not None:
                await self._seq.drained(node)
            until = float(until_of())
            self._cell.journal.write(
                EntryKind.EFFECT,
                "sleep",
                self.step_seq,
                _records.effect_payload(index=index, value={"until": until}, task=node.task),
            )
            await self._guard(self._cell.journal.flush())
        t0 = time.perf_counter()
        self._cell.sleeping = True
        try:
            remaining = until - _timers.now()
            _traceends.sleep(until, remaining, resumed=rec is not None)
            await _timers.CLOCK.sleep_until(until)
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
        # every check before any state changes (the effect index included): a refused call
        # leaves the step as if it had not been made
        check_ref(ref, "ctx.send_later()")
        due = _timers.due_time(delay=delay, at=at, what="ctx.send_later()")
        if not self._cell.timers_kept():
            raise ConfigurationError(f"the store {_timers.NO_TIMERS}")
        letter = admit_message(self._cell.registry, msg)
        row = _timers.new_row(ref.cls, ref.actor_id, letter, due=due, sender=self.actor_id)
        node = self._task("ctx.send_later()")
        with _tasks.outside():
            return await self._send_later(node, ref, row, due)

    async def _send_later(self, node: Node, ref: ActorRef[Any], row: TimerRow, due: float) -> str:
        index = node.index
        node.index += 1
        timer_id = self._effect_id(node, index)
        rec = self._expect(node, index, EntryKind.EFFECT, "send_later", None)
        if rec is not None:
            self.effects_from_log += 1
            value = rec.record.value if isinstance(rec.record, EffectRecord) else None
            if isinstance(value, dict):
                timer_id = str(value.get("timer_id", timer_id))
                due = float(value.get("due", due))
            if self._complete or node.index < len(self._tasks.get(node.task, ())):
                return timer_id  # put before the task went on
        row = row._replace(timer_id=timer_id, message_id=f"timer:{timer_id}", due=due)
        if rec is None:
            if self._seq is not None:
                await self._seq.drained(node)
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
                _records.effect_payload(index=index, value=value, task=node.task),
            )
            await self._guard(self._cell.journal.flush())
        await self._guard(self._cell.put_timer(row))
        return timer_id


def check_ref(ref: object, what: str) -> None:
    """A ``ConfigurationError`` unless ``ref`` is an ``ActorRef`` (``system.ref``,
    ``spawn``, ``ctx.spawn``)."""
    if not isinstance(ref, ActorRef):
        raise ConfigurationError(
            f"{what} takes an ActorRef (system.ref(Class, id) or the ref spawn returns) as "
            f"its first argument, not {type(ref).__name__}"
        )


def _until(rec: Recorded) -> float:
    value = rec.record.value if isinstance(rec.record, EffectRecord) else None
    until = value.get("until") if isinstance(value, dict) else None
    return float(until) if isinstance(until, int | float) else 0.0
