"""CPU time per durable step on MemoryStore: the runtime's own cost, without any I/O.

    python -m benchmarks.cpu_per_step [--actors 1,100] [--asks 2000] [--rounds 4] [--quick]

Each client asks its actor ``Step(i)`` with a ``message_id``; each step makes one
``ctx.call``. Measured as process CPU time (``time.process_time``) per ask, the best of
``--rounds`` runs: on a shared or loaded machine CPU time is far steadier than wall-clock
throughput, so two builds can be compared by running this alternately with each.
"""

from __future__ import annotations

import time

import anyio
import attrs
from actorlog import Actor, ActorRef, ActorSystem, Context, message, tool
from actorlog.stores import MemoryStore

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


async def cpu_per_ask(actors: int, asks: int) -> float:
    """Process CPU seconds per ask, ``asks`` spread over ``actors`` concurrent clients."""
    async with ActorSystem(MemoryStore(), actors=[Stepper]) as system:
        refs = [await system.spawn(Stepper, f"a{i}") for i in range(actors)]
        per_client = max(asks // actors, 1)

        async def client(ref: ActorRef[Stepper]) -> None:
            for i in range(per_client):
                await ref.ask(Step(i), message_id=f"{ref.actor_id}-{i}")

        t0 = time.process_time()
        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(client, ref)
        return (time.process_time() - t0) / (per_client * actors)


def main() -> None:
    parser = bench_parser(__doc__, quick_help="--asks 400 --rounds 2", writes=False)
    parser.add_argument("--actors", default="1,100", help="concurrent actors, comma-separated")
    parser.add_argument("--asks", type=int, default=2000, help="asks per measurement")
    parser.add_argument("--rounds", type=int, default=4, help="runs per figure (best is kept)")
    args = parser.parse_args()
    quick(args, parser, asks=400, rounds=2)
    for actors in (int(a) for a in args.actors.split(",")):
        best = min(anyio.run(cpu_per_ask, actors, args.asks) for _ in range(args.rounds))
        print(f"{actors:>5} actors: {best * 1e6:7.1f} µs CPU per ask (best of {args.rounds})")


if __name__ == "__main__":
    main()
