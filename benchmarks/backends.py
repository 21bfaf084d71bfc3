"""SqliteStore on asyncio and on trio: the same workloads, interleaved, as ratios.

    python -m benchmarks.backends [--backends asyncio,trio] [--rounds 5] [--calls 1000]

Measured in one run, on one machine, in interleaved rounds (each round runs every workload on
every backend, one after the other, so a change in the machine's load hits them alike):

* **sequential calls**: one actor handling one ``Run(N)`` message whose handler makes N
  ``ctx.call``s (each call's intent is durable before the tool runs: one commit per call).
* **100 actors**: 100 actors each handling one ``Run(n)`` at once (group commit shares the
  commits among them).

Each on ``SqliteStore`` (``durability`` as given; ``fsync`` by default) and, as a reference
for the runtime's own cost on each backend, on ``MemoryStore``. The figures to quote are the
ratios to the first backend of ``--backends``, medians over the rounds: absolute rates move
with the disk and the machine's load.
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING, Any

import anyio
from actorlog import ActorSystem
from actorlog.stores import MemoryStore, SqliteStore

from . import _agent
from ._common import (
    Table,
    bench_parser,
    configure_output,
    loadavg,
    machine_info,
    quick,
    scratch_dir,
    write_report,
)

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from actorlog.store import Store

__all__ = ["main"]

WORKLOADS = ("sequential calls", "100 actors")


def _store(kind: str, path: Path, durability: str) -> Store:
    if kind == "memory":
        return MemoryStore()
    return SqliteStore(path, durability=durability)  # type: ignore[arg-type]  # checked by the store


async def _sequential(kind: str, path: Path, durability: str, calls: int) -> float:
    """One actor, ``calls`` sequential ``ctx.call``s in one handler: calls per second."""
    async with ActorSystem(_store(kind, path, durability), actors=[_agent.Agent]) as system:
        ref = await system.spawn(_agent.Agent, "solo")
        await ref.ask(_agent.Run(20), message_id="warmup")
        t = time.perf_counter()
        await ref.ask(_agent.Run(calls), message_id="run")
        return calls / (time.perf_counter() - t)


async def _actors(kind: str, path: Path, durability: str, actors: int, calls_each: int) -> float:
    """``actors`` actors, each one ``Run(calls_each)`` at once: calls per second overall."""
    async with ActorSystem(_store(kind, path, durability), actors=[_agent.Agent]) as system:
        refs = [await system.spawn(_agent.Agent, f"agent-{a:05d}") for a in range(actors)]

        async def run(ref: Any, n: int, message_id: str) -> None:
            await ref.ask(_agent.Run(n), message_id=message_id)

        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(run, ref, 2, "warmup")
        t = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(run, ref, calls_each, "run")
        return actors * calls_each / (time.perf_counter() - t)


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--rounds 1 --calls 100 --calls-each 5", writes=True)
    parser.add_argument("--backends", default="asyncio,trio", help="anyio backends, compared")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians")
    parser.add_argument("--calls", type=int, default=1000, help="sequential ctx.calls")
    parser.add_argument("--actors", type=int, default=100, help="concurrent actors")
    parser.add_argument("--calls-each", type=int, default=20, help="ctx.calls of each actor")
    parser.add_argument(
        "--durability",
        default="fsync",
        choices=("fsync", "survive-process-crash"),
        help="SqliteStore durability (survive-process-crash: no fsync per commit, so the "
        "runtime's and the driver's costs show more)",
    )
    parser.add_argument("--no-memory", action="store_true", help="skip the MemoryStore runs")
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, rounds=1, calls=100, calls_each=5)
    configure_output(args)
    backends = [b.strip() for b in args.backends.split(",") if b.strip()]
    kinds = ["sqlite"] if args.no_memory else ["sqlite", "memory"]
    rates: dict[tuple[str, str, str], list[float]] = {}
    with scratch_dir(args.dir) as d:
        info = machine_info(d)
        for rnd in range(args.rounds):
            for workload in WORKLOADS:
                for kind in kinds:
                    for backend in backends:
                        path = d / f"{rnd}-{workload[:3]}-{kind}-{backend}.db"
                        if workload == "sequential calls":
                            rate = anyio.run(
                                _sequential, kind, path, args.durability, args.calls,
                                backend=backend,
                            )  # fmt: skip
                        else:
                            rate = anyio.run(
                                _actors, kind, path, args.durability, args.actors,
                                args.calls_each, backend=backend,
                            )  # fmt: skip
                        rates.setdefault((workload, kind, backend), []).append(rate)
                        print(
                            f"round {rnd + 1}/{args.rounds}: {workload}, {kind}, {backend}: "
                            f"{rate:,.0f} calls/s",
                            flush=True,
                        )
        info["load average (1, 5, 15 min) at end"] = loadavg()

    base = backends[0]
    table = Table(
        [
            "workload",
            "store",
            "backend",
            "ctx.calls/s (median)",
            f"vs {base} (median of per-round ratios)",
            "per-round ratios",
        ]
    )
    for workload in WORKLOADS:
        for kind in kinds:
            for backend in backends:
                mine = rates[(workload, kind, backend)]
                ref = rates[(workload, kind, base)]
                ratios = [m / r for m, r in zip(mine, ref, strict=True)]
                table.add(
                    workload,
                    "SqliteStore" if kind == "sqlite" else "MemoryStore",
                    backend,
                    statistics.median(mine),
                    f"{statistics.median(ratios):.2f}x",
                    " ".join(f"{x:.2f}" for x in ratios),
                )
    print()
    print(table.text())
    if not args.no_write:
        body = (
            f"SqliteStore (`durability={args.durability!r}`) and MemoryStore on "
            f"{', '.join(backends)}, {args.rounds} interleaved rounds. Sequential calls: one "
            f"actor, {args.calls} `ctx.call`s in one handler. {args.actors} actors: each one "
            f"`Run({args.calls_each})` at once. Ratios are to {base} in the same round.\n\n"
            + table.markdown()
            + "\n\nReading: the MemoryStore lines are the runtime alone (no I/O), so they show "
            "what the backend itself costs the runtime; the SqliteStore lines add the store "
            "(its connection threads answer either backend the same way). On a machine shared "
            "with other work, compare the ratios, not the rates."
        )
        path = write_report("backends", "SqliteStore on asyncio and trio", body, info=info)
        print(f"\nreport: {path}")


if __name__ == "__main__":
    main()
