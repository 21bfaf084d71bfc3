"""Stored bytes per ask: format 1's layout, formats 2, 3, 4 and 5 (SQLite), in one run.

    python -m benchmarks.bytes [--asks 2000] [--rounds 5]

Workload (issue 28's): one actor on a ``SqliteStore`` file, ``--asks`` sequential asks with a
message id, each step making one tool call (an idempotent write) and returning its result:
four entries an ask (message, intent, result, step), retention ``all``, checksums on, the
default snapshot policy (none). Then ``PRAGMA wal_checkpoint(TRUNCATE)`` and the figures:

* **file bytes / ask**: the database file's size, divided by the asks;
* **entries table and its indexes / ask**: the pages of each b-tree (``dbstat``, when this
  SQLite has it): ``entries`` or, in format 3, ``log`` (and ``tags``, and the actors'
  ``actor_id`` index), the message-id and step indexes;
* **entry columns / ask**: the bytes of the entry columns alone as a record stores them
  (text and blobs their length, integers the bytes of their serial type), and of the
  payloads alone.

``format 1 layout`` writes each payload as the JSON object format 1's builders wrote (every
key, ``at`` as float seconds, a duration with all its digits).

Five variants of the same run: ``format 5`` (this code, a new file: ``log`` a rowid table
keyed ``actor << 32 | seq``, no step index, payloads packed as in format 4; [F24]),
``format 4`` (a file made in format 4, which keeps its format: format 3's tables with packed
payloads, [F21]), ``format 3`` (this code writing a file made in format 3, which
keeps its format: compact payloads, the log in ``log`` with an integer actor key and integer
codes), ``format 2`` (a file made in format 2, which keeps its layout: ``entries``
``WITHOUT ROWID`` with text columns, made before the store opens the file) and ``format 1
layout`` (this code writing what format 1 wrote: payloads as JSON objects with every key,
and the entries table with a rowid and its primary-key index). Then the codec's CPU per
entry, the forms interleaved in this process (``time.process_time``, best of ``--rounds``):
building and encoding a payload (format 1's builders made dicts with every key; format 4
also packs an ask's rows as its store does), and verifying and decoding its row (format 4
unpacking it first).
"""

from __future__ import annotations

import contextlib
import os
import sqlite3
import time
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, message, tool
from actorlog._journal import codec, compact, records
from actorlog.store import EntryRow
from actorlog.stores import SqliteStore, _sqlite_pack, _sqlite_unpack

from ._common import (
    Table,
    bench_parser,
    configure_output,
    machine_info,
    quick,
    scratch_dir,
    write_report,
)


@message(name="bench.bytes.Ask")
@attrs.define
class Ask:
    question: str


@message(name="bench.bytes.Tally")
@attrs.define
class Tally:
    asked: int = 0


@tool(effect="write", idempotent=True, name="bench.bytes.lookup")
async def lookup(q: str, *, idempotency_key: str) -> str:
    return "answer to " + q


class Agent(Actor[Tally], name="bench.bytes.Agent"):
    async def receive(self, ctx: Context, msg: Ask) -> str:
        found = await ctx.call(lookup, msg.question)
        self.state.asked += 1
        return found


_plain = codec.encode_plain


def format1_entry(kind: str, payload: dict[str, Any] | list[Any]) -> bytes:
    """The payload bytes format 1 wrote for this payload: the JSON object of its record with
    every key, ``at`` as float seconds (``time.time()``) and a measured duration's digits."""
    if type(payload) is not list:  # decisions: the same object in both formats
        return _plain(payload, f"{kind} entry")
    data = _plain(payload, f"{kind} entry")
    rec = records.decode_entry(EntryRow("x", 1, kind, "x", 0, None, data, 0))
    p = rec.payload()
    if p.get("at") is not None:
        p["at"] = time.time()
    if p.get("duration"):
        p["duration"] += 1e-12  # a perf_counter difference has ~17 significant digits
    return _plain(p, f"{kind} entry")


def _format1_plain(obj: dict[str, Any] | list[Any], what: str) -> bytes:
    """``codec.encode_plain`` writing an entry's compact array as :func:`format1_entry`
    (the journal encodes a builder's array with it)."""
    if type(obj) is list and what.endswith(" entry"):
        return format1_entry(what[: -len(" entry")], obj)
    return _plain(obj, what)


@contextlib.contextmanager
def format1_payloads() -> Iterator[None]:
    """Write payloads as format 1 did (:func:`format1_entry`)."""
    saved = compact.encode_entry
    compact.encode_entry = format1_entry  # benchmark switches
    codec.encode_plain = _format1_plain
    try:
        yield
    finally:
        compact.encode_entry = saved
        codec.encode_plain = _plain


def older_file(path: Path, version: int) -> None:
    """Make the file as format ``version`` (1 to 4) did, before the store opens it (which
    then keeps its layout and format): in formats 1 and 2 the entries table with text
    columns, a rowid table in format 1; in formats 3 and 4 format 3's tables (format 4
    packs payloads in them)."""
    from actorlog.stores._sqlite_schema import PRELUDE, SCHEMA, SCHEMA3

    con = sqlite3.connect(path)
    try:
        con.execute(PRELUDE)
        schema = {1: SCHEMA.replace(") WITHOUT ROWID;", ");"), 2: SCHEMA, 3: SCHEMA3, 4: SCHEMA3}[
            version
        ]
        con.executescript(schema)
        con.execute("INSERT INTO actorlog_meta VALUES ('format_version', ?)", (str(version),))
        con.commit()
    finally:
        con.close()


async def _run(path: Path, asks: int) -> None:
    async with ActorSystem(SqliteStore(path), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "agent-1")
        for i in range(asks):
            await ref.ask(Ask(f"question {i}"), message_id=f"m-{i}")


async def _store_read(path: Path, asks: int) -> float:
    """CPU µs per entry of ``SqliteStore.read`` of the whole log (best of 5)."""
    store = SqliteStore(path, read_only=True)
    await store.open()
    try:
        best = 1e9
        for _ in range(5):
            t0 = time.process_time()
            await store.read("agent-1")
            best = min(best, time.process_time() - t0)
    finally:
        await store.close()
    return best * 1e6 / (4 * asks)


def _figures(path: Path, asks: int) -> dict[str, float]:
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        out = {"file": os.path.getsize(path) / asks}
        found = con.execute("SELECT sql FROM sqlite_master WHERE name='log'").fetchall()
        table = "entries" if not found else "log" if "WITHOUT ROWID" in found[0][0] else "log5"
        cols, payload = con.execute(
            f"SELECT sum({' + '.join(_stored(c) for c in _COLUMNS[table])}), sum(length(payload))"
            f" FROM {table.removesuffix('5')}"
        ).fetchone()
        out["columns"] = cols / asks
        out["payload"] = payload / asks
        # reading every entry through the view ``entries`` (format 4's unpacks in SQLite)
        best = 1e9
        for _ in range(5):
            t0 = time.process_time()
            con.execute("SELECT * FROM entries").fetchall()
            best = min(best, time.process_time() - t0)
        out["read_us"] = best * 1e6 / (4 * asks)
        try:
            for name, size, unused, pages in con.execute(
                "SELECT name, sum(pgsize), sum(unused), count(*) FROM dbstat GROUP BY name"
            ):
                out[_SAME.get(name, name)] = size / asks
                if name in ("entries", "log"):
                    out["unused"] = unused / asks
                elif name == "sqlite_schema":
                    out["schema_pages"] = pages
                elif name not in _SAME and name not in _SAME.values():
                    out["small_btrees"] = out.get("small_btrees", 0) + (pages == 1)
        except sqlite3.OperationalError:  # SQLite built without dbstat
            pass
        (out["schema_text"], out["view_text"]) = con.execute(
            "SELECT sum(length(sql)), sum(CASE WHEN type = 'view' AND name = 'entries' "
            "THEN length(sql) ELSE 0 END) FROM sqlite_master"
        ).fetchone()
        # the same file rebuilt (``VACUUM INTO``: every b-tree bulk-loaded, its pages full)
        rebuilt = path.with_name(path.stem + "-rebuilt.db")
        con.execute("VACUUM INTO ?", (str(rebuilt),))
        out["rebuilt"] = os.path.getsize(rebuilt) / asks
        with (
            contextlib.closing(sqlite3.connect(rebuilt)) as again,
            contextlib.suppress(sqlite3.OperationalError),
        ):
            (unused,) = again.execute(
                "SELECT sum(unused) FROM dbstat WHERE name IN ('log', 'entries')"
            ).fetchone()
            out["rebuilt_unused"] = unused / asks
    finally:
        con.close()
    return out


#: the columns of the log's table, by table
_COLUMNS = {
    "entries": ("actor_id", "seq", "kind", "type_tag", "ref", "message_id", "payload", "checksum"),
    "log": ("actor", "seq", "kind", "tag", "ref", "message_id", "payload", "checksum"),
    # format 5: the rowid (the key, a varint in the cell; its record column is NULL)
    "log5": ("rowid", "kind", "tag", "ref", "message_id", "payload", "checksum"),
}

#: format 3's b-trees under the names of their format-2 counterparts
_SAME = {
    "log": "entries",
    "log_message_id": "entries_message_id",
    "log_step": "entries_step",
    "sqlite_autoindex_log_1": "sqlite_autoindex_entries_1",
}


#: the b-trees of the tags and the actors (format 3 looks actors up by their key)
_NAMES = ("tags", "sqlite_autoindex_tags_1", "actors", "sqlite_autoindex_actors_1")


def _indexes(f: dict[str, float]) -> float:
    """The message-id and step indexes' bytes per ask."""
    return f.get("entries_message_id", 0) + f.get("entries_step", 0)


def _remaining(f: dict[str, float], asks: int) -> str:
    """Where a layout's bytes per ask are, in words."""
    table = f.get("entries", 0)
    indexes = _indexes(f)
    fixed = _fixed(f)
    return (
        f"{f['payload']:.0f} payloads, {f['columns'] - f['payload']:.0f} the other columns' "
        f"values, {table - f['columns'] - f.get('unused', 0):.0f} the rows' record headers "
        f"and cells, {f.get('unused', 0):.0f} free space in the log's b-tree pages, "
        f"{indexes:.0f} the message-id and step indexes, and {fixed:.0f} the pages of the "
        f"other tables, indexes and the schema ({fixed * asks / 1024:.0f} KiB, the same for "
        "any number of asks)"
    )


def _fixed(f: dict[str, float]) -> float:
    """The bytes per ask of the pages that are not the log's or its indexes'."""
    return f["file"] - f.get("entries", 0) - _indexes(f)


def _stored(column: str) -> str:
    """SQL: the bytes of ``column``'s value in a record (its serial type's size), of a rowid
    its varint's."""
    if column == "rowid":
        return "(" + " + ".join(f"(rowid >= {1 << 7 * k})" for k in range(1, 9)) + " + 1)"
    return (
        f"(CASE typeof({column}) WHEN 'integer' THEN CASE WHEN {column} IN (0, 1) THEN 0 "
        f"WHEN abs({column}) < 128 THEN 1 WHEN abs({column}) < 32768 THEN 2 "
        f"WHEN abs({column}) < 8388608 THEN 3 WHEN abs({column}) < 2147483648 THEN 4 "
        f"WHEN abs({column}) < 140737488355328 THEN 6 ELSE 8 END "
        f"WHEN 'real' THEN 8 WHEN 'null' THEN 0 ELSE length(CAST({column} AS BLOB)) END)"
    )


_INC = "71fae61705510524"


def _format1_payloads() -> list[tuple[str, str, int, str | None, Any]]:
    """The four payloads of an ask as format 1's builders made them (dicts with every key)."""
    t = time.time
    return [
        ("message", "bench.bytes.Ask", 0, "m-1",
         {"body": {"question": "question 1"}, "sender": None, "trace": None, "at": t(),
          "incarnation": _INC}),
        ("intent", "bench.bytes.lookup", 5, None,
         {"index": 0, "effect": "write", "policy": "rerun-same-key", "args": ["question 1"],
          "kwargs": {}, "key": f"agent-1:{_INC}:5:0", "at": t()}),
        ("result", "bench.bytes.lookup", 6, None,
         {"ok": True, "attempt": 1, "duration": 4.4022999645676464e-05, "settled_by": "run",
          "at": t(), "value": "answer to question 1"}),
        ("step", "bench.bytes.Ask", 5, None,
         {"ok": True, "span": None, "duration": 0.009283027000492439, "at": t(),
          "reply": "answer to question 1"}),
    ]  # fmt: skip


def _format2_payloads() -> list[tuple[str, str, int, str | None, Any]]:
    """The same, as this code's builders make them (compact arrays)."""
    return [
        ("message", "bench.bytes.Ask", 0, "m-1",
         records.message_payload({"question": "question 1"}, sender=None, trace=None,
                                 incarnation=_INC)),
        ("intent", "bench.bytes.lookup", 5, None,
         records.intent_payload(index=0, effect="write", policy="rerun-same-key",
                                args=["question 1"], kwargs={}, key=f"agent-1:{_INC}:5:0")),
        ("result", "bench.bytes.lookup", 6, None,
         records.result_payload(value="answer to question 1", duration=4.4022999645676464e-05)),
        ("step", "bench.bytes.Ask", 5, None,
         records.step_payload(reply="answer to question 1", duration=0.009283027000492439)),
    ]  # fmt: skip


def _cpu(rounds: int, n: int = 5000) -> dict[str, tuple[float, float]]:
    """(build + encode, verify + decode) microseconds per entry, by form, best of
    ``rounds``, the forms interleaved. An ask's four entries are seqs 5 to 8; format 4 packs
    them in the two appends the runtime makes (message and intent, result and step) and
    unpacks them before the checks."""
    Form = tuple[Callable[[], list[Any]], Callable[[str, Any], bytes], bool]
    forms: dict[str, Form] = {
        "format 1 layout": (
            _format1_payloads,
            lambda kind, p: codec.encode_plain(p, "entry"),
            False,
        ),
        "formats 2 and 3": (_format2_payloads, compact.encode_entry, False),
        "format 4": (_format2_payloads, compact.encode_entry, True),
    }
    best = {name: [1e9, 1e9] for name in forms}
    for _ in range(rounds):
        for name, (build, encode, packed) in forms.items():
            t0 = time.process_time()
            asks = []
            for _ in range(n):
                rows = [
                    codec.make_row("agent-1", seq, kind, tag, ref, mid, encode(kind, p))
                    for seq, (kind, tag, ref, mid, p) in enumerate(build(), start=5)
                ]
                if packed:
                    rows = _sqlite_pack.pack_rows(rows[:2]) + _sqlite_pack.pack_rows(rows[2:])
                asks.append(rows)
            t1 = time.process_time()
            for rows in asks:
                if packed:  # what a row read from ``log`` goes through (the view: in SQL)
                    rows = _sqlite_unpack.unpack_rows(rows, {})
                for r in rows:
                    codec.verify_row(r, "agent-1", r.seq)
                    records.decode_entry(r)
            t2 = time.process_time()
            per = 1e6 / (4 * n)
            best[name][0] = min(best[name][0], (t1 - t0) * per)
            best[name][1] = min(best[name][1], (t2 - t1) * per)
    return {name: (e, d) for name, (e, d) in best.items()}


def main() -> None:
    parser = bench_parser(__doc__, quick_help="200 asks, 2 rounds")
    parser.add_argument("--asks", type=int, default=2000, help="asks, one tool call each")
    parser.add_argument("--rounds", type=int, default=5, help="rounds of the CPU figure")
    parser.add_argument("--no-write", action="store_true", help="print only, write no report")
    args = parser.parse_args()
    quick(args, parser, asks=200, rounds=2)
    configure_output(args)
    sizes: dict[str, dict[str, float]] = {}
    with scratch_dir() as d:
        variants = (
            ("format 1 layout", 1),
            ("format 2", 2),
            ("format 3", 3),
            ("format 4", 4),
            ("format 5", 5),
        )
        for name, version in variants:
            path = d / f"v{version}.db"
            if version < 5:
                older_file(path, version)
            if version == 1:
                with format1_payloads():
                    anyio.run(_run, path, args.asks)
            else:
                anyio.run(_run, path, args.asks)
            sizes[name] = _figures(path, args.asks)
            sizes[name]["store_read_us"] = anyio.run(_store_read, path, args.asks)
        info = machine_info(d)
    size_table = Table(
        ["layout", "file / ask", "entries table", "pk index", "message-id index",
         "step index", "tags, actors", "entry columns", "payloads", "SQL read µs/entry",
         "store read µs/entry"]
    )  # fmt: skip
    for name, f in sizes.items():
        size_table.add(
            name,
            f"{f['file']:.0f}",
            f"{f.get('entries', 0):.0f}",
            f"{f.get('sqlite_autoindex_entries_1', 0):.0f}",
            f"{f.get('entries_message_id', 0):.0f}",
            f"{f.get('entries_step', 0):.0f}",
            f"{sum(f.get(k, 0) for k in _NAMES):.0f}",
            f"{f['columns']:.0f}",
            f"{f['payload']:.0f}",
            f"{f['read_us']:.2f}",
            f"{f['store_read_us']:.2f}",
        )
    old, two, three, four_f, new = (sizes[f"format {v}"]["file"] for v in ("1 layout", 2, 3, 4, 5))
    four, five = sizes["format 4"], sizes["format 5"]
    cpu = _cpu(args.rounds)
    cpu_table = Table(
        ["payload form", "build + encode µs/entry", "verify + decode µs/entry", "sum"]
    )
    for name, (e, dec) in cpu.items():
        cpu_table.add(name, f"{e:.2f}", f"{dec:.2f}", f"{e + dec:.2f}")
    body = (
        f"{args.asks:,} asks with one tool call each (4 entries an ask), bytes per ask after a "
        "truncating checkpoint:\n\n"
        f"{size_table.markdown()}\n\n"
        f"Format 5 stores {new / four_f:.2f}x the bytes of format 4 ({four_f:.0f} -> "
        f"{new:.0f} bytes an ask), {new / three:.2f}x those of format 3 ({three:.0f}), "
        f"{new / two:.2f}x those of format 2 ({two:.0f}) and {new / old:.2f}x those of format "
        f"1's layout ({old:.0f}). Of format 5's {new:.0f} bytes: {_remaining(five, args.asks)}."
        "\n\n"
        "Format 5 keeps format 4's packed payloads ([F21]: the intent's `at` and key, the "
        "step's `at` and reply, against the entries of their own append) and changes the "
        "log's table (FORMAT.md [F24]): a rowid table keyed `actor << 32 | seq`, whose "
        "appends at the right edge of an actor's range SQLite packs page by page (the free "
        f"space in the log's pages: {four.get('unused', 0):.0f} bytes an ask in format 4's "
        f"`WITHOUT ROWID` table, whose page splits leave both halves part empty, "
        f"{five.get('unused', 0):.0f} in format 5); no step index "
        f"({four.get('entries_step', 0):.0f} bytes an ask in format 4: a repeated `ask` reads "
        "the actor's log from its message to its step); the meta and log-start tables "
        "`WITHOUT ROWID` (no second b-tree for their keys). The message-id index costs "
        f"{five.get('entries_message_id', 0):.0f} bytes an ask (format 4: "
        f"{four.get('entries_message_id', 0):.0f}): it holds the rowid, an integer of 6 bytes, "
        "where format 4's held a seq of 2.\n\n"
        "Issue 28's 250 bytes an ask are not reached: without the fixed pages an ask costs "
        f"about {new - _fixed(five):.0f} bytes, of which the payloads are "
        f"{five['payload']:.0f} and the message-id index "
        f"{five.get('entries_message_id', 0):.0f}; the fixed pages are "
        f"{_fixed(five):.0f} bytes an ask at {args.asks:,} asks "
        f"({five.get('small_btrees', 0):.0f} b-trees of one page, "
        f"{five.get('schema_pages', 0):.0f} pages of schema, {five['schema_text']:,.0f} bytes of "
        f"SQL of which {five['view_text']:,.0f} the view `entries`, and a pointer-map page). "
        "Measured (`python -m benchmarks.bytes_layouts`, the same log replayed into candidate "
        "layouts) and left out: the kind and tag codes in one integer (about 2 bytes an ask); "
        "the tables of timers, the audit and compaction made only when first used (8 pages, "
        "about 16 bytes an ask here, and next to nothing at 200,000 asks), which every reader "
        "and writer of them, and the audit's triggers, would have to expect missing. What is "
        "left to reach 250 is in the "
        "payloads: the message's `at` and incarnation and the result's `at` repeat what "
        "earlier appends hold (about 40 bytes an ask), which packing can take only against "
        "an anchor that survives compaction; and a commit's entries as one row (about 25), "
        "which every read by seq would have to look inside.\n\n"
        "`SQL read µs/entry`: the CPU of `SELECT * FROM entries` over the whole file (best "
        "of 5), where the views of formats 4 and 5 unpack in SQL (what SQL typed by hand "
        "pays); `store read µs/entry`: `SqliteStore.read` of the whole log (best of 5), which "
        "in formats 4 and 5 reads the stored payloads and unpacks them in Python. The "
        "codec table's format 4 row (format 5's payloads are format 4's) packs an ask's rows "
        "as the store does on every append, and unpacks them as the store's read does.\n\n"
        "The codec's CPU per entry (the four entries of an ask, the forms interleaved in one "
        f"process, best of {args.rounds} rounds):\n\n{cpu_table.markdown()}\n"
    )
    print(body)
    if not args.no_write:
        print("report:", write_report("bytes", "Stored bytes per ask", body, info=info))


if __name__ == "__main__":
    main()
