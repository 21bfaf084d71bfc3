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
the calls' time, equal counts) and the median of the slices' ratios. With
``--paired-actors 100`` (the default: ``1,100``) 100 actors make ``--slice-calls`` calls
each per slice, concurrently (issue 28's "100 actors >= 3x the raw rate").
"""

from __future__ import annotations

import asyncio
import time
from functools import partial
from typing import TYPE_CHECKING, Literal

import anyio
import attrs
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


#: ``--durability``: the SQLite stores' (the raw rates are always measured with fsync)
_DURABILITY: list[Literal["fsync", "survive-process-crash"]] = ["fsync"]


async def _solo(kind: str, path: Path, calls: int) -> tuple[float, float, float]:
    """Calls per second, CPU seconds per call, and the share of commits on the loop."""
    store = _make_store(kind, path, _DURABILITY[0])
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


@attrs.frozen
class Slice:
    """One paired slice: raw one-row commits through a thread and sequential calls."""

    raw_commits: int
    raw_s: float
    calls: int
    calls_s: float
    cpu_s: float


async def _paired(d: Path, actors: int, slices: int, n: int) -> list[Slice]:
    """``slices`` pairs: ``n`` raw one-row commits through a thread, and ``actors`` actors on
    the default store each making ``n`` sequential calls (one ``Run(n)`` each, concurrently),
    in an order swapped every other slice."""
    store = _make_store("sqlite", d / f"paired-{actors}.db", _DURABILITY[0])
    out: list[Slice] = []
    async with (
        RawThread(d / f"paired-raw-{actors}.db") as raw,
        ActorSystem(store, actors=[_agent.Agent]) as system,
    ):
        refs = [await system.spawn(_agent.Agent, f"solo-{a}") for a in range(actors)]

        async def run(i: int, calls: int) -> tuple[float, float]:
            c, t = time.process_time(), time.perf_counter()
            async with anyio.create_task_group() as tg:
                for ref in refs:
                    tg.start_soon(partial(ref.ask, _agent.Run(calls), message_id=f"slice-{i}"))
            return time.perf_counter() - t, time.process_time() - c

        await run(-1, 20)  # warm-up
        for i in range(slices):
            if i % 2:
                wall, cpu = await run(i, n)
                raw_s = await raw.commits(n)
            else:
                raw_s = await raw.commits(n)
                wall, cpu = await run(i, n)
            out.append(Slice(n, raw_s, n * actors, wall, cpu))
    return out


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--rounds 2 --calls 50 --raw-seconds 0.1")
    parser.add_argument("--rounds", type=int, default=7, help="interleaved rounds")
    parser.add_argument("--calls", type=int, default=300, help="ctx.calls per store, per round")
    parser.add_argument("--raw-seconds", type=float, default=0.4, help="per raw measurement")
    parser.add_argument(
        "--durability",
        choices=["fsync", "survive-process-crash"],
        default="fsync",
        help="the stores' durability (survive-process-crash: no fsync, for the CPU per call "
        "without the disk's noise; the ratios then mean nothing)",
    )
    parser.add_argument("--slices", type=int, default=20, help="paired slices (0: none)")
    parser.add_argument(
        "--slice-calls", type=int, default=50, help="calls per actor per paired slice"
    )
    parser.add_argument(
        "--paired-actors", default="1,100", help="concurrent actors of the paired slices"
    )
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, rounds=2, calls=50, raw_seconds=0.1, slices=4, slice_calls=20)
    configure_output(args)
    _DURABILITY[0] = args.durability

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
        pairs = {
            a: anyio.run(_paired, d, a, args.slices, args.slice_calls)
            for a in ([int(x) for x in args.paired_actors.split(",")] if args.slices else [])
        }
        info["load average (1, 5, 15 min) at end"] = loadavg()

    paired = Table(
        [
            "store",
            "actors",
            "slices",
            "raw thread 1-row/s (slices: min-max)",
            "calls/s (slices: min-max)",
            "vs raw thread 1-row: ratio of the rates over all slices",
            "median of the slices' ratios",
            "CPU µs/call",
        ]
    )
    for actors, got in pairs.items():
        raw_rate = sum(p.raw_commits for p in got) / sum(p.raw_s for p in got)
        calls_rate = sum(p.calls for p in got) / sum(p.calls_s for p in got)
        raws = [p.raw_commits / p.raw_s for p in got]
        speeds = [p.calls / p.calls_s for p in got]
        paired.add(
            _NAMES["sqlite"],
            actors,
            len(got),
            f"{min(raws):,.0f}-{max(raws):,.0f}",
            f"{min(speeds):,.0f}-{max(speeds):,.0f}",
            f"{calls_rate / raw_rate:.2f}x",
            f"{_median([c / r for c, r in zip(speeds, raws, strict=True)]):.2f}x",
            1e6 * sum(p.cpu_s for p in got) / sum(p.calls for p in got),
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
                "one-row commits through a thread and as many sequential calls by each actor "
                "(concurrently) on the default store, alternating in one event loop.\n\n"
                + paired.markdown()
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
