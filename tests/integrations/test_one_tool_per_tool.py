"""Both integrations journal each model request (whole and streamed) and each tool call with
one ``Tool`` per tool, made once: making a ``Tool`` per call cost an ``inspect.signature`` and,
for its return type, a ``typing.get_type_hints`` every time. Each call runs its own work
(``calling``), and the calls keep their names, policies and idempotency keys."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from actorlog import ActorSystem, Happened, ops
from actorlog._effects.context import Context
from actorlog._effects.tools import Tool
from actorlog.stores import MemoryStore


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the OpenAI Agents SDK runs on asyncio


async def was_it_checked(key: str, args: dict[str, Any]) -> Happened | None:
    return None


@dataclass
class Case:
    """Two DurableAgents of one integration (the model's responses whole, and streamed to an
    event handler) and what their runs must log."""

    actor: type[Any]
    durables: list[Any]
    #: ``await run(durable, system, k)``: run ``k`` of ``durable``, its output
    run: Callable[[Any, ActorSystem, int], Awaitable[Any]]
    output_ok: Callable[[Any], bool]
    #: (tool name in the log, policy) of every call the runs make
    calls: set[tuple[str, str]]
    book: str
    #: the idempotency keys the booking tool was given
    keys: list[str] = field(default_factory=list)


def pydantic_ai_case() -> Case:
    pytest.importorskip("pydantic_ai")
    from actorlog.integrations.pydantic_ai import (
        IDEMPOTENT,
        READ,
        AgentActor,
        DurableAgent,
        idempotency_key,
        reconciled,
    )
    from pydantic_ai import Agent, RunContext
    from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
    from pydantic_ai.models.function import AgentInfo, FunctionModel

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if not any(isinstance(m, ModelResponse) for m in messages):
            parts = [ToolCallPart(n, {"x": n}, tool_call_id=n) for n in ("look", "book", "check")]
            return ModelResponse(parts=list(parts))
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(fn), name="t-tools-once")
    keys: list[str] = []

    @agent.tool_plain
    async def look(x: str) -> str:
        return x

    @agent.tool_plain
    async def book(x: str) -> str:
        keys.append(idempotency_key())
        return x

    @agent.tool_plain
    async def check(x: str) -> str:
        return x

    async def on_events(ctx: RunContext[Any], events: Any) -> None:
        async for _ in events:
            pass

    tools = {"look": READ, "book": IDEMPOTENT, "check": reconciled(was_it_checked)}
    whole = DurableAgent(agent, tools=tools)
    streamed = DurableAgent(
        agent, name="t-tools-once-streamed", tools=tools, event_stream_handler=on_events
    )

    async def run(durable: Any, system: ActorSystem, k: int) -> Any:
        got = await durable.run(
            system, durable.name, "go", message_id=f"m-{k}", new_conversation=True
        )
        return got.output

    return Case(
        actor=AgentActor,
        durables=[whole, streamed],
        run=run,
        output_ok=lambda output: output == "done",
        calls={
            ("pydantic_ai.model_request", "rerun"),
            ("pydantic_ai.tool.look", "rerun"),
            ("pydantic_ai.tool.book", "rerun-same-key"),
            ("pydantic_ai.tool.check", "reconcile"),
        },
        book="pydantic_ai.tool.book",
        keys=keys,
    )


def openai_agents_case() -> Case:
    pytest.importorskip("agents")
    from actorlog.integrations.openai_agents import (
        IDEMPOTENT,
        READ,
        AgentActor,
        DurableAgent,
        reconciled,
    )
    from agents import RunConfig, StreamEvent

    from tests.integrations import openai_travel
    from tests.integrations.openai_travel import TravelModel

    async def on_event(event: StreamEvent) -> None:
        pass

    tools = {"search": READ, "weather": reconciled(was_it_checked), "book": IDEMPOTENT}
    plain = DurableAgent(
        openai_travel.triage,
        name="t-tools-once",
        tools=tools,
        run_config=RunConfig(model=TravelModel()),
    )
    streamed = DurableAgent(
        openai_travel.triage,
        name="t-tools-once-streamed",
        tools=tools,
        run_config=RunConfig(model=TravelModel()),
        event_handler=on_event,
    )
    cities = ["Oslo", "Lisbon", "Rome"]

    async def run(durable: Any, system: ActorSystem, k: int) -> Any:
        got = await durable.run(
            system, durable.name, f"plan a trip to {cities[k]}", message_id=cities[k]
        )
        return got.final_output

    return Case(
        actor=AgentActor,
        durables=[plain, streamed],
        run=run,
        output_ok=lambda output: output.startswith("Trip to ") and "(ref " in output,
        calls={
            ("openai_agents.model_call", "rerun"),
            ("openai_agents.model_stream", "rerun"),
            ("openai_agents.tool.search", "rerun"),
            ("openai_agents.tool.weather", "reconcile"),
            ("openai_agents.tool.book", "rerun-same-key"),
        },
        book="openai_agents.tool.book",
    )


@pytest.mark.anyio
@pytest.mark.parametrize("make", [pydantic_ai_case, openai_agents_case])
async def test_a_run_makes_no_tool_per_journaled_call(
    make: Callable[[], Case], monkeypatch: pytest.MonkeyPatch
) -> None:
    case = make()
    made: list[str | None] = []
    hinted: list[str] = []
    used: dict[tuple[str, str], set[int]] = {}
    real_init, real_call = Tool.__init__, Context.call

    def counting_init(self: Any, fn: Any, *args: Any, **kwargs: Any) -> None:
        made.append(kwargs.get("name"))
        real_init(self, fn, *args, **kwargs)

    def counting_return_type(self: Any) -> Any:
        hinted.append(self.name)
        return Any

    async def noting_call(self: Context, tool: Any, /, *args: Any, **kwargs: Any) -> Any:
        used.setdefault((self.actor_id, tool.name), set()).add(id(tool))
        return await real_call(self, tool, *args, **kwargs)

    monkeypatch.setattr(Context, "call", noting_call)
    store = MemoryStore()
    async with ActorSystem(store, actors=[case.actor]) as system:
        for durable in case.durables:  # the first run makes each tool's Tool
            await case.run(durable, system, 0)
        monkeypatch.setattr(Tool, "__init__", counting_init)
        counting = functools.cached_property(counting_return_type)
        counting.__set_name__(Tool, "return_type")
        monkeypatch.setattr(Tool, "return_type", counting)
        outputs = [await case.run(d, system, k) for d in case.durables for k in (1, 2)]
        calls = [
            c
            for durable in case.durables
            for step in (await ops.history(store, durable.name)).steps
            for c in step.calls
        ]
    assert made == [] and hinted == [], (made, hinted)
    # one Tool object per tool of each agent (conversation), whichever run or call used it
    assert {name for _, name in used} == {name for name, _ in case.calls}, used
    assert {agent for agent, _ in used} == {d.name for d in case.durables}, used
    assert all(len(ids) == 1 for ids in used.values()), used
    assert all(case.output_ok(output) for output in outputs), outputs
    assert {(c.tool, c.policy) for c in calls} == case.calls
    books = [c.key for c in calls if c.tool == case.book]
    assert len(books) == 6 and len(set(books)) == 6, books  # 2 agents x 3 runs, a key each
    if case.keys:  # the tool itself saw the logged keys
        assert sorted(case.keys) == sorted(books), (case.keys, books)


def test_a_journaling_tool_called_outside_its_call_is_refused() -> None:
    """The one ``Tool`` of a tool runs the work of the ``ctx.call`` being made; called
    anywhere else (directly, outside any actor) it raises a ConfigurationError saying so,
    and runs nothing."""
    import anyio
    from actorlog import ConfigurationError
    from actorlog.integrations._effects import READ, JournalingTools

    tool = JournalingTools("p.", lambda v: v).get("look", READ)
    with pytest.raises(ConfigurationError, match=r"only inside the ctx\.call"):
        anyio.run(functools.partial(tool, {"x": 1}))
