"""PostgreSQL: throughput with 1 and 3 runtimes, and failover time vs lease duration.

    python -m benchmarks.postgres [--url postgresql://...] [--actors 60] [--asks 30]
                                  [--ttls 1,2,4]

Needs a PostgreSQL server (``DATABASE_URL`` or ``--url``; locally ``source .ci/pg.sh;
pg_start``). Each measurement uses a fresh schema, dropped afterwards.

* **throughput**: R runtime processes (1, then 3), each owning ``actors / R`` actors and
  asking each of them ``asks`` messages, one after another per actor, all actors
  concurrently (one ``ctx.call`` per step). Steps/s over all runtimes, p50/p99 ask latency.
* **failover**: a runtime process owns one actor with a lease of ``ttl`` seconds and is
  SIGKILLed; this process (another runtime) keeps asking the actor and reports the time from
  the kill to the first answer: lease expiry (at most ``ttl`` after the last renewal) plus
  the take-over and recovery.
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import time
import uuid
from typing import Any

import anyio
import asyncpg
import attrs
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.stores import PostgresStore

from ._common import bench_parser, quick


@attrs.define
class Bump:
    n: int


@attrs.define
class Count:
    total: int = 0


@tool(effect="read")
async def look(n: int) -> int:
    return n


class Counter(Actor[Count]):
    async def receive(self, ctx: Context, msg: Bump) -> int:
        self.state.total += await ctx.call(look, msg.n)
        return self.state.total


def _pct(xs: list[float], p: float) -> float:
    xs = sorted(xs)
    return xs[min(len(xs) - 1, int(p * len(xs)))] if xs else float("nan")


async def _worker(url: str, schema: str, owner: str, actors: list[str], asks: int) -> None:
    store = PostgresStore(url, schema=schema)
    async with ActorSystem(store, actors=[Counter], owner=owner, lease_ttl=5) as system:
        refs = [await system.spawn(Counter, a) for a in actors]
        print("ready", flush=True)
        sys.stdin.readline()  # go
        lat: list[float] = []

        async def one(i: int) -> None:
            for k in range(asks):
                t0 = time.perf_counter()
                await refs[i].ask(Bump(1), message_id=f"{actors[i]}-{k}")
                lat.append(time.perf_counter() - t0)

        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(len(refs)):
                tg.start_soon(one, i)
        print(json.dumps({"elapsed": time.perf_counter() - t0, "lat": lat}), flush=True)


async def _holder(url: str, schema: str, ttl: float) -> None:
    store = PostgresStore(url, schema=schema)
    async with ActorSystem(store, actors=[Counter], owner="holder", lease_ttl=ttl) as system:
        ref = await system.spawn(Counter, "victim")
        await ref.ask(Bump(1))
        print("ready", flush=True)
        await anyio.sleep_forever()


def _spawn(*args: str) -> subprocess.Popen[str]:
    return subprocess.Popen(
        [sys.executable, "-m", f"{__package__}.postgres", *args],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )


async def _drop(url: str, schema: str) -> None:
    conn = await asyncpg.connect(url)
    try:
        await conn.execute(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
    finally:
        await conn.close()


async def throughput(url: str, runtimes: int, actors: int, asks: int) -> dict[str, Any]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    store = PostgresStore(url, schema=schema)
    await store.open()
    await store.close()
    names = [f"c{i:04d}" for i in range(actors)]
    procs = [
        _spawn("--worker", url, schema, f"r{r}", ",".join(names[r::runtimes]), str(asks))
        for r in range(runtimes)
    ]
    try:
        for p in procs:
            assert p.stdout is not None
            assert (await anyio.to_thread.run_sync(p.stdout.readline)).strip() == "ready"
        for p in procs:
            assert p.stdin is not None
            p.stdin.write("go\n")
            p.stdin.flush()
        results = []
        for p in procs:
            assert p.stdout is not None
            results.append(json.loads(await anyio.to_thread.run_sync(p.stdout.readline)))
        for p in procs:
            p.wait()
    finally:
        for p in procs:
            if p.poll() is None:
                p.kill()
                p.wait()
        await _drop(url, schema)
    lat = [x for r in results for x in r["lat"]]
    elapsed = max(r["elapsed"] for r in results)
    return {
        "runtimes": runtimes,
        "steps": len(lat),
        "steps_per_s": len(lat) / elapsed,
        "p50_ms": _pct(lat, 0.5) * 1e3,
        "p99_ms": _pct(lat, 0.99) * 1e3,
    }


async def failover(url: str, ttl: float) -> dict[str, Any]:
    schema = f"bench_{uuid.uuid4().hex[:10]}"
    holder = _spawn("--holder", url, schema, str(ttl))
    try:
        assert holder.stdout is not None
        line = await anyio.to_thread.run_sync(holder.stdout.readline)
        assert line.strip() == "ready", line
        store = PostgresStore(url, schema=schema)
        async with ActorSystem(store, actors=[Counter], owner="taker", lease_ttl=ttl) as system:
            holder.send_signal(signal.SIGKILL)
            killed = time.monotonic()
            holder.wait()
            await system.ref(Counter, "victim").ask(Bump(1), message_id="after-kill")
            resumed = time.monotonic() - killed
    finally:
        if holder.poll() is None:
            holder.kill()
            holder.wait()
        if holder.stdout is not None:
            holder.stdout.close()
        await _drop(url, schema)
    return {"ttl_s": ttl, "failover_s": resumed}


async def main(args: argparse.Namespace) -> None:
    url = args.url or os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit("set DATABASE_URL or pass --url (source .ci/pg.sh; pg_start)")
    print(f"throughput: {args.actors} actors x {args.asks} asks (one ctx.call per step)")
    print(f"{'runtimes':>8} {'steps/s':>9} {'p50 ms':>8} {'p99 ms':>8}")
    for r in (1, 3):
        t = await throughput(url, r, args.actors, args.asks)
        print(f"{r:>8} {t['steps_per_s']:>9.0f} {t['p50_ms']:>8.1f} {t['p99_ms']:>8.1f}")
    print("failover: SIGKILL the owner; time until another runtime answers an ask")
    print(f"{'lease s':>8} {'failover s':>11}")
    for ttl in (float(x) for x in args.ttls.split(",")):
        f = await failover(url, ttl)
        print(f"{ttl:>8.1f} {f['failover_s']:>11.2f}")


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        u, s, o, a, n = sys.argv[2:7]
        anyio.run(_worker, u, s, o, a.split(","), int(n), backend="asyncio")
    elif len(sys.argv) > 1 and sys.argv[1] == "--holder":
        anyio.run(_holder, sys.argv[2], sys.argv[3], float(sys.argv[4]), backend="asyncio")
    else:
        ap = bench_parser(__doc__, quick_help="--actors 10 --asks 5 --ttls 1", writes=False)
        ap.add_argument("--url", help="PostgreSQL URL (default: $DATABASE_URL)")
        ap.add_argument("--actors", type=int, default=60, help="actors")
        ap.add_argument("--asks", type=int, default=30, help="asks per actor")
        ap.add_argument("--ttls", default="1,2,4", help="lease TTLs to try, seconds")
        args = ap.parse_args()
        quick(args, ap, actors=10, asks=5, ttls="1")
        anyio.run(main, args, backend="asyncio")
