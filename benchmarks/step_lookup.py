"""A repeated ask's step lookup: format 4's step index against format 5's scan.

A message asked again after it was handled gets its reply from its step, found with
``Store.find_ref(actor, "step", seq)``: in a format-4 SQLite file through the partial index
``log_step``, in a format-5 file (no step index, docs/FORMAT.md [F24]) by reading the
actor's log after the message. One actor answers ``--asks`` asks with one tool call each
(4 entries an ask) in a file of each format, built by the runtime; then, the formats
interleaved, ``--rounds`` rounds of ``--lookups`` lookups of the step of the first message
(the whole log after it scanned in format 5) and of the last one. Wall time per lookup
(it includes the hop to the store's thread) and CPU time of the process, medians of the
rounds.

    python -m benchmarks.step_lookup [--asks 25000] [--rounds 5] [--lookups 20] [--no-write]
"""

from __future__ import annotations

import statistics
import time
from typing import TYPE_CHECKING

import anyio
from actorlog.stores import SqliteStore

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
from .bytes import _run, older_file

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

ACTOR = "agent-1"  # benchmarks.bytes' actor


async def _lookups(path: Path, seq: int, n: int) -> tuple[float, float, int]:
    """Wall and CPU seconds per lookup of the step of the message at ``seq``, and its seq."""
    store = SqliteStore(path)
    await store.open()
    try:
        found = await store.find_ref(ACTOR, "step", seq)  # warm: the pages in the cache
        t0, c0 = time.perf_counter(), time.process_time()
        for _ in range(n):
            await store.find_ref(ACTOR, "step", seq)
        wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    finally:
        await store.close()
    return wall / n, cpu / n, found[0].seq if found else 0


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--asks 500 --rounds 2 --lookups 5", writes=True)
    parser.add_argument("--asks", type=int, default=25_000, help="asks in each file")
    parser.add_argument("--rounds", type=int, default=5, help="rounds (medians shown)")
    parser.add_argument("--lookups", type=int, default=20, help="lookups per round and case")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, asks=500, rounds=2, lookups=5)
    configure_output(args)
    last_message = 4 * (args.asks - 1) + 1  # an ask's entries: message, intent, result, step
    cases = {"the first message": 1, "the last message": last_message}
    with scratch_dir() as d:
        info = machine_info(d)
        files = {}
        for version in (4, 5):
            path = d / f"v{version}.db"
            if version == 4:
                older_file(path, 4)
            anyio.run(_run, path, args.asks)
            files[f"format {version}"] = path
        got: dict[tuple[str, str], list[tuple[float, float, int]]] = {}
        for _ in range(args.rounds):
            for case, seq in cases.items():
                for name, path in files.items():
                    got.setdefault((case, name), []).append(
                        anyio.run(_lookups, path, seq, args.lookups)
                    )
        info["load average (1, 5, 15 min) at end"] = loadavg()
    table = Table(["step of", "file", "its step's seq", "wall ms / lookup", "CPU ms / lookup"])
    for (case, name), runs in got.items():
        table.add(
            case,
            name,
            runs[0][2],
            f"{1e3 * statistics.median(r[0] for r in runs):.3f}",
            f"{1e3 * statistics.median(r[1] for r in runs):.3f}",
        )
    print(table.text())
    if not args.no_write:
        body = (
            f"One actor, {args.asks:,} asks with one tool call each ({4 * args.asks:,} "
            f"entries), a file of each format; medians of {args.rounds} interleaved rounds "
            f"of {args.lookups} lookups each.\n\n" + table.markdown()
        )
        out = write_report("step_lookup", "A repeated ask's step lookup", body, info=info)
        print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
