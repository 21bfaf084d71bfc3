"""Recovery time against the log tail since the last snapshot, the history before it, and
the size of the state.

    python -m benchmarks.recovery [--max-tail 25000] [--tail 250] [--sizes 1000,100000,10000000]
                                  [--against REV]

With ``--against REV`` the same logs are also recovered by revision REV's ``actorlog`` (the
measuring processes of the two builds interleaved): before and after in one run.

The log is built with the real runtime (``benchmarks._agent``: ``Step(i)`` messages, one
``ctx.call`` each, so four entries per step: message, intent, result, step) in an SQLite file;
a snapshot is forced by one step under ``snapshot_every=1``, the tail is then written under
``snapshot_every=None``. (Building uses ``durability="survive-process-crash"`` to go faster:
the entries are the same.)

Each measurement is a **fresh process** (the fastest of ``--repeat`` processes, each on its own
copy of the file) (``python -m benchmarks.recovery --measure DB``) that
opens the store, spawns the actor (recovery: newest valid snapshot, then the tail replayed
through the handler with effects served from the log) and asks one new ``Step``. Reported:

* the runtime's own recovery duration (``ActorSystem.last_recovery``) and entries read;
* spawn → first live step: from just before ``spawn`` to the tool of the new step;
* process start → first live step: from ``Popen`` (interpreter start and imports included;
  "process start → main" is the interpreter's share, up to the first line of the module);
* replay rate: entries read per second of recovery.

The OS page cache is warm (the file was just written), as after a process restart, not a
machine reboot.
"""

from __future__ import annotations

import time

_T_MAIN = time.monotonic_ns()  # first line of Python in a --measure process

import argparse  # noqa: E402
import json  # noqa: E402
import math  # noqa: E402
import os  # noqa: E402
import shutil  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

import anyio  # noqa: E402
import attrs  # noqa: E402
from actorlog import ActorSystem  # noqa: E402
from actorlog.stores import SqliteStore  # noqa: E402

from . import _agent  # noqa: E402
from ._common import (  # noqa: E402
    REPO_ROOT,
    Table,
    bench_parser,
    configure_output,
    fmt_bytes,
    loadavg,
    machine_info,
    output_dir,
    plot_lines,
    quick,
    scratch_dir,
    write_report,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["Point", "main"]

ACTOR = "recovering-agent"
SENDERS = 16  # concurrent senders while building: group commit makes building faster


# -- building logs --------------------------------------------------------------------------


async def _add(path: Path, steps: int, *, snapshot_every: int | None, grow: int | None) -> None:
    store = SqliteStore(path, durability="survive-process-crash")
    async with ActorSystem(store, actors=[_agent.Agent]) as system:
        ref = await system.spawn(_agent.Agent, ACTOR, snapshot_every=snapshot_every)
        if grow is not None:
            await ref.ask(_agent.Grow(grow))

        async def sender(k: int) -> None:
            for i in range(k, steps, SENDERS):
                await ref.send(_agent.Step(i))

        async with anyio.create_task_group() as tg:
            for k in range(min(SENDERS, steps)):
                tg.start_soon(sender, k)
        await ref.ask(_agent.Status())  # handled after every Step: the log is complete


def add_steps(path: Path, steps: int) -> None:
    """Append ``steps`` steps without snapshots."""
    anyio.run(lambda: _add(path, steps, snapshot_every=None, grow=None))


def snapshot_now(path: Path, state_bytes: int | None = None) -> None:
    """One step under ``snapshot_every=1`` (growing the state first if asked): a snapshot."""
    anyio.run(lambda: _add(path, 0, snapshot_every=1, grow=state_bytes))


def copy_db(src: Path, dest: Path) -> Path:
    for suffix in ("", "-wal", "-shm"):
        f = Path(str(src) + suffix)
        if f.exists():
            shutil.copyfile(f, Path(str(dest) + suffix))
    return dest


# -- measuring (in a fresh process) ---------------------------------------------------------


async def _measure(path: str) -> dict[str, Any]:
    first_live: list[int] = []

    def impl(i: int) -> str:
        if not first_live:
            first_live.append(time.monotonic_ns())
        return f"value-{i:06d}"

    _agent.configure(impl)
    t_open = time.monotonic_ns()
    async with ActorSystem(SqliteStore(path), actors=[_agent.Agent]) as system:
        t_spawn = time.monotonic_ns()
        ref = await system.spawn(_agent.Agent, ACTOR, snapshot_every=None)
        t_spawned = time.monotonic_ns()
        await ref.ask(_agent.Step(-1))
        found = system.last_recovery(ACTOR)
        rec = found.as_dict() if found is not None else {}
        snaps = await system.store.list_snapshots(ACTOR)
    return {
        "t_main": _T_MAIN,
        "t_open": t_open,
        "t_spawn": t_spawn,
        "t_spawned": t_spawned,
        "t_first_live": first_live[0] if first_live else None,
        "snapshot_size": snaps[0].size if snaps else 0,
        "recovery": {k: v for k, v in rec.items() if k != "snapshots_rejected"},
    }


@attrs.define
class Point:
    series: str
    label: str
    state_bytes: int
    #: the build measured: "this checkout", or ``--against``'s revision
    build: str = "this checkout"
    history_entries: int = 0
    entries_read: int = 0
    steps_replayed: int = 0
    snapshot_size: int = 0
    recovery_s: float = float("nan")
    spawn_to_live_s: float = float("nan")
    process_to_live_s: float = float("nan")
    main_s: float = float("nan")
    error: str = ""

    @property
    def replay_rate(self) -> float:
        return self.entries_read / self.recovery_s if self.recovery_s > 0 else float("nan")


def measure(
    path: Path,
    series: str,
    label: str,
    state_bytes: int,
    repeat: int,
    builds: dict[str, Path | None] | None = None,
) -> list[Point]:
    """Recover the actor in ``repeat`` fresh processes per build (each on a copy; the
    builds interleaved, in turn first); keep each build's fastest. ``builds``: name ->
    a package directory put first on the path (None: the installed ``actorlog``)."""
    builds = builds or {"this checkout": None}
    best: dict[str, Point] = {}
    for rep in range(repeat):
        order = list(builds.items())
        for build, pkg in order if rep % 2 == 0 else reversed(order):
            p = _measure_once(path, series, label, state_bytes, rep, build, pkg)
            if p.error:
                return [p]
            if build not in best or p.spawn_to_live_s < best[build].spawn_to_live_s:
                best[build] = p
    return [best[b] for b in builds]


def _measure_once(
    path: Path, series: str, label: str, state_bytes: int, rep: int, build: str, pkg: Path | None
) -> Point:
    db = copy_db(path, path.with_name(f"{path.stem}-m{rep}.db"))
    env = dict(os.environ)
    first = [str(pkg)] if pkg is not None else []
    env["PYTHONPATH"] = os.pathsep.join([*first, str(REPO_ROOT), env.get("PYTHONPATH", "")])
    cmd = [sys.executable, "-m", f"{__package__}.recovery", "--measure", str(db)]
    t0 = time.monotonic_ns()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    p = Point(series, label, state_bytes, build)
    if proc.returncode == 0 and proc.stdout.strip():
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        rec = r["recovery"]
        p.history_entries = int(rec.get("snapshot_seq") or 0)
        p.entries_read = int(rec.get("entries_read") or 0)
        p.steps_replayed = int(rec.get("steps_replayed") or 0)
        p.recovery_s = float(rec.get("duration_s") or float("nan"))
        p.snapshot_size = int(r["snapshot_size"])
        p.main_s = (r["t_main"] - t0) / 1e9
        if r["t_first_live"] is not None:
            p.spawn_to_live_s = (r["t_first_live"] - r["t_spawn"]) / 1e9
            p.process_to_live_s = (r["t_first_live"] - t0) / 1e9
    else:
        p.error = (proc.stderr.strip().splitlines() or ["no output"])[-1][:200]
    for suffix in ("", "-wal", "-shm"):
        Path(str(db) + suffix).unlink(missing_ok=True)
    return p


# -- the runs ---------------------------------------------------------------------------------


def _tail_steps(max_tail: int) -> list[int]:
    steps = [0]
    s = 25
    while s <= max_tail:
        steps.append(s)
        s *= 10
    if steps[-1] != max_tail and max_tail > 0:
        steps.append(max_tail)
    return steps


def run(
    work: Path,
    max_tail: int,
    tail: int,
    sizes: Sequence[int],
    repeat: int,
    log: Any = print,
    builds: dict[str, Path | None] | None = None,
    keep: dict[int, Path] | None = None,
) -> list[Point]:
    """The three series; ``keep``: tail length in steps -> where to copy the log of that
    tail (a tail the series measures)."""
    points: list[Point] = []
    base = sizes[0]

    def note(ps: list[Point]) -> None:
        for p in ps:
            points.append(p)
            log(
                f"  {p.series:8s} {p.label:28s} {p.build[:14]:14s} entries read "
                f"{p.entries_read:>7,}  recovery {1000 * p.recovery_s:8.1f} ms  "
                f"spawn→live {1000 * p.spawn_to_live_s:8.1f} ms"
                + (f"  ERROR {p.error}" if p.error else "")
            )

    # 1. tail: one log, a snapshot at the start, the tail grown step by step
    log(f"tail series (state {fmt_bytes(base)}) ...")
    main_db = work / "tail.db"
    snapshot_now(main_db, base)
    done = 0
    history_branch: Path | None = None
    for t in _tail_steps(max_tail):
        add_steps(main_db, t - done)
        done = t
        if keep is not None and t in keep:
            copy_db(main_db, keep[t])
        note(measure(main_db, "tail", f"tail {t:,} steps", base, repeat, builds))
        if history_branch is None and t >= max_tail // 10 and t > tail:
            history_branch = copy_db(main_db, work / "history-mid.db")

    # 2. history: the same tail after histories of growing length
    log(f"history series (tail {tail:,} steps) ...")
    small = work / "history-small.db"
    add_steps(small, tail)
    snapshot_now(small, base)
    add_steps(small, tail)
    note(measure(small, "history", f"history {tail:,} steps", base, repeat, builds))
    for name, db in (
        ("history: branch of tail series", history_branch),
        ("history: tail series", main_db),
    ):
        if db is None:
            continue
        snapshot_now(db)
        add_steps(db, tail)
        note(measure(db, "history", name, base, repeat, builds))

    # 3. state size at a fixed tail
    log(f"state-size series (tail {tail:,} steps) ...")
    for size in sizes:
        db = work / f"state-{size}.db"
        snapshot_now(db, size)
        add_steps(db, tail)
        note(measure(db, "state", f"state {fmt_bytes(size)}", size, repeat, builds))
    return points


#: ``--callgrind``'s tails, in steps: the instructions an entry costs are the difference
#: over the difference in entries read
CALLGRIND_TAILS = (0, 2500)


def callgrind(
    work: Path, logs: dict[int, Path], reads: list[int], builds: dict[str, Path | None]
) -> Table:
    """Instructions (``valgrind --tool=callgrind``: every thread, C included; a count the
    load does not move) of one measuring process per build and tail (``logs``, which read
    ``reads`` entries), and per entry."""
    from ._startup_counts import instructions  # (not in a --measure process)

    t = Table(
        [
            "build",
            *(f"tail {n:,} steps (M instructions)" for n in logs),
            "per entry read (k instructions)",
        ]
    )
    for build, pkg in builds.items():
        counts = []
        for n, path in logs.items():
            db = copy_db(path, work / f"cg-{n}.db")
            env = dict(os.environ)
            first = [str(pkg)] if pkg is not None else []
            env["PYTHONPATH"] = os.pathsep.join([*first, str(REPO_ROOT), env.get("PYTHONPATH", "")])
            cmd = [sys.executable, "-m", f"{__package__}.recovery", "--measure", str(db)]
            counts.append(instructions(cmd, env, work, f"recovery-{n}"))
        # (nan when the tails read as many entries: nothing to divide)
        per = (counts[-1] - counts[0]) / (reads[-1] - reads[0] or math.nan) / 1000
        t.add(build, *(c / 1e6 for c in counts), per)
    return t


def _table(points: Sequence[Point], builds: int = 1) -> Table:
    t = Table(
        [
            *(["build"] if builds > 1 else []),
            "series",
            "state",
            "snapshot",
            "history (entries before snapshot)",
            "tail entries read",
            "steps replayed",
            "recovery (ms)",
            "replay rate (entries/s)",
            "spawn → first live step (ms)",
            "process start → first live step (ms)",
            "of which process start → main (ms)",
        ]
    )
    for p in points:
        first = [p.build] if builds > 1 else []
        if p.error:
            t.add(*first, p.series, fmt_bytes(p.state_bytes), p.error, *(["-"] * 8))
            continue
        t.add(
            *first,
            p.series,
            fmt_bytes(p.state_bytes),
            fmt_bytes(p.snapshot_size),
            p.history_entries,
            p.entries_read,
            p.steps_replayed,
            1000 * p.recovery_s,
            p.replay_rate if p.entries_read else "-",
            1000 * p.spawn_to_live_s,
            1000 * p.process_to_live_s,
            1000 * p.main_s,
        )
    return t


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(
        __doc__, quick_help="--max-tail 2500 --tail 100 --sizes 1000 --repeat 1", writes=True
    )
    parser.add_argument("--measure", help=argparse.SUPPRESS)
    parser.add_argument(
        "--max-tail", type=int, default=25_000, help="longest tail, in steps (4 entries each)"
    )
    parser.add_argument("--tail", type=int, default=250, help="the fixed tail, in steps")
    parser.add_argument(
        "--sizes", default="1000,100000,10000000", help="state sizes in bytes (first: default)"
    )
    parser.add_argument("--repeat", type=int, default=3, help="fresh processes per point; best")
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help=f"also count the instructions of recovering tails of {CALLGRIND_TAILS} steps",
    )
    parser.add_argument(
        "--against",
        metavar="REV",
        default=None,
        help="also measure this git revision's actorlog, interleaved (the same logs, written "
        "by this checkout: REV must read their format, 5 since format 5 landed)",
    )
    args = parser.parse_args(argv)
    quick(args, parser, max_tail=2500, tail=100, sizes="1000", repeat=1)
    configure_output(args)
    if args.measure:
        print(json.dumps(anyio.run(_measure, args.measure)))
        return
    sizes = [int(x) for x in args.sizes.split(",") if x.strip()]

    with scratch_dir(args.dir) as work:
        info = machine_info(work)
        builds: dict[str, Path | None] = {"this checkout": None}
        if args.against:
            from .startup import checkout, working_tree  # (not in a --measure process)

            builds = {"this checkout": working_tree(work)}
            builds[f"{args.against} (--against)"] = checkout(args.against, work)
        keep = {n: work / f"kept-{n}.db" for n in CALLGRIND_TAILS} if args.callgrind else None
        points = run(work, args.max_tail, args.tail, sizes, args.repeat, builds=builds, keep=keep)
        insn = None
        if keep is not None:
            missing = [n for n, path in keep.items() if not path.exists()]
            if missing:
                parser.error(f"--callgrind needs tails of {missing} steps in the tail series")
            read = {
                p.label: p.entries_read
                for p in points
                if p.series == "tail" and p.build == "this checkout"
            }
            reads = [read[f"tail {n:,} steps"] for n in keep]
            insn = callgrind(work, keep, reads, builds)
            print(insn.text())
        info["load average (1, 5, 15 min) at end"] = loadavg()
    table = _table(points, len(builds))
    print()
    print(table.text())
    every = [p for p in points if not p.error]
    lines = []
    for build in builds:
        ok = [p for p in every if p.build == build]
        named = f"{build}: " if len(builds) > 1 else ""
        hist = [p for p in ok if p.series == "history"]
        if len(hist) >= 2:
            lo, hi = hist[0], hist[-1]
            lines.append(
                f"{named}History {lo.history_entries:,} → {hi.history_entries:,} entries "
                f"(x{hi.history_entries / max(1, lo.history_entries):.0f}) at a fixed tail: "
                f"recovery x{hi.recovery_s / lo.recovery_s:.2f}, spawn → first live step "
                f"x{hi.spawn_to_live_s / lo.spawn_to_live_s:.2f}."
            )
        tails = [p for p in ok if p.series == "tail" and p.entries_read > 1000]
        if tails:
            rate = sum(p.entries_read for p in tails) / sum(p.recovery_s for p in tails)
            lines.append(
                f"{named}Replay rate over the tails above 1,000 entries: {rate:,.0f} entries/s."
            )
    ok = [p for p in every if p.build == "this checkout"]
    hist = [p for p in ok if p.series == "history"]
    for line in lines:
        print(line)
    if args.no_write:
        return
    plots = []
    tail_pts = [p for p in ok if p.series == "tail"]
    png = plot_lines(
        output_dir() / "recovery_tail.png",
        "actorlog recovery time vs log tail since the last snapshot",
        "tail entries replayed",
        "time (ms)",
        {
            "recovery (runtime)": [(p.entries_read, 1000 * p.recovery_s) for p in tail_pts],
            "spawn → first live step": [
                (p.entries_read, 1000 * p.spawn_to_live_s) for p in tail_pts
            ],
            "process start → first live step": [
                (p.entries_read, 1000 * p.process_to_live_s) for p in tail_pts
            ],
        },
        logx=True,
        logy=True,
        note=f"state {fmt_bytes(sizes[0])}; {info['CPU']}, {info['cores (logical)']} cores",
    )
    if png is not None:
        plots.append(f"![recovery vs tail]({png.name})")
    if hist:
        png = plot_lines(
            output_dir() / "recovery_history.png",
            f"actorlog recovery time vs history, fixed tail ({args.tail:,} steps)",
            "history entries before the snapshot",
            "time (ms)",
            {
                "recovery (runtime)": [(p.history_entries, 1000 * p.recovery_s) for p in hist],
                "spawn → first live step": [
                    (p.history_entries, 1000 * p.spawn_to_live_s) for p in hist
                ],
            },
            logx=True,
            note=f"{info['CPU']}, {info['cores (logical)']} cores",
        )
        if png is not None:
            plots.append(f"![recovery vs history]({png.name})")
    body = "\n\n".join(
        [
            (__doc__ or "").split("\n\n", 2)[2].strip(),
            table.markdown(),
            *lines,
            *(
                []
                if insn is None
                else [
                    "Instructions (`--callgrind`): one measuring process per build and tail "
                    "(open, recover, one new step), under `valgrind --tool=callgrind`; per "
                    "entry: the difference over the difference in entries read.",
                    insn.markdown(),
                ]
            ),
            *plots,
        ]
    )
    out = write_report("recovery", "actorlog recovery time", body, info=info)
    print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
