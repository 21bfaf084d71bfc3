"""Part 2 of ``python -m benchmarks parallel``: the same pydantic-ai agent with the
integration (``DurableAgent``) and without it, and actorlog making the same journaled calls
without pydantic-ai (``Shaped``), to split what a durable run adds between the runtime and
the integration (docs/benchmarks/parallel.md)."""

from __future__ import annotations

import itertools
import time
from collections.abc import Awaitable, Callable, Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import attrs
from actorlog import Actor, ActorSystem, Context, message, tool
from actorlog.stores import SqliteStore

#: the values a DurableAgent run logs (its model responses, its reply's conversation), for
#: ``Shaped``: set from a real run by ``agent_rounds``
_SHAPE: dict[str, Any] = {}


@tool(effect="read", name="bench.shaped_request")
async def shaped_request(model: str, request: str, tools: str) -> Any:
    return _SHAPE["responses"][0 if request == "first" else 1]


@tool(effect="read", name="bench.shaped_tool")
async def shaped_tool(args: dict[str, Any]) -> Any:
    await anyio.lowlevel.checkpoint()
    return {"__pydantic_ai__": "value", "value": f"page {args['i']}"}


@message(name="bench.shaped_state")
@attrs.define
class ShapedState:
    messages: list[Any] = attrs.Factory(list)


@message(name="bench.shaped_run")
@attrs.define
class ShapedRun:
    calls: int  # tool calls; 0: no journaled call at all (spawn, step, state, reply)


class Shaped(Actor[ShapedState], name="bench.shaped"):
    """A DurableAgent run's journaled calls without pydantic-ai: 2 model requests around
    ``calls`` parallel tool calls, logging values of the same shape, the same state and reply."""

    async def receive(self, ctx: Context, msg: ShapedRun) -> dict[str, Any]:
        if msg.calls:
            await ctx.call(shaped_request, "fan-fn", "first", "0" * 64)
            async with anyio.create_task_group() as tg:
                for i in range(msg.calls):
                    tg.start_soon(ctx.call, shaped_tool, {"i": i})
            await ctx.call(shaped_request, "fan-fn", "second", "0" * 64)
        self.state.messages = _SHAPE["messages"]
        return {"output": "x", "messages": _SHAPE["messages"], "new_from": 0, "usage": {}}


# -- part 2: pydantic-ai --------------------------------------------------------------------

#: (what, wall clock, process CPU) of the run being split into phases, or None: marked by the
#: waiting agents' model function and tool, and around the run (``agent_rounds``)
_MARKS: list[tuple[str, float, float]] | None = None

#: the phases of a run whose tools wait: before the first model request (the actor's spawn,
#: the message and the request's intent logged), from the first response to the first tool
#: (the response logged, the tool calls' intents), the tools' wait, from the last tool's end
#: to the second model request (the results, the request's intent), and from the second
#: response to the caller's result (the step's end, the reply)
PHASES = (
    "start → first model request",
    "first response → first tool starts",
    "the tools' wait",
    "last tool ends → second model request",
    "second response → result",
)


def _mark(what: str) -> None:
    if _MARKS is not None:
        _MARKS.append((what, time.perf_counter(), time.process_time()))


def phases(marks: Sequence[tuple[str, float, float]]) -> list[tuple[float, float]]:
    """(wall, CPU) seconds of each of ``PHASES`` in one run's ``marks``."""
    models = [m for m in marks if m[0] == "model"]
    starts = [m for m in marks if m[0] == "tool start"]
    ends = [m for m in marks if m[0] == "tool end"]
    points = [marks[0], models[0], starts[0], ends[-1], models[-1], marks[-1]]
    return [(b[1] - a[1], b[2] - a[2]) for a, b in itertools.pairwise(points)]


class TimedSqliteStore(SqliteStore):
    """``SqliteStore`` that counts its transactions (appends and actor registrations) and
    the wall time each took. Benchmark-only: it wraps the store's private commit hooks
    (``_commit_now``: a lone append committed on the event loop's thread)."""

    def __init__(self, path: str | Path) -> None:
        super().__init__(path)
        self.commits = 0
        self.commit_seconds = 0.0
        #: the payload bytes of every entry appended (what a run writes into the log)
        self.payload_bytes = 0

    async def append(self, actor_id: str, expected_last_seq: int, rows: Sequence[Any]) -> None:
        self.payload_bytes += sum(len(r.payload) for r in rows)
        await super().append(actor_id, expected_last_seq, rows)

    def _commit_now(self, req: Any) -> bool:
        # a lone append committed on the loop's thread, without ``_commit`` (an actorlog
        # without this hook never calls it)
        t = time.perf_counter()
        done = super()._commit_now(req)
        if done:
            self.commits += 1
            self.commit_seconds += time.perf_counter() - t
        return done

    async def _commit(self, batch: Sequence[Any]) -> None:
        t = time.perf_counter()
        try:
            await super()._commit(batch)
        finally:
            self.commits += 1
            self.commit_seconds += time.perf_counter() - t

    async def _register(self, batch: Sequence[Any]) -> None:
        t = time.perf_counter()
        try:
            await super()._register(batch)
        finally:
            self.commits += 1
            self.commit_seconds += time.perf_counter() - t


def pydantic_ai_cases(
    calls: int, delay: float, system: list[ActorSystem]
) -> tuple[type[Actor[Any]], dict[str, Callable[[], Awaitable[Any]]]] | None:
    """The actor class to register and, by name, a coroutine function running the agent once
    (durable runs use ``system[0]``); None without pydantic-ai."""
    try:
        from actorlog.integrations.pydantic_ai import READ, AgentActor, DurableAgent
        from pydantic_ai import Agent
        from pydantic_ai.messages import (
            ModelMessage,
            ModelMessagesTypeAdapter,
            ModelRequest,
            ModelResponse,
            TextPart,
            ToolCallPart,
            ToolReturnPart,
            UserPromptPart,
        )
        from pydantic_ai.models.function import AgentInfo, FunctionModel
    except ImportError:
        return None

    def model_fn(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        _mark("model")
        # this run's tool returns: those after the last prompt (a conversation's earlier
        # runs are its history)
        prompts = [
            k
            for k, m in enumerate(messages)
            if isinstance(m, ModelRequest) and any(isinstance(p, UserPromptPart) for p in m.parts)
        ]
        returns = [
            str(p.content)
            for m in messages[prompts[-1] if prompts else 0 :]
            if isinstance(m, ModelRequest)
            for p in m.parts
            if isinstance(p, ToolReturnPart)
        ]
        if not returns:
            parts = [ToolCallPart("fetch", {"i": i}, tool_call_id=f"c{i}") for i in range(calls)]
            return ModelResponse(parts=list(parts))
        return ModelResponse(parts=[TextPart("; ".join(returns))])

    def make(name: str, wait: float) -> Agent[None, str]:
        agent = Agent(FunctionModel(model_fn, model_name="fan-fn"), name=name)

        @agent.tool_plain
        async def fetch(i: int) -> str:
            _mark("tool start")
            await anyio.sleep(wait)
            _mark("tool end")
            return f"page {i}"

        return agent

    waiting, instant = make("fan-wait", delay), make("fan-instant", 0.0)
    durable_waiting = DurableAgent(waiting, tools={"fetch": READ})
    durable_instant = DurableAgent(instant, tools={"fetch": READ})
    runs = iter(range(10**9))

    async def alone(agent: Agent[None, str], sequential: bool = False) -> Any:
        if sequential:
            with Agent.parallel_tool_call_execution_mode("sequential"):
                return (await agent.run("go")).output
        return (await agent.run("go")).output

    async def durable(d: DurableAgent[None, str]) -> Any:
        n = next(runs)
        return (await d.run(system[0], f"conv-{n}", "go", message_id=f"run-{n}")).output

    history: list[ModelMessage] = []

    async def alone_long() -> Any:
        nonlocal history
        if not history:  # LONG earlier runs
            for _ in range(LONG):
                history = (await instant.run("go", message_history=history or None)).all_messages()
        result = await instant.run("go", message_history=history)
        history = result.all_messages()
        return result.output

    long_runs = iter(range(10**9))

    async def durable_long() -> Any:
        if next(long_runs) == 0:  # LONG earlier runs
            for k in range(LONG):
                await durable_instant.run(system[0], "conv-long", "go", message_id=f"long-{k}")
        return (await durable_instant.run(system[0], "conv-long", "go")).output

    async def shaped(k: int) -> Any:
        if not _SHAPE:  # the values of a real run
            n = next(runs)
            got = await durable_instant.run(system[0], f"conv-{n}", "go", message_id=f"run-{n}")
            plain = ModelMessagesTypeAdapter.dump_python(got.messages, mode="json")
            _SHAPE.update(messages=plain, responses=plain[1::2])
        n = next(runs)
        ref = await system[0].spawn(Shaped, f"shaped-{n}")
        return await ref.ask(ShapedRun(k), message_id=f"shaped-{n}")

    return AgentActor, {
        "pydantic-ai alone (parallel)": lambda: alone(waiting),
        "pydantic-ai alone (sequential mode)": lambda: alone(waiting, True),
        "DurableAgent (parallel)": lambda: durable(durable_waiting),
        "pydantic-ai alone, tools that do not wait": lambda: alone(instant),
        "DurableAgent, tools that do not wait": lambda: durable(durable_instant),
        SHAPED: lambda: shaped(calls),
        SHAPED_NONE: lambda: shaped(0),
        LONG_ALONE: alone_long,
        LONG_DURABLE: durable_long,
    }


#: per-run figures of the durable cases: the store's transactions and their wall time; of
#: every case: its CPU time (``time.process_time``: every thread, SQLite's included); of the
#: durable cases also the payload bytes they logged
COMMITS, COMMIT_TIME, CPU = "commits", "commit time", "cpu"
#: the payload bytes a durable case's run appended to the log
BYTES = "bytes"
#: the runtime's share: a run's journaled calls without pydantic-ai (``Shaped``), and none
SHAPED = "the same journaled calls, no pydantic-ai"
SHAPED_NONE = "the same step without journaled calls"
#: the waiting cases split into ``PHASES`` (``name + ": " + phase + WALL / PHASE_CPU``)
SPLIT = ("pydantic-ai alone (parallel)", "DurableAgent (parallel)")
WALL, PHASE_CPU = " wall", " cpu"
#: a conversation's later run: ``LONG`` runs of history before it (the history grows by one
#: run per round)
LONG = 20
LONG_ALONE = f"pydantic-ai alone, tools that do not wait, after {LONG} runs"
LONG_DURABLE = f"DurableAgent, tools that do not wait, after {LONG} runs"


async def agent_rounds(db: Path, calls: int, delay: float, rounds: int) -> dict[str, list[float]]:
    """Seconds per run of each case; for each durable case also its store transactions
    (``name + ": commits"``) and their wall time (``name + ": commit time"``); for the
    cases of ``SPLIT`` the wall and CPU time of each of ``PHASES``."""
    global _MARKS
    holder: list[ActorSystem] = []
    found = pydantic_ai_cases(calls, delay, holder)
    if found is None:
        return {}
    actor, cases = found
    times: dict[str, list[float]] = {name: [] for name in cases}
    store = TimedSqliteStore(db)
    async with ActorSystem(store, actors=[actor, Shaped]) as system:
        holder.append(system)
        for run in cases.values():  # warm up: imports, first spawn
            await run()
        for _ in range(rounds):
            for name, run in cases.items():
                n0, s0, b0 = store.commits, store.commit_seconds, store.payload_bytes
                if name in SPLIT:
                    _MARKS = []
                    _mark("start")
                c, t = time.process_time(), time.perf_counter()
                await run()
                times[name].append(time.perf_counter() - t)
                if _MARKS is not None:
                    _mark("end")
                    for phase, (wall, cpu) in zip(PHASES, phases(_MARKS), strict=True):
                        times.setdefault(f"{name}: {phase}{WALL}", []).append(wall)
                        times.setdefault(f"{name}: {phase}{PHASE_CPU}", []).append(cpu)
                    _MARKS = None
                times.setdefault(f"{name}: {CPU}", []).append(time.process_time() - c)
                if name.startswith("DurableAgent") or name in (SHAPED, SHAPED_NONE):
                    times.setdefault(f"{name}: {COMMITS}", []).append(store.commits - n0)
                    times.setdefault(f"{name}: {COMMIT_TIME}", []).append(store.commit_seconds - s0)
                    times.setdefault(f"{name}: {BYTES}", []).append(store.payload_bytes - b0)
    return times
