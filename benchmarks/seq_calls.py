"""One actor's sequential tool calls on SQLite against the raw one-row commit rate, in rounds.

    python -m benchmarks.seq_calls [--rounds 7] [--calls 300] [--raw-seconds 0.4]

Issue 28 asks for one actor's sequential calls at >= 0.8x the raw one-row commit rate of the
same run. On a shared machine the disk changes speed from one second to the next (an fsync
took 0.3 ms and 3.5 ms within a minute on the 2-core build machine), so two figures measured
a minute apart make a ratio that says little. Each round here measures, back to back: the
raw one-row commit rate through a thread (``benchmarks.raw_sqlite``'s ``thread`` driver: a
commit handed to another thread, as ``SqliteStore``'s writer connection does) and with plain
``sqlite3`` on the caller's thread, then one actor making ``--calls`` sequential
``ctx.call``s (one commit each) on each store setting, each in a fresh database and in an
order rotated from round to round: ``SqliteStore()`` (the default), ``commit_on_loop=False``
and ``commit_on_loop=True``. The
report gives the median over the rounds of each round's ratio, the CPU time per call
(``time.process_time``, all threads) and the share of the commits that ran on the event
loop's thread.

Even a round's raw rate can be a different disk's from its calls' (the speed of an fsync
changed several times within a round on that machine). So, last, the *paired* slices: in
one event loop, the raw thread commits ``--slice-calls`` one-row transactions, then the
default store's actor makes as many sequential calls (one ``ask`` of ``Run(n)``), and again,
``--slices`` times, the order swapped every other slice: each slice's two measurements are
a fraction of a second apart. Reported: the ratio of the sums (the raw thread's time over
the calls' time, equal counts) and the median of the slices' ratios.
"""

from __future__ import annotations

import asyncio
import time
from typing import TYPE_CHECKING

import anyio
from actorlog import ActorSystem

from . import _agent
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
from .raw_sqlite import RawThread, measure_sqlite3, measure_thread
from .throughput import _NAMES, BatchCountingSqliteStore, _make_store, _median

if TYPE_CHECKING:
    from collections.abc import Sequence
    from pathlib import Path

__all__ = ["main"]

KINDS = ("sqlite", "sqlite-thread", "sqlite-on-loop")


async def _solo(kind: str, path: Path, calls: int) -> tuple[float, float, float]:
    """Calls per second, CPU seconds per call, and the share of commits on the loop."""
    store = _make_store(kind, path)
    assert isinstance(store, BatchCountingSqliteStore)
    async with ActorSystem(store, actors=[_agent.Agent]) as system:
        ref = await system.spawn(_agent.Agent, "solo")
        await ref.ask(_agent.Run(20), message_id="warmup")
        store.commits = 0
        on_loop = getattr(store, "_loop_commits", 0)  # 0: an actorlog without it
        c, t = time.process_time(), time.perf_counter()
        await ref.ask(_agent.Run(calls), message_id="run")
        wall, cpu = time.perf_counter() - t, time.process_time() - c
        loop_share = (getattr(store, "_loop_commits", 0) - on_loop) / max(1, store.commits)
    return calls / wall, cpu / calls, loop_share


async def _paired(d: Path, slices: int, n: int) -> list[tuple[float, float, float]]:
    """``slices`` pairs (raw thread seconds for ``n`` one-row commits, seconds for ``n``
    sequential calls on the default store, CPU seconds of those calls)."""
    store = _make_store("sqlite", d / "paired.db")
    out: list[tuple[float, float, float]] = []
    async with (
        RawThread(d / "paired-raw.db") as raw,
        ActorSystem(store, actors=[_agent.Agent]) as system,
    ):
        ref = await system.spawn(_agent.Agent, "solo")
        await ref.ask(_agent.Run(20), message_id="warmup")

        async def calls(i: int) -> tuple[float, float]:
            c, t = time.process_time(), time.perf_counter()
            await ref.ask(_agent.Run(n), message_id=f"slice-{i}")
            return time.perf_counter() - t, time.process_time() - c

        for i in range(slices):
            if i % 2:
                wall, cpu = await calls(i)
                raw_s = await raw.commits(n)
            else:
                raw_s = await raw.commits(n)
                wall, cpu = await calls(i)
            out.append((raw_s, wall, cpu))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--rounds 2 --calls 50 --raw-seconds 0.1")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--calls", type=int, default=300, help="ctx.calls per store, per round")
    parser.add_argument("--raw-seconds", type=float, default=0.4, help="per raw measurement")
    parser.add_argument("--slices", type=int, default=20, help="paired slices (0: none)")
    parser.add_argument("--slice-calls", type=int, default=50, help="calls per paired slice")
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, rounds=2, calls=50, raw_seconds=0.1, slices=4, slice_calls=20)
    configure_output(args)

    rounds = Table(
        ["round", "raw thread 1-row/s", "raw sqlite3 1-row/s"]
        + [f"{_NAMES[k]} calls/s" for k in KINDS]
    )
    ratios: dict[str, list[float]] = {k: [] for k in KINDS}
    ratios_sync: dict[str, list[float]] = {k: [] for k in KINDS}
    rates: dict[str, list[float]] = {k: [] for k in KINDS}
    cpus: dict[str, list[float]] = {k: [] for k in KINDS}
    shares: dict[str, list[float]] = {k: [] for k in KINDS}
    with scratch_dir(args.dir) as d:
        info = machine_info(d)
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds} ...", flush=True)
            raw = asyncio.run(measure_thread(d / f"raw-t-{r}.db", 1, args.raw_seconds))
            raw_sync = measure_sqlite3(d / f"raw-s-{r}.db", 1, args.raw_seconds)
            cells: list[object] = [r + 1, raw.commits_per_s, raw_sync.commits_per_s]
            # the settings in an order rotated from round to round: none always comes
            # first after the raw runs
            for kind in KINDS[r % len(KINDS) :] + KINDS[: r % len(KINDS)]:
                rate, cpu, share = anyio.run(_solo, kind, d / f"{kind}-{r}.db", args.calls)
                rates[kind].append(rate)
                ratios[kind].append(rate / raw.commits_per_s)
                ratios_sync[kind].append(rate / raw_sync.commits_per_s)
                cpus[kind].append(cpu)
                shares[kind].append(share)
            for kind in KINDS:
                rate = rates[kind][-1]
                cells.append(f"{rate:,.0f} ({rate / raw.commits_per_s:.2f}x)")
            rounds.add(*cells)
        pairs = anyio.run(_paired, d, args.slices, args.slice_calls) if args.slices else []
        info["load average (1, 5, 15 min) at end"] = loadavg()

    paired = Table(
        [
            "store",
            "slices",
            "calls per slice",
            "raw thread 1-row/s (slices: min-max)",
            "calls/s (slices: min-max)",
            "vs raw thread 1-row: ratio of the sums",
            "median of the slices' ratios",
            "CPU µs/call",
        ]
    )
    if pairs:
        n = args.slice_calls
        raw_total = sum(p[0] for p in pairs)
        calls_total = sum(p[1] for p in pairs)
        paired.add(
            _NAMES["sqlite"],
            len(pairs),
            n,
            f"{min(n / p[0] for p in pairs):,.0f}-{max(n / p[0] for p in pairs):,.0f}",
            f"{min(n / p[1] for p in pairs):,.0f}-{max(n / p[1] for p in pairs):,.0f}",
            f"{raw_total / calls_total:.2f}x",
            f"{_median([p[0] / p[1] for p in pairs]):.2f}x",
            1e6 * sum(p[2] for p in pairs) / (n * len(pairs)),
        )

    summary = Table(
        [
            "store",
            "calls/s (median)",
            "vs raw thread 1-row (median of rounds)",
            "vs raw sqlite3 1-row (median of rounds)",
            "CPU µs/call (median)",
            "commits on the loop",
        ]
    )
    for kind in KINDS:
        summary.add(
            _NAMES[kind],
            _median(rates[kind]),
            f"{_median(ratios[kind]):.2f}x",
            f"{_median(ratios_sync[kind]):.2f}x",
            1e6 * _median(cpus[kind]),
            f"{_median(shares[kind]):.0%}",
        )
    print()
    print(summary.text())
    print()
    print(rounds.text())
    if pairs:
        print()
        print(paired.text())
    if not args.no_write:
        body = (
            f"{args.rounds} rounds; in each, the raw one-row commit rates "
            f"({args.raw_seconds:g} s each), then one actor making {args.calls:,} sequential "
            "`ctx.call`s on each store setting (a fresh database each). Ratios are to the raw "
            "rates of the same round.\n\n## Medians\n\n"
            + summary.markdown()
            + "\n\n## Rounds\n\n"
            + rounds.markdown()
            + (
                f"\n\n## Paired slices\n\n{args.slices} slices of {args.slice_calls} raw "
                "one-row commits through a thread and as many sequential calls on the default "
                "store, alternating in one event loop.\n\n" + paired.markdown()
                if pairs
                else ""
            )
        )
        out = write_report(
            "seq_calls", "Sequential calls vs raw SQLite, in rounds", body, info=info
        )
        print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
