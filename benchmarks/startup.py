"""Start-up: the cost of ``import actorlog``, and process start to the first resumed step.

    python -m benchmarks.startup [--rounds 9] [--resumes 3] [--against REV] [--quick]

Part 1, the import: ``python -X importtime -c "import actorlog"`` in ``--rounds`` fresh
interpreters; the run with the smallest total is kept. Shown: the ``actorlog`` line's
cumulative time, the wall time of ``python -c "import actorlog"`` less that of
``python -c pass`` (best of the rounds; also for the dependencies alone: anyio with its
asyncio backend, attrs and sqlite3, which a run imports whatever actorlog does), how
many modules the import loads, the time by top-level package (self times summed) and the
modules with the largest self times.

Part 2, the start after a crash: ``benchmarks.peers``' workload (one actor, one message
whose handler makes ``--steps`` sequential ``ctx.call``s; the process is SIGKILLed in the
tool of step 75 %, a fresh process resumes it). Shown: the resume process's start to
``main``, to "ready" (system started, recovery under way) and to the first resumed tool
call, best and median of ``--resumes`` crash-and-resume rounds. With DBOS installed
(``actorlog[peers]``) it runs in the same rounds, interleaved, and the ratio is shown
(issue 17's target: actorlog's first resumed step in 1/20 of DBOS's time).

Part 3, the floor: in the same rounds, a bare ``python -c`` that imports ``sqlite3``, opens a
database file in WAL mode with ``synchronous=FULL`` (``SqliteStore``'s defaults), inserts one
row and commits it, timed the same way from the parent's clock before the process starts to the
child's clock after its commit; and the same with what a run of actorlog imports whatever
actorlog does (anyio with its asyncio backend, attrs), timed inside ``anyio.run`` after the
commit. Shown: each build's start to first resumed step over the floor, medians (issue 28's
target: at most 3x), and the dependencies' floor over it; in wall time and in the CPU time
each process used until then (all its threads; steadier than wall time on a loaded machine).

Part 4, the work itself: the Python function calls (cProfile's count) of a process that
resumes the same crashed run, from its start to its first resumed tool call, once per build,
split at the dependencies imported and at actorlog imported. Unlike times, the count does not
move with the machine's load, so it shows a change in actorlog's own work even on a busy
machine.

Part 5 (``--callgrind``; minutes): the same phases and the floors in instructions
(``valgrind --tool=callgrind``: every thread, C included), each in a fresh process.

``--against REV`` measures another revision of this repository the same way, interleaved
with the current code (its ``runtime/`` and ``stores/``, extracted with ``git archive`` into a
scratch package): before and after in one run on one machine. The current code runs the same
way, from a copy of the working tree's ``runtime/`` and ``stores/`` (not the editable
install), so both builds have the same ``sys.path``. Packages are compiled (``compileall``)
and child processes run with bytecode caching on (``PYTHONDONTWRITEBYTECODE`` removed), as
an installed package runs; a warm-up import of the dependencies and actorlog writes the
caches of what is not compiled yet.
"""

from __future__ import annotations

import compileall
import contextlib
import io
import os
import re
import shutil
import statistics
import subprocess
import sys
import tarfile
import time
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from . import peers
from ._common import (
    REPO_ROOT,
    Table,
    bench_parser,
    configure_output,
    fmt_num,
    loadavg,
    machine_info,
    quick,
    scratch_dir,
    write_report,
)
from ._startup_counts import (
    DEPENDENCIES,
    FLOOR,
    FLOOR_DEPS,
    Calls,
    calls_floor,
    calls_round,
    child_env,
    instructions_floors,
    instructions_round,
)

if TYPE_CHECKING:
    from collections.abc import Iterator, Sequence

__all__ = ["ImportRun", "Resume", "checkout", "floor_round", "import_run", "main", "working_tree"]

_LINE = re.compile(r"^import time:\s+(\d+)\s+\|\s+(\d+)\s+\|( +)(\S+)\s*$")


@attrs.define
class ImportRun:
    """One ``python -X importtime -c STATEMENT``: microseconds per module. ``total_us``: the
    cumulative time of the top-level imports of ``actorlog`` (and ``actorlog.stores``);
    ``modules``: those imports' modules (each loaded by them, not before), import order."""

    total_us: int
    modules: list[tuple[str, int, int]]  # (name, self us, cumulative us), import order

    def by_package(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for name, self_us, _ in self.modules:
            top = name.split(".")[0]
            if top == "actorlog" and name.startswith("actorlog.stores"):
                top = "actorlog.stores"
            out[top] = out.get(top, 0) + self_us
        return out


@attrs.define
class Resume:
    """The resume process of one crash-and-resume round (seconds from its start)."""

    build: str
    to_main: float
    to_ready: float
    to_first_step: float
    cpu_to_first_step: float


def import_run(pkg: Path | None, statement: str = "import actorlog") -> ImportRun:
    """``python -X importtime -c STATEMENT`` in a fresh interpreter (``pkg``: a package
    directory put first on the path, for ``--against``)."""
    out = subprocess.run(
        [sys.executable, "-X", "importtime", "-c", statement],
        capture_output=True,
        text=True,
        env=child_env(pkg),
        cwd=str(pkg or REPO_ROOT.parent),
        check=True,
    )
    modules: list[tuple[str, int, int]] = []
    pending: list[tuple[str, int, int]] = []  # since the last top-level import
    total = 0
    for line in out.stderr.splitlines():
        m = _LINE.match(line)
        if m is None:
            continue
        name, self_us, cum_us = m.group(4), int(m.group(1)), int(m.group(2))
        pending.append((name, self_us, cum_us))
        if len(m.group(3)) == 1:  # a top-level import: its modules are listed before it
            if name == "actorlog" or name.startswith("actorlog."):
                total += cum_us
                modules += pending
            pending = []
    return ImportRun(total, modules)


def _wall(pkg: Path | None, statement: str) -> float:
    t = time.perf_counter()
    subprocess.run(
        [sys.executable, "-c", statement],
        env=child_env(pkg),
        cwd=str(pkg or REPO_ROOT.parent),
        check=True,
    )
    return time.perf_counter() - t


def checkout(rev: str, work: Path) -> Path:
    """A package directory holding revision ``rev``'s ``actorlog`` (runtime/ and stores/)."""
    data = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", rev, "runtime", "stores"],
        capture_output=True,
        check=True,
    ).stdout
    src = work / f"src-{rev}"
    with tarfile.open(fileobj=io.BytesIO(data)) as tar:
        tar.extractall(src, filter="data")
    pkg = work / f"pkg-{rev}"
    pkg.mkdir()
    (src / "runtime").rename(pkg / "actorlog")
    (src / "stores").rename(pkg / "actorlog" / "stores")
    compileall.compile_dir(pkg, quiet=1)
    return pkg


def working_tree(work: Path) -> Path:
    """A package directory holding this checkout's ``actorlog`` as its files are now (the
    working tree's runtime/ and stores/), laid out and compiled like ``checkout``'s: both
    builds run from a directory first on ``sys.path``, so neither pays for a longer path
    (an import searches every entry before the one that has it)."""
    pkg = work / "pkg-working-tree"
    skip = shutil.ignore_patterns("__pycache__", "*.pyc")
    shutil.copytree(REPO_ROOT / "runtime", pkg / "actorlog", ignore=skip)
    shutil.copytree(REPO_ROOT / "stores", pkg / "actorlog" / "stores", ignore=skip)
    compileall.compile_dir(pkg, quiet=1)
    return pkg


@contextlib.contextmanager
def _environment(pkg: Path | None) -> Iterator[None]:
    """``os.environ`` as ``_env`` makes it, for the peers workers (they inherit it)."""
    saved = dict(os.environ)
    os.environ.clear()
    os.environ.update(child_env(pkg))
    try:
        yield
    finally:
        os.environ.clear()
        os.environ.update(saved)


def resume_round(
    build: str, pkg: Path | None, steps: int, work: Path, rep: int, system: str = "actorlog"
) -> Resume | str:
    """One crash-and-resume of ``benchmarks.peers`` (``system``); a Resume, or why not."""
    with _environment(pkg):
        r = peers.run_system(system, steps, 0.75, work / build, rep=rep)
    if r.status != "ok" or not r.correct:
        return f"{build}: {r.status}" + ("" if r.correct else " (wrong result)")
    return Resume(build, r.start_to_main_s, r.start_to_ready_s, r.start_to_resume_s, r.resume_cpu_s)


def floor_round(work: Path, rep: int, script: str = FLOOR) -> tuple[float, float]:
    """Seconds from before the start of a fresh ``python -c FLOOR`` to its first commit, and
    the CPU seconds of that process until then."""
    db = work / f"floor-{rep}.db"
    t0 = time.monotonic_ns()
    out = subprocess.run(
        [sys.executable, "-c", script, str(db)],
        capture_output=True,
        text=True,
        env=child_env(None),
        cwd=str(work),
        check=True,
    )
    t, cpu = out.stdout.split()[-2:]
    return (int(t) - t0) / 1e9, int(cpu) / 1e9


def _ms(seconds: float) -> str:
    return f"{seconds * 1000:.1f}"


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--rounds 3 --resumes 1 --steps 200")
    parser.add_argument("--rounds", type=int, default=9, help="fresh interpreters per import")
    parser.add_argument("--resumes", type=int, default=3, help="crash-and-resume rounds")
    parser.add_argument("--steps", type=int, default=1000, help="steps of the resumed run")
    parser.add_argument(
        "--against", metavar="REV", default=None, help="also measure this git revision"
    )
    parser.add_argument(
        "--peer",
        default="dbos",
        help="the peer of benchmarks.peers resumed in the same rounds ('none': skip)",
    )
    parser.add_argument("--top", type=int, default=12, help="modules listed by self time")
    parser.add_argument(
        "--callgrind",
        action="store_true",
        help="also count instructions (valgrind --tool=callgrind; slow: minutes)",
    )
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, rounds=3, resumes=1, steps=200)
    configure_output(args)

    with scratch_dir() as work:
        info = machine_info(work)
        builds: dict[str, Path | None] = {"this checkout": working_tree(work)}
        if args.against:
            builds[f"{args.against} (--against)"] = checkout(args.against, work)
        for pkg in builds.values():  # warm-up: bytecode caches written
            import_run(pkg, f"{DEPENDENCIES}; import actorlog, actorlog.stores")

        own_import = f"{DEPENDENCIES}; import actorlog, actorlog.stores"
        imports: dict[str, list[ImportRun]] = {b: [] for b in builds}
        owns: dict[str, list[ImportRun]] = {b: [] for b in builds}
        walls: dict[str, list[float]] = {b: [] for b in builds}
        own_walls: dict[str, list[float]] = {b: [] for b in builds}
        bare: list[float] = []
        deps: list[float] = []
        for i in range(args.rounds):  # interleaved: a load change hits every build alike
            order = list(builds.items()) if i % 2 == 0 else list(reversed(builds.items()))
            bare.append(_wall(None, "pass"))
            deps.append(_wall(None, DEPENDENCIES))
            for build, pkg in order:
                imports[build].append(import_run(pkg))
                owns[build].append(import_run(pkg, own_import))
                walls[build].append(_wall(pkg, "import actorlog"))
                own_walls[build].append(_wall(pkg, own_import))
        print(f"import actorlog: best of {args.rounds} fresh interpreters")
        best = {b: min(runs, key=lambda r: r.total_us) for b, runs in imports.items()}
        best_own = {b: min(runs, key=lambda r: r.total_us) for b, runs in owns.items()}
        imp = Table(
            [
                "build",
                "`import actorlog` alone: importtime (ms)",
                "wall - bare interpreter (ms)",
                "modules",
                "after the dependencies: importtime of actorlog + actorlog.stores (ms)",
                "wall - the dependencies' (ms)",
                "modules",
            ]
        )
        for b, run in best.items():
            imp.add(
                b,
                _ms(run.total_us / 1e6),
                _ms(min(walls[b]) - min(bare)),
                len(run.modules),
                _ms(best_own[b].total_us / 1e6),
                _ms(min(own_walls[b]) - min(deps)),
                len(best_own[b].modules),
            )
        imp.add(
            "(the dependencies alone: wall - bare interpreter)",
            "",
            _ms(min(deps) - min(bare)),
            "",
            "",
            "",
            "",
        )
        print(imp.text())

        packages = sorted(
            {p for run in best_own.values() for p in run.by_package()},
            key=lambda p: -max(run.by_package().get(p, 0) for run in best_own.values()),
        )
        pkg_table = Table(["package (self times summed, ms)", *best_own])
        for p in packages[: args.top + 4]:
            pkg_table.add(p, *(_ms(run.by_package().get(p, 0) / 1e6) for run in best_own.values()))
        print()
        print(pkg_table.text())
        current = best_own["this checkout"]
        top = Table(["module (this checkout)", "self (ms)", "cumulative (ms)"])
        for name, self_us, cum_us in sorted(current.modules, key=lambda m: -m[1])[: args.top]:
            top.add(name, _ms(self_us / 1e6), _ms(cum_us / 1e6))
        print()
        print(top.text())

        resumes: dict[str, list[Resume]] = {}
        floors: list[tuple[float, float]] = []
        dep_floors: list[tuple[float, float]] = []
        problems: list[str] = []
        peer = None if args.peer == "none" else args.peer
        if peer is not None and peers.available(peer) is not None:
            problems.append(f"{peer}: {peers.available(peer)}")
            peer = None
        for rep in range(args.resumes):
            runs: list[tuple[str, Path | None, str]] = [
                (b, pkg, "actorlog") for b, pkg in builds.items()
            ]
            if peer is not None:
                runs.append((peer, None, peer))
            if rep % 2:
                runs.reverse()
            floors.append(floor_round(work, rep))
            dep_floors.append(floor_round(work, rep + args.resumes, FLOOR_DEPS))
            print(
                f"resume {rep + 1}/{args.resumes}: floor {floors[-1][0]:.3f} s, "
                f"with the dependencies {dep_floors[-1][0]:.3f} s"
            )
            for build, pkg, system in runs:
                print(f"resume {rep + 1}/{args.resumes}: {build} ... ", end="", flush=True)
                got = resume_round(build, pkg, args.steps, work, rep, system)
                if isinstance(got, str):
                    problems.append(got)
                    print(got)
                    continue
                resumes.setdefault(build, []).append(got)
                print(f"first resumed step after {got.to_first_step:.3f} s")
        calls = {
            b: calls_round(pkg, args.steps, work, str(i))
            for i, (b, pkg) in enumerate(builds.items())
        }
        floor_calls = calls_floor(work)
        insns: dict[str, Calls] = {}
        insn_floors: dict[str, int] = {}
        if args.callgrind:
            print("counting instructions (callgrind) ...", flush=True)
            insns = {
                b: instructions_round(pkg, args.steps, work, str(i))
                for i, (b, pkg) in enumerate(builds.items())
            }
            insn_floors = instructions_floors(work)
        info["load average (1, 5, 15 min) at end"] = loadavg()

    res = Table(
        [
            "build",
            "start → main (s)",
            "start → ready (s)",
            "start → first resumed step, best (s)",
            "median (s)",
            "CPU to it, best (s)",
            "median (s) ",
        ]
    )
    medians: dict[str, float] = {}
    cpu_medians: dict[str, float] = {}
    for build, rs in resumes.items():
        medians[build] = statistics.median(r.to_first_step for r in rs)
        cpus = [r.cpu_to_first_step for r in rs if r.cpu_to_first_step == r.cpu_to_first_step]
        cpu_medians[build] = statistics.median(cpus) if cpus else float("nan")
        res.add(
            build,
            fmt_num(min(r.to_main for r in rs)),
            fmt_num(min(r.to_ready for r in rs)),
            fmt_num(min(r.to_first_step for r in rs)),
            fmt_num(medians[build]),
            fmt_num(min(cpus)) if cpus else "",
            fmt_num(cpu_medians[build]) if cpus else "",
        )
    floor = floor_cpu = dep_floor = dep_floor_cpu = float("nan")
    if floors:
        floor = statistics.median(f[0] for f in floors)
        floor_cpu = statistics.median(f[1] for f in floors)
        dep_floor = statistics.median(f[0] for f in dep_floors)
        dep_floor_cpu = statistics.median(f[1] for f in dep_floors)
        for label, samples in (
            ("floor: python -c, sqlite3, one row committed", floors),
            ("the same with anyio (asyncio backend) and attrs imported, in anyio.run", dep_floors),
        ):
            res.add(
                label,
                "",
                "",
                fmt_num(min(f[0] for f in samples)),
                fmt_num(statistics.median(f[0] for f in samples)),
                fmt_num(min(f[1] for f in samples)),
                fmt_num(statistics.median(f[1] for f in samples)),
            )
    print()
    print(res.text())
    work_table = Table(
        [
            "build",
            "the dependencies imported",
            "actorlog (+ its SQLite store) imported",
            "system start → first resumed tool call",
            "total: start → first resumed tool call",
            "actorlog's own (total - dependencies)",
        ]
    )
    for build, c in calls.items():
        work_table.add(
            build,
            f"{c.deps:,}",
            f"{c.imported - c.deps:,}",
            f"{c.total - c.imported:,}",
            f"{c.total:,}",
            f"{c.total - c.deps:,}",
        )
    work_table.add(
        "the dependency floor (one row committed in anyio.run)",
        f"{floor_calls.deps:,}",
        "",
        f"{floor_calls.total - floor_calls.deps:,}",
        f"{floor_calls.total:,}",
        "",
    )
    print()
    print(work_table.text())
    insn_table = Table(
        [
            "build (millions of instructions)",
            "the dependencies imported",
            "actorlog (+ its SQLite store) imported",
            "system start → first resumed tool call",
            "total: start → first resumed tool call",
            "actorlog's own (total - dependencies)",
            "total / the floor",
        ]
    )
    floor_insn = insn_floors.get("floor: python -c, sqlite3, one row committed", 0)
    for build, c in insns.items():
        insn_table.add(
            build,
            f"{c.deps / 1e6:.1f}",
            f"{(c.imported - c.deps) / 1e6:.1f}",
            f"{(c.total - c.imported) / 1e6:.1f}",
            f"{c.total / 1e6:.1f}",
            f"{(c.total - c.deps) / 1e6:.1f}",
            f"{c.total / floor_insn:.1f}x" if floor_insn else "",
        )
    for label, n in insn_floors.items():
        ratio = f"{n / floor_insn:.1f}x" if floor_insn else ""
        insn_table.add(label, "", "", "", f"{n / 1e6:.1f}", "", ratio)
    if insns:
        print()
        print(insn_table.text())
    ratios = []
    if floors:
        ratios.append(
            f"the dependencies alone: {dep_floor / floor:.1f}x the floor "
            f"({dep_floor_cpu / floor_cpu:.1f}x in CPU time; medians)"
        )
    for build, m in medians.items():
        if floors and build != peer:
            ratios.append(
                f"{build}: first resumed step at {m / floor:.1f}x the floor "
                f"({cpu_medians[build] / floor_cpu:.1f}x in CPU time; medians; target 3x)"
            )
    if peer is not None and peer in medians:
        for build, m in medians.items():
            if build != peer:
                ratios.append(
                    f"{build}: first resumed step {medians[peer] / m:.1f}x sooner than {peer} "
                    f"(medians; target 20x)"
                )
    for line in problems + ratios:
        print(line)

    if not args.no_write:
        body = (
            f"## `import actorlog`\n\nBest of {args.rounds} fresh interpreters (the run with "
            "the smallest `-X importtime` total), with bytecode caches. Alone, `import "
            "actorlog` also pays for what it imports first that a run imports anyway (asyncio, "
            "anyio); after the dependencies (`" + DEPENDENCIES + "`), what actorlog itself "
            "adds: its modules and the few standard ones only it needs.\n\n"
            + imp.markdown()
            + "\n\nWhat actorlog adds after the dependencies, by top-level package (self times "
            "summed, the best run of each build; attrs' class building counts in the module "
            "that defines the class):\n\n"
            + pkg_table.markdown()
            + "\n\nThe modules with the largest self times (this checkout, after the "
            "dependencies):\n\n"
            + top.markdown()
            + f"\n\n## Process start to the first resumed step\n\n`benchmarks.peers`' run "
            f"of {args.steps} steps, SIGKILLed at step {int(args.steps * 0.75)} and resumed "
            f"by a fresh process; {args.resumes} rounds, interleaved. The floor: a fresh "
            "`python -c` that opens a SQLite file (WAL, `synchronous=FULL`) and commits one "
            "row, timed the same way in the same rounds; below it the same with what a run "
            "of actorlog imports whatever actorlog does (anyio with its asyncio backend, "
            "attrs), timed inside `anyio.run`. CPU: the process's CPU time (all threads) "
            "from its start to that moment, steadier than wall time on a loaded machine. "
            "What the ratio is made of: [README.md](README.md#start-up-issue-28).\n\n"
            + res.markdown()
            + (
                "\n\n" + "\n".join(f"- {x}" for x in problems + ratios)
                if problems or ratios
                else ""
            )
            + "\n\n## The work: Python function calls to the first resumed tool call\n\n"
            "The same crashed run resumed once more per build, under `cProfile` from the "
            "interpreter's first line to the first resumed tool call: a count that the "
            "machine's load does not move, by phase (the dependencies imported as the "
            "dependency floor imports them, then actorlog and its SQLite store, then the "
            "run: system start, store open, recovery's read, verify and decode of the log "
            "tail, the replay of the recorded calls).\n\n"
            + work_table.markdown()
            + (
                "\n\n## Instructions (`--callgrind`)\n\nThe same phases in instructions "
                "(`valgrind --tool=callgrind`, every thread, C included: SQLite, unmarshalling "
                "the bytecode, compiling attrs' generated methods), each in a fresh process "
                "(the dependencies' and actorlog's imports end the process where they are "
                "done), and the floors the same way: a count the load does not move.\n\n"
                + insn_table.markdown()
                if insns
                else ""
            )
        )
        out = write_report("startup", "Start-up: import and first resumed step", body, info=info)
        print(f"\nwrote {out}")


if __name__ == "__main__":
    main()
