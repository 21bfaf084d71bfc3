"""The first ask after a restart, for a long and a short message-id history with the same tail
(issue 24 item 23): must it read every message id of the log before it is answered?

    python -m benchmarks.first_ask [--long 25000] [--short 200] [--tail 50] [--repeat 5]

Two SQLite logs are built with the real runtime (``benchmarks._agent``: ``Step(i)`` messages,
one ``ctx.call`` each, four entries per step), **every message with its own message id**: a
history of ``--long`` (or ``--short``) steps, one step under ``snapshot_every=1`` (a snapshot),
then ``--tail`` steps without snapshots. Both actors recover the same tail; only the number of
message ids in their logs differs (25,053 against 253 by default: one per step, and three
asks).

Each measurement is a fresh process (the fastest of ``--repeat``, each on its own copy of the
file) that opens the store, spawns the actor (recovery: snapshot, then the tail) and then asks
one new ``Step`` **with** a new message id (``first ask``; and, in another process, **without**
one: the baseline). Reported: spawn (recovery) and the first ask, and the ratio long/short of
spawn + first ask. Before the fix, the first ask with a message id loaded every id of the log
into the message-id filter before it was answered.
"""

from __future__ import annotations

import argparse
import json
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

import anyio
import attrs
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from . import _agent
from ._common import (
    REPO_ROOT,
    Table,
    bench_parser,
    configure_output,
    loadavg,
    machine_info,
    quick,
    scratch_dir,
    write_report,
)
from .recovery import copy_db

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["main"]

ACTOR = "asked-agent"
SENDERS = 16


async def _add(path: Path, first: int, steps: int, *, snapshot_every: int | None) -> None:
    store = SqliteStore(path, durability="survive-process-crash")
    async with ActorSystem(store, actors=[_agent.Agent]) as system:
        ref = await system.spawn(_agent.Agent, ACTOR, snapshot_every=snapshot_every)

        async def sender(k: int) -> None:
            for i in range(first + k, first + steps, SENDERS):
                await ref.send(_agent.Step(i), message_id=f"step-{i}")

        async with anyio.create_task_group() as tg:
            for k in range(min(SENDERS, steps)):
                tg.start_soon(sender, k)
        await ref.ask(_agent.Status(), message_id=f"status-{first}-{steps}")


def build(path: Path, history: int, tail: int) -> None:
    anyio.run(lambda: _add(path, 0, history, snapshot_every=None))
    anyio.run(lambda: _add(path, history, 1, snapshot_every=1))  # the snapshot
    anyio.run(lambda: _add(path, history + 1, tail, snapshot_every=None))


async def _measure(path: str, with_id: bool) -> dict[str, Any]:
    async with ActorSystem(SqliteStore(path), actors=[_agent.Agent]) as system:
        t0 = time.perf_counter()
        ref = await system.spawn(_agent.Agent, ACTOR, snapshot_every=None)
        t1 = time.perf_counter()
        await ref.ask(_agent.Step(-1), message_id="first-ask" if with_id else None)
        t2 = time.perf_counter()
        found = system.last_recovery(ACTOR)
        rec = found.as_dict() if found is not None else {}
    return {"spawn": t1 - t0, "ask": t2 - t1, "entries_read": rec.get("entries_read", 0)}


@attrs.define
class Point:
    log: str
    ids: int
    with_id: bool
    spawn_s: float = float("nan")
    ask_s: float = float("nan")
    entries_read: int = 0

    @property
    def total_s(self) -> float:
        return self.spawn_s + self.ask_s


def measure(path: Path, log: str, ids: int, with_id: bool, repeat: int) -> Point:
    best = Point(log, ids, with_id)
    for rep in range(repeat):
        db = copy_db(path, path.with_name(f"{path.stem}-m{rep}.db"))
        env = dict(os.environ)
        env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
        cmd = [sys.executable, "-m", f"{__package__}.first_ask", "--measure", str(db)]
        if with_id:
            cmd.append("--with-id")
        proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
        for suffix in ("", "-wal", "-shm"):
            Path(str(db) + suffix).unlink(missing_ok=True)
        if proc.returncode != 0:
            raise SystemExit(proc.stderr.strip().splitlines()[-1])
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        p = Point(log, ids, with_id, r["spawn"], r["ask"], int(r["entries_read"]))
        if not best.total_s <= p.total_s:  # nan at first
            best = p
    return best


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--long 2000 --short 200 --repeat 2", writes=True)
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument("--with-id", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--long", type=int, default=25_000, help="long history, in steps")
    parser.add_argument("--short", type=int, default=200, help="short history, in steps")
    parser.add_argument("--tail", type=int, default=50, help="steps after the snapshot")
    parser.add_argument("--repeat", type=int, default=5, help="fresh processes per point; best")
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, long=2000, short=200, repeat=2)
    configure_output(args)
    if args.measure:
        print(json.dumps(anyio.run(_measure, args.measure, args.with_id)))
        return
    points: list[Point] = []
    with scratch_dir(args.dir) as work:
        info = machine_info(work)
        for log, history in (("short", args.short), ("long", args.long)):
            db = work / f"{log}.db"
            build(db, history, args.tail)
            ids = history + args.tail + 3  # every step's id and the three Status asks
            for with_id in (False, True):
                points.append(measure(db, log, ids, with_id, args.repeat))
        info["load average (1, 5, 15 min) at end"] = loadavg()
    table = Table(
        [
            "log",
            "message ids",
            "first ask",
            "tail entries read",
            "spawn (ms)",
            "first ask (ms)",
            "spawn + ask (ms)",
        ]
    )
    for p in points:
        table.add(
            p.log,
            p.ids,
            "with message_id" if p.with_id else "without",
            p.entries_read,
            round(1000 * p.spawn_s, 2),
            round(1000 * p.ask_s, 2),
            round(1000 * p.total_s, 2),
        )
    lines = []
    for with_id in (False, True):
        short, long = (
            next(p for p in points if p.log == log and p.with_id == with_id)
            for log in ("short", "long")
        )
        lines.append(
            f"Ratio long/short of spawn + first ask, {'with' if with_id else 'without'} a "
            f"message id: {long.total_s / short.total_s:.2f}."
        )
    print()
    print(table.text())
    for line in lines:
        print(line)
    if args.no_write:
        return
    body = "\n\n".join([__doc__.split("\n\n", 1)[1].strip(), table.markdown(), *lines])
    out = write_report(
        "first_ask", "First ask after a restart vs message-id history", body, info=info
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
