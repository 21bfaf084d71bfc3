"""Retention: store size over a long run with and without compaction.

    python -m benchmarks.retention [--steps 20000] [--actors 4] [--every 100] [--points 5]

Each variant runs ``--actors`` actors in a fresh ``SqliteStore`` (``durability=
"survive-process-crash"``, to spend the time on the log rather than on fsync), each step
logging a message of ~200 bytes, one ``ctx.now()`` effect and the step (three entries),
with ``snapshot_every=--every`` and ``snapshot_keep=2``. At ``--points`` moments it prints
the file size (``page_count * page_size``, after a WAL checkpoint), the pages in use, the
entries stored and the steps/s so far:

* ``all``: ``retention="all"`` (the default): the log grows with every step;
* ``since-snapshot``: compacted in the background after each snapshot; a new file is in
  ``auto_vacuum=INCREMENTAL`` mode, so freed pages go back to the OS;
* ``since-snapshot, old file``: the same on a file made before that mode (``auto_vacuum``
  NONE): freed pages are reused for new entries, so the file stops growing but does not
  shrink (docs/tuning.md, "Reclaiming space").
"""

from __future__ import annotations

import argparse
import sqlite3
import time
from datetime import timedelta
from pathlib import Path
from typing import ClassVar

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, message
from actorlog.stores import SqliteStore

from ._common import Table, fmt_bytes, scratch_dir


@message(name="bench.retention.Note")
@attrs.define
class Note:
    text: str


@message(name="bench.retention.Count")
@attrs.define
class Count:
    n: int = 0


class Logger(Actor[Count], name="bench.retention.Logger"):
    snapshot_keep: ClassVar[int] = 2
    retention: ClassVar[str | float | timedelta] = "all"

    async def receive(self, ctx: Context, msg: Note) -> int:
        ctx.now()
        self.state.n += 1
        return self.state.n


def _size(path: Path) -> tuple[int, int, int]:
    """(file bytes, bytes in used pages, entries) after a checkpoint."""
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        (pages,) = con.execute("PRAGMA page_count").fetchone()
        (free,) = con.execute("PRAGMA freelist_count").fetchone()
        (size,) = con.execute("PRAGMA page_size").fetchone()
        (entries,) = con.execute("SELECT count(*) FROM entries").fetchone()
    finally:
        con.close()
    return pages * size, (pages - free) * size, entries


async def run(
    path: Path, retention: str, steps: int, actors: int, every: int, points: int
) -> list[list[str]]:
    rows: list[list[str]] = []
    text = "x" * 200
    marks = {steps * (i + 1) // points for i in range(points)}
    start = time.perf_counter()
    async with ActorSystem(
        SqliteStore(path, durability="survive-process-crash"), actors=[Logger]
    ) as system:
        refs = [
            await system.spawn(Logger, f"a{i}", retention=retention, snapshot_every=every)
            for i in range(actors)
        ]
        done = 0
        while done < steps:
            async with anyio.create_task_group() as tg:
                for ref in refs:
                    tg.start_soon(ref.ask, Note(text))
            done += 1
            if done in marks:
                elapsed = time.perf_counter() - start
                await anyio.sleep(0.05)  # let the background compaction finish
                file_bytes, used, entries = _size(path)
                rows.append(
                    [
                        retention,
                        f"{done * actors:,}",
                        fmt_bytes(file_bytes),
                        fmt_bytes(used),
                        f"{entries:,}",
                        f"{done * actors / elapsed:,.0f}",
                    ]
                )
    return rows


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--steps", type=int, default=20_000, help="steps in all (split over the actors)")
    p.add_argument("--actors", type=int, default=4)
    p.add_argument("--every", type=int, default=100, help="snapshot_every")
    p.add_argument("--points", type=int, default=5)
    a = p.parse_args()
    per_actor = max(1, a.steps // a.actors)
    table = Table(["retention", "steps", "file size", "used pages", "entries", "steps/s"])
    with scratch_dir() as d:
        for name, retention, old in (
            ("all", "all", False),
            ("since-snapshot", "since-snapshot", False),
            ("since-snapshot, old file", "since-snapshot", True),
        ):
            path = d / f"{name.replace(' ', '_').replace(',', '')}.db"
            if old:  # a file made before incremental auto-vacuum: the mode is fixed
                sqlite3.connect(path).execute("CREATE TABLE placeholder (x)").connection.close()
            for row in anyio.run(run, path, retention, per_actor, a.actors, a.every, a.points):
                row[0] = name
                table.add(*row)
    print(table.text())


if __name__ == "__main__":
    main()
