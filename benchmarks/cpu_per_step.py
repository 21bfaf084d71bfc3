"""CPU time per durable step on MemoryStore: the runtime's own cost, without any I/O.

    python -m benchmarks.cpu_per_step [--actors 1,100] [--burst 100] [--asks 2000] [--rounds 4]
                                      [--sqlite-burst] [--spawn N] [--conversation N]
                                      [--quick]

Each client asks its actor ``Step(i)`` with a ``message_id``; each step makes one
``ctx.call``. Measured as process CPU time (``time.process_time``) per ask, the best of
``--rounds`` runs; with ``--burst N`` also one actor asked by N concurrent clients (its asks
queue up and are handled as bursts). On a shared or loaded machine CPU time is far steadier
than wall-clock throughput, so two builds can be compared by running this alternately with
each.

With ``--spawn N``, also N new actors spawned on a SQLite file (then on MemoryStore), each
asked once: process CPU per spawn and first ask, and spawns (each with its ask) per second of
wall-clock time. With ``--conversation N``, also one actor whose steps reply a conversation of
N nested messages (an agent framework's reply): process CPU per ask on MemoryStore.

Beside it, in the same run, the floor: a bare asyncio actor per client (a task, an
``asyncio.Queue``, a future per ask) awaiting the same ``echo`` coroutine; the ratio
actorlog / bare is the figure that does not depend on the machine's speed.
"""

from __future__ import annotations

import asyncio
import os
import tempfile
import time
from typing import Any

import anyio
import attrs
from actorlog import Actor, ActorRef, ActorSystem, Context, message, tool
from actorlog.stores import MemoryStore, SqliteStore

from ._common import bench_parser, quick


@message(name="bench.cpu.Count")
@attrs.define
class Count:
    n: int = 0


@message(name="bench.cpu.Step")
@attrs.frozen
class Step:
    i: int


@tool(effect="read")
async def echo(x: int) -> int:
    return x


class Stepper(Actor[Count], name="bench.cpu.Stepper"):
    async def receive(self, ctx: Context, msg: Step) -> int:
        value = await ctx.call(echo, msg.i)
        self.state.n += 1
        return value


class Counter(Actor[Count], name="bench.cpu.Counter"):
    """A step without a tool call: its only commit is its end (or its burst's)."""

    async def receive(self, ctx: Context, msg: Step) -> int:
        self.state.n += 1
        return self.state.n


class Talker(Actor[Count], name="bench.cpu.Talker"):
    """A step whose reply is a conversation (``CONVERSATION_ITEMS`` nested messages, as an
    agent framework's step returns): what encoding a large plain reply costs."""

    items = 20

    async def receive(self, ctx: Context, msg: Step) -> list[dict[str, Any]]:
        self.state.n += 1
        return [_turn(self.state.n, k) for k in range(self.items)]


def _turn(n: int, k: int) -> dict[str, Any]:
    """One message of a conversation, shaped like an agent framework's (nested parts)."""
    return {
        "kind": "response" if k % 2 else "request",
        "parts": [
            {"part_kind": "text", "content": f"answer {n}.{k} " * 8, "id": None},
            {"part_kind": "tool-call", "tool_name": "search", "args": {"q": f"q{k}", "n": 3}},
        ],
        "usage": {"input_tokens": 120 + k, "output_tokens": 40, "details": {}},
        "timestamp": "2026-11-28T12:00:00Z",
    }


async def conversation_cpu(items: int, asks: int) -> float:
    """Process CPU seconds per ask of one actor whose steps reply a conversation of
    ``items`` messages (no tool call), on MemoryStore."""
    Talker.items = items
    async with ActorSystem(MemoryStore(), actors=[Talker]) as system:
        ref = await system.spawn(Talker, "talker")
        await ref.ask(Step(0), message_id="warm-up")
        t0 = time.process_time()
        for i in range(asks):
            await ref.ask(Step(i), message_id=f"c-{i}")
        return (time.process_time() - t0) / asks


async def sqlite_burst(clients: int, asks: int) -> tuple[float, float]:
    """One actor on a SQLite file asked by ``clients`` concurrent clients, steps without a
    tool call: (commits per ask, asks per second of wall-clock time)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = SqliteStore(os.path.join(tmp, "burst.db"))
        async with ActorSystem(store, actors=[Counter]) as system:
            ref = await system.spawn(Counter, "burst")
            await ref.ask(Step(0), message_id="warm-up")
            before = len(store.batch_sizes)
            per_client = max(asks // clients, 1)

            async def client(c: int) -> None:
                for i in range(per_client):
                    await ref.ask(Step(i), message_id=f"{c}-{i}")

            t0 = time.perf_counter()
            async with anyio.create_task_group() as tg:
                for c in range(clients):
                    tg.start_soon(client, c)
            wall = time.perf_counter() - t0
            n = per_client * clients
            return (len(store.batch_sizes) - before) / n, n / wall


async def spawn_and_first_ask(n: int, memory: bool = False) -> tuple[float, float]:
    """``n`` new actors on a SQLite file (``memory``: on MemoryStore), each spawned and asked
    once (``Counter``, no tool call), one after the other: (CPU seconds per spawn and ask,
    spawns per wall second)."""
    with tempfile.TemporaryDirectory() as tmp:
        store = MemoryStore() if memory else SqliteStore(os.path.join(tmp, "spawn.db"))
        async with ActorSystem(store, actors=[Counter]) as s:
            ref = await s.spawn(Counter, "warm-up")
            await ref.ask(Step(0), message_id="warm-up")
            t0, w0 = time.process_time(), time.perf_counter()
            for i in range(n):
                ref = await s.spawn(Counter, f"new-{i}")
                await ref.ask(Step(i), message_id=f"first-{i}")
            return (time.process_time() - t0) / n, n / (time.perf_counter() - w0)


async def cpu_per_ask(actors: int, asks: int, clients: int = 1, store: str = "memory") -> float:
    """Process CPU seconds per ask, ``asks`` spread over ``actors`` actors, each asked by
    ``clients`` concurrent clients (more than one: its asks queue up, a burst), on
    MemoryStore (``store="sqlite"``: on a SQLite file in a temporary directory)."""
    with tempfile.TemporaryDirectory() as tmp:
        opened = MemoryStore() if store == "memory" else SqliteStore(os.path.join(tmp, "cpu.db"))
        return await _cpu_per_ask(opened, actors, asks, clients)


async def _cpu_per_ask(
    store: MemoryStore | SqliteStore, actors: int, asks: int, clients: int
) -> float:
    async with ActorSystem(store, actors=[Stepper]) as system:
        refs = [await system.spawn(Stepper, f"a{i}") for i in range(actors)]
        per_client = max(asks // (actors * clients), 1)

        async def client(ref: ActorRef[Stepper], c: int) -> None:
            for i in range(per_client):
                await ref.ask(Step(i), message_id=f"{ref.actor_id}-{c}-{i}")

        t0 = time.process_time()
        async with anyio.create_task_group() as tg:
            for ref in refs:
                for c in range(clients):
                    tg.start_soon(client, ref, c)
        return (time.process_time() - t0) / (per_client * actors * clients)


async def bare_cpu_per_ask(actors: int, asks: int, clients: int = 1) -> float:
    """The same workload on bare asyncio actors: per actor a task that takes
    ``(message, future)`` from an ``asyncio.Queue``, awaits ``echo`` and sets the future."""
    per_client = max(asks // (actors * clients), 1)
    queues: list[asyncio.Queue[tuple[int, asyncio.Future[int]] | None]] = [
        asyncio.Queue() for _ in range(actors)
    ]
    loop = asyncio.get_running_loop()
    state = [0] * actors

    async def actor(k: int) -> None:
        inbox = queues[k]
        while (item := await inbox.get()) is not None:
            i, reply = item
            value = await echo.fn(i)
            state[k] += 1
            reply.set_result(value)

    async def client(k: int) -> None:
        for i in range(per_client):
            reply: asyncio.Future[int] = loop.create_future()
            queues[k].put_nowait((i, reply))
            await reply

    workers = [asyncio.create_task(actor(k)) for k in range(actors)]
    t0 = time.process_time()
    await asyncio.gather(*(client(k) for k in range(actors) for _ in range(clients)))
    elapsed = time.process_time() - t0
    for inbox in queues:
        inbox.put_nowait(None)
    await asyncio.gather(*workers)
    return elapsed / (per_client * actors * clients)


def main() -> None:
    parser = bench_parser(__doc__, quick_help="--asks 400 --rounds 2", writes=False)
    parser.add_argument("--actors", default="1,100", help="concurrent actors, comma-separated")
    parser.add_argument(
        "--burst",
        type=int,
        default=100,
        help="also measure one actor asked by this many concurrent clients (0: not)",
    )
    parser.add_argument(
        "--sqlite-burst",
        action="store_true",
        help="also: the --burst clients on one actor on a SQLite file, steps without a tool "
        "call (commits per ask, asks/s)",
    )
    parser.add_argument(
        "--spawn",
        type=int,
        default=0,
        help="also: this many new actors on a SQLite file, each spawned and asked once (CPU "
        "per spawn + first ask, spawns/s; best of --rounds)",
    )
    parser.add_argument(
        "--conversation",
        type=int,
        default=0,
        help="also: one actor whose steps reply a conversation of this many nested messages "
        "(CPU per ask, MemoryStore; best of --rounds)",
    )
    parser.add_argument("--asks", type=int, default=2000, help="asks per measurement")
    parser.add_argument("--rounds", type=int, default=4, help="runs per figure (best is kept)")
    args = parser.parse_args()
    quick(args, parser, asks=400, rounds=2)
    setups = [(int(a), 1) for a in args.actors.split(",")]
    if args.burst > 1:
        setups.append((1, args.burst))
    for actors, clients in setups:
        ours: list[float] = []
        bare: list[float] = []
        for _ in range(args.rounds):  # interleaved: a load change hits both alike
            ours.append(anyio.run(cpu_per_ask, actors, args.asks, clients))
            bare.append(asyncio.run(bare_cpu_per_ask(actors, args.asks, clients)))
        best, floor = min(ours), min(bare)
        what = f"{actors:>5} actors" if clients == 1 else f"1 actor, {clients} clients"
        print(
            f"{what}: {best * 1e6:7.1f} µs CPU per ask, bare asyncio actor "
            f"{floor * 1e6:5.1f} µs: {best / floor:5.1f}x (best of {args.rounds})"
        )
    if args.sqlite_burst and args.burst > 1:
        commits, rate = anyio.run(sqlite_burst, args.burst, min(args.asks, 1000))
        print(
            f"1 actor, {args.burst} clients, SQLite, no tool call: {commits:.3f} commits per "
            f"ask, {rate:,.0f} asks/s"
        )
    if args.spawn > 0:
        for memory in (False, True):
            runs = [anyio.run(spawn_and_first_ask, args.spawn, memory) for _ in range(args.rounds)]
            cpu, rate = min(r[0] for r in runs), max(r[1] for r in runs)
            print(
                f"{args.spawn} new actors, {'MemoryStore' if memory else 'SQLite'}: "
                f"{cpu * 1e3:.3f} ms CPU per spawn + first ask, {rate:,.0f} spawns/s "
                f"(best of {args.rounds})"
            )
    if args.conversation > 0:
        asks = min(args.asks, 500)
        cpu = min(anyio.run(conversation_cpu, args.conversation, asks) for _ in range(args.rounds))
        print(
            f"1 actor, replies of {args.conversation} nested messages: {cpu * 1e6:7.1f} µs CPU "
            f"per ask (best of {args.rounds})"
        )


if __name__ == "__main__":
    main()
