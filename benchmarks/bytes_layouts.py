"""Candidate SQLite layouts of the log, measured before building one (issue 28, format 5).

    python -m benchmarks.bytes_layouts [--asks 2000]

Runs ``benchmarks.bytes``'s workload once on this code's store (``--asks`` asks, one tool
call each), reads the log back (unpacked), and appends the same entries again, two appends
an ask as the runtime makes them (message and intent, result and step), each packed as
format 4 packs an append ([F21]) and committed in its own transaction, into one new file per
candidate layout. Then ``PRAGMA wal_checkpoint(TRUNCATE)`` and, per file: its bytes an ask,
the log's b-tree (and its free space), the message-id and step indexes, and the rest (the
other b-trees, the schema, the pointer map).

The candidates: ``wr`` the log of formats 3 and 4 (``WITHOUT ROWID``, key ``(actor,
seq)``); ``r32``/``r40`` a rowid table keyed ``actor << 32 | seq`` (``<< 40``), whose
appends at the right edge SQLite fills page by page (a ``WITHOUT ROWID`` table's page
splits leave both halves part empty), its message-id index on ``(id >> 32, message_id)``;
``kt`` the kind and tag codes in one integer; ``step`` with the step index;
``full`` with every other table of the schema (timers, audit, snapshots, events, log
starts), ``lazy`` with only the meta table, actors and tags. Format 5 (FORMAT.md [F24]) is
``r32 full`` (with its meta and log-start tables ``WITHOUT ROWID``, and the view and
triggers this replay leaves out: ``python -m benchmarks.bytes`` measures the real file).
"""

from __future__ import annotations

import os
import sqlite3
from pathlib import Path
from typing import Any

import anyio
from actorlog.store import EntryRow
from actorlog.stores import SqliteStore, _sqlite_pack
from actorlog.stores._sqlite_schema import _COMMON

from ._common import bench_parser, quick, scratch_dir
from .bytes import _run

_KIND = {"message": 1, "intent": 2, "result": 3, "step": 4, "effect": 5, "decision": 6}
_U32, _SIGN = 1 << 32, 1 << 31

_META = """CREATE TABLE actorlog_meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE actors (id INTEGER PRIMARY KEY, actor_id TEXT NOT NULL UNIQUE,
 actor_type TEXT NOT NULL, created_at REAL NOT NULL, last_seq INTEGER NOT NULL DEFAULT 0,
 last_message_seq INTEGER NOT NULL DEFAULT 0, handled_seq INTEGER NOT NULL DEFAULT 0,
 first_seq INTEGER NOT NULL DEFAULT 0);
CREATE TABLE tags (id INTEGER PRIMARY KEY, tag TEXT NOT NULL UNIQUE);
"""
_WR = (
    _META
    + """CREATE TABLE log (actor INTEGER NOT NULL, seq INTEGER NOT NULL, kind INTEGER NOT NULL,
 tag INTEGER NOT NULL, ref INTEGER NOT NULL, message_id TEXT, payload BLOB NOT NULL,
 checksum INTEGER NOT NULL, PRIMARY KEY (actor, seq)) WITHOUT ROWID;
CREATE UNIQUE INDEX log_message_id ON log (actor, message_id) WHERE message_id IS NOT NULL;
"""
)


def _rowid(shift: int, step: bool, kt: bool) -> str:
    cols = "kind_tag INTEGER NOT NULL," if kt else "kind INTEGER NOT NULL, tag INTEGER NOT NULL,"
    sql = _META + (
        f"CREATE TABLE log (id INTEGER PRIMARY KEY, {cols} ref INTEGER NOT NULL, "
        "message_id TEXT, payload BLOB NOT NULL, checksum INTEGER NOT NULL);\n"
        f"CREATE UNIQUE INDEX log_message_id ON log (id >> {shift}, message_id) "
        "WHERE message_id IS NOT NULL;\n"
    )
    if step:
        sql += f"CREATE INDEX log_step ON log (id >> {shift}, ref) WHERE kind = 4;\n"
    return sql


#: name -> (schema of the log, the other tables too, shift of the rowid key or 0, kind+tag)
CANDIDATES: dict[str, tuple[str, bool, int, bool]] = {
    "wr full step (format 4)": (
        _WR + "CREATE INDEX log_step ON log (actor, ref) WHERE kind = 4;\n",
        True,
        0,
        False,
    ),
    "wr full": (_WR, True, 0, False),
    "r40 full step": (_rowid(40, True, False), True, 40, False),
    "r40 full": (_rowid(40, False, False), True, 40, False),
    "r32 full": (_rowid(32, False, False), True, 32, False),
    "r32 lazy": (_rowid(32, False, False), False, 32, False),
    "r32 kt full": (_rowid(32, False, True), True, 32, True),
    "r32 kt lazy": (_rowid(32, False, True), False, 32, True),
}


def _values(r: EntryRow, tags: dict[str, int], shift: int, kt: bool) -> tuple[Any, ...]:
    k, t = _KIND[r.kind], tags.setdefault(r.type_tag, len(tags) + 1)
    c = r.checksum - _U32 if r.checksum >= _SIGN else r.checksum
    if not shift:
        return (1, r.seq, k, t, r.ref, r.message_id, r.payload, c)
    key = (1 << shift) | r.seq
    if kt:
        return (key, k + 8 * t, r.ref, r.message_id, r.payload, c)
    return (key, k, t, r.ref, r.message_id, r.payload, c)


def measure(path: Path, rows: list[EntryRow], candidate: tuple[str, bool, int, bool]) -> str:
    schema, full, shift, kt = candidate
    asks = len(rows) / 4
    con = sqlite3.connect(path, isolation_level=None)
    try:
        con.execute("PRAGMA auto_vacuum=INCREMENTAL")
        con.execute("PRAGMA journal_mode=WAL")
        con.execute("PRAGMA synchronous=OFF")  # the layout, not the fsyncs, is measured
        con.executescript("BEGIN;" + schema + (_COMMON if full else "") + "COMMIT;")
        con.execute("INSERT INTO actorlog_meta VALUES ('format_version', '5')")
        con.execute("INSERT INTO actors (actor_id, actor_type, created_at) VALUES ('a', 'A', 1)")
        tags: dict[str, int] = {}
        width = len(_values(rows[0], tags, shift, kt))
        sql = f"INSERT INTO log VALUES ({','.join('?' * width)})"
        for i in range(0, len(rows), 2):
            con.execute("BEGIN")
            for r in _sqlite_pack.pack_rows(rows[i : i + 2]):
                con.execute(sql, _values(r, tags, shift, kt))
            con.execute("COMMIT")
        con.executemany("INSERT INTO tags (tag) VALUES (?)", [(t,) for t in tags])
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        size = os.path.getsize(path) / asks
        trees = {
            name: (total / asks, unused / asks)
            for name, total, unused in con.execute(
                "SELECT name, sum(pgsize), sum(unused) FROM dbstat GROUP BY name"
            )
        }
    finally:
        con.close()
    log, free = trees.get("log", (0.0, 0.0))
    ids = trees.get("log_message_id", (0.0, 0.0))[0]
    step = trees.get("log_step", (0.0, 0.0))[0]
    rest = size - log - ids - step
    return f"| {size:.0f} | {log:.0f} | {free:.0f} | {ids:.0f} | {step:.0f} | {rest:.0f} |"


async def _read(path: Path) -> list[EntryRow]:
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        return await store.read("agent-1")
    finally:
        await store.close()


def main() -> None:
    parser = bench_parser(__doc__, quick_help="200 asks", writes=False)
    parser.add_argument("--asks", type=int, default=2000, help="asks, one tool call each")
    args = parser.parse_args()
    quick(args, parser, asks=200)
    with scratch_dir() as d:
        source = d / "source.db"
        anyio.run(_run, source, args.asks)
        rows = anyio.run(_read, source)
        print("| layout | file / ask | log | log free | message-id index | step index | rest |")
        print("|---|---:|---:|---:|---:|---:|---:|")
        for i, (name, candidate) in enumerate(CANDIDATES.items()):
            print(f"| {name} " + measure(d / f"c{i}.db", rows, candidate))


if __name__ == "__main__":
    main()
