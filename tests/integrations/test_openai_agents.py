"""DurableAgent for the OpenAI Agents SDK in one process: recorded results, conversations,
handoffs, in-doubt escalation and reconciliation, non-determinism, streamed runs after a
resume, and bad arguments refused at the call."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("agents")

from actorlog import (
    ActorQuarantinedError,
    ActorSystem,
    ConfigurationError,
    Happened,
    NonDeterminismError,
)
from actorlog.integrations.openai_agents import (
    ESCALATE,
    IDEMPOTENT,
    READ,
    AgentActor,
    DurableAgent,
    idempotency_key,
    reconciled,
)
from actorlog.stores import MemoryStore, SqliteStore
from agents import Agent, RunConfig, StreamEvent, function_tool

from tests.integrations import openai_travel
from tests.integrations.openai_travel import PLANNER, TRIAGE, TravelModel, search, weather


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # the SDK runs on asyncio


class Blocker:
    """A ``book`` tool that blocks (until released) the first time it runs."""

    def __init__(self) -> None:
        self.ran: list[str] = []
        self.block = True
        self.reached = anyio.Event()
        blocker = self

        @function_tool
        async def book(what: str) -> str:
            """Book a hotel."""
            blocker.ran.append(what)
            if blocker.block:
                blocker.reached.set()
                await anyio.sleep_forever()
            return f"booked {what}"

        self.tool = book


def travel(
    name: str,
    book: Any,
    model: TravelModel,
    *,
    instructions: str = PLANNER,
    **kwargs: Any,
) -> DurableAgent[Any]:
    planner: Agent[Any] = Agent(
        name="planner", instructions=instructions, tools=[search, weather, book]
    )
    triage: Agent[Any] = Agent(name="triage", instructions=TRIAGE, handoffs=[planner])
    return DurableAgent(triage, name=name, run_config=RunConfig(model=model), **kwargs)


async def run_until(
    durable: DurableAgent[Any], system: ActorSystem, actor_id: str, reached: anyio.Event
) -> None:
    """Start a run and stop waiting once the blocking tool started; the system's exit then
    cuts the step off in the middle of that tool call (as a crash would)."""
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            await durable.run(system, actor_id, "plan a trip to Rome", message_id="m")

        tg.start_soon(go)
        with anyio.fail_after(60):
            await reached.wait()
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_asking_again_returns_the_recorded_run_and_runs_continue_the_conversation() -> None:
    model = TravelModel()
    durable = DurableAgent(
        openai_travel.triage,
        name="t-recorded",
        tools={"search": READ, "weather": "read", "book": IDEMPOTENT},
        run_config=RunConfig(model=model),
    )
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        first = await durable.run(system, "c-1", "plan a trip to Lisbon", message_id="1")
        assert model.calls == 5  # triage (handoff), search, weather, book, answer
        assert first.last_agent == "planner"  # the handoff happened
        assert first.final_output.startswith("Trip to Lisbon: Hotel Lisbon Central;")
        assert "(ref c-1:" in first.final_output  # the idempotency key reached the tool
        assert first.usage.requests == 5 and first.new_items == first.items
        again = await durable.run(system, "c-1", "plan a trip to Lisbon", message_id="1")
        assert again == first and model.calls == 5  # nothing ran again

        second = await durable.run(system, "c-1", "plan a trip to Porto", message_id="2")
        assert second.final_output.startswith("Trip to Porto:")
        assert second.items[: len(first.items)] == first.items
        assert second.new_items[0] == {"role": "user", "content": "plan a trip to Porto"}
        fresh = await durable.run(
            system, "c-1", "plan a trip to Oslo", message_id="3", new_conversation=True
        )
        assert fresh.items == fresh.new_items and fresh.items[0]["content"].endswith("Oslo")


@pytest.mark.anyio
async def test_an_undeclared_write_of_a_handoff_target_in_doubt_escalates(tmp_path: Path) -> None:
    """The planner is reached by a handoff; its undeclared ``book`` cut off mid-call is in
    doubt after the restart, and the run waits for an operator, whose answer it uses."""
    model = TravelModel()
    blocker = Blocker()
    durable = travel("t-escalate", blocker.tool, model, tools={"search": READ, "weather": READ})
    assert durable.effect_of("book") == ESCALATE
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system:
        await run_until(durable, system, "c-2", blocker.reached)
    calls_before = model.calls
    blocker.block = False
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        pending = await system.wait_in_doubt("c-2")
        ((seq, (tool_name, _key)),) = pending.items()
        assert tool_name == "openai_agents.tool.book"
        await system.resolve("c-2", seq, result="booked by hand", reason="checked")
        result = await durable.run(system, "c-2", "plan a trip to Rome", message_id="m")
    assert blocker.ran == ["Hotel Rome Central"]  # never re-run
    assert result.final_output.endswith("booked by hand")
    assert model.calls == calls_before + 1  # only the answer after the booking is new


@pytest.mark.anyio
async def test_a_reconciled_write_in_doubt_asks_the_reconcile_function(tmp_path: Path) -> None:
    asked: list[tuple[str, dict[str, Any]]] = []

    async def did_it_happen(key: str, tool_args: dict[str, Any]) -> Happened:
        asked.append((key, tool_args))
        return Happened(f"booking {key} exists")

    blocker = Blocker()
    tools = {"search": READ, "weather": READ, "book": reconciled(did_it_happen)}
    durable = travel("t-reconcile", blocker.tool, TravelModel(), tools=tools)
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system:
        await run_until(durable, system, "c-3", blocker.reached)
    blocker.block = False
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "c-3", "plan a trip to Rome", message_id="m")
    assert blocker.ran == ["Hotel Rome Central"]
    ((key, tool_args),) = asked
    assert tool_args == {"what": "Hotel Rome Central"} and key.startswith("c-3:")
    assert result.final_output.endswith(f"booking {key} exists")


@pytest.mark.anyio
async def test_a_changed_agent_on_replay_is_non_determinism(tmp_path: Path) -> None:
    model = TravelModel()
    blocker = Blocker()
    tools = {"search": READ, "weather": READ, "book": READ}
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system:
        await run_until(
            travel("t-nondet", blocker.tool, model, tools=tools), system, "c-4", blocker.reached
        )
    calls = model.calls
    # the same name, the planner's instructions changed: a recorded request differs
    changed = travel("t-nondet", blocker.tool, model, tools=tools, instructions=PLANNER + " ")
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await changed.run(system, "c-4", "plan a trip to Rome", message_id="m")
    assert isinstance(info.value.__cause__, NonDeterminismError)
    assert "openai_agents.model_call" in str(info.value.__cause__)
    assert model.calls == calls  # nothing was asked


@pytest.mark.anyio
async def test_a_streamed_run_after_a_resume_gives_the_handler_the_whole_run_again(
    tmp_path: Path,
) -> None:
    events: list[str] = []

    async def on_event(event: StreamEvent) -> None:
        if event.type == "raw_response_event":
            events.append(event.data.type)
        elif event.type == "run_item_stream_event":
            events.append(event.name)
        else:
            events.append(f"agent {event.new_agent.name}")

    model = TravelModel()
    blocker = Blocker()
    tools = {"search": READ, "weather": READ, "book": IDEMPOTENT}
    durable = travel("t-stream", blocker.tool, model, tools=tools, event_handler=on_event)
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system:
        await run_until(durable, system, "c-5", blocker.reached)
    first = list(events)
    assert "agent planner" in first and "response.output_item.done" in first
    events.clear()
    blocker.block = False
    calls = model.calls
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "c-5", "plan a trip to Rome", message_id="m")
    assert result.final_output.startswith("Trip to Rome:") and result.last_agent == "planner"
    assert events[: len(first)] == first  # what was seen before is a prefix of the resume
    assert "response.output_text.delta" in events[len(first) :]  # the answer, streamed
    assert model.calls == calls + 1  # the recorded streams came from the log
    assert blocker.ran == ["Hotel Rome Central"] * 2  # the booking in doubt, re-run


@pytest.mark.anyio
async def test_bad_arguments_are_refused_at_the_call_and_store_nothing() -> None:
    with pytest.raises(ConfigurationError):
        DurableAgent("not an agent")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError, match="not one of"):
        DurableAgent(openai_travel.triage, name="t-bad", tools={"search": "sometimes"})
    with pytest.raises(ConfigurationError):
        DurableAgent(openai_travel.triage, name="")
    with pytest.raises(ConfigurationError):
        DurableAgent(openai_travel.triage, name="t-bad", max_turns=0)
    with pytest.raises(ConfigurationError):
        DurableAgent(openai_travel.triage, name="t-bad", default_tool_effect="read")  # type: ignore[arg-type]
    with pytest.raises(ConfigurationError):
        idempotency_key()  # outside a tool
    store = MemoryStore()
    async with ActorSystem(store, actors=[AgentActor]) as system:
        with pytest.raises(ConfigurationError):
            await openai_travel.durable.run(system, "c-6", 42, message_id="m")  # type: ignore[arg-type]
        assert await store.list_actors() == []


def test_a_tool_that_runs_here_unjournaled_is_refused() -> None:
    """A computer, local shell, apply-patch or custom tool would run again on every replay:
    refused when the DurableAgent is made, on a handoff target too."""
    from agents import LocalShellTool

    async def shell(request: Any) -> str:
        return "ran"

    helper: Agent[Any] = Agent(name="helper", tools=[LocalShellTool(executor=shell)])
    start: Agent[Any] = Agent(name="start", handoffs=[helper])
    with pytest.raises(ConfigurationError, match="LocalShellTool"):
        DurableAgent(start, name="t-local")


@pytest.mark.anyio
@pytest.mark.parametrize("sequential", [False, True], ids=["concurrent", "sequential"])
async def test_tool_calls_of_one_turn_run_concurrently_unless_sequential(
    monkeypatch: pytest.MonkeyPatch, sequential: bool
) -> None:
    """The model asks for search and weather in one turn: by default both run at once, as
    the SDK runs them; ``sequential_tools=True`` runs them one after the other. The run's
    outcome is the same."""
    monkeypatch.setenv("TRAVEL_PARALLEL", "1")
    openai_travel.ORDER.clear()
    durable = DurableAgent(
        openai_travel.triage,
        name=f"t-turn-{sequential}",
        tools={"search": READ, "weather": READ, "book": IDEMPOTENT},
        run_config=RunConfig(model=TravelModel()),
        sequential_tools=sequential,
    )
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        result = await durable.run(system, "c-8", "plan a trip to Lisbon", message_id="m")
    assert result.final_output.startswith("Trip to Lisbon: Hotel Lisbon Central; sunny in")
    assert result.usage.requests == 4  # triage, search + weather, book, answer
    if sequential:
        assert openai_travel.ORDER == ["start search", "end search", "start weather", "end weather"]
    else:
        assert openai_travel.ORDER[:2] == ["start search", "start weather"]


@pytest.mark.anyio
async def test_a_failed_run_leaves_the_conversation_as_it_was() -> None:
    """MaxTurnsExceeded (the SDK's error) fails the run with HandlerError; the next run
    continues the conversation from before the failed one."""
    from actorlog import HandlerError

    short = DurableAgent(
        openai_travel.triage,
        name="t-short",
        tools={"search": READ, "weather": READ, "book": IDEMPOTENT},
        run_config=RunConfig(model=TravelModel()),
        max_turns=2,
    )
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        with pytest.raises(HandlerError, match="MaxTurnsExceeded"):
            await short.run(system, "c-9", "plan a trip to Lisbon", message_id="1")
        short.max_turns = 10
        result = await short.run(system, "c-9", "plan a trip to Porto", message_id="2")
    assert result.items == result.new_items  # nothing of the failed run
    assert result.items[0] == {"role": "user", "content": "plan a trip to Porto"}


@pytest.mark.anyio
async def test_agent_models_and_provider_models_are_journaled(tmp_path: Path) -> None:
    """No run_config.model: triage's model is a name the run's model provider looks up, the
    planner's is its own Model instance. Cut off in the booking and resumed, neither model
    is asked again for a recorded call."""
    from agents import ModelProvider

    triage_model, planner_model = TravelModel(), TravelModel()

    class Provider(ModelProvider):
        def get_model(self, model_name: str | None) -> Any:
            assert model_name == "scripted-triage"
            return triage_model

    blocker = Blocker()
    planner: Agent[Any] = Agent(
        name="planner",
        instructions=PLANNER,
        tools=[search, weather, blocker.tool],
        model=planner_model,
    )
    triage: Agent[Any] = Agent(
        name="triage", instructions=TRIAGE, handoffs=[planner], model="scripted-triage"
    )
    durable = DurableAgent(
        triage,
        name="t-models",
        tools={"search": READ, "weather": READ, "book": IDEMPOTENT},
        run_config=RunConfig(model_provider=Provider()),
    )
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system:
        await run_until(durable, system, "c-10", blocker.reached)
    assert (triage_model.calls, planner_model.calls) == (1, 3)
    blocker.block = False
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "c-10", "plan a trip to Rome", message_id="m")
    assert result.final_output.startswith("Trip to Rome:") and result.last_agent == "planner"
    assert (triage_model.calls, planner_model.calls) == (1, 4)  # only the answer is new


@pytest.mark.anyio
async def test_an_event_handler_that_raises_stops_the_streamed_run() -> None:
    """The run fails with the handler's error and stops there: the SDK's background run
    is cancelled, so no model call or tool call is made for it afterwards."""
    from actorlog import HandlerError

    seen: list[str] = []

    async def on_event(event: StreamEvent) -> None:
        seen.append(event.type)
        if event.type == "run_item_stream_event" and event.name == "tool_called":
            raise RuntimeError("the consumer went away")

    model = TravelModel()
    openai_travel.ORDER.clear()
    durable = DurableAgent(
        openai_travel.triage,
        name="t-handler-raises",
        tools={"search": READ, "weather": READ, "book": IDEMPOTENT},
        run_config=RunConfig(model=model),
        event_handler=on_event,
    )
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        with pytest.raises(HandlerError, match="the consumer went away"):
            await durable.run(system, "c-11", "plan a trip to Lisbon", message_id="1")
        calls = model.calls
        await anyio.sleep(0.5)  # what a run left running would do meanwhile
        assert model.calls == calls == 2  # triage, the planner's search call
        assert openai_travel.ORDER in ([], ["start search"])  # never finished
