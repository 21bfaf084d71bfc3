"""Bad input at the call gets a clear, typed error and writes nothing (issue 11.11).

DESIGN.md section 8: "Bad input fails at the call that caused it, with a message that says
what to do, and writes nothing".
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

import attrs
import pytest
from actorlog import Actor, ActorSystem, ConfigurationError, Context, tool
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]
RUNS: list[tuple[Any, ...]] = []


@attrs.define
class Go:
    how: str = ""


@attrs.define
class Seen:
    got: list[str] = attrs.Factory(list)


@tool(effect="read")
async def join(a: str, b: str, *, sep: str = "-") -> str:
    RUNS.append((a, b, sep))
    return f"{a}{sep}{b}"


async def plain_join(a: str, b: str) -> str:  # an undeclared tool: a write that escalates
    RUNS.append((a, b))
    return a + b


class Partials(Actor[Seen]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Go) -> str:
        if msg.how == "tool":
            got = await ctx.call(functools.partial(join, "x", sep="+"), "y")
        else:
            got = await ctx.call(functools.partial(plain_join, "p"), "q")
        self.state.got.append(got)
        return got


async def dump(make_store: StoreFactory) -> list[tuple[str, list[tuple[int, str]]]]:
    store = make_store()
    if isinstance(store, SqliteStore):  # the running system holds the file's writer lock
        store = SqliteStore(store.path, read_only=True)
    await store.open()
    try:
        return [
            (a.actor_id, [(r.seq, r.kind) for r in await store.read(a.actor_id)])
            for a in await store.list_actors()
        ]
    finally:
        if not isinstance(store, MemoryStore):
            await store.close()


@pytest.mark.parametrize("bad", ["a\udcff", "\ud800"])
async def test_an_actor_id_with_a_lone_surrogate_is_a_configuration_error(
    make_store: StoreFactory, bad: str
) -> None:
    async with ActorSystem(make_store(), actors=[Partials]) as system:
        with pytest.raises(ConfigurationError, match="actor id"):
            await system.spawn(Partials, bad)
        with pytest.raises(ConfigurationError, match="actor id"):
            system.ref(Partials, bad)
        ref = await system.spawn(Partials, "ok")  # the system goes on
        assert await ref.ask(Go("tool")) == "x+y"
    assert [a for a, _ in await dump(make_store)] == ["ok"]


@pytest.mark.parametrize("kind", ["send", "ask"])
async def test_a_message_id_with_a_lone_surrogate_is_a_configuration_error(
    make_store: StoreFactory, kind: str
) -> None:
    async with ActorSystem(make_store(), actors=[Partials]) as system:
        ref = await system.spawn(Partials, "p")
        await ref.ask(Go("tool"), message_id="first")
        before = await dump(make_store)
        with pytest.raises(ConfigurationError, match="message_id"):
            if kind == "send":
                await ref.send(Go("tool"), message_id="m\udcff")
            else:
                await ref.ask(Go("tool"), message_id="m\udcff")
        assert await dump(make_store) == before
        assert await ref.ask(Go("tool"), message_id="second") == "x+y"  # still usable


async def test_a_tool_name_that_cannot_be_logged_is_refused_at_declaration() -> None:
    with pytest.raises(ConfigurationError, match="name"):
        tool(effect="read", name="bad\udcff")(plain_join)
    with pytest.raises(ConfigurationError, match="name"):
        tool(effect="read", name="")(plain_join)


@pytest.mark.parametrize("how", ["tool", "plain"])
async def test_ctx_call_of_a_partial_runs_and_replays_as_the_underlying_tool(
    make_store: StoreFactory, how: str
) -> None:
    """A partial is the underlying tool with its frozen arguments logged like any other."""
    RUNS.clear()
    async with ActorSystem(make_store(), actors=[Partials]) as system:
        ref = await system.spawn(Partials, "p")
        live = await ref.ask(Go(how), message_id="m1")
    assert live == ("x+y" if how == "tool" else "pq")
    assert len(RUNS) == 1
    store = make_store()
    await store.open()
    try:
        [intent] = [r for r in await store.read("p") if r.kind == "intent"]
    finally:
        if not isinstance(store, MemoryStore):
            await store.close()
    assert intent.type_tag == (join.name if how == "tool" else f"{__name__}.plain_join")
    async with ActorSystem(make_store(), actors=[Partials]) as system:
        ref = await system.spawn(Partials, "p")
        assert await ref.ask(Go(how), message_id="m1") == live
        assert await ref.ask(Go(how), message_id="m2") == live
    assert len(RUNS) == 2  # replay served the first from the log
