"""A warm conversation's history is kept as pydantic-ai objects between its runs (issue 25,
docs/pydantic-ai.md "A warm conversation"): a run of a conversation whose actor ran before
in this process starts from the objects its last run ended with instead of validating the
state's JSON, and messages no run changed keep their JSON instead of being dumped again.
What it logs and replies is what a run starting from the log logs and replies, and a
history message a run changes in place is seen."""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("pydantic_ai")

from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from pydantic_ai import Agent
from pydantic_ai.capabilities import ProcessHistory
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

from tests.integrations.test_pydantic_ai_chain import fingerprints, plain, rows, timeless


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs its tool calls as asyncio tasks


async def found(q: str) -> str:
    return f"found {q}"


def make(
    name: str,
    seen: list[ModelMessage],
    edit: str | None = None,
    lookup: Callable[[str], Awaitable[str]] = found,
) -> DurableAgent[None, str]:
    """The chain tests' agent (each run: a tool call, the tool, an answer); ``seen`` gets the
    first message of each request's history. With ``edit``, the history processor edits
    the history in place in the run whose prompt is ``edit``: the first prompt's text (a
    part's field) and the first tool call's arguments (a value inside a part's field); at
    the run's second request, the prompt of its own first request."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages[0])
        for part in messages[-1].parts:
            if isinstance(part, UserPromptPart):  # a tool call id of its own: the same in both
                return ModelResponse(
                    parts=[ToolCallPart("lookup", {"q": part.content}, f"c-{part.content}")]
                )
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(f"answer {part.content}")])
        raise AssertionError("unexpected request")

    def processor(messages: list[ModelMessage]) -> list[ModelMessage]:
        last = messages[-1]
        asked = [p.content for p in last.parts if isinstance(p, UserPromptPart)]
        if isinstance(last, ModelRequest) and asked == [edit]:
            prompt = messages[0].parts[0]
            assert isinstance(prompt, UserPromptPart)
            prompt.content = "edited"
            call = messages[1].parts[0]
            assert isinstance(call, ToolCallPart) and isinstance(call.args, dict)
            args: Any = call.args
            args["q"] = "edited"
        returned = [p.content for p in last.parts if isinstance(p, ToolReturnPart)]
        if isinstance(last, ModelRequest) and returned == [f"found {edit}"]:
            # the run's own first request, dumped for its fingerprint: its prompt's text
            own = messages[-3].parts[0]
            assert isinstance(own, UserPromptPart) and own.content == edit
            own.content = f"{edit} edited"
        return messages

    agent = Agent(
        FunctionModel(model, model_name="chain"),
        name=name,
        capabilities=[ProcessHistory(processor)] if edit else [],
    )

    agent.tool_plain(name="lookup")(lookup)
    return DurableAgent(agent, tools={"lookup": READ})


def replies(store: Path) -> list[Any]:
    return [timeless(payload["reply"]) for _, payload, _ in rows(store, "c", "step")]


@pytest.mark.anyio
async def test_a_warm_run_logs_and_replies_what_a_run_from_the_log_does(tmp_path: Path) -> None:
    """Five runs of one conversation in one system (runs 2 to 5 warm), against the same
    five runs in a conversation whose fifth run starts in a new system (from the log):
    the same fingerprints, replies and results; the warm runs' model saw the kept
    objects, the cold run's model new ones."""
    warm_seen: list[ModelMessage] = []
    cold_seen: list[ModelMessage] = []
    warm_agent, cold_agent = make("t-warm-w", warm_seen), make("t-warm-c", cold_seen)
    warm_db, cold_db = tmp_path / "warm.db", tmp_path / "cold.db"
    async with ActorSystem(SqliteStore(warm_db), actors=[AgentActor]) as system:
        warm = [await warm_agent.run(system, "c", f"q{i}", message_id=f"q{i}") for i in range(5)]
    async with ActorSystem(SqliteStore(cold_db), actors=[AgentActor]) as system:
        cold = [await cold_agent.run(system, "c", f"q{i}", message_id=f"q{i}") for i in range(4)]
    async with ActorSystem(SqliteStore(cold_db), actors=[AgentActor]) as system:
        cold.append(await cold_agent.run(system, "c", "q4", message_id="q4"))
    # 2 requests a run: the first message of runs 2 to 5 is one object in the warm
    # system, and the cold fifth run's is another (validated from the state's JSON)
    assert all(m is warm_seen[0] for m in warm_seen[2:])
    assert cold_seen[8] is not cold_seen[6] and cold_seen[8] is cold_seen[9]
    assert fingerprints(warm_db, "c") == fingerprints(cold_db, "c")
    assert replies(warm_db) == replies(cold_db)
    assert [timeless(plain(r)) for r in warm] == [timeless(plain(r)) for r in cold]
    # a result read again in a new system is the live one
    async with ActorSystem(SqliteStore(warm_db), actors=[AgentActor]) as system:
        step = rows(warm_db, "c", "step")[-1][1]
        again = await warm_agent.result(system, "c", step["reply"])
    assert plain(again) == plain(warm[-1])


@pytest.mark.anyio
async def test_a_history_message_edited_in_place_is_seen(tmp_path: Path) -> None:
    """A history processor edits messages of the history in place (a part's field, and a
    value inside a part's dict field; and a message of the run, after its request's
    fingerprint dumped it): the run's conversation, as the caller gets it and as
    the next run starts from it (warm, or from the log in a new system), has the edits."""
    db = tmp_path / "agents.db"
    seen: list[ModelMessage] = []
    durable = make("t-warm-edit", seen, edit="q2")
    async with ActorSystem(SqliteStore(db), actors=[AgentActor]) as system:
        for i in range(2):
            await durable.run(system, "c", f"q{i}", message_id=f"q{i}")
        edited = await durable.run(system, "c", "q2", message_id="q2")
        after = await durable.run(system, "c", "q3", message_id="q3")
    conversation = plain(edited)
    assert conversation[0]["parts"][0]["content"] == "edited"
    assert conversation[1]["parts"][0]["args"] == {"q": "edited"}
    assert conversation[8]["parts"][0]["content"] == "q2 edited"
    assert plain(after)[:2] == conversation[:2]
    async with ActorSystem(SqliteStore(db), actors=[AgentActor]) as system:
        cold = await durable.run(system, "c", "q4", message_id="q4")
        step = rows(db, "c", "step")[2][1]
        again = await durable.result(system, "c", step["reply"])
    assert plain(cold)[:2] == conversation[:2]
    assert plain(again) == conversation


@pytest.mark.anyio
async def test_a_run_continuing_a_replayed_history_replies_the_logged_conversation(
    tmp_path: Path,
) -> None:
    """Runs q0 to q2 complete, the system stops while q3's tool call runs. In a new system
    recovery replays q0 to q2 (the state's requests then carry the replay's clock readings)
    and q3 goes on: its caller gets the conversation as the log holds it (the first runs'
    clock readings), not the state's; so does the caller of q4, which continues q3 warm."""
    db = tmp_path / "agents.db"
    gate, blocked = anyio.Event(), anyio.Event()

    async def lookup(q: str) -> str:
        if q == "q3" and not gate.is_set():
            blocked.set()
            await anyio.sleep_forever()
        return f"found {q}"

    durable = make("t-warm-replayed", [], lookup=lookup)
    async with ActorSystem(SqliteStore(db), actors=[AgentActor]) as system:
        old = [await durable.run(system, "c", f"q{i}", message_id=f"q{i}") for i in range(3)]
    async with (
        ActorSystem(SqliteStore(db), actors=[AgentActor], shutdown_grace=0.1) as system,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(functools.partial(durable.run, system, "c", "q3", message_id="q3"))
        await blocked.wait()
        tg.cancel_scope.cancel()
    gate.set()
    async with ActorSystem(SqliteStore(db), actors=[AgentActor]) as system:
        resumed = await durable.run(system, "c", "q3", message_id="q3")
        later = await durable.run(system, "c", "q4", message_id="q4")
    assert plain(resumed)[:12] == plain(old[2])
    assert plain(later)[:16] == plain(resumed)


@pytest.mark.anyio
async def test_a_result_shares_nothing_with_the_conversation_the_actor_keeps(
    tmp_path: Path,
) -> None:
    """The caller edits a value nested in what its results hold (a list inside a tool
    call's arguments, which pydantic-ai's validation does not copy); the conversation's
    next runs, warm or from the log, do not see it."""

    def model(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        for part in messages[-1].parts:
            if isinstance(part, UserPromptPart):
                args = {"q": {"words": [str(part.content)]}}
                return ModelResponse(parts=[ToolCallPart("lookup", args, "c")])
            if isinstance(part, ToolReturnPart):
                return ModelResponse(parts=[TextPart(f"answer {part.content}")])
        raise AssertionError("unexpected request")

    agent = Agent(FunctionModel(model, model_name="nested"), name="t-warm-own")

    @agent.tool_plain
    async def lookup(q: dict[str, list[str]]) -> str:
        return " ".join(q["words"])

    durable = DurableAgent(agent, tools={"lookup": READ})
    db = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(db), actors=[AgentActor]) as system:
        first = await durable.run(system, "c", "q0", message_id="q0")
        before = plain(first)
        reply = rows(db, "c", "step")[0][1]["reply"]
        for result in (first, await durable.result(system, "c", reply)):
            call = result.messages[1].parts[0]
            assert isinstance(call, ToolCallPart)
            args: Any = call.args
            args["q"]["words"].append("changed")
        second = await durable.run(system, "c", "q1", message_id="q1")
    assert plain(second)[:4] == before
    async with ActorSystem(SqliteStore(db), actors=[AgentActor]) as system:
        third = await durable.run(system, "c", "q2", message_id="q2")
    assert plain(third)[:4] == before
