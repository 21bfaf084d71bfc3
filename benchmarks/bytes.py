"""Stored bytes per ask: format 1's layout and format 2's compact frame, in one run.

    python -m benchmarks.bytes [--asks 2000] [--rounds 5]

Workload (issue 28's): one actor on a ``SqliteStore`` file, ``--asks`` sequential asks with a
message id, each step making one tool call (an idempotent write) and returning its result:
four entries an ask (message, intent, result, step), retention ``all``, checksums on, the
default snapshot policy (none). Then ``PRAGMA wal_checkpoint(TRUNCATE)`` and the figures:

* **file bytes / ask**: the database file's size, divided by the asks;
* **entries table and its indexes / ask**: the pages of each b-tree (``dbstat``, when this
  SQLite has it);
* **entry columns / ask**: the bytes of the entry columns alone (the sum of their lengths,
  integers at 8 bytes), and of the payloads alone.

``format 1 layout`` writes each payload as the JSON object format 1's builders wrote (every
key, ``at`` as float seconds, a duration with all its digits).

Two variants of the same run: ``format 2`` (this code: compact payloads, ``WITHOUT ROWID``
entries) and ``format 1 layout`` (this code writing what format 1 wrote: payloads as JSON
objects with every key, and the entries table with a rowid and its primary-key index, made
before the store opens the file). Then the codec's CPU per entry, both forms interleaved in
this process (``time.process_time``, best of ``--rounds``): building and encoding a payload
(format 1's builders made dicts with every key), and verifying and decoding its row.
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
from actorlog.stores import SqliteStore

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


def format1_entry(kind: str, payload: dict[str, Any] | list[Any]) -> bytes:
    """The payload bytes format 1 wrote for this payload: the JSON object of its record with
    every key, ``at`` as float seconds (``time.time()``) and a measured duration's digits."""
    if type(payload) is not list:  # decisions: the same object in both formats
        return codec.encode_plain(payload, f"{kind} entry")
    data = codec.encode_plain(payload, f"{kind} entry")
    rec = records.decode_entry(EntryRow("x", 1, kind, "x", 0, None, data, 0))
    p = rec.payload()
    if p.get("at") is not None:
        p["at"] = time.time()
    if p.get("duration"):
        p["duration"] += 1e-12  # a perf_counter difference has ~17 significant digits
    return codec.encode_plain(p, f"{kind} entry")


@contextlib.contextmanager
def format1_payloads() -> Iterator[None]:
    """Write payloads as format 1 did (:func:`format1_entry`)."""
    saved = compact.encode_entry
    compact.encode_entry = format1_entry  # a benchmark switch
    try:
        yield
    finally:
        compact.encode_entry = saved


def format1_table(path: Path) -> None:
    """Make the entries table as format 1 did (a rowid table), before the store opens the
    file (its ``CREATE TABLE IF NOT EXISTS`` then keeps it)."""
    from actorlog.stores._sqlite_schema import PRELUDE, SCHEMA

    con = sqlite3.connect(path)
    try:
        con.execute(PRELUDE)
        con.executescript(SCHEMA.replace(") WITHOUT ROWID;", ");"))
    finally:
        con.close()


async def _run(path: Path, asks: int) -> None:
    async with ActorSystem(SqliteStore(path), actors=[Agent]) as system:
        ref = await system.spawn(Agent, "agent-1")
        for i in range(asks):
            await ref.ask(Ask(f"question {i}"), message_id=f"m-{i}")


def _figures(path: Path, asks: int) -> dict[str, float]:
    con = sqlite3.connect(path)
    try:
        con.execute("PRAGMA wal_checkpoint(TRUNCATE)")
        out = {"file": os.path.getsize(path) / asks}
        cols, payload = con.execute(
            "SELECT sum(length(actor_id) + length(kind) + length(type_tag)"
            " + coalesce(length(message_id), 0) + length(payload) + 24), sum(length(payload))"
            " FROM entries"
        ).fetchone()
        out["columns"] = cols / asks
        out["payload"] = payload / asks
        try:
            for name, size in con.execute(
                "SELECT name, sum(pgsize) FROM dbstat WHERE name = 'entries'"
                " OR name LIKE 'entries_%' OR name = 'sqlite_autoindex_entries_1' GROUP BY name"
            ):
                out[name] = size / asks
        except sqlite3.OperationalError:  # SQLite built without dbstat
            pass
    finally:
        con.close()
    return out


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
    ``rounds``, both forms interleaved."""
    forms: dict[str, tuple[Callable[[], list[Any]], Callable[[str, Any], bytes]]] = {
        "format 1 layout": (_format1_payloads, lambda kind, p: codec.encode_plain(p, "entry")),
        "format 2": (_format2_payloads, compact.encode_entry),
    }
    best = {name: [1e9, 1e9] for name in forms}
    for _ in range(rounds):
        for name, (build, encode) in forms.items():
            t0 = time.process_time()
            rows = [
                codec.make_row("agent-1", 5, kind, tag, ref, mid, encode(kind, p))
                for _ in range(n)
                for kind, tag, ref, mid, p in build()
            ]
            t1 = time.process_time()
            for r in rows:
                codec.verify_row(r, "agent-1", 5)
                records.decode_entry(r)
            t2 = time.process_time()
            per = 1e6 / len(rows)
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
        for name, legacy in (("format 1 layout", True), ("format 2", False)):
            path = d / f"{'v1' if legacy else 'v2'}.db"
            if legacy:
                format1_table(path)
                with format1_payloads():
                    anyio.run(_run, path, args.asks)
            else:
                anyio.run(_run, path, args.asks)
            sizes[name] = _figures(path, args.asks)
        info = machine_info(d)
    size_table = Table(
        ["layout", "file / ask", "entries table", "pk index", "message-id index",
         "step index", "entry columns", "payloads"]
    )  # fmt: skip
    for name, f in sizes.items():
        size_table.add(
            name,
            f"{f['file']:.0f}",
            f"{f.get('entries', 0):.0f}",
            f"{f.get('sqlite_autoindex_entries_1', 0):.0f}",
            f"{f.get('entries_message_id', 0):.0f}",
            f"{f.get('entries_step', 0):.0f}",
            f"{f['columns']:.0f}",
            f"{f['payload']:.0f}",
        )
    old, new = sizes["format 1 layout"]["file"], sizes["format 2"]["file"]
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
        f"Format 2 stores {new / old:.2f}x the bytes of format 1's layout "
        f"({old:.0f} -> {new:.0f} bytes an ask).\n\n"
        "The codec's CPU per entry (the four entries of an ask, both forms interleaved in one "
        f"process, best of {args.rounds} rounds):\n\n{cpu_table.markdown()}\n"
    )
    print(body)
    if not args.no_write:
        print("report:", write_report("bytes", "Stored bytes per ask", body, info=info))


if __name__ == "__main__":
    main()
