"""Snapshot tuning: what ``snapshot_every`` costs while running and saves at recovery.

    python -m benchmarks.snapshots [--steps 5000] [--every 10,100,1000,10000,never]
                                   [--sizes 1000,100000] [--points 3]
    python -m benchmarks.snapshots --stall 40 [--snapshots 5]

For each state size and each ``snapshot_every``, one actor (``benchmarks._agent``, one
``ctx.call`` per ``Step`` message, 16 concurrent senders) runs in a fresh ``SqliteStore``
(default durability: fsync per commit). The log is stopped at ``--points`` random step
counts between ``steps/2`` and ``steps`` (the same points for every setting, like crashes at
random moments); at each, a fresh process recovers the actor (see ``benchmarks.recovery``)
and the time to its first live step is measured. Reported per setting:

* steady-state steps/s (all steps over the time spent running them);
* bytes written per step: the process's block-device writes (``/proc/self/io``
  ``write_bytes``: WAL, checkpoints, snapshots, including snapshots later deleted);
* store size per step: used pages of the database at the end;
* recovery: mean over the random points of the runtime's recovery time and of spawn → first
  live step, and the mean tail replayed.
"""

from __future__ import annotations

import random
import time
from typing import TYPE_CHECKING

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context
from actorlog.stores import SqliteStore

from . import _agent
from ._common import (
    Table,
    bench_parser,
    configure_output,
    fmt_bytes,
    loadavg,
    machine_info,
    output_dir,
    plot_lines,
    quick,
    scratch_dir,
    write_report,
)
from .recovery import ACTOR, SENDERS, measure

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = ["Setting", "main"]

NEVER_X = 100_000  # where "never" is drawn on the plot's x axis


def _write_bytes() -> int:
    try:
        with open("/proc/self/io", encoding="utf-8") as f:
            for line in f:
                if line.startswith("write_bytes:"):
                    return int(line.split()[1])
    except (OSError, ValueError):
        pass
    return -1


def _used_bytes(path: Path) -> int:
    import sqlite3

    conn = sqlite3.connect(path)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        page = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    finally:
        conn.close()
    return (pages - free) * page


async def _run_to(path: Path, first: int, last: int, every: int | None, grow: int | None) -> float:
    """Steps ``first .. last-1``; returns the seconds spent (store open/close excluded)."""
    async with ActorSystem(SqliteStore(path), actors=[_agent.Agent]) as system:
        ref = await system.spawn(_agent.Agent, ACTOR, snapshot_every=every)
        if grow is not None:
            await ref.ask(_agent.Grow(grow))
        t = time.perf_counter()

        async def sender(k: int) -> None:
            for i in range(first + k, last, SENDERS):
                await ref.send(_agent.Step(i))

        async with anyio.create_task_group() as tg:
            for k in range(min(SENDERS, last - first)):
                tg.start_soon(sender, k)
        await ref.ask(_agent.Status())
        return time.perf_counter() - t


@attrs.define
class Setting:
    every: int | None
    state_bytes: int
    steps: int = 0
    seconds: float = 0.0
    written: int = 0
    used: int = 0
    recovery_s: list[float] = attrs.Factory(list)
    live_s: list[float] = attrs.Factory(list)
    tails: list[int] = attrs.Factory(list)
    errors: list[str] = attrs.Factory(list)

    @property
    def label(self) -> str:
        return "never" if self.every is None else f"{self.every:,}"

    @property
    def steps_per_s(self) -> float:
        return self.steps / self.seconds if self.seconds else float("nan")


def _mean(xs: Sequence[float]) -> float:
    return sum(xs) / len(xs) if xs else float("nan")


def run_setting(
    work: Path, every: int | None, size: int, points: Sequence[int], repeat: int
) -> Setting:
    s = Setting(every, size)
    db = work / f"snap-{s.label.replace(',', '')}-{size}.db"
    done = 0
    w0 = _write_bytes()
    for n, point in enumerate(points):
        grow = size if n == 0 else None
        s.seconds += anyio.run(_run_to, db, done, point, every, grow)
        done = point
        w1 = _write_bytes()
        s.written += w1 - w0
        p = measure(db, "snapshots", s.label, size, repeat)[0]
        w0 = _write_bytes()  # measuring copies the file: not counted
        if p.error:
            s.errors.append(p.error)
            continue
        s.recovery_s.append(p.recovery_s)
        s.live_s.append(p.spawn_to_live_s)
        s.tails.append(p.entries_read)
    s.steps = done
    s.used = _used_bytes(db)
    return s


@attrs.define
class Big:
    rows: list[str] = attrs.Factory(list)


class BigActor(Actor[Big]):
    snapshot_every = 1

    async def receive(self, ctx: Context, msg: _agent.Grow) -> int:
        if not self.state.rows:
            row = "x" * 1000
            self.state.rows = [f"{i}:{row}" for i in range(msg.size // 1000)]
        return len(self.state.rows)


async def _stall_run(path: Path, size: int, snapshots: int, offload: bool) -> tuple[float, float]:
    """(longest event-loop stall, mean snapshot duration), both in ms, while an actor with a
    ``size``-byte state takes ``snapshots`` snapshots; ``offload`` False forces encoding on
    the loop (the behaviour before off-loop encoding)."""
    import actorlog._durability.snapshots as cell_module

    saved = cell_module.OFFLOAD_BYTES
    cell_module.OFFLOAD_BYTES = saved if offload else 1 << 62
    stall = 0.0
    durations: list[float] = []
    try:
        async with ActorSystem(SqliteStore(path), actors=[BigActor]) as system:
            ref = await system.spawn(BigActor, "big")
            await ref.ask(_agent.Grow(size))  # builds the state; its first snapshot follows
            await anyio.sleep(0.5)

            async def ticker() -> None:
                nonlocal stall
                last = time.perf_counter()
                while True:
                    await anyio.sleep(0.001)
                    now = time.perf_counter()
                    stall = max(stall, now - last - 0.001)
                    last = now

            async with anyio.create_task_group() as tg:
                tg.start_soon(ticker)
                cell = system._cells["big"]
                for _ in range(snapshots):
                    t0 = time.perf_counter()
                    await cell.snapshot()
                    durations.append(time.perf_counter() - t0)
                    await anyio.sleep(0.05)
                tg.cancel_scope.cancel()
    finally:
        cell_module.OFFLOAD_BYTES = saved
    return 1000 * stall, 1000 * _mean(durations)


def stall_main(size_mb: float, snapshots: int, directory: str | None) -> None:
    """Print the loop stall during snapshots of a large state, on the loop and off it."""
    size = int(size_mb * 1_000_000)
    table = Table(["state", "encoding", "longest loop stall (ms)", "snapshot (ms, mean)"])
    with scratch_dir(directory) as work:
        for offload in (False, True):
            stall, took = anyio.run(
                _stall_run, work / f"stall-{offload}.db", size, snapshots, offload
            )
            table.add(fmt_bytes(size), "worker thread" if offload else "on the loop", stall, took)
    print(table.text())


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(
        __doc__, quick_help="--steps 500 --every 10,100,never --sizes 1000 --points 1", writes=True
    )
    parser.add_argument("--steps", type=int, default=5000, help="longest run, in steps")
    parser.add_argument("--every", default="10,100,1000,10000,never", help="snapshot_every values")
    parser.add_argument("--sizes", default="1000,100000", help="state sizes in bytes")
    parser.add_argument("--points", type=int, default=3, help="random stop points per setting")
    parser.add_argument("--repeat", type=int, default=1, help="fresh processes per point; best")
    parser.add_argument("--seed", type=int, default=47, help="random seed")
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    parser.add_argument(
        "--stall", type=float, default=None, help="MB: measure the loop stall of snapshots only"
    )
    parser.add_argument("--snapshots", type=int, default=5, help="snapshots for --stall")
    args = parser.parse_args(argv)
    quick(args, parser, steps=500, every="10,100,never", sizes="1000", points=1)
    configure_output(args)
    if args.stall is not None:
        stall_main(args.stall, args.snapshots, args.dir)
        return
    everies = [None if e.strip() == "never" else int(e) for e in args.every.split(",") if e.strip()]
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]
    rng = random.Random(args.seed)
    points = sorted(rng.sample(range(args.steps // 2, args.steps + 1), args.points))

    settings: list[Setting] = []
    with scratch_dir(args.dir) as work:
        info = machine_info(work)
        for size in sizes:
            for every in everies:
                label = "never" if every is None else f"{every:,}"
                print(f"state {fmt_bytes(size)}, snapshot_every={label} ...", flush=True)
                s = run_setting(work, every, size, points, args.repeat)
                settings.append(s)
                print(
                    f"  {s.steps_per_s:,.0f} steps/s, {s.written / s.steps:,.0f} B written/step, "
                    f"recovery {1000 * _mean(s.recovery_s):.1f} ms (tail {_mean(s.tails):,.0f})"
                )
        info["load average (1, 5, 15 min) at end"] = loadavg()

    table = Table(
        [
            "state",
            "snapshot_every",
            "steps/s",
            "bytes written/step",
            "store size/step",
            "mean tail replayed (entries)",
            "recovery (ms, mean)",
            "spawn → first live step (ms, mean)",
        ]
    )
    for s in settings:
        table.add(
            fmt_bytes(s.state_bytes),
            s.label,
            s.steps_per_s,
            round(s.written / s.steps) if s.written >= 0 else "n/a",
            round(s.used / s.steps),
            _mean([float(t) for t in s.tails]),
            1000 * _mean(s.recovery_s),
            1000 * _mean(s.live_s),
        )
    print()
    print(table.text())
    if args.no_write:
        return

    def x(s: Setting) -> float:
        return float(NEVER_X if s.every is None else s.every)

    plots = []
    for size in sizes:
        ss = [s for s in settings if s.state_bytes == size]
        png = plot_lines(
            output_dir() / f"snapshots_{size}.png",
            f"snapshot_every: running cost vs recovery (state {fmt_bytes(size)})",
            f"snapshot_every (never drawn at {NEVER_X:,})",
            "spawn → first live step (ms)",
            {"recovery (spawn → first live step)": [(x(s), 1000 * _mean(s.live_s)) for s in ss]},
            logx=True,
            logy=True,
            secondary={"steps/s": [(x(s), s.steps_per_s) for s in ss]},
            secondary_label="steady-state steps/s",
            note=f"{info['CPU']}, {info['cores (logical)']} cores; stops at steps {points}",
        )
        if png is not None:
            plots.append(f"![snapshot tuning, state {fmt_bytes(size)}]({png.name})")
    body = "\n\n".join(
        [
            (__doc__ or "").split("\n\n", 2)[2].strip(),
            f"Random stop points (steps): {', '.join(f'{p:,}' for p in points)}."
            + "".join(
                f" snapshot_every={e:,} takes no snapshot within {max(points):,} steps, so it "
                "behaves like never here."
                for e in everies
                if e is not None and e > max(points)
            ),
            table.markdown(),
            *plots,
        ]
    )
    out = write_report("snapshots", "Snapshot tuning", body, info=info)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
