"""Pending timers do not slow steps down.

    python -m benchmarks.timers [--timers 10000] [--steps 2000]

One ``SqliteStore`` file (default durability: fsync per commit). First, steps of one actor
(``ask`` in a row, one ``ctx.now()`` effect each) with no timers; then ``--timers`` pending
timers (``send_later`` an hour ahead) are put, and the same steps run again while the timer
loop is up. Prints steps/s and the time to put the timers. No assertion: figures only.
"""

from __future__ import annotations

import argparse
import tempfile
import time
from pathlib import Path

import actorlog
import anyio
import attrs
from actorlog import Actor, ActorSystem, Context
from actorlog.stores import SqliteStore


@actorlog.message(name="benchmarks.timers.Tick")
@attrs.define
class Tick:
    n: int


@actorlog.message(name="benchmarks.timers.Count")
@attrs.define
class Count:
    n: int = 0


class Counter(Actor[Count], name="benchmarks.timers.Counter"):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Tick) -> int:
        ctx.now()
        self.state.n += msg.n
        return self.state.n


async def steps_per_second(system: ActorSystem, actor_id: str, steps: int) -> float:
    ref = system.ref(Counter, actor_id)
    t0 = time.perf_counter()
    for _ in range(steps):
        await ref.ask(Tick(1))
    return steps / (time.perf_counter() - t0)


async def main(timers: int, steps: int) -> None:
    with tempfile.TemporaryDirectory() as tmp:
        path = Path(tmp) / "timers.db"
        async with ActorSystem(SqliteStore(path), actors=[Counter]) as system:
            await steps_per_second(system, "warm", 200)
            before = await steps_per_second(system, "a", steps)
            target = system.ref(Counter, "target")
            t0 = time.perf_counter()
            for i in range(timers):
                await system.send_later(target, Tick(i), delay=3600 + i * 0.001)
            put = time.perf_counter() - t0
            await steps_per_second(system, "settle", steps)  # the WAL checkpoint of the puts
            after = await steps_per_second(system, "b", steps)
            pending = len(await system.timers("target"))
        print(f"steps/s with no timers:          {before:8.0f}")
        print(f"steps/s with {pending} pending timers: {after:8.0f}  ({after / before:.2f}x)")
        print(f"putting {timers} timers: {put:.2f} s ({timers / put:.0f}/s)")


if __name__ == "__main__":
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--timers", type=int, default=10_000)
    parser.add_argument("--steps", type=int, default=2000)
    args = parser.parse_args()
    anyio.run(main, args.timers, args.steps)
