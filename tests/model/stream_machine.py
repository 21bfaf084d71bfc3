"""A stateful model of streaming (``ctx.emit`` / ``ref.ask_stream``, docs/streaming.md), with a
crash at every durability boundary.

Each rule runs one step of the ``Streamer`` actor from a plan (emits, reads, ``ctx.now``) and
streams it; a crash rule kills the store at the N-th append from then on, before or after the
commit (:class:`CrashingStore`: that append and every later call fail, so the store holds
exactly what was committed before the crash, as after a SIGKILL), drops the system, starts a
new one on the same data and asks the same ``message_id`` again with ``ask_stream``.

What the model checks (the documented promises):

- a step's events arrive in order, numbered 1, 2, 3 ... with no gap (buffers are large
  enough here), as the plan emits them, and the reply arrives after them;
- several callers of one step each get every event;
- after a crash, the resumed run's stream starts at 1 (the recent events of a running step
  are kept for a caller that joins), its ``replayed`` flags are a prefix of True, and **every
  event the first caller received comes again with the same number and the same data**: the
  read tool returns a fresh value on every real run, so an event delivered before the result
  it shows was durable would come back different;
- a step already completed streams its reply only.
"""

from __future__ import annotations

import itertools
import shutil
import tempfile
from collections.abc import Sequence
from typing import Any

import anyio
import attrs
from actorlog import Actor, ActorlogError, ActorSystem, Context, message, tool
from actorlog.store import EntryRow, Store
from actorlog.stores import MemoryStore, SqliteStore
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

#: a fresh value per real run of the read tool (never the same twice)
_RUNS = itertools.count(1)


@message(name="model_stream_plan")
@attrs.define
class Plan:
    """Run ``ops`` in order: ``e`` emit, ``r`` a read tool call, ``n`` ``ctx.now()``."""

    tag: str
    ops: str


@message(name="model_stream_state")
@attrs.define
class Seen:
    steps: int = 0


@tool(name="model_stream_read", effect="read")
async def read_value(tag: str) -> int:
    await anyio.sleep(0.002)  # a resumed step is still running when its caller asks again
    return next(_RUNS)


class Streamer(Actor[Seen], name="model_streamer"):
    async def receive(self, ctx: Context, msg: Plan) -> str:
        last: Any = None
        for i, op in enumerate(msg.ops):
            if op == "e":
                ctx.emit(f"{msg.tag}:{i}:{last}")
            elif op == "r":
                last = await ctx.call(read_value, msg.tag)
            else:
                last = ctx.now().isoformat()
        self.state.steps += 1
        return f"done {msg.tag}"


class Crashed(Exception):
    """The simulated crash (the store is dead from here on)."""


class CrashingStore:
    """A store that dies at the ``countdown``-th append: before writing it, or after
    committing it. Every call after that fails; ``close`` still closes the real store."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.countdown: int | None = None
        self.after = False
        self.dead = False

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self._inner, name)
        if not self.dead or name in ("close", "capabilities") or not callable(attr):
            return attr

        async def refused(*args: Any, **kwargs: Any) -> Any:
            from actorlog import StoreUnavailableError

            raise StoreUnavailableError("the process crashed (simulated)")

        return refused

    async def append(self, actor_id: str, expected: int, rows: Sequence[EntryRow]) -> None:
        from actorlog import StoreUnavailableError

        if self.dead:
            raise StoreUnavailableError("the process crashed (simulated)")
        if self.countdown is not None:
            self.countdown -= 1
            if self.countdown <= 0:
                if self.after:
                    await self._inner.append(actor_id, expected, rows)
                self.dead = True
                raise StoreUnavailableError("the process crashed (simulated)")
        await self._inner.append(actor_id, expected, rows)


Events = list[tuple[int, Any, bool]]


async def _stream(system: ActorSystem, tag: str, ops: str) -> tuple[Events, Any, bool]:
    """Stream one step: (events, reply, whether it ended with an error)."""
    got: Events = []
    stream = system.ref(Streamer, "s").ask_stream(Plan(tag, ops), message_id=tag)
    try:
        async for ev in stream:
            got.append((ev.number, ev.data, ev.replayed))
    except ActorlogError:
        return got, None, True
    return got, stream.reply, False


def _expected_numbers(ops: str) -> list[int]:
    return list(range(1, ops.count("e") + 1))


class StreamMachine(RuleBasedStateMachine):
    store_kind = "memory"
    backend = "asyncio"
    base_dir: str | None = None

    @initialize()
    def setup(self) -> None:
        self.dir = tempfile.mkdtemp(dir=self.base_dir)
        self.memory = MemoryStore()
        self.tags = itertools.count()
        #: message id -> the plan it was asked with, for the steps completed
        self.done: dict[str, str] = {}

    def teardown(self) -> None:
        shutil.rmtree(getattr(self, "dir", ""), ignore_errors=True)

    def _store(self) -> Store:
        if self.store_kind == "memory":
            return self.memory
        return SqliteStore(f"{self.dir}/stream.db")

    def _run(self, fn: Any, *args: Any) -> Any:
        return anyio.run(fn, *args, backend=self.backend)

    def _check_live(self, ops: str, events: Events, reply: Any, tag: str) -> None:
        assert [n for n, _, _ in events] == _expected_numbers(ops), events
        assert not any(replayed for _, _, replayed in events), events
        prefix = [d.split(":")[:2] for _, d, _ in events]
        assert prefix == [[tag, str(i)] for i, op in enumerate(ops) if op == "e"], events
        assert reply == f"done {tag}"

    @rule(ops=st.text("ern", min_size=0, max_size=8), callers=st.integers(1, 3))
    def stream_a_step(self, ops: str, callers: int) -> None:
        """Every caller of one step (the same ``message_id``) gets every event, in order,
        then the reply."""
        tag = f"t{next(self.tags)}"

        async def go() -> list[tuple[Events, Any, bool]]:
            results: list[tuple[Events, Any, bool]] = []
            async with (
                ActorSystem(self._store(), actors=[Streamer]) as system,
                anyio.create_task_group() as tg,
            ):

                async def one() -> None:
                    results.append(await _stream(system, tag, ops))

                for _ in range(callers):
                    tg.start_soon(one)
            return results

        results = self._run(go)
        for events, reply, failed in results:
            assert not failed
            if events or ops.count("e") == 0:
                self._check_live(ops, events, reply, tag)
            else:  # a caller that came after the step ended (others made it run)
                assert reply == f"done {tag}"
        self.done[tag] = ops

    @rule(
        ops=st.text("ern", min_size=1, max_size=8),
        crash_at=st.integers(1, 6),
        after=st.booleans(),
    )
    def crash_mid_stream(self, ops: str, crash_at: int, after: bool) -> None:
        """The store dies at the ``crash_at``-th append of the step (before or after the
        commit); a new system resumes the step and the caller asks again."""
        tag = f"t{next(self.tags)}"

        async def first() -> tuple[Events, Any, bool]:
            store = CrashingStore(self._store())
            store.countdown, store.after = crash_at, after
            try:
                async with ActorSystem(store, actors=[Streamer]) as system:
                    return await _stream(system, tag, ops)
            except Exception:  # the crashed system's own shutdown fails: it is dropped
                return [], None, True

        async def again() -> tuple[Events, Any, bool]:
            async with ActorSystem(self._store(), actors=[Streamer]) as system:
                return await _stream(system, tag, ops)

        seen, reply1, failed1 = self._run(first)
        if not failed1:  # the crash came after the step (its commit, then a snapshot ...)
            self._check_live(ops, seen, reply1, tag)
        assert [n for n, _, _ in seen] == list(range(1, len(seen) + 1)), seen
        events, reply, failed = self._run(again)
        assert not failed
        assert reply == f"done {tag}"
        if events:
            numbers = [n for n, _, _ in events]
            assert numbers == _expected_numbers(ops), events  # from 1: nothing lost
            flags = [r for _, _, r in events]
            assert flags == sorted(flags, reverse=True), events  # replayed: a prefix
            resumed = {n: d for n, d, _ in events}
            for n, data, _ in seen:
                assert resumed[n] == data, (n, data, events)  # never taken back
        self.done[tag] = ops

    @rule(i=st.integers(0, 50))
    def ask_a_completed_step_again(self, i: int) -> None:
        """A completed step streams its reply only."""
        if not self.done:
            return
        tag = sorted(self.done)[i % len(self.done)]

        async def go() -> tuple[Events, Any, bool]:
            async with ActorSystem(self._store(), actors=[Streamer]) as system:
                return await _stream(system, tag, self.done[tag])

        events, reply, failed = self._run(go)
        assert (events, reply, failed) == ([], f"done {tag}", False)
