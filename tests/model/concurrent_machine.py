"""The stateful model of concurrent effects inside a step (issue 25, "the proof").

In the style of ``machine.py`` and ``test_timer_model.py``: Hypothesis rules, the system on
a blocking portal. A step of the model agent (``agent._concurrent``) makes its tool calls
from the tasks of a task group: a fan-out of N tasks (each a read and a write that depends
on it), nested groups, the event loop's own (``asyncio.gather`` and ``asyncio.TaskGroup``
on asyncio, a nursery on trio), a race (the first to return cancels the others) and a
deadline (``anyio.move_on_after``) around a call (a read, or a write that escalates when in
doubt: ``paydeadline``). Hypothesis picks the tools' latencies, so
the calls finish in a different order from one example to the next.

A step may be crashed at a durability boundary of its calls: the store stops at the Nth
append carrying an intent (after its commit), a result (before or after its commit), or the
step (before or after), or a tool stops as it starts; from then on nothing more is written
(the process is as good as dead), the runtime is closed and a new one opens the same store
(the same SQLite file; the same ``MemoryStore``), and the message is asked again.

Predictions, checked after every step:

* the reply is the one the shape gives (fan-out, nested, native: fixed by the call ids;
  race: the contestant whose value was logged first; deadline: the value if its result was
  logged, ``timed out`` if the call was settled otherwise), after a crash too: no
  ``NonDeterminismError``, no quarantine, every call's recorded outcome is what the
  recovered step got;
* a call runs again only if a crash left its intent open (at most once per such crash):
  no completed call is run twice;
* every call of a completed step is settled in the log (a race's losers and a call past
  its deadline are recorded, as cancelled unless they returned first; switch
  ``conc_losers_settled``, see ``machine.BROKEN_ON_MAIN``); a plain write past its
  deadline (``paydeadline``: cancelled while it ran, or, after a crash left it in doubt,
  while the recovered step waited for an operator's ruling) is recorded in doubt, for a
  ruling, unless its tool never started;
* the state a fresh system recovers from a copy of the store is the live one.
"""

from __future__ import annotations

import copy
import os
import shutil
import sqlite3
import tempfile
from collections import Counter
from collections.abc import Awaitable, Callable, Sequence
from contextlib import AbstractContextManager
from typing import TypeVar

import anyio
import anyio.from_thread
from actorlog import ActorSystem, HandlerError, InDoubtError, StoreUnavailableError, ops
from actorlog.store import EntryRow, Store
from actorlog.stores import MemoryStore, SqliteStore
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, invariant, precondition, rule

from .agent import WORLD, Agent, Op, Peek
from .machine import STATS, on

T = TypeVar("T")
#: the statuses of a call with no outcome in the log (ops.history)
OPEN = ("in_doubt", "auto", "retry_authorized", "retry_interrupted")
TIMEOUT = 10.0  # seconds for one rule's awaits: longer is a hang (a defect)

#: where a step is crashed: ``<entry kind>_<before|after>`` of an append, or ``tool``
CRASH_POINTS = (
    "intent_after",
    "result_before",
    "result_after",
    "step_before",
    "step_after",
    "tool",
)


class Crash:
    """A durability boundary at which the process dies: armed with a point and an N; once
    hit, every later append blocks forever (nothing more is written), as does the tool."""

    def __init__(self) -> None:
        self.point: str | None = None
        self.nth = 0
        self.down = False
        #: the dead runtime is being closed: blocked appends fail (the journal shields its
        #: commits from cancellation, so a blocked one would hold the close forever)
        self.closing = False

    def arm(self, point: str, nth: int) -> None:
        self.point, self.nth, self.down, self.closing = point, nth, False, False

    def reset(self) -> None:
        self.point, self.nth, self.down, self.closing = None, 0, False, False

    def take(self, point: str) -> bool:
        if self.point != point or self.down:
            return False
        self.nth -= 1
        if self.nth > 0:
            return False
        self.down = True
        STATS[f"conc_crash_{point}"] += 1
        return True

    async def die_if(self, point: str) -> None:
        if self.take(point) or self.down:
            await self.dead()

    async def dead(self) -> None:
        """Never return: block until the dead runtime is closed, then fail."""
        while not self.closing:
            await anyio.sleep(0.002)
        raise StoreUnavailableError("the process is dead (a simulated crash)")


CRASH = Crash()


async def _tool_started(call: str) -> None:
    await CRASH.die_if("tool")


class _Trapped:
    """A store whose appends stop at :data:`CRASH`'s boundary (a mixin over a store)."""

    async def append(self, actor_id: str, expected_last_seq: int, rows: Sequence[EntryRow]) -> None:
        kinds = {r.kind for r in rows}
        if CRASH.down:
            await CRASH.dead()
        for kind in kinds & {"result", "step"}:
            await CRASH.die_if(f"{kind}_before")
        await super().append(actor_id, expected_last_seq, rows)  # type: ignore[misc]  # a mixin over a store
        for kind in kinds & {"intent", "result", "step"}:
            await CRASH.die_if(f"{kind}_after")


class TrappedMemory(_Trapped, MemoryStore):
    pass


class TrappedSqlite(_Trapped, SqliteStore):
    pass


def expected_reply(shape: str, lat: list[int], backend: str) -> str | None:
    """The reply of a shape fixed by its call ids (None: it depends on timing)."""
    if shape == "fanout":
        n = max(2, len(lat) // 2)
        return "fan:" + ",".join(f"{i}B-{i}A" for i in range(n))
    if shape == "nested":
        return "nest:" + ",".join(f"{i}.{j}" for i in range(2) for j in ("0", "1", "END"))
    if shape == "native":
        if backend == "trio":
            return "native:n0,n1,n2"
        return "native:g0,g1,g2,T0,T1"
    return None


class ConcurrentMachine(RuleBasedStateMachine):
    """Set :attr:`store_kind` (``memory`` or ``sqlite``) and :attr:`backend` in a subclass."""

    store_kind = "memory"
    backend = "asyncio"
    base_dir: str | None = None

    def __init__(self) -> None:
        super().__init__()
        WORLD.reset()
        WORLD.on_start = _tool_started
        CRASH.reset()
        self.tmp = tempfile.mkdtemp(prefix="actorlog-conc-model-", dir=self.base_dir)
        self.path = os.path.join(self.tmp, "agents.db")
        self.memory = TrappedMemory()
        self._portal_cm = anyio.from_thread.start_blocking_portal(self.backend)
        self.portal = self._portal_cm.__enter__()
        self._system_cm: AbstractContextManager[ActorSystem] | None = None
        self.system: ActorSystem | None = None
        self.counter = 0
        #: call id -> how many times it may have run (1 + crashes that left it open)
        self.allowed: Counter[str] = Counter()
        #: tag -> the reply the model holds for that message
        self.replies: dict[str, str] = {}
        self.order: list[str] = []  # tags in the order their steps were sent
        self.actor_id = "c0"

    # -- plumbing ------------------------------------------------------------------------

    def run(self, fn: Callable[[], Awaitable[T]], what: str) -> T:
        STATS[what.split(" ")[0]] += 1

        async def bounded() -> T:
            try:
                with anyio.fail_after(TIMEOUT):
                    return await fn()
            except TimeoutError as exc:
                raise AssertionError(f"{what}: no answer in {TIMEOUT} s (a hang)") from exc

        return self.portal.call(bounded)

    def store(self) -> Store:
        if self.store_kind == "memory":
            return self.memory
        return TrappedSqlite(self.path)

    def start(self) -> None:
        system = ActorSystem(self.store(), actors=[Agent], shutdown_grace=0)
        self._system_cm = self.portal.wrap_async_context_manager(system)
        self.system = self._system_cm.__enter__()
        self.run(lambda: self.sys.spawn(Agent, self.actor_id), "spawn")

    def stop(self) -> None:
        cm, self._system_cm, self.system = self._system_cm, None, None
        if cm is not None:
            cm.__exit__(None, None, None)

    def teardown(self) -> None:
        try:
            self.stop()
            self._portal_cm.__exit__(None, None, None)
        finally:
            WORLD.on_start = None
            CRASH.reset()
            shutil.rmtree(self.tmp, ignore_errors=True)

    @property
    def sys(self) -> ActorSystem:
        assert self.system is not None
        return self.system

    def history(self) -> ops.History:
        async def go() -> ops.History:
            if self.store_kind == "memory":
                return await ops.history(self.memory, self.actor_id)
            reader = SqliteStore(self.path, read_only=True)
            await reader.open()
            try:
                return await ops.history(reader, self.actor_id)
            finally:
                await reader.close()

        return self.run(go, "history")

    def ask(self, op: Op | Peek, message_id: str) -> str:
        async def go() -> str:
            ref = self.sys.ref(Agent, self.actor_id)
            while True:
                try:
                    reply = await ref.ask(op, message_id=message_id)
                    break
                except HandlerError as exc:
                    raise AssertionError(f"{message_id}: the step failed: {exc.message}") from exc
                except InDoubtError:
                    # a recovered paydeadline step waits for an operator until its deadline
                    # cancels the call; then the step completes
                    STATS["conc_in_doubt_ask"] += 1
                    await anyio.sleep(0.005)
            assert isinstance(reply, str), reply
            return reply

        try:
            return self.run(go, f"ask {message_id}")
        except Exception:
            status = self.sys.status(self.actor_id)
            if status == "quarantined":
                raise AssertionError(
                    f"{self.actor_id} quarantined: {self.sys.error(self.actor_id)!r}"
                ) from None
            raise

    # -- rules ---------------------------------------------------------------------------

    @initialize()
    def setup(self) -> None:
        self.start()

    @rule(
        shape=st.sampled_from(["fanout", "nested", "native", "race", "timeout", "paydeadline"]),
        lat=st.lists(st.sampled_from([0, 1, 5, 10, 20, 40, 60]), min_size=1, max_size=6),
        crash=st.none() | st.tuples(st.sampled_from(CRASH_POINTS), st.integers(1, 4)),
    )
    def step(self, shape: str, lat: list[int], crash: tuple[str, int] | None) -> None:
        """A concurrent step, maybe crashed at a boundary (then recovered and asked again)."""
        self.counter += 1
        tag = f"s{self.counter}"
        op = Op(tag, "conc", f"{shape}:{','.join(map(str, lat))}")
        STATS[f"conc_{shape}"] += 1
        if crash is None:
            reply = self.ask(op, tag)
            self._settle(tag, shape, lat, reply, None)
            return
        CRASH.arm(*crash)
        ref = self.sys.ref(Agent, self.actor_id)
        got: list[str] = []

        async def go() -> None:
            async with anyio.create_task_group() as tg:

                async def asker() -> None:
                    reply = await ref.ask(op, message_id=tag)
                    assert isinstance(reply, str)
                    got.append(reply)
                    tg.cancel_scope.cancel()

                tg.start_soon(asker)
                while not CRASH.down:
                    await anyio.sleep(0.002)
                tg.cancel_scope.cancel()

        self.run(go, f"crash {crash[0]} {tag}")
        if got:  # the step ended before the boundary was crossed N times: no crash
            CRASH.reset()
            self._settle(tag, shape, lat, got[0], None)
            return
        at_crash = self.history()  # nothing more is written: what the crash left
        CRASH.closing = True
        try:
            self.stop()
        except Exception:  # what the dead runtime saw on its way down is not the model's
            self.system = None
        CRASH.reset()
        self.start()
        reply = self.ask(op, tag)
        self._settle(tag, shape, lat, reply, at_crash)

    @precondition(lambda self: bool(self.order))
    @rule()
    def restart(self) -> None:
        """A clean restart: recovery replays the steps (none runs a tool again)."""
        self.stop()
        self.start()

    # -- predictions ---------------------------------------------------------------------

    def _settle(
        self, tag: str, shape: str, lat: list[int], reply: str, at_crash: ops.History | None
    ) -> None:
        h = self.history()
        (step,) = [s for s in h.steps if s.message_id == tag]
        assert step.status == "ok", f"{tag}: step {step.status} {step.error}"
        calls = {c.args[1]: c for c in step.calls}
        for c in step.calls:
            if on("conc_losers_settled"):
                assert c.status not in OPEN, f"{tag}: unsettled call {c}"
            elif c.status in OPEN:  # the defect the switch waits for: every recovery (and
                self.allowed[f"{tag}/{c.args[1]}"] += 1000  # replay on a copy) re-runs it
            self.allowed[f"{tag}/{c.args[1]}"] += 1  # its first run
        if at_crash is not None:
            (before,) = [s for s in at_crash.steps if s.message_id == tag]
            for c in before.calls:
                if c.status in OPEN:
                    self.allowed[f"{tag}/{c.args[1]}"] += 1  # open at the crash: may rerun
                else:  # settled before the crash: the recovered step got that outcome
                    now = calls[c.args[1]]
                    assert (now.status, now.value) == (c.status, c.value), (tag, c, now)
            STATS["conc_recovered"] += 1
        want = expected_reply(shape, lat, self.backend)
        if want is not None:
            assert reply == want, f"{tag} ({shape} {lat}): reply {reply!r}, expected {want!r}"
        elif shape == "race":
            first = min(
                (c for c in step.calls if c.status == "ok"), key=lambda c: c.result_seq or 0
            )
            assert reply == f"won:{first.value}", (
                f"{tag} (race {lat}): reply {reply!r}, but {first.args[1]} was logged first: "
                f"{[(c.args[1], c.status, c.result_seq) for c in step.calls]}"
            )
        else:
            (call,) = step.calls
            expect = f"in time:{call.value}" if call.status == "ok" else "timed out"
            assert reply == expect, f"{tag} ({shape} {lat}): reply {reply!r}, call {call}"
            if shape == "paydeadline" and call.status != "ok":
                # a plain write the deadline cancelled while it ran, or while it waited for
                # an operator after a crash: in doubt, for a ruling (never plain cancelled)
                assert call.settled_by == "cancelled", (tag, call)
                ran = "did not run" not in str((call.error or {}).get("message"))
                assert call.in_doubt == ran and call.needs_ruling == ran, (tag, call)
                STATS["conc_write_in_doubt"] += 1
        self.replies[tag] = reply
        self.order.append(tag)

    @invariant()
    def no_call_ran_twice(self) -> None:
        runs = Counter(call for _, call in WORLD.runs)
        over = {c: (n, self.allowed[c]) for c, n in runs.items() if n > self.allowed[c]}
        assert not over, f"calls run more often than crashes allow (runs, allowed): {over}"

    @invariant()
    def live_equals_replay(self) -> None:
        """The state (and every recorded reply) a fresh system recovers from a copy of the
        store is the live one."""
        if self.system is None or not self.order:
            return
        live = self.ask(Peek(), f"peek{self.counter}-{len(WORLD.runs)}")
        expected = "|".join(f"{t}={self.replies[t]}" for t in self.order)
        assert live == expected, f"live state {live!r}, model {expected!r}"
        copied = self._copy()
        runs = len(WORLD.runs)

        async def go() -> str:
            async with ActorSystem(
                copied, actors=[Agent], shutdown_grace=0, recover_on_start=False
            ) as fresh:
                ref = await fresh.spawn(Agent, self.actor_id)
                state = await ref.ask(Peek(), message_id=f"replay{self.counter}")
                assert isinstance(state, str)
                return state

        recovered = self.run(go, "replay on a copy")
        assert recovered == live, f"recovered {recovered!r}, live {live!r}"
        ran = WORLD.runs[runs:]
        if not on("conc_losers_settled"):
            # a loser left unsettled (the defect the switch waits for) is re-run by its
            # policy when the copy recovers: only those may run
            unsettled = {
                f"{s.message_id}/{c.args[1]}"
                for s in self.history().steps
                for c in s.calls
                if c.status in OPEN
            }
            ran = [r for r in ran if r[1] not in unsettled]
        assert not ran, f"replay ran tools: {ran}"

    def _copy(self) -> Store:
        if self.store_kind == "memory":
            copied: Store = self.portal.call(copy.deepcopy, self.memory)
            return copied
        target = os.path.join(self.tmp, f"copy{self.counter}.db")
        for suffix in ("", "-wal", "-shm"):
            if os.path.exists(target + suffix):
                os.remove(target + suffix)
        src, dst = sqlite3.connect(self.path), sqlite3.connect(target)
        try:
            src.backup(dst)
        finally:
            src.close()
            dst.close()
        return SqliteStore(target)
