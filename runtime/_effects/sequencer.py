"""Replay ordering for a step whose effects ran in several tasks ([F18], docs/recovery.md).

Effects are matched by identity (``_tasks``), so any task may ask for its recorded effects in
any order. But code that reacts to "which finished first" (``asyncio.wait(FIRST_COMPLETED)``,
a task group whose first finisher cancels the others, a race) must see the outcomes in the
order the live run saw them. The :class:`Sequencer` hands them back in the order they were
logged: outcome *r* is released only after every earlier one was released and the task that
got it ran until it blocked again (its next effect request, or a few loop turns when it
asks for nothing more).

Ordered outcomes: the settling result (or operator decision) of each recorded tool call, by
the seq it was logged at, and the wake-up of each ``ctx.sleep`` the task went on after,
placed by its wake time among the results' ``at`` (a wake-up is not logged). A call
recorded as cancelled by the handler's own scope is, at its turn, waited on until the
handler cancels it again. Effects that are not served from the log (new ones, an in-doubt
call settled by its policy) wait until every logged outcome has been released: the live
part of a resumed step starts after its log is drained.

A step whose effects all came from the handler's own task gets no sequencer: each outcome is
at the head of the order when its task asks for it.
"""

from __future__ import annotations

import bisect
from collections.abc import Callable
from typing import NoReturn

import anyio
import anyio.lowlevel

from .._journal.records import EffectRecord, EntryKind, Recorded
from .tasks import Node

__all__ = ["GRACE_TURNS", "Sequencer"]

#: loop turns a released task gets to block again when it asks for no further effect
GRACE_TURNS = 8


class Sequencer:
    """Releases the recorded outcomes of one replayed step in log order."""

    def __init__(
        self, order: list[tuple[float, int]], effects: list[int], fail: Callable[[int], NoReturn]
    ) -> None:
        #: (place in the log, seq of the recorded effect) of each outcome, in release order
        self._order = order
        self._pos = {seq: i for i, (_, seq) in enumerate(order)}
        #: the seqs of every recorded effect of the step, and which were asked for
        self._effects = effects
        self._asked: set[int] = set()
        self._unasked = 0  # index into _effects of the first not asked for
        self._done = [False] * len(order)
        self._head = 0
        #: the task that got the last outcome and has not blocked again
        self._pending: Node | None = None
        self._changed = anyio.Event()
        self._fail = fail
        #: the seq of a recorded effect that can never be asked for (its task ended)
        self.stuck: int | None = None

    @classmethod
    def of(cls, recorded: list[Recorded], fail: Callable[[int], NoReturn]) -> Sequencer:
        """The order of ``recorded``'s outcomes: tool results by the seq they were logged
        at; each sleep's wake-up by its wake time among the results' ``at``."""
        results: list[tuple[float, int, float]] = []  # (key, effect seq, at)
        sleeps: list[tuple[float, int]] = []  # (until, effect seq)
        for rec in recorded:
            if rec.kind == EntryKind.INTENT:
                settled = next((o for o in rec.outcomes if o.settles), None)
                if settled is not None:
                    at = settled.record.at
                    results.append((float(settled.seq), rec.seq, 0.0 if at is None else at))
            elif rec.type_tag == "sleep" and isinstance(rec.record, EffectRecord):
                value = rec.record.value
                until = value.get("until") if isinstance(value, dict) else None
                if isinstance(until, int | float):
                    sleeps.append((float(until), rec.seq))
        results.sort()
        ats = [at for _, _, at in results]
        order = [(key, seq) for key, seq, _ in results]
        last = recorded[-1].seq if recorded else 0
        for until, seq in sleeps:
            # before the first result logged after it woke (after its own entry)
            i = bisect.bisect_right(ats, until)
            key = results[i][0] - 0.5 if i < len(results) else last + 0.5
            order.append((max(key, seq + 0.25), seq))
        order.sort()
        return cls(order, sorted(rec.seq for rec in recorded), fail)

    def asked(self, seq: int) -> None:
        """The recorded effect ``seq`` was asked for (matched by its identity)."""
        self._asked.add(seq)
        effects = self._effects
        moved = False
        while self._unasked < len(effects) and effects[self._unasked] in self._asked:
            self._unasked += 1
            moved = True
        if moved:
            self._notify()

    def _ready(self, i: int) -> bool:
        """Outcome ``i`` is next, and every effect logged before it was asked for again
        (live, it was asked for before this outcome was logged)."""
        if self._head != i:
            return False
        return (
            self._unasked >= len(self._effects) or self._effects[self._unasked] > self._order[i][0]
        )

    def ordered(self, seq: int) -> bool:
        return seq in self._pos

    def _notify(self) -> None:
        self._changed.set()
        self._changed = anyio.Event()

    def blocked(self, node: Node) -> None:
        """``node``'s task asks for an effect: it has blocked again."""
        if self._pending is node:
            self._pending = None
            self._notify()

    def _advance(self) -> None:
        while self._head < len(self._done) and self._done[self._head]:
            self._head += 1
        self._notify()

    def _check(self) -> None:
        if self.stuck is not None:
            self._fail(self.stuck)

    async def turn(self, seq: int, node: Node) -> None:
        """Wait until the outcome of recorded effect ``seq`` is next; then release it to
        ``node``'s task. A cancellation point."""
        self.blocked(node)
        i = self._pos[seq]
        grace = 0
        try:
            while True:
                self._check()
                if self._ready(i):
                    if self._pending is None or grace >= GRACE_TURNS:
                        break
                    grace += 1
                    await anyio.lowlevel.checkpoint()
                    continue
                await self._changed.wait()
        except BaseException:
            # cancelled before its turn (its task lost a race the handler settled first):
            # the outcome is not handed out; the ones after it must not wait for it
            if not self._done[i]:
                self._done[i] = True
                self._advance()
            raise
        self._done[i] = True
        self._pending = node
        self._advance()

    async def lost(self, seq: int, node: Node) -> NoReturn:
        """A call recorded as cancelled by the handler's own scope: wait, until that scope
        cancels it again (its place in the order is taken when it is cancelled)."""
        self.blocked(node)
        i = self._pos.get(seq)
        try:
            while True:
                self._check()
                await self._changed.wait()
        finally:
            if i is not None and not self._done[i]:
                self._done[i] = True
                self._advance()

    async def drained(self, node: Node) -> None:
        """Wait until every recorded outcome has been released (before a live effect)."""
        self.blocked(node)
        while self._head < len(self._done):
            self._check()
            await self._changed.wait()

    def task_ended(self, seq: int) -> None:
        """The recorded effect ``seq`` can no longer be asked for (its task ended, or was
        never started): the waiters stop with ``NonDeterminismError``."""
        if self.stuck is None:
            self.stuck = seq
            self._notify()
