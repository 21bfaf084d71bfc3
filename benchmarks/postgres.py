"""PostgreSQL: throughput with 1 and 3 runtimes, and failover time vs lease duration.

    python -m benchmarks.postgres [--url postgresql://...] [--actors 60] [--asks 100]
                                  [--runtimes 1,3] [--repeat 1] [--ttls 1,2,4]

Needs a PostgreSQL server (``DATABASE_URL`` or ``--url``; locally ``source .ci/pg.sh;
pg_start``). Each measurement uses a fresh schema, dropped afterwards.

* **throughput**: R runtime processes (1, then 3), each owning ``actors / R`` actors (leases,
  fenced appends) and asking each of them ``asks`` messages, one after another per actor
  (``ask`` with a ``message_id``), all actors concurrently (one ``ctx.call`` per step).
  Steps/s over all runtimes, p50/p99 ask latency; counted in the runtimes: commits (store
  transactions of the log) per second, appends per commit, statements sent per step (every
  statement of the store's pool), and CPU time per step of the runtime processes and, when
  the server runs on this machine, of their server backends (``/proc``): on a shared machine
  CPU per step is steadier than wall-clock rates.
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
from collections.abc import Sequence
from typing import Any

import anyio
import asyncpg
import attrs
from actorlog import Actor, ActorSystem, Context, message, tool
from actorlog.stores import PostgresStore

from ._common import (
    Table,
    bench_parser,
    configure_output,
    loadavg,
    machine_info,
    percentile,
    quick,
    write_report,
)


@message(name="bench.pg.bump")
@attrs.define
class Bump:
    n: int


@message(name="bench.pg.count")
@attrs.define
class Count:
    total: int = 0


@tool(effect="read", name="bench.pg.look")
async def look(n: int) -> int:
    return n


class Counter(Actor[Count], name="bench.pg.counter"):
    async def receive(self, ctx: Context, msg: Bump) -> int:
        self.state.total += await ctx.call(look, msg.n)
        return self.state.total


class CountingPostgresStore(PostgresStore):
    """``PostgresStore`` that counts its log commits (benchmark-only: it overrides the
    store's private ``_commit`` hook, as ``benchmarks.throughput`` does for SQLite)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self.commits = self.appends = self.rows = 0

    async def _commit(self, batch: Sequence[Any]) -> None:
        self.commits += 1
        self.appends += len(batch)
        self.rows += sum(len(req.item[2]) for req in batch)
        await super()._commit(batch)


class _Statements:
    """Counts the statements of every pool connection and remembers their server pids
    (asyncpg's query logger, installed through the pool's ``init`` hook)."""

    def __init__(self) -> None:
        self.count = 0
        self.pids: set[int] = set()
        original = asyncpg.create_pool

        def create_pool(*args: Any, **kwargs: Any) -> Any:
            async def init(conn: Any) -> None:
                self.pids.add(conn.get_server_pid())
                conn.add_query_logger(self._logged)

            kwargs["init"] = init
            return original(*args, **kwargs)

        asyncpg.create_pool = create_pool

    def _logged(self, _: object) -> None:
        self.count += 1

    def server_cpu(self) -> float | None:
        """CPU seconds of the pool's server backends so far (None: not on this machine)."""
        total = 0
        try:
            for pid in self.pids:
                with open(f"/proc/{pid}/stat", encoding="ascii") as f:
                    fields = f.read().rsplit(")", 1)[1].split()
                total += int(fields[11]) + int(fields[12])
        except (OSError, IndexError, ValueError):
            return None
        return total / os.sysconf("SC_CLK_TCK")


async def _worker(url: str, schema: str, owner: str, actors: list[str], asks: int) -> None:
    statements = _Statements()
    store = CountingPostgresStore(url, schema=schema)
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

        store.commits = store.appends = store.rows = 0
        n_statements = statements.count
        server0 = statements.server_cpu()
        cpu0 = time.process_time()
        t0 = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for i in range(len(refs)):
                tg.start_soon(one, i)
        elapsed = time.perf_counter() - t0
        cpu = time.process_time() - cpu0
        server1 = statements.server_cpu()
        result = {
            "elapsed": elapsed,
            "lat": lat,
            "cpu": cpu,
            "server_cpu": None if server0 is None or server1 is None else server1 - server0,
            "commits": store.commits,
            "appends": store.appends,
            "rows": store.rows,
            "statements": statements.count - n_statements,
        }
        print(json.dumps(result), flush=True)


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


@attrs.define
class Throughput:
    runtimes: int
    steps: int
    seconds: float
    latencies: list[float]
    cpu_s: float  # the runtime processes' CPU time
    server_cpu_s: float | None  # their server backends' (None: server elsewhere)
    commits: int
    appends: int
    rows: int
    statements: int

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds


async def throughput(url: str, runtimes: int, actors: int, asks: int) -> Throughput:
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
    servers = [r["server_cpu"] for r in results]
    return Throughput(
        runtimes=runtimes,
        steps=len(lat),
        seconds=max(r["elapsed"] for r in results),
        latencies=lat,
        cpu_s=sum(r["cpu"] for r in results),
        server_cpu_s=None if None in servers else sum(servers),
        commits=sum(r["commits"] for r in results),
        appends=sum(r["appends"] for r in results),
        rows=sum(r["rows"] for r in results),
        statements=sum(r["statements"] for r in results),
    )


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


def _median(values: Sequence[float]) -> float:
    vals = sorted(values)
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def _throughput_table(runs: dict[int, list[Throughput]]) -> Table:
    """One line per runtime count: medians over the repeats (latency percentiles over all)."""
    table = Table(
        [
            "runtimes",
            "steps/s",
            "ask p50 (ms)",
            "ask p99 (ms)",
            "commits/s",
            "appends/commit",
            "rows/commit",
            "statements/step",
            "runtime CPU µs/step",
            "server CPU µs/step",
        ]
    )
    for n, rs in runs.items():
        lat = [x for r in rs for x in r.latencies]
        servers = [r.server_cpu_s for r in rs]
        table.add(
            n,
            _median([r.steps_per_s for r in rs]),
            1000 * percentile(lat, 50),
            1000 * percentile(lat, 99),
            _median([r.commits / r.seconds for r in rs]),
            _median([r.appends / r.commits for r in rs if r.commits]),
            _median([r.rows / r.commits for r in rs if r.commits]),
            _median([r.statements / r.steps for r in rs]),
            _median([1e6 * r.cpu_s / r.steps for r in rs]),
            "-"
            if None in servers
            else _median([1e6 * (r.server_cpu_s or 0.0) / r.steps for r in rs]),
        )
    return table


async def main(args: argparse.Namespace) -> None:
    url = args.url or os.environ.get("DATABASE_URL")
    if not url:
        raise SystemExit("set DATABASE_URL or pass --url (source .ci/pg.sh; pg_start)")
    configure_output(args)
    info = machine_info()
    levels = [int(x) for x in args.runtimes.split(",") if x.strip()]
    print(f"throughput: {args.actors} actors x {args.asks} asks (one ctx.call per step)")
    runs: dict[int, list[Throughput]] = {n: [] for n in levels}
    for rep in range(args.repeat):  # interleaved: changes in load hit every line alike
        for n in levels:
            t = await throughput(url, n, args.actors, args.asks)
            runs[n].append(t)
            print(
                f"  run {rep + 1}/{args.repeat}, {n} runtime(s): {t.steps_per_s:,.0f} steps/s, "
                f"{1e6 * t.cpu_s / t.steps:,.0f} µs runtime CPU/step",
                flush=True,
            )
    table = _throughput_table(runs)
    print(table.text())
    print("failover: SIGKILL the owner; time until another runtime answers an ask")
    fail_table = Table(["lease ttl (s)", "kill → answered elsewhere (s)"])
    for ttl in (float(x) for x in args.ttls.split(",") if x.strip()):
        f = await failover(url, ttl)
        fail_table.add(ttl, f["failover_s"])
    print(fail_table.text())
    info["load average (1, 5, 15 min) at end"] = loadavg()
    if args.no_write:
        return
    body = "\n\n".join(
        [
            (f"Medians of {args.repeat} interleaved runs. " if args.repeat > 1 else "")
            + "The PostgreSQL server's own settings decide what a commit costs (this run: "
            f"{await _settings(url)}).",
            f"## Throughput: {args.actors} actors x {args.asks} asks, 1 and 3 runtimes\n\n"
            "Each runtime is a process owning its share of the actors (leases; every append "
            "fenced by the database), asking each of them one message after another "
            "(`ask` with a `message_id`, one `ctx.call` per step), all actors at once. "
            "*commits*: transactions of the log (group commit: *appends/commit* actors' "
            "appends share one `INSERT ... SELECT FROM unnest(...)`); *statements/step*: "
            "every statement the runtimes' store pools sent, per step; *CPU µs/step*: "
            "process CPU time of the runtime processes, and of their server backends when "
            "the server runs on this machine.\n\n" + table.markdown(),
            "## Failover\n\n"
            "A runtime process owns one actor with a lease of *ttl* seconds and is "
            "SIGKILLed; another runtime keeps asking the actor: the time from the kill to "
            "its first answer (lease expiry, take-over, recovery).\n\n" + fail_table.markdown(),
        ]
    )
    path = write_report("postgres", "actorlog on PostgreSQL", body, info=info)
    print(f"report: {path}")


async def _settings(url: str) -> str:
    conn = await asyncpg.connect(url)
    try:
        version = await conn.fetchval("SHOW server_version")
        fsync = await conn.fetchval("SHOW fsync")
        sync = await conn.fetchval("SHOW synchronous_commit")
    finally:
        await conn.close()
    return f"PostgreSQL {version}, `fsync={fsync}`, `synchronous_commit={sync}`"


if __name__ == "__main__":
    if len(sys.argv) > 1 and sys.argv[1] == "--worker":
        u, s, o, a, n = sys.argv[2:7]
        anyio.run(_worker, u, s, o, a.split(","), int(n), backend="asyncio")
    elif len(sys.argv) > 1 and sys.argv[1] == "--holder":
        anyio.run(_holder, sys.argv[2], sys.argv[3], float(sys.argv[4]), backend="asyncio")
    else:
        ap = bench_parser(__doc__, quick_help="--actors 10 --asks 5 --ttls 1", writes=True)
        ap.add_argument("--url", help="PostgreSQL URL (default: $DATABASE_URL)")
        ap.add_argument("--actors", type=int, default=60, help="actors")
        ap.add_argument("--asks", type=int, default=100, help="asks per actor")
        ap.add_argument("--runtimes", default="1,3", help="runtime process counts to run")
        ap.add_argument("--repeat", type=int, default=1, help="interleaved runs; medians")
        ap.add_argument("--ttls", default="1,2,4", help="lease TTLs to try, seconds ('': none)")
        ap.add_argument("--no-write", action="store_true", help="print only; write no report")
        args = ap.parse_args()
        quick(args, ap, actors=10, asks=5, ttls="1")
        anyio.run(main, args, backend="asyncio")
