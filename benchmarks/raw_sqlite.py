"""The raw commit rate of SQLite on this machine: the ceiling every durable step pays against.

A temp database in WAL mode; each transaction inserts rows of ~200 bytes (1 row, or 64 rows,
per transaction) into a table keyed like actorlog's log (actor id, seq). Measured with the
plain ``sqlite3`` module (no thread hop) and through ``SqliteStore``'s connection
(``thread``: one hop to its thread per awaited call), at ``synchronous=FULL`` (a real fsync
per commit, actorlog's default) and, for reference, ``synchronous=NORMAL`` (WAL without
fsync per commit: survives a process crash, not a power loss).

    python -m benchmarks.raw_sqlite [--seconds 2] [--dir PATH] [--no-write]
"""

from __future__ import annotations

import asyncio
import os
import sqlite3
import time
from typing import TYPE_CHECKING, Any

import attrs

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

__all__ = ["RawResult", "RawThread", "measure_thread", "measure_sqlite3", "run_all"]

PAYLOAD = bytes(range(200))  # ~200 bytes, like a small encoded log entry
ACTOR = "actor-0000000001"

_SCHEMA = """
CREATE TABLE IF NOT EXISTS entries (
    actor_id TEXT    NOT NULL,
    seq      INTEGER NOT NULL,
    payload  BLOB    NOT NULL,
    PRIMARY KEY (actor_id, seq)
)
"""


@attrs.frozen
class RawResult:
    driver: str
    synchronous: str
    rows_per_txn: int
    commits: int
    seconds: float

    @property
    def commits_per_s(self) -> float:
        return self.commits / self.seconds if self.seconds > 0 else float("nan")

    @property
    def rows_per_s(self) -> float:
        return self.commits_per_s * self.rows_per_txn

    @property
    def us_per_commit(self) -> float:
        return 1e6 * self.seconds / self.commits if self.commits else float("nan")


def _insert_sql(rows_per_txn: int) -> str:
    # One multi-row INSERT in autocommit mode: one statement, one atomic transaction.
    return "INSERT INTO entries (actor_id, seq, payload) VALUES " + ",".join(
        ["(?,?,?)"] * rows_per_txn
    )


def _params(seq0: int, rows_per_txn: int) -> list[object]:
    params: list[object] = []
    for i in range(rows_per_txn):
        params += (ACTOR, seq0 + i, PAYLOAD)
    return params


def _prepare(path: Path, synchronous: str) -> sqlite3.Connection:
    conn = sqlite3.connect(path, isolation_level=None, check_same_thread=False)
    mode = conn.execute("PRAGMA journal_mode=WAL").fetchone()[0]
    if mode != "wal":
        raise RuntimeError(f"could not enable WAL on {path}: {mode}")
    conn.execute(f"PRAGMA synchronous={synchronous}")
    conn.execute(_SCHEMA)
    return conn


def measure_sqlite3(
    path: Path, rows_per_txn: int, seconds: float, synchronous: str = "FULL"
) -> RawResult:
    """Commit transactions of ``rows_per_txn`` rows for about ``seconds`` with ``sqlite3``."""
    conn = _prepare(path, synchronous)
    sql = _insert_sql(rows_per_txn)
    seq = 1
    commits = 0
    try:
        # warm-up: file growth and page cache
        for _ in range(20):
            conn.execute(sql, _params(seq, rows_per_txn))
            seq += rows_per_txn
        start = time.perf_counter()
        deadline = start + seconds
        now = start
        while now < deadline:
            conn.execute(sql, _params(seq, rows_per_txn))
            seq += rows_per_txn
            commits += 1
            now = time.perf_counter()
        elapsed = now - start
    finally:
        conn.close()
    return RawResult("sqlite3", synchronous, rows_per_txn, commits, elapsed)


async def measure_thread(
    path: Path, rows_per_txn: int, seconds: float, synchronous: str = "FULL"
) -> RawResult:
    """The same through ``SqliteStore``'s connection (``sqlite3`` on a thread of its own):
    each commit is one awaited call, one hop to that thread and back (what aiosqlite did)."""
    from actorlog.stores._sqlite_conn import Connection

    _prepare(path, synchronous).close()  # create schema, switch to WAL (persistent)
    sql = _insert_sql(rows_per_txn)
    conn = await Connection.connect(str(path))
    try:
        await conn.execute(f"PRAGMA synchronous={synchronous}")
        seq = 1
        commits = 0
        for _ in range(20):
            await conn.execute(sql, _params(seq, rows_per_txn))
            seq += rows_per_txn
        start = time.perf_counter()
        deadline = start + seconds
        now = start
        while now < deadline:
            await conn.execute(sql, _params(seq, rows_per_txn))
            seq += rows_per_txn
            commits += 1
            now = time.perf_counter()
        elapsed = now - start
    finally:
        await conn.close()
    return RawResult("thread", synchronous, rows_per_txn, commits, elapsed)


class RawThread:
    """:func:`measure_thread`'s commits in slices, from an event loop that does other work
    between them (``benchmarks.seq_calls``' paired slices): ``await commits(n)`` commits
    ``n`` one-row transactions through the thread and returns the seconds they took."""

    def __init__(self, path: Path) -> None:
        self.path = path
        self._conn: Any = None
        self._seq = 1

    async def __aenter__(self) -> RawThread:
        from actorlog.stores._sqlite_conn import Connection

        _prepare(self.path, "FULL").close()
        self._conn = await Connection.connect(str(self.path))
        await self._conn.execute("PRAGMA synchronous=FULL")
        await self.commits(20)  # warm-up
        return self

    async def __aexit__(self, *exc: object) -> None:
        await self._conn.close()

    async def commits(self, n: int) -> float:
        sql = _insert_sql(1)
        start = time.perf_counter()
        for _ in range(n):
            await self._conn.execute(sql, _params(self._seq, 1))
            self._seq += 1
        return time.perf_counter() - start


def run_all(
    directory: Path,
    seconds: float,
    rows: Sequence[int] = (1, 64),
    synchronous: Sequence[str] = ("FULL", "NORMAL"),
) -> list[RawResult]:
    results: list[RawResult] = []
    n = 0
    for sync in synchronous:
        for rows_per_txn in rows:
            n += 1
            results.append(measure_sqlite3(directory / f"raw-{n}.db", rows_per_txn, seconds, sync))
            n += 1
            results.append(
                asyncio.run(measure_thread(directory / f"raw-{n}.db", rows_per_txn, seconds, sync))
            )
    return results


def results_table(results: Sequence[RawResult]) -> Table:
    table = Table(
        ["driver", "synchronous", "rows/txn", "commits/s", "rows/s", "µs/commit", "commits"]
    )
    for r in results:
        table.add(
            r.driver,
            r.synchronous,
            r.rows_per_txn,
            r.commits_per_s,
            r.rows_per_s,
            r.us_per_commit,
            r.commits,
        )
    return table


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--seconds 0.3", writes=True)
    parser.add_argument("--seconds", type=float, default=2.0, help="time per measurement")
    parser.add_argument("--repeat", type=int, default=1, help="interleaved runs; medians shown")
    parser.add_argument("--dir", default=None, help="where to create the temp database files")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, seconds=0.3)
    configure_output(args)

    with scratch_dir(args.dir) as d:
        info = machine_info(d)
        runs: dict[tuple[str, str, int], list[RawResult]] = {}
        for rep in range(args.repeat):
            sub = d / f"r{rep}"
            sub.mkdir()
            for r in run_all(sub, args.seconds):
                runs.setdefault((r.driver, r.synchronous, r.rows_per_txn), []).append(r)
        results = [sorted(v, key=lambda r: r.commits_per_s)[len(v) // 2] for v in runs.values()]
        info["load average (1, 5, 15 min) at end"] = loadavg()
    table = results_table(results)
    print(table.text())
    print()
    for key, value in info.items():
        print(f"{key}: {value}")
    if not args.no_write:
        body = (
            "Raw SQLite commit rate on this machine: WAL journal, ~200-byte rows keyed "
            "(actor id, seq), each transaction one multi-row `INSERT` in autocommit mode. "
            "`synchronous=FULL` fsyncs the WAL on every commit (actorlog's default durability); "
            "`NORMAL` is shown for reference (survives a process crash, not a power loss). "
            "`thread` is `SqliteStore`'s connection (`sqlite3` on a thread of its own, any "
            "anyio backend): one hop to its thread per awaited call.\n\n"
            + table.markdown()
            + f"\n\nEach line ran for {args.seconds:g} s after 20 warm-up commits, "
            f"single process, pid {os.getpid()}"
            + (f"; the median of {args.repeat} interleaved runs." if args.repeat > 1 else ".")
        )
        out = write_report("raw_sqlite", "Raw SQLite commit rate", body, info=info)
        print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
