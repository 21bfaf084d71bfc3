"""Which task each journaled pydantic-ai effect is logged under (FORMAT.md [F18]): an
identity that does not depend on the helper tasks pydantic-ai spawns while it waits for
tool calls, and runs recorded before tool calls ran in parallel still resume."""

from __future__ import annotations

import shutil
import sqlite3
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("pydantic_ai")

from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart, ToolCallPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from tests._payload import payload_of

FIXTURE = Path(__file__).with_name("fixtures") / "pai_sequential_v0.db"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs its tool calls as asyncio tasks


def intents(store: Path) -> list[dict[str, Any]]:
    """The intent entries of the log, in log order (their JSON payloads)."""
    with closing(sqlite3.connect(store)) as db:
        rows = db.execute(
            "SELECT payload FROM entries WHERE kind = 'intent' ORDER BY seq"
        ).fetchall()
    return [payload_of("intent", p) for (p,) in rows]


async def stop_in(durable: DurableAgent[Any, Any], store: Path, reached: anyio.Event) -> None:
    """Run until ``reached``, then stop the system under the run (the call in flight stays
    in doubt)."""

    async def go(system: ActorSystem) -> None:
        await durable.run(system, "a", "go", message_id="m")

    async with (
        ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(go, system)
        with anyio.fail_after(30):
            await reached.wait()
        tg.cancel_scope.cancel()


@pytest.mark.anyio
async def test_a_sequential_tool_after_parallel_ones_replays(tmp_path: Path) -> None:
    """A response with three parallel calls, a ``sequential=True`` tool (pydantic-ai runs it
    after them, alone) and one more call, twice. pydantic-ai spawns a helper task per
    wake-up while it waits for the parallel calls; live they finish together, on replay one
    at a time, so the tasks spawned after them are numbered differently. The effects' log
    identity does not follow those spawns: the run resumes (it was NonDeterminismError)."""
    ran: list[str] = []
    block = True
    reached = anyio.Event()

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        k = sum(1 for m in messages if isinstance(m, ModelResponse))
        if k == 2:
            return ModelResponse(parts=[TextPart("done")])
        parts = [
            ToolCallPart("fetch", {"i": 10 * k + i}, tool_call_id=f"c{k}{i}") for i in range(3)
        ]
        parts.append(ToolCallPart("barrier", {"i": k}, tool_call_id=f"b{k}"))
        parts.append(ToolCallPart("fetch", {"i": 10 * k + 5}, tool_call_id=f"c{k}5"))
        return ModelResponse(parts=list(parts))

    agent = Agent(FunctionModel(fn), name="t-barrier")

    @agent.tool_plain
    async def fetch(i: int) -> str:
        ran.append(f"fetch {i}")
        if i == 15 and block:
            reached.set()
            await anyio.sleep_forever()
        return f"p{i}"

    @agent.tool_plain(sequential=True)
    async def barrier(i: int) -> str:
        ran.append(f"barrier {i}")
        return f"b{i}"

    durable = DurableAgent(agent, tools={"fetch": READ, "barrier": READ})
    store = tmp_path / "agents.db"
    await stop_in(durable, store, reached)
    before = list(ran)
    assert before.index("barrier 0") > max(before.index(f"fetch {i}") for i in range(3))

    block = False
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "a", "go", message_id="m")
    assert result.output == "done"
    assert ran[len(before) :] == ["fetch 15"]  # only the call in flight ran again
    tasks = [p.get("task") for p in intents(store)]
    # each effect under a node of its own, numbered in the order the run asked for them
    assert tasks[:5] == ["0.0", "0.1", "0.2", "0.3", "0.4"]
    assert len(set(tasks)) == len(tasks)


@pytest.mark.anyio
async def test_a_run_recorded_before_parallel_tool_calls_resumes(tmp_path: Path) -> None:
    """``fixtures/pai_sequential_v0.db`` was recorded by actorlog at commit 49148f5 (tool calls
    one at a time, every effect of the step's own task: no ``task`` field), stopped while
    the last of six tool calls ran. It resumes with the same history: the recorded calls
    come from the log, the one in flight runs again, the rest of the run is logged as it
    was recorded (the step's own task, one call at a time)."""
    ran: list[int] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        k = sum(1 for m in messages if isinstance(m, ModelResponse))
        if k < 2:
            parts = [
                ToolCallPart("fetch", {"i": 10 * k + i}, tool_call_id=f"c{k}{i}") for i in range(3)
            ]
            return ModelResponse(parts=list(parts))
        return ModelResponse(parts=[TextPart("done")])

    agent = Agent(FunctionModel(fn), name="exp")

    @agent.tool_plain
    async def fetch(i: int) -> str:
        ran.append(i)
        return f"p{i}"

    durable = DurableAgent(agent, tools={"fetch": READ})
    store = tmp_path / "old.db"
    shutil.copyfile(FIXTURE, store)
    recorded = intents(store)
    assert len(recorded) == 8 and all("task" not in p for p in recorded)

    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "a", "go", message_id="m")
    assert result.output == "done"
    assert ran == [12]
    after = intents(store)
    assert [p["index"] for p in after] == list(range(9))  # 7: fetch(12) again, 8: the answer
    assert all("task" not in p for p in after)


@pytest.mark.anyio
async def test_pydantic_ais_own_tasks_are_not_the_steps_tasks(tmp_path: Path) -> None:
    """pydantic-ai runs its graph's nodes, its gathers and each tool call in tasks of its
    own (about 20 a run). Every effect of a run is logged under the node the integration
    numbers for it, so those tasks run outside the step's spawn counting: the step knows
    only the run's nodes and its effects' (it counted each of pydantic-ai's tasks as a task
    of the step, a node and a done callback each), and the code pydantic-ai runs in them
    (here the event stream handler) sees no step task."""
    from actorlog._effects import tasks as _tasks
    from actorlog._effects.context import Context
    from actorlog.integrations.pydantic_ai import AgentState, RunPrompt

    seen: list[object] = []
    contexts: list[Context] = []

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        if sum(1 for m in messages if isinstance(m, ModelResponse)) == 1:
            return ModelResponse(parts=[TextPart("done")])
        return ModelResponse(
            parts=[ToolCallPart("fetch", {"i": i}, tool_call_id=f"c{i}") for i in range(3)]
        )

    agent: Agent[None, str] = Agent(FunctionModel(fn), name="own-tasks")

    @agent.tool_plain
    async def fetch(i: int) -> str:
        return f"page {i}"

    async def handler(ctx: Any, events: Any) -> None:
        async for _ in events:
            seen.append(_tasks.current())

    class Capturing(DurableAgent[None, str]):
        async def _step(self, ctx: Context, state: AgentState, msg: RunPrompt) -> Any:
            contexts.append(ctx)
            return await super()._step(ctx, state, msg)

    durable = Capturing(agent, tools={"fetch": READ}, event_stream_handler=handler)
    async with ActorSystem(SqliteStore(tmp_path / "s.db"), actors=[AgentActor]) as system:
        result = await durable.run(system, "a", "go", message_id="m")
    assert result.output == "done"
    assert seen and all(node is None for node in seen)
    (ctx,) = contexts
    # the step's root task, the run's node "0" and its 2 model requests and 3 tool calls
    assert sorted(ctx.nodes) == ["", "0", "0.0", "0.1", "0.2", "0.3", "0.4"]
    logged = sorted({str(i.get("task", "")) for i in intents(tmp_path / "s.db")})
    assert logged == ["0.0", "0.1", "0.2", "0.3", "0.4"]
