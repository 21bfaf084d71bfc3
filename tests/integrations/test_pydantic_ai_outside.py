"""docs/pydantic-ai.md's promises on a conversation, as a user reads them (black box: the
public API, real SQLite files): the caller's kept conversation ("What a run's reply
holds") is used only when it is the conversation in the log, whoever ran the runs in
between and whatever happened to the actor id."""

from __future__ import annotations

import os
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

pytest.importorskip("pydantic_ai")

import pydantic_ai._utils
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import (
    READ,
    AgentActor,
    DurableAgent,
    DurableRunResult,
    RunPrompt,
)
from pydantic_ai import Agent
from pydantic_ai.messages import (
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
    UserPromptPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs its tool calls as asyncio tasks


FIXED = datetime(2026, 1, 1, tzinfo=UTC)


def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    """A tool call for a prompt, then the tool's return as text; fixed timestamps (a model
    whose responses carry the provider's clock)."""
    last = messages[-1]
    assert isinstance(last, ModelRequest)
    for part in last.parts:
        if isinstance(part, UserPromptPart):
            call = ToolCallPart("lookup", {"q": str(part.content)}, tool_call_id="t")
            return ModelResponse(parts=[call], timestamp=FIXED)
        if isinstance(part, ToolReturnPart):
            return ModelResponse(parts=[TextPart(f"answer {part.content}")], timestamp=FIXED)
    raise AssertionError("unexpected request")


def make(name: str) -> DurableAgent[None, str]:
    agent = Agent(FunctionModel(fn, model_name="outside"), name=name)

    @agent.tool_plain
    async def lookup(q: str) -> str:
        return f"found {q}"

    return DurableAgent(agent, tools={"lookup": READ})


def prompts(result: DurableRunResult[Any]) -> list[str]:
    """The user prompts of a result's conversation, in order."""
    return [
        str(part.content)
        for message in result.messages
        if isinstance(message, ModelRequest)
        for part in message.parts
        if isinstance(part, UserPromptPart)
    ]


class _FrozenClock(datetime):
    @classmethod
    def now(cls, tz: Any = None) -> Any:
        return FIXED


@pytest.fixture
def frozen_clock(monkeypatch: pytest.MonkeyPatch) -> None:
    """pydantic-ai's clock stopped, as a user's test under freezegun has it."""
    monkeypatch.setattr(pydantic_ai._utils, "datetime", _FrozenClock)


@pytest.mark.anyio
async def test_a_conversation_deleted_and_started_again_is_the_new_one(tmp_path: Path) -> None:
    """docs: "an actor deleted and registered again has other replies at the same seqs":
    the runs of the new conversation (same id, same message ids) give its own messages."""
    durable = make("outside-deleted")
    async with ActorSystem(f"sqlite:///{tmp_path / 'a.db'}", actors=[AgentActor]) as system:
        for i in range(3):
            await durable.run(system, "c", f"old{i}", message_id=f"m{i}")
        await system.terminate("c")
        await system.delete("c")
        got = [await durable.run(system, "c", f"new{i}", message_id=f"m{i}") for i in range(4)]
    assert [prompts(r) for r in got] == [[f"new{j}" for j in range(i + 1)] for i in range(4)]


@pytest.mark.anyio
@pytest.mark.usefixtures("frozen_clock")
async def test_a_kept_conversation_is_not_taken_for_another_with_the_same_last_run(
    tmp_path: Path,
) -> None:
    """The conversation is deleted and started again by someone else (a plain ``ask`` of
    the ``RunPrompt``, as docs/pydantic-ai.md shows for streaming): its third run is the
    same prompt as the old third run, with a clock that does not move, but its first runs
    differ. The caller's next ``run`` must give the new conversation, not the kept one."""
    durable = make("outside-same-last")
    async with ActorSystem(f"sqlite:///{tmp_path / 'a.db'}", actors=[AgentActor]) as system:
        for p in ["a", "b", "c"]:
            await durable.run(system, "conv", p, message_id=f"old-{p}")
        await system.terminate("conv")
        await system.delete("conv")
        ref = await system.spawn(AgentActor, "conv")
        for p in ["x", "y", "c"]:
            await ref.ask(RunPrompt(durable.name, p), message_id=f"new-{p}")
        result = await durable.run(system, "conv", "d", message_id="new-d")
    assert prompts(result) == ["x", "y", "c", "d"]


@pytest.mark.anyio
async def test_openai_agents_a_kept_conversation_is_not_taken_for_another(tmp_path: Path) -> None:
    """docs/openai-agents.md, the same promise: the conversation deleted and started again,
    its runs made by a plain ``ask`` of the ``RunInput``, its third run the same input as the
    old third run, its first ones not (the SDK's items carry no clock)."""
    pytest.importorskip("agents")
    from actorlog.integrations.openai_agents import (
        AgentActor as OaiActor,
        DurableAgent as OaiAgent,
        RunInput,
    )
    from agents import (
        Agent as OaiBase,
        Model,
        ModelResponse as OaiResponse,
        RunConfig,
        set_tracing_disabled,
    )
    from agents.testing import assistant_message
    from agents.usage import Usage

    set_tracing_disabled(True)  # the SDK would post its traces to api.openai.com

    class Echo(Model):
        async def get_response(
            self, system_instructions: Any, input: Any, *a: Any, **k: Any
        ) -> Any:
            said = [i["content"] for i in input if isinstance(i, dict) and i.get("role") == "user"]
            text = f"echo {said[-1]}"
            return OaiResponse(
                output=[assistant_message(text, item_id="m")], usage=Usage(), response_id="r"
            )

        def stream_response(self, *a: Any, **k: Any) -> Any:
            raise NotImplementedError

    agent: OaiAgent[Any] = OaiAgent(
        OaiBase(name="outside-oai", instructions="echo"), run_config=RunConfig(model=Echo())
    )

    def inputs(items: list[Any]) -> list[str]:
        return [i["content"] for i in items if isinstance(i, dict) and i.get("role") == "user"]

    async with ActorSystem(f"sqlite:///{tmp_path / 'a.db'}", actors=[OaiActor]) as system:
        for said in ["a", "b", "c"]:
            await agent.run(system, "conv", said, message_id=f"old-{said}")
        await system.terminate("conv")
        await system.delete("conv")
        ref = await system.spawn(OaiActor, "conv")
        for said in ["x", "y", "c"]:
            await ref.ask(RunInput(agent.name, said), message_id=f"new-{said}")
        result = await agent.run(system, "conv", "d", message_id="new-d")
    assert inputs(result.items) == ["x", "y", "c", "d"]


HOSTILE_RUNS: dict[str, dict[str, Any]] = {
    "prompt 42": {"prompt": 42},
    "prompt None": {"prompt": None},
    "prompt bytes": {"prompt": b"x"},
    "prompt a list": {"prompt": ["a", 1]},
    "new_conversation 'yes'": {"new_conversation": "yes"},
    "system None": {"system": None},
    "answer: results a list": {"answer": True, "results": ["a"]},
    "answer: results not JSON": {"answer": True, "results": {"id": object()}},
    "answer: results by int": {"answer": True, "results": {1: "x"}},
    "answer: approval 'yes'": {"answer": True, "approvals": {"id": "yes"}},
    "answer: approvals a list": {"answer": True, "approvals": ["id"]},
    "answer: system None": {"answer": True, "system": None, "results": {"id": "x"}},
}


@pytest.mark.anyio
@pytest.mark.parametrize("case", list(HOSTILE_RUNS))
async def test_hostile_arguments_to_run_and_answer_are_refused_at_the_call(
    tmp_path: Path, case: str
) -> None:
    """``run(system, actor_id, prompt: str, *, new_conversation: bool)`` and ``answer(...,
    results: Mapping, approvals: Mapping[str, bool])``: anything else is a
    ``ConfigurationError`` at the call, and nothing is stored (the old code logged a run of
    ``42``, of ``{"i": "d"}`` approvals, or raised AttributeError/ValueError/pydantic's)."""
    from actorlog import ConfigurationError

    args = dict(HOSTILE_RUNS[case])
    durable = make("outside-hostile")
    db = tmp_path / "a.db"
    async with ActorSystem(f"sqlite:///{db}", actors=[AgentActor]) as system:
        await durable.run(system, "other", "p", message_id="first")  # the file holds a run
        target = args.pop("system", system)
        with pytest.raises(ConfigurationError):
            if args.pop("answer", False):
                await durable.answer(target, "c", message_id="m", **args)
            else:
                prompt = args.pop("prompt", "p")
                await durable.run(target, "c", prompt, message_id="m", **args)
        assert not await system.store.read("c")
        ok = await durable.run(system, "c", "fine", message_id="m")  # the id is still free
    assert ok.output == "answer found fine"


@pytest.mark.anyio
async def test_openai_agents_run_refuses_what_is_not_a_system(tmp_path: Path) -> None:
    """The OpenAI Agents ``run`` checks its arguments as pydantic-ai's does (it raised
    AttributeError for ``system=None``)."""
    pytest.importorskip("agents")
    from actorlog import ConfigurationError
    from actorlog.integrations.openai_agents import DurableAgent as OaiAgent
    from agents import Agent as OaiBase

    agent: OaiAgent[Any] = OaiAgent(OaiBase(name="outside-oai-args", instructions="x"))
    with pytest.raises(ConfigurationError, match="system must be an ActorSystem"):
        await agent.run(None, "c", "hello")  # type: ignore[arg-type]  # the hostile call


def _continue_and_kill(db: Path) -> list[str]:
    """Run ``q2`` and ``q3`` of ``conv`` in another process, SIGKILLed in ``q3``'s tool."""
    import signal
    import subprocess
    import sys

    from tests.integrations import outside_worker

    env = {**os.environ, "OUTSIDE_BLOCK": "q3"}
    worker = Path(outside_worker.__file__)
    lines = []
    with subprocess.Popen(
        [sys.executable, str(worker), str(db), "q2", "q3"],
        env=env,
        stdout=subprocess.PIPE,
        text=True,
    ) as proc:
        assert proc.stdout is not None
        for line in proc.stdout:
            lines.append(line)
            if line.startswith("BLOCKED"):
                break
        proc.send_signal(signal.SIGKILL)
        proc.wait()
    return lines


@pytest.mark.anyio
async def test_a_conversation_continued_and_killed_in_another_process(tmp_path: Path) -> None:
    """docs/pydantic-ai.md: ``result.messages`` is the whole conversation, "in another
    process too", and a run killed mid-tool resumes. This process runs ``q0``, ``q1`` (its
    caller keeps the conversation), closes its system; another process runs ``q2`` and is
    SIGKILLed inside ``q3``'s tool call; this process opens a system on the same store
    object again: ``run`` of ``q3`` (same message id) gives the resumed run with the whole
    conversation, ``q4`` continues it."""
    from actorlog.stores import SqliteStore

    from tests.integrations import outside_worker

    db = tmp_path / "a.db"
    store = SqliteStore(db)
    durable = outside_worker.durable
    async with ActorSystem(store, actors=[AgentActor]) as system:
        for p in ["q0", "q1"]:
            await durable.run(system, "conv", p, message_id=p)
    lines = _continue_and_kill(db)
    assert lines[0].startswith("DONE answer found q2 12"), lines
    async with ActorSystem(store, actors=[AgentActor]) as system:
        q3 = await durable.run(system, "conv", "q3", message_id="q3")
        q4 = await durable.run(system, "conv", "q4", message_id="q4")
    assert q3.output == "answer found q3"
    assert prompts(q3) == ["q0", "q1", "q2", "q3"]
    assert prompts(q4) == ["q0", "q1", "q2", "q3", "q4"]
    assert len(q4.messages) == 20


HOSTILE_OPTIONS: dict[str, dict[str, Any]] = {
    "an effect 'bogus'": {"tools": {"lookup": "bogus"}},
    "an effect 42": {"tools": {"lookup": 42}},
    "tools a list": {"tools": ["lookup"]},
    "default 42": {"default_tool_effect": 42},
    "name 5": {"name": 5},
    "agent a str": {"agent": "not an agent"},
    "event_stream_handler 5": {"event_stream_handler": 5},
    "event_stream_handler a str": {"event_stream_handler": "print"},
    "emit_deltas 1": {"emit_deltas": 1},
}


@pytest.mark.parametrize("case", list(HOSTILE_OPTIONS))
def test_hostile_options_to_durable_agent_are_refused_at_the_call(case: str) -> None:
    """``DurableAgent(agent, tools={name: effect}, default_tool_effect=ToolEffect)``: the
    old code took any of these (a bad effect failed the first run that called the tool,
    after its message and model request were logged), or raised ValueError/AttributeError."""
    from actorlog import ConfigurationError

    args = dict(HOSTILE_OPTIONS[case])
    agent = Agent(FunctionModel(fn), name="outside-options")
    with pytest.raises(ConfigurationError):
        DurableAgent(args.pop("agent", agent), **args)
    assert DurableAgent(agent, tools={"lookup": "read"}).tools == {"lookup": READ}


@pytest.mark.anyio
async def test_a_failed_run_leaves_the_conversation_as_it_was(tmp_path: Path) -> None:
    """docs/pydantic-ai.md, "Rules and limits": a run that fails (``HandlerError``) leaves
    the conversation's history as it was; the next run continues the one before it, for
    this caller (which keeps the conversation) and for a new system on the file."""
    from actorlog import HandlerError

    def failing(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        last = messages[-1]
        assert isinstance(last, ModelRequest)
        if any(isinstance(p, UserPromptPart) and p.content == "boom" for p in last.parts):
            raise RuntimeError("the provider is down")
        return fn(messages, info)

    agent = Agent(FunctionModel(failing, model_name="outside"), name="outside-failing")

    @agent.tool_plain
    async def lookup(q: str) -> str:
        return f"found {q}"

    durable = DurableAgent(agent, tools={"lookup": READ})
    db = tmp_path / "a.db"
    async with ActorSystem(f"sqlite:///{db}", actors=[AgentActor]) as system:
        for p in ["q0", "q1"]:
            await durable.run(system, "c", p, message_id=p)
        with pytest.raises(HandlerError):
            await durable.run(system, "c", "boom", message_id="boom")
        q2 = await durable.run(system, "c", "q2", message_id="q2")
    async with ActorSystem(f"sqlite:///{db}", actors=[AgentActor]) as system:
        q3 = await durable.run(system, "c", "q3", message_id="q3")
    assert prompts(q2) == ["q0", "q1", "q2"]
    assert prompts(q3) == ["q0", "q1", "q2", "q3"]
