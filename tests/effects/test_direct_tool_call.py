"""A tool awaited directly inside a handler would bypass the log (issue 15): it raises
``ToolCalledDirectlyError`` naming the fix; outside any actor, and inside a tool that
``ctx.call`` runs, a direct call works as before. Also: a state class without defaults."""

from __future__ import annotations

import anyio
import attrs
import pytest
from actorlog import (
    Actor,
    ActorSystem,
    ConfigurationError,
    Context,
    HandlerError,
    ToolCalledDirectlyError,
    tool,
)

from tests.conftest import StoreFactory

pytestmark = pytest.mark.anyio

RUNS: list[str] = []


@tool(effect="read")
async def lookup(q: str) -> str:
    RUNS.append(q)
    return f"found {q}"


@tool(effect="read")
async def lookup_twice(q: str) -> str:
    # a tool's own body may call other tools directly: it is one logged effect
    return await lookup(q) + " / " + await lookup(q + "!")


@attrs.define
class Q:
    q: str
    how: str = "direct"


@attrs.define
class Notes:
    n: int = 0


class Agent(Actor[Notes]):
    async def receive(self, ctx: Context, msg: Q) -> str:
        if msg.how == "direct":
            return await lookup(msg.q)  # the mistake
        if msg.how == "child-task":
            out: list[str] = []

            async def child() -> None:
                out.append(await lookup(msg.q))

            async with anyio.create_task_group() as tg:
                tg.start_soon(child)
            return out[0]
        if msg.how == "nested":
            return await ctx.call(lookup_twice, msg.q)
        return await ctx.call(lookup, msg.q)


async def test_a_tool_called_directly_in_a_handler_is_refused_with_the_fix(
    make_store: StoreFactory,
) -> None:
    how = "direct"
    RUNS.clear()
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        with anyio.fail_after(10), pytest.raises(HandlerError) as err:
            await ref.ask(Q("x", how), message_id="m1")
        # the actor goes on: the next message is handled
        assert await ref.ask(Q("y", "ctx")) == "found y"
    assert RUNS == ["y"]  # the direct call never ran
    assert err.value.error_type == "ToolCalledDirectlyError"
    text = str(err.value)
    assert "called directly inside the handler of Agent (actor 'a')" in text
    assert "await ctx.call(lookup, ...)" in text
    # the replay of that step fails the same way, and the recorded error is what a re-ask gets
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        with anyio.fail_after(10), pytest.raises(HandlerError) as again:
            await ref.ask(Q("x", how), message_id="m1")
    assert str(again.value) == text
    assert RUNS == ["y"]


async def test_a_tool_called_directly_in_a_handlers_child_task_is_refused_too(
    make_store: StoreFactory,
) -> None:
    RUNS.clear()
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        with anyio.fail_after(10), pytest.raises(HandlerError) as err:
            await ref.ask(Q("x", "child-task"))
    assert RUNS == []  # the handler's own task group raised; the tool never ran
    assert err.value.error_type == "ExceptionGroup"


async def test_a_tool_may_call_tools_directly_inside_ctx_call(make_store: StoreFactory) -> None:
    RUNS.clear()
    async with ActorSystem(make_store(), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")
        with anyio.fail_after(10):
            assert await ref.ask(Q("z", "nested")) == "found z / found z!"
    assert RUNS == ["z", "z!"]


async def test_a_tool_called_outside_any_actor_runs() -> None:
    RUNS.clear()
    assert await lookup("plain") == "found plain"
    assert RUNS == ["plain"]


def test_the_error_is_a_configuration_error() -> None:
    err = ToolCalledDirectlyError("app.tools.search", "R (actor 'r')")
    assert isinstance(err, ConfigurationError)
    assert "await ctx.call(search, ...)" in str(err)


@attrs.define
class NoDefaults:
    topic: str
    items: list[str] = attrs.Factory(list)


class Needy(Actor[NoDefaults]):
    async def receive(self, ctx: Context, msg: Q) -> None:
        pass


class Provided(Actor[NoDefaults]):
    def initial_state(self) -> NoDefaults:
        return NoDefaults(topic="given")

    async def receive(self, ctx: Context, msg: Q) -> str:
        return self.state.topic


async def test_a_state_class_without_defaults_says_what_to_do(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Needy, Provided]) as system:
        with pytest.raises(ConfigurationError) as err:
            await system.spawn(Needy, "n")
        assert await (await system.spawn(Provided, "p")).ask(Q("?")) == "given"
    text = str(err.value)
    assert "NoDefaults() failed" in text and "topic" in text
    assert "Give every field of NoDefaults a default" in text
    assert "override Needy.initial_state()" in text
