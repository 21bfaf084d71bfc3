"""``python -m actorlog.benchmarks NAME [options]``: run one benchmark."""

from __future__ import annotations

import runpy
import sys

#: name -> what it measures (each is a module of this package)
BENCHMARKS = {
    "recovery": "recovery time vs log tail, history and state size (SQLite)",
    "snapshots": "snapshot_every vs recovery time and step cost",
    "adaptive": "recovery_budget: adaptive snapshots",
    "throughput": "durable steps per second, group commit, concurrency",
    "seq_calls": "one actor's sequential calls vs the raw SQLite commit rate, in rounds",
    "backends": "SqliteStore on asyncio vs trio: sequential calls and 100 actors",
    "cpu_per_step": "the runtime's CPU time per durable step (MemoryStore): build vs build",
    "compiled": "the step path compiled with mypyc vs pure: instructions, calls per ask",
    "raw_sqlite": "the raw SQLite commit rate of this disk (the ceiling)",
    "telemetry_overhead": "the cost of tracing with and without an OpenTelemetry SDK",
    "console": "the web console's page times (needs actorlog[web])",
    "timers": "steps per second with 10,000 pending timers",
    "retention": "store size over a long run with and without retention",
    "bytes": "stored bytes per ask with one tool call: format 1's layout vs format 2",
    "bytes_layouts": "candidate SQLite layouts of the log: bytes per ask, before building one",
    "step_lookup": "a repeated ask's step lookup: format 4's step index vs format 5's scan",
    "postgres": "PostgreSQL throughput and failover (needs a server and actorlog[postgres])",
    "peers": "crash-and-resume against DBOS and LangGraph (needs actorlog[peers])",
    "startup": "import actorlog, and process start to the first resumed step after a crash",
    "first_ask": "the first ask with a message id after a restart: long vs short id history",
    "parallel": "5 tool calls in one step: sequential vs parallel, live and after SIGKILL",
    "streaming": "ctx.emit to ask_stream: latency per event and emit cost (memory, SQLite)",
    "pai_stream": "latency per streamed token, pydantic-ai alone vs DurableAgent",
    "sse_chat": "examples/sse_chat: ctx.emit to the browser's EventSource and to httpx",
    "oai_conversation": "OpenAI Agents DurableAgent: CPU per run after 20 runs, build vs build",
}


def main(argv: list[str] | None = None) -> int:
    args = sys.argv[1:] if argv is None else argv
    if not args or args[0] in ("-h", "--help") or args[0] not in BENCHMARKS:
        width = max(map(len, BENCHMARKS))
        lines = [f"  {name:<{width}}  {what}" for name, what in BENCHMARKS.items()]
        print(
            "usage: python -m actorlog.benchmarks NAME [--quick] [--out DIR] [options]\n\n"
            "benchmarks (NAME --help: options and defaults):\n" + "\n".join(lines)
        )
        if args and args[0] not in ("-h", "--help"):
            print(f"\nunknown benchmark {args[0]!r}", file=sys.stderr)
            return 2
        return 0 if args else 2
    package = __spec__.parent if __spec__ is not None else "benchmarks"
    sys.argv = [f"{package}.{args[0]}", *args[1:]]
    runpy.run_module(f"{package}.{args[0]}", run_name="__main__", alter_sys=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
