"""pydantic-ai's default parallel tool mode under the integration: the tool calls of one model
response run at once, and after a resume the run takes the path the live run took (tool
results handed back in the order they finished live, so the event stream is a
prefix-extension of what was seen), without running a completed tool again."""

from __future__ import annotations

import json
import os
import signal
import sqlite3
import subprocess
import sys
from collections import Counter
from contextlib import closing
from pathlib import Path
from typing import Any

import anyio
import pytest

pytest.importorskip("pydantic_ai")

from actorlog import ActorSystem, ops
from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
from actorlog.stores import SqliteStore
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import (
    AgentStreamEvent,
    FunctionToolCallEvent,
    FunctionToolResultEvent,
    ModelMessage,
    ModelRequest,
    ModelResponse,
    TextPart,
    ToolCallPart,
    ToolReturnPart,
)
from pydantic_ai.models.function import AgentInfo, FunctionModel

WORKER = Path(__file__).with_name("fanout_worker.py")
TOOL = "pydantic_ai.tool."  # the log name of a pydantic-ai tool (docs/pydantic-ai.md)


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"  # pydantic-ai runs its tool calls as asyncio tasks


def describe(event: AgentStreamEvent) -> str:
    if isinstance(event, FunctionToolCallEvent):
        return f"call {event.part.tool_call_id}"
    if isinstance(event, FunctionToolResultEvent):
        return f"result {event.tool_call_id} {event.part.content}"
    return type(event).__name__


def fan_model(calls: int) -> FunctionModel:
    """One response with ``calls`` tool calls of ``fetch``, then an answer."""

    def fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        returns = [
            str(p.content)
            for m in messages
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if returns:
            return ModelResponse(parts=[TextPart("; ".join(returns))])
        parts = [ToolCallPart("fetch", {"i": i}, tool_call_id=f"c{i}") for i in range(calls)]
        return ModelResponse(parts=list(parts))

    return FunctionModel(fn, model_name="fan")


@pytest.mark.anyio
async def test_tool_calls_run_in_parallel_and_resume_in_the_order_they_finished(
    tmp_path: Path,
) -> None:
    """Three tool calls of one response: c2 finishes first, then c1, while c0 is still
    running when the system stops. After the restart c0 runs again (a read in doubt), c1 and
    c2 come from the log, and the handler sees the events it saw before in the same order
    (c2's result before c1's), then c0's."""
    ran: list[int] = []
    running: set[int] = set()
    overlapped: list[int] = []
    events: list[list[str]] = []
    block = True
    seen = {1: anyio.Event(), 2: anyio.Event()}  # the handler got this call's result
    reached = anyio.Event()

    async def handler(ctx: RunContext[Any], stream: Any) -> None:
        run: list[str] = []
        events.append(run)
        async for event in stream:
            run.append(describe(event))
            if isinstance(event, FunctionToolResultEvent) and event.tool_call_id != "c0":
                seen[int(event.tool_call_id[1:])].set()

    agent = Agent(fan_model(3), name="t-parallel-order")

    @agent.tool_plain
    async def fetch(i: int) -> str:
        ran.append(i)
        running.add(i)
        overlapped.append(len(running))
        await anyio.sleep(0.05)  # all three start before any returns
        try:
            if i == 1:
                await seen[2].wait()  # c2 finishes first, then c1
            elif i == 0 and block:
                await seen[1].wait()
                reached.set()
                await anyio.sleep_forever()
            return f"page {i}"
        finally:
            running.discard(i)

    durable = DurableAgent(agent, tools={"fetch": READ}, event_stream_handler=handler)
    store = tmp_path / "agents.db"

    async def go(system: ActorSystem) -> None:
        await durable.run(system, "fan-1", "go", message_id="m-1")

    async with (
        ActorSystem(SqliteStore(store), actors=[AgentActor], shutdown_grace=0.1) as system,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(go, system)
        with anyio.fail_after(30):
            await reached.wait()
        tg.cancel_scope.cancel()
    assert sorted(ran) == [0, 1, 2] and max(overlapped) == 3  # all three at once
    first = [e for run in events for e in run]
    results = [e for e in first if e.startswith("result")]
    assert results == ["result c2 page 2", "result c1 page 1"]

    block = False
    events.clear()
    async with ActorSystem(SqliteStore(store), actors=[AgentActor]) as system:
        result = await durable.run(system, "fan-1", "go", message_id="m-1")
    assert result.output == "page 0; page 1; page 2"
    assert sorted(ran) == [0, 0, 1, 2]  # only the call in flight ran again
    again = [e for run in events for e in run]
    assert again[: len(first)] == first
    assert [e for e in again if e.startswith("result")] == [
        "result c2 page 2",
        "result c1 page 1",
        "result c0 page 0",
    ]


async def logged_results(store: Path, actor_id: str) -> dict[str, str]:
    """The tool calls of ``actor_id`` in the log (read-only, beside a running runtime):
    ``"fetch {json args}"`` -> status (``ok`` once its result is logged)."""
    async with ops.opened(f"sqlite:///{store}") as s:
        found = await ops.history(s, actor_id)
    return {
        f"{c.tool.removeprefix(TOOL)} {json.dumps(c.args[0], sort_keys=True)}": c.status
        for step in found.steps
        for c in step.calls
        if c.tool.startswith(TOOL)
    }


# -- SIGKILL between the starts and the results of parallel tool calls ------------------------


def _env(ledger: Path) -> dict[str, str]:
    return dict(os.environ, FANOUT_LEDGER=str(ledger))


def _worker(store: Path, ledger: Path, kill_after: int | None) -> tuple[list[str], int]:
    """Run the worker; SIGKILL it after ``kill_after`` ``[effect]`` lines. The lines it
    printed (whole lines only), and its return code."""
    proc = subprocess.Popen(
        [sys.executable, str(WORKER), str(store)],
        env=_env(ledger),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    assert proc.stdout is not None and proc.stderr is not None
    lines: list[str] = []
    effects = 0
    for line in proc.stdout:
        if not line.endswith("\n"):
            break
        lines.append(line.rstrip("\n"))
        if line.startswith("[effect]"):
            effects += 1
            if effects == kill_after:
                proc.send_signal(signal.SIGKILL)
                break
    proc.stdout.close()
    err = proc.stderr.read()
    proc.stderr.close()
    rc = proc.wait(timeout=120)
    assert rc in (0, -signal.SIGKILL), err
    return lines, rc


def _ledger(ledger: Path, table: str) -> Counter[str]:
    if not ledger.exists():
        return Counter()
    with closing(sqlite3.connect(ledger)) as db:
        try:
            rows = db.execute(f"SELECT key FROM {table}").fetchall()
        except sqlite3.OperationalError:  # not created yet
            return Counter()
    return Counter(str(k) for (k,) in rows)


def _tool_key(logged: str) -> str:
    """``'fetch {"i": 2}'`` (a call in the log) -> ``'fetch:2'`` (a ledger key)."""
    name, args = logged.split(" ", 1)
    return f"{name}:{json.loads(args)['i']}"


#: how many [effect] lines each killed process gets to print: between the tool calls'
#: starts and their results, in both rounds (ACTORLOG_PAI_KILLS="3,6,..." to try others)
KILLS = [int(k) for k in os.environ.get("ACTORLOG_PAI_KILLS", "3,6,9,5").split(",")]


def test_killed_between_parallel_tool_calls_resumes_without_repeating_completed_ones(
    tmp_path: Path,
) -> None:
    ref_lines, rc = _worker(tmp_path / "ref.db", tmp_path / "ref-ledger.db", None)
    assert rc == 0
    reference = json.loads(ref_lines[-1].removeprefix("DONE "))
    effects = [x.split(" ", 1)[1] for x in ref_lines if x.startswith("[effect]")]
    # parallel: every fetch started before the first one finished, likewise the saves
    assert effects.index("finished fetch:3") > max(
        effects.index(f"started fetch:{i}") for i in range(4)
    )
    assert effects.index("finished save:2") > max(
        effects.index(f"started save:{i}") for i in range(3)
    )

    store, ledger = tmp_path / "agents.db", tmp_path / "ledger.db"
    runs: list[list[str]] = []
    kills = 0
    completed: set[str] = set()  # tool calls whose result the log holds
    for after in [*KILLS, None]:
        started_before = _ledger(ledger, "started")
        lines, rc = _worker(store, ledger, after)
        runs.append([x for x in lines if x.startswith("[event]")])
        started = _ledger(ledger, "started") - started_before
        again = sorted(k for k in started if k in completed)
        assert not again, f"completed tool calls ran again: {again}"
        if rc != 0:
            kills += 1
            logged = anyio.run(logged_results, store, "fan-7")
            completed |= {_tool_key(k) for k, status in logged.items() if status == "ok"}
        else:
            final = json.loads(lines[-1].removeprefix("DONE "))
    assert kills >= 3, runs
    assert final == reference

    # what each killed process's handler saw is a prefix of what the last one saw
    last = runs[-1]
    for seen in runs[:-1]:
        assert last[: len(seen)] == seen, (seen, last)
    assert sum(1 for x in last if x.startswith("[event] result")) == 7

    # the idempotent writes ran with their three keys only (again with the same key when
    # in doubt), and every tool call ran at least once
    assert len(_ledger(ledger, "saved")) == 3
    assert set(_ledger(ledger, "started")) == {f"fetch:{i}" for i in range(4)} | {
        f"save:{i}" for i in range(3)
    }
