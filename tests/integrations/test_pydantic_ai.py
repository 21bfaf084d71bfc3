"""DurableAgent in one process: recorded results, in-doubt escalation, human in the loop,
and what an event stream handler sees after a resume."""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("pydantic_ai")

from actorlog import (
    ActorQuarantinedError,
    ActorSystem,
    ConfigurationError,
    Happened,
    NonDeterminismError,
)
from actorlog.integrations.pydantic_ai import (
    ESCALATE,
    IDEMPOTENT,
    READ,
    AgentActor,
    DurableAgent,
    ToolEffect,
    idempotency_key,
    reconciled,
)
from actorlog.stores import MemoryStore, SqliteStore
from pydantic_ai import Agent, CallDeferred, DeferredToolRequests, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def two_step_model(tool: str, calls: list[int]) -> FunctionModel:
    """Calls ``tool`` once, then answers with what it returned; counts its requests."""

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        calls.append(1)
        returns = [
            str(p.content)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if not returns:
            return ModelResponse(parts=[ToolCallPart(tool, {"x": "1"}, tool_call_id="c1")])
        return ModelResponse(parts=[TextPart("answer: " + returns[-1])])

    return FunctionModel(fn, model_name="two-step")


async def run_until(
    durable: DurableAgent[Any, Any],
    system: ActorSystem,
    actor_id: str,
    message_id: str,
    reached: anyio.Event,
) -> None:
    """Start a run and stop waiting for it once a tool has started (``reached``); the
    system's exit then cuts the step off in the middle of that tool call."""
    async with anyio.create_task_group() as tg:

        async def go() -> None:
            await durable.run(system, actor_id, "go", message_id=message_id)

        tg.start_soon(go)
        with anyio.fail_after(30):
            await reached.wait()
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_asking_again_returns_the_recorded_run_without_calling_anything() -> None:
    calls: list[int] = []
    ran: list[str] = []
    agent = Agent(two_step_model("lookup", calls), name="t-recorded")

    @agent.tool_plain
    async def lookup(x: str) -> str:
        ran.append(x)
        return f"found {x}"

    durable = DurableAgent(agent, tools={"lookup": READ})
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        first = await durable.run(system, "c-1", "go", message_id="m-1")
        again = await durable.run(system, "c-1", "go", message_id="m-1")
    assert first.output == again.output == "answer: found 1"
    assert calls == [1, 1] and ran == ["1"]
    assert again.usage.requests == 2 and again.usage.tool_calls == 1
    assert len(first.new_messages) == 4


@pytest.mark.anyio
async def test_a_second_run_continues_the_conversation() -> None:
    seen: list[int] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(len(messages))
        return ModelResponse(parts=[TextPart(f"{len(messages)} messages so far")])

    durable = DurableAgent(Agent(FunctionModel(fn), name="t-conversation"))
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        await durable.run(system, "c-2", "hello", message_id="a")
        second = await durable.run(system, "c-2", "again", message_id="b")
        fresh = await durable.run(system, "c-2", "anew", message_id="c", new_conversation=True)
    assert seen == [1, 3, 1]
    assert len(second.messages) == 4 and len(second.new_messages) == 2
    assert fresh.output == "1 messages so far"


@pytest.mark.anyio
async def test_an_undeclared_write_in_doubt_escalates_and_events_are_replayed(
    tmp_path: Path,
) -> None:
    """A tool cut off mid-call (the system shuts down under it) with no declared effect is
    in doubt after the restart; the run waits for an operator, whose answer the agent
    sees. The event stream handler is given the whole run again, rebuilt from the log."""
    calls: list[int] = []
    started: list[str] = []
    events: list[list[str]] = []
    block = True
    reached = anyio.Event()

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        run: list[str] = []
        events.append(run)
        event: AgentStreamEvent
        async for event in stream:
            run.append(type(event).__name__)
            if isinstance(event, FunctionToolCallEvent):
                run.append(event.part.tool_name)

    agent = Agent(two_step_model("pay", calls), name="t-escalate")

    @agent.tool_plain
    async def pay(x: str) -> str:
        started.append(x)
        if block:
            reached.set()
            await anyio.sleep_forever()
        return "paid"

    durable = DurableAgent(agent, event_stream_handler=handler)
    assert durable.effect_of("pay") == ESCALATE
    store = tmp_path / "agents.db"

    async with ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system:
        await run_until(durable, system, "c-3", "pay-1", reached)
    assert started == ["1"] and len(calls) == 1
    first_events = [e for run in events for e in run]

    block = False
    events.clear()
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        pending = await system.wait_in_doubt("c-3")
        ((seq, (tool_name, _key)),) = pending.items()
        assert tool_name == "pydantic_ai.tool.pay"
        await system.resolve("c-3", seq, result="paid by hand", reason="checked the bank")
        result = await durable.run(system, "c-3", "go", message_id="pay-1")
    assert result.output == "answer: paid by hand"
    assert started == ["1"]  # never re-run
    assert len(calls) == 2  # the first request came from the log
    replayed = [e for run in events for e in run]
    assert replayed[: len(first_events)] == first_events


@pytest.mark.anyio
async def test_human_in_the_loop_waits_across_a_restart(tmp_path: Path) -> None:
    calls: list[int] = []
    agent = Agent(
        two_step_model("ask_human", calls),
        name="t-human",
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool_plain
    async def ask_human(x: str) -> str:
        raise CallDeferred(kind="question")

    durable = DurableAgent(agent, tools={"ask_human": ToolEffect("read")})
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        waiting = await durable.run(system, "c-4", "ask them", message_id="q")
    assert waiting.deferred is not None
    (call,) = waiting.deferred.calls
    assert call.tool_name == "ask_human"

    # days later, in another process: the answer is a message to the same actor
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        done = await durable.answer(
            system, "c-4", {call.tool_call_id: "yes, go ahead"}, message_id="q/answer"
        )
    assert done.output == "answer: yes, go ahead"
    assert done.deferred is None
    assert len(calls) == 2


@pytest.mark.anyio
async def test_a_tool_that_requires_approval_runs_once_approved(tmp_path: Path) -> None:
    calls: list[int] = []
    ran: list[str] = []
    agent = Agent(
        two_step_model("transfer", calls),
        name="t-approval",
        output_type=[str, DeferredToolRequests],
    )

    @agent.tool_plain(requires_approval=True)
    async def transfer(x: str) -> str:
        ran.append(x)
        return "transferred"

    durable = DurableAgent(agent)
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        waiting = await durable.run(system, "c-5", "move money", message_id="t")
    assert waiting.deferred is not None and ran == []
    (call,) = waiting.deferred.approvals

    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        done = await durable.answer(
            system, "c-5", approvals={call.tool_call_id: True}, message_id="t/approved"
        )
        again = await durable.answer(
            system, "c-5", approvals={call.tool_call_id: True}, message_id="t/approved"
        )
    assert done.output == again.output == "answer: transferred"
    assert ran == ["1"]


@pytest.mark.anyio
async def test_a_reconciled_write_in_doubt_asks_the_reconcile_function(tmp_path: Path) -> None:
    calls: list[int] = []
    ran: list[str] = []
    asked: list[tuple[str, dict[str, Any]]] = []
    block = True
    reached = anyio.Event()

    async def did_it_happen(key: str, tool_args: dict[str, Any]) -> Happened:
        asked.append((key, tool_args))
        return Happened(f"order {key} exists")

    agent = Agent(two_step_model("order", calls), name="t-reconcile")

    @agent.tool_plain
    async def order(x: str) -> str:
        ran.append(x)
        if block:
            reached.set()
            await anyio.sleep_forever()
        return "ordered"

    durable = DurableAgent(agent, tools={"order": reconciled(did_it_happen)})
    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system:
        await run_until(durable, system, "c-6", "o", reached)
    block = False
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "c-6", "go", message_id="o")
    assert ran == ["1"]
    ((key, tool_args),) = asked
    assert tool_args == {"x": "1"} and key.startswith("c-6:")
    assert result.output == f"answer: order {key} exists"


@pytest.mark.anyio
async def test_a_changed_agent_on_replay_is_non_determinism(tmp_path: Path) -> None:
    calls: list[int] = []
    reached = anyio.Event()
    agent = Agent(two_step_model("wait", calls), name="t-nondet", instructions="Be brief.")

    @agent.tool_plain
    async def wait(x: str) -> str:
        reached.set()
        await anyio.sleep_forever()
        return "never"

    store = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system:
        await run_until(DurableAgent(agent, tools={"wait": READ}), system, "c-7", "n", reached)
    # the same name, other instructions: the recorded first request no longer matches
    changed = Agent(two_step_model("wait", calls), name="t-nondet", instructions="Be long.")
    durable = DurableAgent(changed, tools={"wait": READ})
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        with pytest.raises(ActorQuarantinedError) as info:
            await durable.run(system, "c-7", "go", message_id="n")
    assert isinstance(info.value.__cause__, NonDeterminismError)
    assert "pydantic_ai.model_request" in str(info.value.__cause__)
    assert len(calls) == 1


@pytest.mark.anyio
async def test_a_sync_tool_gets_its_idempotency_key() -> None:
    keys: list[str] = []
    agent = Agent(two_step_model("charge", []), name="t-sync")

    @agent.tool_plain
    def charge(x: str) -> str:
        keys.append(idempotency_key())
        return "charged"

    durable = DurableAgent(agent, tools={"charge": IDEMPOTENT})
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        result = await durable.run(system, "c-8", "charge", message_id="s")
    assert result.output == "answer: charged"
    # the call is the run's second effect: task "0.1" (docs/pydantic-ai.md), its first call
    (key,) = keys
    assert re.fullmatch(r"c-8:[0-9a-f]{16}:1:0\.1\.0", key), key


@pytest.mark.anyio
async def test_a_tool_declares_its_effect_in_its_metadata() -> None:
    keys: list[str] = []
    agent = Agent(two_step_model("refund", []), name="t-metadata")

    @agent.tool_plain(metadata={"actorlog": "idempotent"})
    async def refund(x: str) -> str:
        keys.append(idempotency_key())
        return "refunded"

    durable = DurableAgent(agent)
    assert durable.effect_of("refund", {"actorlog": "idempotent"}) == IDEMPOTENT
    assert durable.effect_of("other", {"actorlog": READ}) == READ
    assert durable.effect_of("other") == ESCALATE
    with pytest.raises(ConfigurationError, match="not one of"):
        durable.effect_of("other", {"actorlog": "write-twice"})
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        result = await durable.run(system, "c-9", "refund", message_id="r")
    assert result.output == "answer: refunded" and len(keys) == 1
    assert re.fullmatch(r"c-9:[0-9a-f]{16}:1:0\.1\.0", keys[0]), keys


@pytest.mark.anyio
async def test_a_run_builds_no_schema_for_its_output_or_usage_again(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Decoding a run's result reuses one pydantic ``TypeAdapter`` per type: making one
    generates a schema, which cost every durable run more than its commits (issue 25)."""
    import pydantic
    from pydantic_ai.usage import RunUsage

    made: list[Any] = []
    real_init = pydantic.TypeAdapter.__init__

    def counting_init(self: Any, type_: Any, *args: Any, **kwargs: Any) -> None:
        made.append(type_)
        real_init(self, type_, *args, **kwargs)

    calls: list[int] = []
    agent = Agent(two_step_model("lookup", calls), name="t-schemas")

    @agent.tool_plain
    async def lookup(x: str) -> str:
        return x

    durable = DurableAgent(agent, tools={"lookup": READ})
    async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
        await durable.run(system, "c-schemas", "go", message_id="m-0")
        monkeypatch.setattr(pydantic.TypeAdapter, "__init__", counting_init)
        for k in range(1, 3):
            await durable.run(system, "c-schemas", "go", message_id=f"m-{k}")
    assert RunUsage not in made and str not in made, made


def test_an_output_adapter_is_made_once_per_spec_and_a_failure_is_not_kept() -> None:
    """``adapter_of`` (both integrations decode a run's output through it): one adapter per
    spec object; a spec that is not a type raises every time (nothing kept for it)."""
    from actorlog.integrations._effects import adapter_of

    spec = dict[str, list[int]]
    assert adapter_of(spec) is adapter_of(spec)
    assert adapter_of(spec).validate_python({"a": [1]}) == {"a": [1]}
    for _ in range(2):
        with pytest.raises(Exception):  # noqa: B017 (pydantic's own error for a non-type)
            adapter_of(object())
