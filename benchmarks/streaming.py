"""Events from a step to its caller (``ctx.emit`` / ``ask_stream``): the latency from emit to
receipt, and what an emit costs the handler.

    python -m benchmarks streaming [--events 2000] [--repeat 3] [--backend asyncio]

One actor, one step per run, in one process (the caller and the actor share the event loop).
Each event carries ``time.perf_counter()`` taken at the emit; the caller subtracts it from the
time it receives the event: that is the latency (decode included). Three ways to emit:

- ``paced``: one emit, then the handler yields (a checkpoint), as a handler forwarding model
  tokens does: the latency of one event on its own;
- ``burst``: ``--events`` emits without yielding: an event waits for those before it;
- ``after_call``: a ``ctx.call`` of a read tool before each emit: the event waits for the
  tool's result to be durable (the caller's stream commits it: on SQLite a commit and fsync per
  event), the price of "an event received is never taken back" (docs/streaming.md).

"emit cost" is the handler's time per event (``burst``, nothing else in the loop) with no
caller streaming and with one. MemoryStore and a real SQLite file (default durability: fsync).
The best of ``--repeat`` runs per row (lowest p50).

Reading the table: the caller shares the event loop with the handler, so it receives an event
when the handler next yields. ``paced`` shows the cost of the path itself (emit, buffer, wake,
decode). In ``burst`` an event waits for the rest of the burst and the message's commit (an
event is delivered only once the entries before it are durable, the message included: the
handler starts before its message's commit). ``after_call`` on SQLite pays a commit per event
(the read's result, committed by the caller's stream or by the next intent).

The SSE example (``examples/sse_chat``) carries these events on to a browser: ``python -m
benchmarks sse_chat`` measures a token from ``ctx.emit`` to Chromium's ``EventSource`` and to an
HTTP client, across the HTTP path and another process ([sse_chat.md](sse_chat.md)).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import anyio
import anyio.lowlevel
import attrs
from actorlog import Actor, ActorSystem, Context, message, tool
from actorlog.store import Store
from actorlog.stores import MemoryStore, SqliteStore

from ._common import (
    Table,
    bench_parser,
    configure_output,
    loadavg,
    machine_info,
    percentile,
    quick,
    scratch_dir,
    write_report,
)

__all__ = ["main"]


@message(name="bench_stream_run")
@attrs.define
class Run:
    events: int
    mode: str


@message(name="bench_stream_state")
@attrs.define
class State:
    runs: int = 0


@tool(name="bench_stream_lookup", effect="read")
async def lookup(i: int) -> int:
    await anyio.lowlevel.checkpoint()  # a real tool awaits I/O: the event loop runs others
    return i


class Streamer(Actor[State], name="bench_streamer"):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Run) -> float:
        t0 = time.perf_counter()
        for i in range(msg.events):
            if msg.mode == "after_call":
                await ctx.call(lookup, i)
            ctx.emit(time.perf_counter())
            if msg.mode == "paced":
                await anyio.lowlevel.checkpoint()
        self.state.runs += 1
        return (time.perf_counter() - t0) / max(msg.events, 1)


@attrs.frozen
class Row:
    store: str
    mode: str
    streaming: bool
    events: int
    emit_us: float
    p50_us: float
    p99_us: float
    max_us: float


async def _one(store: Store, mode: str, events: int, streaming: bool, run: int) -> Row:
    async with ActorSystem(store, actors=[Streamer]) as system:
        ref = await system.spawn(Streamer, "s")
        lat: list[float] = []
        if streaming:
            stream = ref.ask_stream(Run(events, mode), message_id=f"run-{run}", buffer=events)
            async for ev in stream:
                lat.append(time.perf_counter() - ev.data)
            per_event = stream.reply
        else:
            per_event = await ref.ask(Run(events, mode), message_id=f"run-{run}")
    us = [1e6 * x for x in lat]
    nan = float("nan")
    return Row(
        type(store).__name__,
        mode,
        streaming,
        events,
        1e6 * per_event,
        percentile(us, 50) if us else nan,
        percentile(us, 99) if us else nan,
        max(us) if us else nan,
    )


def measure(
    kind: str, work: Path, mode: str, events: int, streaming: bool, repeat: int, backend: str
) -> Row:
    best: Row | None = None
    for r in range(repeat):
        store: Any = (
            MemoryStore() if kind == "memory" else SqliteStore(work / f"{mode}-{streaming}-{r}.db")
        )
        row = anyio.run(_one, store, mode, events, streaming, r, backend=backend)
        key = row.p50_us if streaming else row.emit_us
        if best is None or key < (best.p50_us if streaming else best.emit_us):
            best = row
    assert best is not None
    return best


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--events 200 --repeat 1", writes=True)
    parser.add_argument("--events", type=int, default=2000, help="events per step")
    parser.add_argument("--repeat", type=int, default=3, help="runs per row; the best is shown")
    parser.add_argument("--backend", default="asyncio", choices=["asyncio", "trio"])
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, events=200, repeat=1)
    configure_output(args)
    rows: list[Row] = []
    with scratch_dir(args.dir) as work:
        info = machine_info(work)
        for kind in ("memory", "sqlite"):
            rows.append(measure(kind, work, "burst", args.events, False, args.repeat, args.backend))
            for mode in ("burst", "paced", "after_call"):
                n = (
                    args.events
                    if mode != "after_call" or kind == "memory"
                    else min(args.events, 200)
                )
                rows.append(measure(kind, work, mode, n, True, args.repeat, args.backend))
        info["load average (1, 5, 15 min) at end"] = loadavg()
        info["backend"] = args.backend
    table = Table(
        [
            "store",
            "emits",
            "caller streaming",
            "events",
            "emit cost (µs/event)",
            "latency p50 (µs)",
            "p99 (µs)",
            "max (µs)",
        ]
    )
    for row in rows:
        table.add(
            row.store,
            row.mode,
            "yes" if row.streaming else "no",
            row.events,
            round(row.emit_us, 2),
            "-" if not row.streaming else round(row.p50_us, 1),
            "-" if not row.streaming else round(row.p99_us, 1),
            "-" if not row.streaming else round(row.max_us, 1),
        )
    print()
    print(table.text())
    if args.no_write:
        return
    body = "\n\n".join([__doc__.split("\n\n", 1)[1].strip(), table.markdown()])
    out = write_report(
        "streaming", "Streaming: latency per event (ctx.emit to receipt)", body, info=info
    )
    print(f"wrote {out}")


if __name__ == "__main__":
    main()
