"""Live equals replay (DESIGN.md section 10, issue 11.10), as a property over generated values.

A handler sees exactly the same values live and on replay (messages, tool results,
``ctx.now/random/uuid``, operator decisions), and what a caller receives is the decoded form
of what was logged: the same as a re-ask after a restart, never a reference into actor state.
Each example runs a step live, restarts the system on the same store (a real SQLite file),
replays that step, and compares ``repr`` of everything the handler saw (``repr`` tells int
keys from str keys, tuples from lists, and shows NaN).
"""

from __future__ import annotations

import datetime
import itertools
import math
import tempfile
from pathlib import Path
from typing import Any

import anyio
import attrs
import hypothesis
import hypothesis.strategies as st
import pytest
from actorlog import Actor, ActorSystem, Context, EncodeError, ToolCallError, tool
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore


@attrs.define
class Point:
    x: int
    y: Any = None


@attrs.define
class Carry:
    key: str
    payload: Any = None


@attrs.define
class Seen:
    items: list[Any] = attrs.Factory(list)


VALUES: dict[str, Any] = {}  # what the tool returns, by key: the outside world
SEEN: dict[str, list[str]] = {"live": [], "replay": []}
PHASE = {"now": "live"}


@tool(effect="read")
async def produce(key):  # type: ignore[no-untyped-def]  # unannotated on purpose: Any result
    return VALUES[key]


class Probe(Actor[Seen]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Carry) -> Any:
        seen: list[Any] = [("message", msg.payload)]
        got: Any = None
        try:
            got = await ctx.call(produce, msg.key)
            seen.append(("result", got))
        except ToolCallError as exc:
            seen.append(("error", exc.error_type))
        seen += [("now", ctx.now()), ("random", ctx.random()), ("uuid", ctx.uuid())]
        SEEN[PHASE["now"]].append(repr(seen))
        self.state.items.append(got)
        return got


_leaf = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(),
    st.floats(),  # NaN and infinities included: JSON cannot hold them
    st.text(max_size=8),
    st.just("lone \udcff surrogate"),
    st.binary(max_size=8),
    st.datetimes(timezones=st.just(datetime.UTC)),
)
_key = st.one_of(st.integers(-5, 5), st.text(max_size=3), st.floats(), st.booleans(), st.none())
_value = st.recursive(
    _leaf,
    lambda inner: st.one_of(
        st.lists(inner, max_size=3),
        st.tuples(inner, inner),
        st.dictionaries(_key, inner, max_size=3),
        st.frozensets(st.one_of(st.integers(), st.text(max_size=3)), max_size=3),
        st.sets(st.integers(), max_size=3),
        st.builds(Point, x=st.integers(), y=inner),
    ),
    max_leaves=8,
)

_ids = itertools.count()


async def _run(make_store: Any, value: Any) -> None:
    n = next(_ids)
    key, actor_id = f"k{n}", f"probe-{n}"
    VALUES[key] = value
    SEEN["live"].clear()
    SEEN["replay"].clear()
    PHASE["now"] = "live"
    async with ActorSystem(make_store(), actors=[Probe]) as system:
        ref = await system.spawn(Probe, actor_id)
        msg = Carry(key, value)
        try:
            live = await ref.ask(msg, message_id="m")
        except EncodeError:  # a message that cannot be logged is refused at the call
            msg = Carry(key, None)
            live = await ref.ask(msg, message_id="m")
        again = await ref.ask(msg, message_id="m")  # the recorded reply
    VALUES[key] = "changed since"  # replay must not ask the world again
    PHASE["now"] = "replay"
    async with ActorSystem(make_store(), actors=[Probe]) as system:
        ref = await system.spawn(Probe, actor_id)
        replayed = await ref.ask(msg, message_id="m")
    assert len(SEEN["live"]) == 1
    assert SEEN["replay"] == SEEN["live"]
    assert repr(live) == repr(again) == repr(replayed)


@pytest.mark.parametrize("backend", ["asyncio", "trio"])
def test_a_handler_sees_the_same_values_live_and_on_replay(
    backend: str, tmp_path_factory: pytest.TempPathFactory
) -> None:
    if backend == "asyncio":  # a real file: restart = a new store object on it
        path = tmp_path_factory.mktemp("live") / "agents.db"

        def make_store() -> Store:
            return SqliteStore(path)
    else:
        memory = MemoryStore()

        def make_store() -> Store:
            return memory

    @hypothesis.settings(
        max_examples=60,
        deadline=None,
        database=None,
        suppress_health_check=[hypothesis.HealthCheck.too_slow],
    )
    @hypothesis.given(value=_value)
    def check(value: Any) -> None:
        anyio.run(_run, make_store, value, backend=backend)

    check()


@pytest.mark.parametrize("value", [{1: "a"}, (1, [2, (3,)]), {2.5: {None: True}}, {1, 2}])
def test_examples_that_differed_before(value: Any) -> None:
    """The values issue 11.10 names: int keys, tuples, float/None keys, sets."""
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agents.db"
        anyio.run(_run, lambda: SqliteStore(path), value)


class Keeper(Actor[Seen]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Carry) -> Seen:
        if msg.payload is not None:
            self.state.items.append(msg.payload)
        return self.state


@pytest.mark.anyio
async def test_nothing_a_caller_receives_aliases_actor_state(
    make_store: Any, backend_and_store: tuple[str, str]
) -> None:
    async with ActorSystem(make_store(), actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k")
        got = await ref.ask(Carry("k", [1, 2]))
        got.items.append("mutated by the caller")
        got.items[0].append(3)
        assert await ref.ask(Carry("k")) == Seen([[1, 2]])
        # the message object the caller keeps is not the one the handler holds either
        msg = Carry("k", [7])
        await ref.ask(msg)
        msg.payload.append(8)
        assert (await ref.ask(Carry("k"))).items == [[1, 2], [7]]


def test_nan_is_refused_or_recorded_identically() -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "agents.db"
        anyio.run(_run, lambda: SqliteStore(path), {"x": math.nan})


HANG: dict[str, Any] = {"on": True, "started": None}


@tool(effect="write")
async def pay() -> Any:  # escalates when in doubt
    if HANG["on"]:
        HANG["started"].set()
        await anyio.sleep_forever()
    return None


class Payer(Actor[Seen]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Carry) -> Any:
        got = await ctx.call(pay)
        SEEN[PHASE["now"]].append(repr(got))
        self.state.items.append(got)
        return got


@pytest.mark.parametrize("value", [{1: "a"}, (1, (2,)), {"k": {3, 4}}])
def test_an_operators_result_is_seen_as_logged(value: Any) -> None:
    async def main(path: Path) -> None:
        SEEN["live"].clear()
        SEEN["replay"].clear()
        PHASE["now"] = "live"
        HANG["on"], HANG["started"] = True, anyio.Event()
        async with ActorSystem(SqliteStore(path), actors=[Payer], shutdown_grace=0) as system:
            ref = await system.spawn(Payer, "p")
            await ref.send(Carry("k"), message_id="m")
            with anyio.fail_after(10):
                await HANG["started"].wait()  # the intent is durable; "crash" inside the tool
        HANG["on"] = False
        async with ActorSystem(SqliteStore(path), actors=[Payer]) as system:
            await system.spawn(Payer, "p")
            [seq] = await system.wait_in_doubt("p")
            await system.resolve("p", seq, result=value)
            live = await system.ref(Payer, "p").ask(Carry("k"), message_id="m")
        PHASE["now"] = "replay"
        async with ActorSystem(SqliteStore(path), actors=[Payer]) as system:
            replayed = await system.ref(Payer, "p").ask(Carry("k"), message_id="m")
        assert SEEN["replay"] == SEEN["live"]
        assert repr(live) == repr(replayed)

    with tempfile.TemporaryDirectory() as tmp:
        anyio.run(main, Path(tmp) / "agents.db")
