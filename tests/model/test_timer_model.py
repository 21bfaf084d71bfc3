"""The stateful model test of timers (issue 24 "make the suite find this class"): durable
timers driven by a fake clock, crashed at every durability boundary of a timer.

In the style of ``machine.py`` (Hypothesis rules, the system on a blocking portal), separate
from it. The clock is the runtime's private seam ``actorlog._durability.timers.CLOCK``: every timer,
schedule and ``ctx.sleep`` reads it, so a rule moves time and then lets the timer loop look
(``Timers.fire_due``, the loop's own pass) instead of waiting.

Rules: ``system.send_later``; ``ctx.send_later`` from a step; ``cancel_timer``; schedules
(``every=``, both missed policies, a start in the past or the future) and ``unschedule``;
``ctx.sleep``; moving the clock (small steps and jumps past the misfire grace); a clean
restart; and a crash at each durability boundary of a timer: after ``ctx.send_later`` logged
its effect but before the timer was put, after the loop claimed a timer but before it
delivered it, and after it delivered it but before it marked it fired. A crash is simulated
in process: the store stops at the boundary (the operation never returns), the runtime is
closed without that operation finishing, and a new runtime opens the same store (the same
SQLite file; the same ``MemoryStore``).

Invariants, after every rule that lets the loop look: each timer due by now and not
cancelled was delivered exactly once, none before its due time; a timer answered
``"cancelled"`` is never delivered, one answered ``"fired"`` is; each schedule delivered
exactly the firings its missed policy gives (``skip``: a firing found more than
``MISFIRE_GRACE`` late is dropped with all missed ones; ``catch_up_once``: one message for
the latest missed firing), each once; a sleep never ends before its wake time.

``ACTORLOG_MODEL_EXAMPLES=N`` runs N examples per store (default: a short run).
"""

from __future__ import annotations

import datetime
import os
import shutil
import tempfile
from collections.abc import Awaitable, Callable
from contextlib import AbstractContextManager
from pathlib import Path
from typing import Any, TypeVar

import anyio
import anyio.from_thread
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context
from actorlog._durability import timers as timers_mod
from actorlog.store import Store, TimerRow
from actorlog.stores import MemoryStore, SqliteStore
from hypothesis import HealthCheck, settings, strategies as st
from hypothesis.stateful import (
    RuleBasedStateMachine,
    precondition,
    rule,
    run_state_machine_as_test,
)

T = TypeVar("T")
UTC = datetime.UTC
TIMEOUT = 10.0  # seconds for one rule's awaits: longer is a hang
GRACE = timers_mod.MISFIRE_GRACE
START = 1_800_000_000.0  # the fake clock's first reading (2027-01-15)


# -- the actors ---------------------------------------------------------------------------


@attrs.define
class Note:
    label: str


@attrs.define
class Get:
    pass


@attrs.define
class Later:
    label: str
    delay: float


@attrs.define
class Nap:
    label: str
    seconds: float


@attrs.define
class Labels:
    items: list[str] = attrs.Factory(list)


class Sink(Actor[Labels]):
    """Every timer delivers here; keeps the labels in the order they came."""

    name = "timer-model.Sink"
    snapshot_every = 3

    async def receive(self, ctx: Context, msg: Note | Get) -> list[str]:
        if isinstance(msg, Note):
            self.state.items.append(msg.label)
        return list(self.state.items)


class Setter(Actor[Labels]):
    """``ctx.send_later`` from a step (a ``Later``) and ``ctx.sleep`` (a ``Nap``, then a
    note to the sink that it woke)."""

    name = "timer-model.Setter"
    snapshot_every = 4

    async def receive(self, ctx: Context, msg: Later | Nap | Get) -> str:
        sink = await ctx.spawn(Sink, "sink")
        if isinstance(msg, Later):
            return await ctx.send_later(sink, Note(msg.label), delay=msg.delay)
        if isinstance(msg, Nap):
            await ctx.sleep(msg.seconds)
            await ctx.send(sink, Note(msg.label))
        return ""


ACTORS: list[type[Actor[Any]]] = [Sink, Setter]


# -- the fake clock and the crash points ----------------------------------------------------


class FakeClock(timers_mod.Clock):
    """Time moves only when the test says so; sleeps wake when it passes their time."""

    def __init__(self) -> None:
        self.now = START
        self._moved: anyio.Event | None = None

    def time(self) -> float:
        return self.now

    async def sleep_until(self, until: float) -> None:
        while self.now < until:
            if self._moved is None:
                self._moved = anyio.Event()
            await self._moved.wait()

    def advance(self, seconds: float) -> None:
        """Move the clock (in the event loop's thread)."""
        self.now += seconds
        moved, self._moved = self._moved, None
        if moved is not None:
            moved.set()


class Trap:
    """A durability boundary at which the store stops (never returns): a crash there."""

    def __init__(self) -> None:
        self.armed: str | None = None
        self.hit: str | None = None

    def take(self, point: str) -> bool:
        if self.armed != point:
            return False
        self.armed, self.hit = None, point
        return True


TRAP = Trap()


class _TrappedTimers:
    """The timer methods of a store, with :data:`TRAP` at each boundary."""

    async def put_timer(self, timer: TimerRow, *, replace: bool = False) -> bool:
        if timer.sender is not None and TRAP.take("logged"):
            await anyio.sleep_forever()  # ctx.send_later logged its effect; never put
        return await super().put_timer(timer, replace=replace)  # type: ignore[misc, no-any-return]  # a mixin over a store

    async def claim_timer(self, timer_id: str, due: float) -> bool:
        claimed: bool = await super().claim_timer(timer_id, due)  # type: ignore[misc]  # a mixin over a store
        if claimed and TRAP.take("claimed"):
            await anyio.sleep_forever()  # claimed, never delivered
        return claimed

    async def fire_timer(self, timer_id: str, due: float, next_due: float | None) -> bool:
        if TRAP.take("delivered"):
            await anyio.sleep_forever()  # delivered, never marked
        return await super().fire_timer(timer_id, due, next_due)  # type: ignore[misc, no-any-return]  # a mixin over a store


class TrappedMemory(_TrappedTimers, MemoryStore):
    pass


class TrappedSqlite(_TrappedTimers, SqliteStore):
    pass


# -- the model ------------------------------------------------------------------------------


@attrs.define
class Timer:
    label: str
    due: float
    timer_id: str | None = None  # None: its step has not put it yet (a crash was there)
    answer: str | None = None  # what cancel_timer said


@attrs.define
class Schedule:
    name: str
    every: float
    missed: str
    next_due: float
    firings: list[float] = attrs.Factory(list)  # the firings that must have been delivered
    stopped: bool = False

    def settle(self, now: float) -> None:
        """The firings due by ``now``, per the documented missed policy."""
        while not self.stopped and self.next_due <= now:
            if now - self.next_due > GRACE:  # missed: found more than the grace late
                k = int((now - self.next_due) // self.every)
                latest = self.next_due + k * self.every
                if latest > now:
                    latest -= self.every
                if self.missed == "catch_up_once":
                    self.firings.append(latest)
                self.next_due = latest + self.every
            else:
                self.firings.append(self.next_due)
                self.next_due += self.every


class TimerMachine(RuleBasedStateMachine):
    store_kind = "memory"
    base_dir: str | None = None

    def __init__(self) -> None:
        super().__init__()
        self.clock = FakeClock()
        self._saved_clock = timers_mod.CLOCK
        timers_mod.CLOCK = self.clock
        TRAP.armed = TRAP.hit = None
        self.tmp = tempfile.mkdtemp(prefix="actorlog-timer-model-", dir=self.base_dir)
        self.memory = TrappedMemory()
        self._portal_cm = anyio.from_thread.start_blocking_portal("asyncio")
        self.portal = self._portal_cm.__enter__()
        self._system_cm: AbstractContextManager[ActorSystem] | None = None
        self.system: ActorSystem | None = None
        self.timers: dict[str, Timer] = {}
        self.schedules: dict[str, Schedule] = {}
        self.naps: dict[str, float] = {}  # label -> earliest wake time
        self.counter = 0
        self.start()

    # -- plumbing ------------------------------------------------------------------------

    def run(self, fn: Callable[[], Awaitable[T]]) -> T:
        async def bounded() -> T:
            with anyio.fail_after(TIMEOUT):
                return await fn()

        return self.portal.call(bounded)

    def store(self) -> Store:
        if self.store_kind == "memory":
            return self.memory
        return TrappedSqlite(Path(self.tmp) / "timers.db")

    def start(self) -> None:
        system = ActorSystem(self.store(), actors=ACTORS, shutdown_grace=0)
        self._system_cm = self.portal.wrap_async_context_manager(system)
        self.system = self._system_cm.__enter__()

    def stop(self) -> None:
        cm, self._system_cm, self.system = self._system_cm, None, None
        if cm is not None:
            cm.__exit__(None, None, None)

    def teardown(self) -> None:
        try:
            self.stop()
            self._portal_cm.__exit__(None, None, None)
        finally:
            timers_mod.CLOCK = self._saved_clock
            TRAP.armed = None
            shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def sys(self) -> ActorSystem:
        assert self.system is not None
        return self.system

    def fresh(self, prefix: str) -> str:
        self.counter += 1
        return f"{prefix}{self.counter}"

    def look(self) -> None:
        """Let the timer loop look (its own pass, under its lock), then check."""

        async def go() -> None:
            await self.sys._timers.fire_due()

        self.run(go)
        self.check()

    def delivered(self) -> tuple[list[str], list[str | None]]:
        """The sink's labels (its state) and the message ids of its log."""

        async def go() -> tuple[list[str], list[str | None]]:
            labels = await self.sys.ref(Sink, "sink").ask(Get())
            rows = await self.sys.store.read("sink", kinds=["message"])
            return labels, [r.message_id for r in rows]

        return self.run(go)

    def check(self) -> None:
        labels, ids = self.delivered()
        now = self.clock.now
        once = [x for x in labels if x not in self.schedules]  # a schedule's name recurs
        assert len(once) == len(set(once)), f"a label delivered twice: {labels}"
        got = set(labels)
        for t in self.timers.values():
            if t.answer == "cancelled":
                assert t.label not in got, f"{t.label} answered cancelled and was delivered"
            elif t.answer == "fired":
                assert t.label in got, f"{t.label} answered fired and was never delivered"
            elif t.timer_id is not None and t.due <= now:
                assert t.label in got, f"{t.label} due at {t.due} not delivered by {now}"
            if t.due > now:
                assert t.label not in got, f"{t.label} delivered before its due time"
        for label, wake in self.naps.items():
            if label in got:
                assert wake <= now, f"{label} woke before its time"
        for s in self.schedules.values():
            s.settle(now)
            prefix = f"schedule:{s.name}@"
            fired = [m for m in ids if m is not None and m.startswith(prefix)]
            assert len(fired) == len(set(fired)), f"a firing of {s.name} delivered twice"
            want = [timers_mod.firing_message_id(f"schedule:{s.name}", f) for f in s.firings]
            assert sorted(fired) == sorted(want), (s.name, s.missed, fired, want)
            assert labels.count(s.name) == len(want)

    # -- rules ---------------------------------------------------------------------------

    @rule(delay=st.sampled_from([0.0, 1.0, 5.0, 30.0, 120.0]))
    def send_later(self, delay: float) -> None:
        label = self.fresh("t")

        async def go() -> str:
            return await self.sys.send_later(
                self.sys.ref(Sink, "sink"), Note(label), delay=delay, message_id=label
            )

        timer_id = self.run(go)
        self.timers[label] = Timer(label, self.clock.now + delay, timer_id)

    @rule(delay=st.sampled_from([0.0, 2.0, 45.0]))
    def ctx_send_later(self, delay: float) -> None:
        label = self.fresh("c")

        async def go() -> str:
            return str(await self.sys.ref(Setter, "setter").ask(Later(label, delay)))

        due = self.clock.now + delay
        self.timers[label] = Timer(label, due, self.run(go))

    @precondition(lambda self: any(t.answer is None and t.timer_id for t in self.timers.values()))
    @rule(i=st.integers(0, 1000))
    def cancel(self, i: int) -> None:
        open_ = [t for _, t in sorted(self.timers.items()) if t.answer is None and t.timer_id]
        t = open_[i % len(open_)]
        assert t.timer_id is not None

        async def go() -> str:
            assert t.timer_id is not None
            return await self.sys.cancel_timer(t.timer_id)

        answer = self.run(go)
        assert answer in ("cancelled", "fired"), answer
        if t.due > self.clock.now:
            assert answer == "cancelled", f"{t.label} not due yet, but {answer}"
        t.answer = answer

    @rule(
        every=st.sampled_from([7.0, 25.0, 90.0]),
        missed=st.sampled_from(["skip", "catch_up_once"]),
        offset=st.sampled_from([-1000.0, -100.0, -30.0, 0.0, 10.0]),
    )
    def schedule(self, every: float, missed: str, offset: float) -> None:
        name = self.fresh("s")
        start = self.clock.now + offset

        async def go() -> None:
            await self.sys.schedule(
                name,
                self.sys.ref(Sink, "sink"),
                Note(name),
                every=datetime.timedelta(seconds=every),
                start=datetime.datetime.fromtimestamp(start, tz=UTC),
                missed=missed,  # type: ignore[arg-type]  # drawn from the two policies
            )

        self.run(go)
        # the first due time is the given start (a start in the past is late already)
        self.schedules[name] = Schedule(name, every, missed, next_due=start)
        self.look()  # the loop may look at once (the put wakes it): the model does too

    @precondition(lambda self: any(not s.stopped for s in self.schedules.values()))
    @rule(i=st.integers(0, 1000))
    def unschedule(self, i: int) -> None:
        live = [s for _, s in sorted(self.schedules.items()) if not s.stopped]
        s = live[i % len(live)]
        self.look()  # what is due by now is delivered first (the model settles it too)

        async def go() -> bool:
            return await self.sys.unschedule(s.name)

        assert self.run(go)
        s.stopped = True

    @rule(seconds=st.sampled_from([0.0, 3.0, 40.0]))
    def sleep(self, seconds: float) -> None:
        label = self.fresh("z")

        async def go() -> None:
            await self.sys.ref(Setter, "sleeper").send(Nap(label, seconds))

        self.run(go)
        self.naps[label] = self.clock.now + seconds

    @rule(seconds=st.sampled_from([0.5, 2.0, 10.0, 30.0, 61.0, 200.0, 5000.0]))
    def advance(self, seconds: float) -> None:
        self.portal.call(self.clock.advance, seconds)
        self.look()

    @rule()
    def restart(self) -> None:
        self.stop()
        self.start()
        self.look()

    @rule(point=st.sampled_from(["logged", "claimed", "delivered"]))
    def crash(self, point: str) -> None:
        """Stop the store at a durability boundary, close the runtime there, open again."""
        label = self.fresh("k")
        TRAP.armed = point
        if point == "logged":  # in a ctx.send_later, between its effect and the put
            due = self.clock.now + 1.0

            async def go() -> None:
                await self.sys.ref(Setter, "setter").send(Later(label, 1.0))

            self.run(go)
            self.timers[label] = Timer(label, due)  # its id is the step's: known on replay
        else:  # in the loop's firing of a due timer (the put wakes the loop)
            self.send_later_now(label)

        async def hit() -> None:
            while TRAP.hit != point:
                await anyio.sleep(0.005)

        self.run(hit)
        TRAP.hit = None
        self.stop()
        self.start()
        if point == "logged":
            t = self.timers[label]

            async def replayed() -> str:
                # the step's replay puts the timer; its id is the step's (timers() knows it)
                await self.sys.ref(Setter, "setter").ask(Get())
                rows = [r for r in await self.sys.timers("sink") if r.body.find(label) >= 0]
                assert len(rows) == 1, rows
                return rows[0].timer_id

            t.timer_id = self.run(replayed)
        self.look()

    def send_later_now(self, label: str) -> None:
        async def go() -> str:
            return await self.sys.send_later(
                self.sys.ref(Sink, "sink"), Note(label), delay=0, message_id=label
            )

        self.timers[label] = Timer(label, self.clock.now, self.run(go))


def _settings(examples: int) -> settings:
    given = os.environ.get("ACTORLOG_MODEL_EXAMPLES")
    return settings(
        max_examples=int(given) if given else examples,
        stateful_step_count=20,
        deadline=None,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
        print_blob=True,
    )


@pytest.mark.timeout(600)
def test_timer_model_on_memory_store() -> None:
    run_state_machine_as_test(TimerMachine, settings=_settings(12))


@pytest.mark.timeout(600)
def test_timer_model_on_sqlite_file(tmp_path: Path) -> None:
    class OnSqlite(TimerMachine):
        store_kind = "sqlite"
        base_dir = str(tmp_path)

    run_state_machine_as_test(OnSqlite, settings=_settings(8))
