"""The latency a durable pydantic-ai run adds to each streamed token (issue 26 item 2): from
the model producing a delta to the run's event stream handler receiving it.

    python -m benchmarks.pai_stream [--tokens 200] [--runs 20]

A pydantic-ai ``FunctionModel`` streams a response of ``--tokens`` chunks (``"t0 "``,
``"t1 "``, ...), stamping ``time.perf_counter()`` as it hands each one over (pull-based: a
chunk is made when the consumer asks for it, so nothing queues); the handler stamps each delta
as it gets it. The latency of a token is the difference. Measured for the same agent run by
pydantic-ai alone (``agent.run(event_stream_handler=...)``), and by ``DurableAgent`` on
``MemoryStore`` and on a SQLite file (the request is one ``ctx.call``: its intent is logged
and committed before the model is asked, its response logged when the stream ends).
Reported: the per-token latency (median, p90, p99 over every token of ``--runs`` runs), the
time to the first token from the start of the run, and the whole run; all in one process,
after one warm-up run per setup.
"""

from __future__ import annotations

import argparse
import statistics
import time
from collections.abc import AsyncIterator, Awaitable, Callable
from pathlib import Path
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.integrations.pydantic_ai import AgentActor, DurableAgent
from actorlog.stores import MemoryStore, SqliteStore
from pydantic_ai import Agent, RunContext
from pydantic_ai.messages import ModelMessage, PartDeltaEvent, PartStartEvent, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from ._common import (
    Table,
    bench_parser,
    configure_output,
    loadavg,
    machine_info,
    percentile,
    quick,
    scratch_dir,
    write_report,
)

__all__ = ["main"]


class Probe:
    """The model and the handler of one setup: stamps per token, both sides."""

    def __init__(self, tokens: int) -> None:
        self.tokens = tokens
        self.made: list[float] = []
        self.seen: list[float] = []
        self.latencies: list[float] = []
        self.first: list[float] = []
        self.started = 0.0

    async def stream(self, messages: list[ModelMessage], info: AgentInfo) -> AsyncIterator[str]:
        for i in range(self.tokens):
            self.made.append(time.perf_counter())
            yield f"t{i} "

    async def handler(self, ctx: RunContext[Any], stream: Any) -> None:
        async for event in stream:
            now = time.perf_counter()
            text_start = isinstance(event, PartStartEvent) and isinstance(event.part, TextPart)
            if text_start or isinstance(event, PartDeltaEvent):
                self.seen.append(now)

    def start(self) -> None:
        self.made.clear()
        self.seen.clear()
        self.started = time.perf_counter()

    def record(self) -> None:
        assert len(self.made) == len(self.seen) == self.tokens, (len(self.made), len(self.seen))
        self.latencies.extend(s - m for m, s in zip(self.made, self.seen, strict=True))
        self.first.append(self.seen[0] - self.started)


async def _runs(
    probe: Probe, runs: int, one: Callable[[int], Awaitable[None]]
) -> tuple[list[float], list[float]]:
    """Warm up once, then time ``runs`` runs: (per-token latencies, whole runs)."""
    await one(-1)
    probe.latencies.clear()
    probe.first.clear()
    totals: list[float] = []
    for i in range(runs):
        probe.start()
        await one(i)
        totals.append(time.perf_counter() - probe.started)
        probe.record()
    return probe.latencies, totals


async def measure(setup: str, tokens: int, runs: int, work: Path) -> dict[str, Any]:
    probe = Probe(tokens)
    agent = Agent(FunctionModel(stream_function=probe.stream), name=f"bench-{setup}")
    if setup == "pydantic-ai alone":

        async def one(i: int) -> None:
            await agent.run("go", event_stream_handler=probe.handler)

        latencies, totals = await _runs(probe, runs, one)
    else:
        durable = DurableAgent(agent, event_stream_handler=probe.handler)
        store: MemoryStore | SqliteStore = MemoryStore()
        if setup == "DurableAgent, SQLite file":
            store = SqliteStore(work / "stream.db")
        async with ActorSystem(store, actors=[AgentActor]) as system:

            async def one(i: int) -> None:
                await durable.run(system, f"conv-{i}", "go", message_id=f"m-{i}")

            latencies, totals = await _runs(probe, runs, one)
    return {
        "setup": setup,
        "latencies": latencies,
        "first": list(probe.first),
        "totals": totals,
    }


SETUPS = ("pydantic-ai alone", "DurableAgent, MemoryStore", "DurableAgent, SQLite file")


def main(argv: list[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--tokens 50 --runs 3", writes=True)
    parser.add_argument("--tokens", type=int, default=200, help="chunks per response")
    parser.add_argument("--runs", type=int, default=20, help="timed runs per setup")
    parser.add_argument("--dir", default=None, help="where to create the scratch database")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args: argparse.Namespace = parser.parse_args(argv)
    quick(args, parser, tokens=50, runs=3)
    configure_output(args)
    results = []
    with scratch_dir(args.dir) as work:
        info = machine_info(work)
        for setup in SETUPS:
            results.append(anyio.run(measure, setup, args.tokens, args.runs, work))
        info["load average (1, 5, 15 min) at end"] = loadavg()
    table = Table(
        [
            "setup",
            "tokens",
            "per token, median (µs)",
            "p90 (µs)",
            "p99 (µs)",
            "added per token, median (µs)",
            "first token (ms)",
            "whole run, median (ms)",
        ]
    )
    base = statistics.median(results[0]["latencies"])
    for r in results:
        lat = r["latencies"]
        med = statistics.median(lat)
        table.add(
            r["setup"],
            len(lat),
            round(1e6 * med, 1),
            round(1e6 * percentile(lat, 90), 1),
            round(1e6 * percentile(lat, 99), 1),
            round(1e6 * (med - base), 1),
            round(1e3 * statistics.median(r["first"]), 2),
            round(1e3 * statistics.median(r["totals"]), 2),
        )
    print()
    print(table.text())
    if args.no_write:
        return
    body = "\n\n".join([__doc__.split("\n\n", 1)[1].strip(), table.markdown()])
    out = write_report(
        "pai_stream",
        "Streamed tokens: latency per token, with and without actorlog",
        body,
        info=info,
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
