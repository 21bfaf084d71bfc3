"""Durable throughput of actorlog, as ratios to raw SQLite and to an in-memory store.

    python -m benchmarks.throughput [--calls 2000] [--actors 1,10,100,1000] [--steps 2000]

Measured in one run, on one machine:

* **raw**: the SQLite commit rate (``sqlite3``, and ``thread``: ``SqliteStore``'s connection,
  ``sqlite3`` on a thread of its own; WAL, ``synchronous=FULL``,
  1 and 64 rows of ~200 bytes per transaction), as in ``benchmarks.raw_sqlite``.
* **one actor, sequential tool calls**: one ``Run(N)`` message whose handler makes N
  ``ctx.call``s (each call's intent is durable before the tool runs: one commit per call).
* **concurrent actors**: C actors (1, 10, 100, 1,000), each with its own client task asking
  it ``Step(i)`` messages one after another (``ask`` with a ``message_id``; one ``ctx.call``
  per step; snapshots every 100 steps, the default). Steps/s over all actors, p50/p99 latency
  of ``ask``, and the store's commit batch sizes. With group commit (the ``SqliteStore``
  default) and without (every append its own transaction, a benchmark-only subclass), with
  ``SqliteStore(commit_on_loop=True)`` (lone appends committed on the loop's thread), and on
  ``MemoryStore`` (the cost of the runtime without any I/O). The one actor's sequential calls
  run on the default (``commit_on_loop="auto"``), on ``commit_on_loop=False`` (every commit on
  the writer's thread), on ``commit_on_loop=True`` and on ``MemoryStore``.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING, Any, Literal

import anyio
import attrs
from actorlog import ActorSystem
from actorlog.stores import MemoryStore, SqliteStore

from . import _agent
from ._common import (
    Table,
    bench_parser,
    configure_output,
    fmt_num,
    loadavg,
    machine_info,
    percentile,
    quick,
    scratch_dir,
    write_report,
)
from .raw_sqlite import RawResult, measure_sqlite3, measure_thread

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

    from actorlog.store import Store

__all__ = ["BatchCountingSqliteStore", "main"]


class BatchCountingSqliteStore(SqliteStore):
    """``SqliteStore`` that counts its commits; with ``group_commit=False`` it commits every
    queued append in a transaction of its own (what a store without group commit does).

    Benchmark-only: it overrides the store's private ``_commit`` hook, and
    ``_commit_now`` (a lone append committed on the loop without ``_commit``; an actorlog
    without that hook never calls it).
    """

    def __init__(
        self,
        path: str | Path,
        *,
        group_commit: bool = True,
        commit_on_loop: bool | None = None,
        durability: Literal["fsync", "survive-process-crash"] = "fsync",
    ) -> None:
        # None: the store's default (so that this code also measures an older actorlog)
        if commit_on_loop is None:
            super().__init__(path, durability=durability)
        else:
            super().__init__(path, commit_on_loop=commit_on_loop, durability=durability)
        self.group_commit = group_commit
        self.commits = 0
        self.appends = 0
        self.rows = 0
        self.all_batch_sizes: list[int] = []  # unbounded, unlike batch_sizes

    def _commit_now(self, req: Any) -> bool:
        done = super()._commit_now(req)
        if done:
            self.appends += 1
            self.rows += len(req.item[2])
            self.commits += 1
            self.all_batch_sizes.append(1)
        return done

    async def _commit(self, batch: Sequence[Any]) -> None:
        self.appends += len(batch)
        self.rows += sum(len(req.item[2]) for req in batch)
        if self.group_commit:
            self.commits += 1
            self.all_batch_sizes.append(len(batch))
            await super()._commit(batch)
            return
        for req in batch:
            self.commits += 1
            self.all_batch_sizes.append(1)
            await super()._commit([req])


_NAMES = {
    "sqlite": "SqliteStore (default)",
    "sqlite-on-loop": "SqliteStore (commit_on_loop=True)",
    "sqlite-thread": "SqliteStore (commit_on_loop=False)",
    "sqlite-no-group": "SqliteStore, no group commit",
    "memory": "MemoryStore",
}


@attrs.define
class Run:
    label: str
    actors: int
    steps: int
    seconds: float
    latencies: list[float] = attrs.Factory(list)
    batches: list[int] = attrs.Factory(list)
    commits: int = 0
    rows: int = 0
    setup_s: float = 0.0
    #: commits that ran on the event loop's thread (SqliteStore's telemetry; 0 if it has none)
    loop_commits: int = 0

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds > 0 else float("nan")


def _make_store(
    kind: str, path: Path, durability: Literal["fsync", "survive-process-crash"] = "fsync"
) -> Store:
    if kind == "memory":
        return MemoryStore()
    on_loop = {"sqlite-on-loop": True, "sqlite-thread": False}.get(kind)
    return BatchCountingSqliteStore(
        path, group_commit=kind != "sqlite-no-group", commit_on_loop=on_loop, durability=durability
    )


def _collect(run: Run, store: Store) -> None:
    if isinstance(store, BatchCountingSqliteStore):
        run.batches = list(store.all_batch_sizes)
        run.commits = store.commits
        run.rows = store.rows


async def _one_actor(kind: str, path: Path, calls: int) -> Run:
    store = _make_store(kind, path)
    async with ActorSystem(store, actors=[_agent.Agent]) as system:
        ref = await system.spawn(_agent.Agent, "solo")
        await ref.ask(_agent.Run(20), message_id="warmup")
        if isinstance(store, BatchCountingSqliteStore):
            store.all_batch_sizes.clear()
            store.commits = store.rows = 0
        on_loop = getattr(store, "_loop_commits", 0)
        t = time.perf_counter()
        await ref.ask(_agent.Run(calls), message_id="run")
        run = Run(kind, 1, calls, time.perf_counter() - t)
        run.loop_commits = getattr(store, "_loop_commits", 0) - on_loop
        _collect(run, store)
    return run


async def _concurrent(kind: str, path: Path, actors: int, asks_each: int) -> Run:
    store = _make_store(kind, path)
    async with ActorSystem(store, actors=[_agent.Agent]) as system:
        t = time.perf_counter()
        refs = []
        for a in range(actors):
            refs.append(await system.spawn(_agent.Agent, f"agent-{a:05d}"))
        setup = time.perf_counter() - t
        latencies: list[float] = []

        async def client(ref: Any, warmup: bool) -> None:
            if warmup:
                await ref.ask(_agent.Step(-1), message_id="warmup")
                return
            for i in range(asks_each):
                t0 = time.perf_counter()
                await ref.ask(_agent.Step(i), message_id=f"step-{i}")
                latencies.append(time.perf_counter() - t0)

        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(client, ref, True)
        if isinstance(store, BatchCountingSqliteStore):
            store.all_batch_sizes.clear()
            store.commits = store.rows = 0
        t = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(client, ref, False)
        run = Run(kind, actors, actors * asks_each, time.perf_counter() - t, latencies)
        run.setup_s = setup
        _collect(run, store)
    return run


async def _concurrent_calls(kind: str, path: Path, actors: int, calls_each: int) -> Run:
    """C actors, each handling one ``Run(n)`` message (n sequential ``ctx.call``s) at once:
    the shape of C concurrent agent runs (as DBOS workflows or LangGraph invocations)."""
    store = _make_store(kind, path)
    async with ActorSystem(store, actors=[_agent.Agent]) as system:
        t = time.perf_counter()
        refs = [await system.spawn(_agent.Agent, f"agent-{a:05d}") for a in range(actors)]
        setup = time.perf_counter() - t
        latencies: list[float] = []

        async def client(ref: Any, msg: Any, message_id: str, record: bool) -> None:
            t0 = time.perf_counter()
            await ref.ask(msg, message_id=message_id)
            if record:
                latencies.append(time.perf_counter() - t0)

        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(client, ref, _agent.Run(2), "warmup", False)
        if isinstance(store, BatchCountingSqliteStore):
            store.all_batch_sizes.clear()
            store.commits = store.rows = 0
        t = time.perf_counter()
        async with anyio.create_task_group() as tg:
            for ref in refs:
                tg.start_soon(client, ref, _agent.Run(calls_each), "run", True)
        run = Run(kind, actors, actors * calls_each, time.perf_counter() - t, latencies)
        run.setup_s = setup
        _collect(run, store)
    return run


async def _store_appends(path: Path, rows_per_append: int, seconds: float) -> float:
    """``SqliteStore.append`` alone, one actor, back to back: appends per second."""
    from actorlog.store import EntryRow

    store = SqliteStore(path)
    await store.open()
    try:
        await store.register_actor("raw-appender", "bench")
        payload = bytes(range(200))
        seq = 0

        async def one() -> None:
            nonlocal seq
            rows = [
                EntryRow("raw-appender", seq + 1 + k, "message", "bench", 0, None, payload, 0)
                for k in range(rows_per_append)
            ]
            await store.append("raw-appender", seq, rows)
            seq += rows_per_append

        for _ in range(20):
            await one()
        n = 0
        t = time.perf_counter()
        deadline = t + seconds
        now = t
        while now < deadline:
            await one()
            n += 1
            now = time.perf_counter()
        return n / (now - t)
    finally:
        await store.close()


@attrs.define
class StoreCpu:
    """``SqliteStore.append`` alone: appends per second and CPU per append, on the event
    loop's thread and on the other threads (the writer connection's)."""

    appenders: int
    appends: int
    seconds: float
    loop_cpu: float
    other_cpu: float

    @property
    def rate(self) -> float:
        return self.appends / self.seconds

    @property
    def loop_us(self) -> float:
        return 1e6 * self.loop_cpu / self.appends

    @property
    def other_us(self) -> float:
        return 1e6 * self.other_cpu / self.appends


async def _store_cpu(path: Path, appenders: int, appends: int) -> StoreCpu:
    """``appenders`` actors appending one ~130-byte row at a time, each in its own task (a
    message with a message id, then an intent, in turn): how much CPU the store spends per
    append on the loop's thread (``time.thread_time``) and on its other threads (the process's
    CPU time less the loop's)."""
    import os as _os

    from actorlog.store import EntryRow

    store = SqliteStore(path)
    await store.open()
    payload = _os.urandom(130)
    ids = [f"appender-{i:05d}" for i in range(appenders)]
    last = dict.fromkeys(ids, 0)

    async def appender(actor_id: str, n: int) -> None:
        for k in range(n):
            seq = last[actor_id]
            mid = f"m-{seq}" if k % 2 == 0 else None
            kind = "message" if mid else "intent"
            row = EntryRow(actor_id, seq + 1, kind, "bench", 0 if mid else seq, mid, payload, 0)
            await store.append(actor_id, seq, [row])
            last[actor_id] = seq + 1

    async def run(n: int) -> None:
        async with anyio.create_task_group() as tg:
            for actor_id in ids:
                tg.start_soon(appender, actor_id, n)

    try:
        for actor_id in ids:
            await store.register_actor(actor_id, "bench")
        await run(4)  # warm-up
        each = max(2, appends // appenders)
        p0, l0, t0 = time.process_time(), time.thread_time(), time.perf_counter()
        await run(each)
        t1, l1, p1 = time.perf_counter(), time.thread_time(), time.process_time()
    finally:
        await store.close()
    loop_cpu = l1 - l0
    return StoreCpu(appenders, each * appenders, t1 - t0, loop_cpu, (p1 - p0) - loop_cpu)


def _median(values: Sequence[float]) -> float:
    vals = sorted(values)
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def _median_raw(runs: Sequence[RawResult]) -> RawResult:
    return sorted(runs, key=lambda r: r.commits_per_s)[len(runs) // 2]


def _merge(runs: Sequence[Run]) -> Run:
    """One line from repeated runs: the median rate; latencies and batches of all runs."""
    rate = _median([r.steps_per_s for r in runs])
    first = runs[0]
    total_s = sum(r.seconds for r in runs)
    merged = Run(first.label, first.actors, first.steps, first.steps / rate)
    merged.latencies = [x for r in runs for x in r.latencies]
    merged.batches = [x for r in runs for x in r.batches]
    # commits/s from all runs together
    merged.commits = round(sum(r.commits for r in runs) * merged.seconds / total_s)
    merged.rows = round(sum(r.rows for r in runs) * merged.seconds / total_s)
    merged.setup_s = _median([r.setup_s for r in runs])
    merged.loop_commits = round(sum(r.loop_commits for r in runs) * merged.seconds / total_s)
    return merged


def _batch_summary(batches: Sequence[int]) -> str:
    if not batches:
        return "-"
    mean = sum(batches) / len(batches)
    return f"{mean:.1f} / {percentile(batches, 50):.0f} / {max(batches)}"


def _raw_rates(directory: Path, seconds: float) -> dict[tuple[str, int], RawResult]:
    directory.mkdir(parents=True, exist_ok=True)
    out: dict[tuple[str, int], RawResult] = {}
    for rows in (1, 64):
        out[("sqlite3", rows)] = measure_sqlite3(directory / f"raw-s-{rows}.db", rows, seconds)
        out[("thread", rows)] = asyncio.run(
            measure_thread(directory / f"raw-a-{rows}.db", rows, seconds)
        )
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(
        __doc__, quick_help="--calls 200 --actors 1,10 --steps 200 --raw-seconds 0.3", writes=True
    )
    parser.add_argument("--calls", type=int, default=2000, help="ctx.calls of the one actor")
    parser.add_argument("--actors", default="1,10,100,1000", help="concurrency levels")
    parser.add_argument(
        "--steps", type=int, default=2000, help="total asks per concurrency level (at least 2 each)"
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs of everything; medians")
    parser.add_argument("--raw-seconds", type=float, default=1.5, help="per raw measurement")
    parser.add_argument(
        "--modes",
        default="sqlite,sqlite-thread,sqlite-on-loop,sqlite-no-group,memory",
        help="stores for the concurrent runs: sqlite (the default), sqlite-thread "
        "(commit_on_loop=False), sqlite-on-loop (commit_on_loop=True), sqlite-no-group, memory",
    )
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, calls=200, actors="1,10", steps=200, raw_seconds=0.3)
    configure_output(args)
    levels = [int(x) for x in args.actors.split(",") if x.strip()]
    modes = [m.strip() for m in args.modes.split(",") if m.strip()]

    raw_runs: dict[tuple[str, int], list[RawResult]] = {}
    store_runs: dict[int, list[float]] = {}
    cpu_runs: dict[int, list[StoreCpu]] = {}
    solo_runs: dict[str, list[Run]] = {}
    conc_runs: dict[tuple[int, str], list[Run]] = {}
    calls_runs: dict[tuple[int, str], list[Run]] = {}
    calls_each = max(2, args.calls // 10)
    with scratch_dir(args.dir) as d:
        info = machine_info(d)
        for rep in range(args.repeat):  # interleaved, so changes in load hit every line alike
            tag = f" (run {rep + 1}/{args.repeat})" if args.repeat > 1 else ""
            print(f"raw SQLite commit rate{tag} ...", flush=True)
            for key, rr in _raw_rates(d / f"r{rep}", args.raw_seconds).items():
                raw_runs.setdefault(key, []).append(rr)
            for rows in (1, 64):
                path = d / f"store-{rows}-{rep}.db"
                rate = anyio.run(_store_appends, path, rows, args.raw_seconds)
                store_runs.setdefault(rows, []).append(rate)
            for appenders in (1, 100):
                path = d / f"store-cpu-{appenders}-{rep}.db"
                n = max(200, args.steps) if appenders == 1 else max(2000, 10 * args.steps)
                got = anyio.run(_store_cpu, path, appenders, n)
                cpu_runs.setdefault(appenders, []).append(got)
            print(f"one actor, sequential ctx.calls{tag} ...", flush=True)
            for kind in ("sqlite", "sqlite-thread", "sqlite-on-loop", "memory"):
                path = d / f"solo-{kind}-{rep}.db"
                solo_runs.setdefault(kind, []).append(anyio.run(_one_actor, kind, path, args.calls))
            for level in levels:
                each = max(2, args.steps // level)
                for kind in modes:
                    print(f"{level} concurrent actors, {kind}{tag} ...", flush=True)
                    path = d / f"conc-{level}-{kind}-{rep}.db"
                    conc_runs.setdefault((level, kind), []).append(
                        anyio.run(_concurrent, kind, path, level, each)
                    )
                for kind in ("sqlite", "sqlite-on-loop", "memory"):
                    if kind not in modes:
                        continue
                    print(f"{level} concurrent runs of sequential calls, {kind}{tag} ...")
                    path = d / f"calls-{level}-{kind}-{rep}.db"
                    calls_runs.setdefault((level, kind), []).append(
                        anyio.run(_concurrent_calls, kind, path, level, calls_each)
                    )
        info["load average (1, 5, 15 min) at end"] = loadavg()

    raw = {k: _median_raw(v) for k, v in raw_runs.items()}
    raw1 = raw[("thread", 1)].rows_per_s
    raw1_sync = raw[("sqlite3", 1)].rows_per_s
    store_rates = {k: _median(v) for k, v in store_runs.items()}
    solo = {k: _merge(v) for k, v in solo_runs.items()}
    conc = [_merge(v) for v in conc_runs.values()]
    calls = [_merge(v) for v in calls_runs.values()]

    raw_table = Table(["driver", "rows/txn", "commits/s", "rows/s", "µs/commit"])
    for (driver, rows), rr in raw.items():
        raw_table.add(driver, rows, rr.commits_per_s, rr.rows_per_s, rr.us_per_commit)
    for rows, rate in store_rates.items():
        raw_table.add("SqliteStore.append", rows, rate, rate * rows, 1e6 / rate)

    cpu_table = Table(
        [
            "appenders",
            "appends/s",
            "loop thread CPU µs/append",
            "other threads CPU µs/append",
        ]
    )
    for appenders, runs in cpu_runs.items():
        cpu_table.add(
            appenders,
            _median([r.rate for r in runs]),
            _median([r.loop_us for r in runs]),
            _median([r.other_us for r in runs]),
        )

    solo_table = Table(
        [
            "store",
            "ctx.calls/s",
            "vs raw thread 1-row",
            "vs raw sqlite3 1-row",
            "vs MemoryStore",
            "commits",
            "on the loop",
            "rows/commit",
            "batch mean / p50 / max",
        ]
    )
    mem_rate = solo["memory"].steps_per_s
    for kind, r in solo.items():
        durable = kind != "memory"
        solo_table.add(
            _NAMES.get(kind, kind),
            r.steps_per_s,
            f"{r.steps_per_s / raw1:.2f}x" if durable else "-",
            f"{r.steps_per_s / raw1_sync:.2f}x" if durable else "-",
            f"{r.steps_per_s / mem_rate:.2f}x",
            r.commits if durable else "-",
            f"{r.loop_commits / r.commits:.0%}" if durable and r.commits else "-",
            fmt_num(r.rows / r.commits) if durable and r.commits else "-",
            _batch_summary(r.batches) if durable else "-",
        )

    conc_table = Table(
        [
            "actors",
            "store",
            "steps/s",
            "vs raw thread 1-row",
            "vs MemoryStore",
            "ask p50 (ms)",
            "ask p99 (ms)",
            "commits/s",
            "appends/commit mean / p50 / max",
            "spawn all (s)",
        ]
    )
    mem_by_level = {r.actors: r.steps_per_s for r in conc if r.label == "memory"}
    names = _NAMES
    for r in conc:
        durable = r.label != "memory"
        mem = mem_by_level.get(r.actors)
        conc_table.add(
            r.actors,
            names.get(r.label, r.label),
            r.steps_per_s,
            f"{r.steps_per_s / raw1:.2f}x",
            f"{r.steps_per_s / mem:.2f}x" if mem else "-",
            1000 * percentile(r.latencies, 50),
            1000 * percentile(r.latencies, 99),
            r.commits / r.seconds if durable else "-",
            _batch_summary(r.batches) if durable else "-",
            r.setup_s,
        )

    calls_table = Table(
        [
            "actors",
            "store",
            "ctx.calls/s",
            "vs raw thread 1-row",
            "vs raw sqlite3 1-row",
            "vs MemoryStore",
            "run p50 (s)",
            "commits/s",
            "appends/commit mean / p50 / max",
        ]
    )
    mem_calls = {r.actors: r.steps_per_s for r in calls if r.label == "memory"}
    for r in calls:
        durable = r.label != "memory"
        mem = mem_calls.get(r.actors)
        calls_table.add(
            r.actors,
            names.get(r.label, r.label),
            r.steps_per_s,
            f"{r.steps_per_s / raw1:.2f}x",
            f"{r.steps_per_s / raw1_sync:.2f}x",
            f"{r.steps_per_s / mem:.2f}x" if mem else "-",
            percentile(r.latencies, 50),
            r.commits / r.seconds if durable else "-",
            _batch_summary(r.batches) if durable else "-",
        )

    print()
    print(raw_table.text())
    print()
    print(cpu_table.text())
    print()
    print(solo_table.text())
    print()
    print(conc_table.text())
    print()
    print(calls_table.text())
    if not args.no_write:
        body = "\n\n".join(
            [
                (
                    f"Medians of {args.repeat} interleaved runs of everything; latency "
                    "percentiles over all runs. "
                    if args.repeat > 1
                    else ""
                )
                + "All figures from one invocation of the command above. Durable means "
                "`SqliteStore` with its default durability (WAL, `synchronous=FULL`: a real "
                "fsync before `send` returns and before a tool runs).",
                "## Raw SQLite commit rate (the ceiling)\n\n"
                "WAL, `synchronous=FULL`, ~200-byte rows, one multi-row `INSERT` per "
                f"transaction, {args.raw_seconds:g} s each. The `SqliteStore.append` lines are "
                "actorlog's store alone (one actor appending back to back, no runtime): its "
                "schema (indexes, contiguity and summary triggers) on the same commit path.\n\n"
                + raw_table.markdown(),
                "## The store's CPU per append\n\n"
                "`SqliteStore.append` alone (no runtime): 1 or 100 appenders, each in its own "
                "task appending one ~130-byte row at a time (a message with a message id, then "
                "an intent, in turn), `synchronous=FULL`. *Loop thread*: `time.thread_time` of "
                "the event loop's thread per append (the store's Python there, and the "
                "benchmark's own loop); *other threads*: the process's CPU time less the loop's, "
                "per append: the writer connection's thread (binding, SQLite's insert with its "
                "triggers and indexes, the fsync's system time).\n\n" + cpu_table.markdown(),
                f"## One actor, {args.calls:,} sequential tool calls\n\n"
                "One message whose handler makes the calls one after another; each call's "
                "intent must be durable before the tool runs, so one commit per call is the "
                "floor. The ratios are to the raw one-row commit rate above and to the same "
                'actor on `MemoryStore`. *default*: `commit_on_loop="auto"`, which commits an '
                "append no other append shares a transaction with on the event loop's thread "
                "while such commits are fast (running mean <= 1 ms), else on the writer's "
                "thread; `False`: always on the writer's thread; `True`: always on the "
                "loop's (docs/tuning.md). *on the loop*: the share of the commits that ran on "
                "the event loop's thread.\n\n" + solo_table.markdown(),
                "## Concurrent actors\n\n"
                f"About {args.steps:,} asks per line in total (at least 2 per actor), each actor "
                "asked by its own client task one message after another (`ask` with a "
                "`message_id`, one `ctx.call` per step, snapshot every 100 steps). "
                "*appends/commit*: how many actors' appends shared one transaction (one "
                "fsync). *No group commit*: the same store committing every append in a "
                "transaction of its own (a benchmark-only subclass). *spawn all*: registering "
                "and starting the actors, not included in steps/s.\n\n" + conc_table.markdown(),
                "## Concurrent runs of sequential tool calls\n\n"
                f"C actors each handling one message whose handler makes {calls_each:,} `ctx.call`s"
                " one after another, all at once: the shape of C concurrent agent "
                "runs (what the peers benchmark runs as concurrent DBOS workflows or LangGraph "
                "invocations). One commit per call per actor, shared between actors by group "
                "commit. *run p50*: the median time of one actor's whole run.\n\n"
                + calls_table.markdown(),
            ]
        )
        out = write_report("throughput", "actorlog durable throughput", body, info=info)
        print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
