"""The OpenAI Agents integration's CPU per run in a long conversation: build vs build.

    python -m benchmarks.oai_conversation [--long 20] [--runs 10] [--rounds 3]
        [--before /work/main/.venv/bin/python]

A ``DurableAgent`` (triage agent handing off to a planner that calls ``search``, ``weather``
and ``book``, one per turn, then answers: 5 model calls and 3 tool calls per run, about 9
new items) on ``MemoryStore``, its model a scripted one whose cost does not grow with the
conversation (it reads the items after the last user message). One conversation: ``--long``
runs first, then ``--runs`` more, each measured with ``time.process_time``; the SDK alone
(``Runner.run`` with the same model, tools and history, no actorlog) is measured in the same
process, alternating with them. Each round runs one worker process per build, the builds
interleaved (``--before``: another interpreter whose ``actorlog`` is the build to compare,
e.g. a venv of /work/main); shown: the median over every round's runs.
"""

from __future__ import annotations

import argparse
import json
import statistics
import subprocess
import sys
import time
from typing import Any

CITIES = ["Lisbon", "Porto", "Rome", "Oslo"]


def _worker(long: int, runs: int) -> dict[str, list[float]]:
    import anyio
    from actorlog import ActorSystem
    from actorlog.integrations.openai_agents import IDEMPOTENT, READ, AgentActor, DurableAgent
    from actorlog.stores import MemoryStore
    from agents import (
        Agent,
        Model,
        ModelResponse,
        RunConfig,
        Runner,
        Usage,
        function_tool,
        set_tracing_disabled,
    )
    from agents.testing import assistant_message, function_call

    set_tracing_disabled(True)

    def plain(item: Any) -> dict[str, Any]:
        if isinstance(item, dict):
            return item
        dumped: dict[str, Any] = item.model_dump(mode="json", exclude_unset=True)
        return dumped

    class Scripted(Model):
        """Answers from the items after the last user message (no growing cost)."""

        async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any):  # type: ignore[no-untyped-def]
            items = [{"role": "user", "content": input}] if isinstance(input, str) else input
            since: list[dict[str, Any]] = []
            for item in reversed(items):
                p = plain(item)
                if p.get("role") == "user":
                    city = str(p["content"]).rsplit(" ", 1)[-1]
                    break
                since.append(p)
            since.reverse()
            done = {i["call_id"] for i in since if i.get("type") == "function_call_output"}
            calls = {i["call_id"]: i["name"] for i in since if i.get("type") == "function_call"}
            names = {calls[c] for c in done if c in calls}
            if system_instructions == "triage":
                out = [function_call("transfer_to_planner", {}, call_id=f"h{len(items)}")]
            elif "search" not in names:
                out = [function_call("search", {"city": city}, call_id=f"s{len(items)}")]
            elif "weather" not in names:
                out = [function_call("weather", {"city": city}, call_id=f"w{len(items)}")]
            elif "book" not in names:
                out = [function_call("book", {"what": city}, call_id=f"b{len(items)}")]
            else:
                out = [assistant_message(f"Trip to {city}", item_id=f"a{len(items)}")]
            return ModelResponse(output=out, usage=Usage(requests=1), response_id=None)

        def stream_response(self, *a: Any, **k: Any) -> Any:  # pragma: no cover
            raise NotImplementedError("the benchmark's scripted model answers unstreamed runs only")

    @function_tool
    async def search(city: str) -> str:
        """Find the best hotel in a city."""
        return f"Hotel {city} Central"

    @function_tool
    async def weather(city: str) -> str:
        """Tomorrow's weather in a city."""
        return f"sunny in {city}"

    @function_tool
    async def book(what: str) -> str:
        """Book a hotel."""
        return f"booked {what}"

    planner: Agent[Any] = Agent(
        name="planner", instructions="planner", tools=[search, weather, book]
    )
    triage: Agent[Any] = Agent(name="triage", instructions="triage", handoffs=[planner])
    config = RunConfig(model=Scripted())
    durable = DurableAgent(
        triage,
        name="bench",
        tools={"search": READ, "weather": READ, "book": IDEMPOTENT},
        run_config=config,
    )
    out: dict[str, list[float]] = {"durable": [], "alone": []}

    async def main() -> None:
        history: list[Any] = []
        async with ActorSystem(MemoryStore(), actors=[AgentActor]) as system:
            for i in range(long + runs):
                ask = f"plan trip {i} to {CITIES[i % 4]}"
                t0 = time.process_time()
                result = await durable.run(system, "c", ask)
                t1 = time.process_time()
                alone = await Runner.run(
                    triage, [*history, {"role": "user", "content": ask}], run_config=config
                )
                t2 = time.process_time()
                history = alone.to_input_list()
                assert len(history) == len(result.items)
                if i >= long:
                    out["durable"].append(t1 - t0)
                    out["alone"].append(t2 - t1)

    anyio.run(main)
    return out


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--long", type=int, default=20)
    parser.add_argument("--runs", type=int, default=10)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--before", default=None, help="the interpreter of the build before")
    parser.add_argument("--worker", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.worker:
        print(json.dumps(_worker(args.long, args.runs)))
        return 0
    builds = {"after": sys.executable}
    if args.before:
        builds = {"before": args.before, **builds}
    got: dict[str, dict[str, list[float]]] = {b: {"durable": [], "alone": []} for b in builds}
    for _ in range(args.rounds):
        for build, python in builds.items():
            cmd = [python, "-m", "benchmarks.oai_conversation", "--worker"]
            cmd += ["--long", str(args.long), "--runs", str(args.runs)]
            res = json.loads(subprocess.run(cmd, check=True, capture_output=True).stdout)
            for k in ("durable", "alone"):
                got[build][k].extend(res[k])
    print(
        f"CPU per run (ms) after {args.long} runs of one conversation, median of "
        f"{args.rounds} x {args.runs} runs"
    )
    for build, m in got.items():
        d, a = statistics.median(m["durable"]) * 1e3, statistics.median(m["alone"]) * 1e3
        print(f"{build:>7}: DurableAgent {d:.1f}  SDK alone {a:.1f}  actorlog adds {d - a:.1f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
