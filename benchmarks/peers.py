"""The same agent workload on actorlog and its peers, with a crash at 75% and a restart.

    python -m benchmarks.peers [--steps 1000] [--crash-at 0.75] [--systems dbos,...]

Workload (``benchmarks/_peer_worker.py``): N sequential durable steps; step i calls a tool
that returns a small string and folds it into a small state. Each system runs in its own
subprocess: process 1 runs until the tool of step 0.75 N kills it with SIGKILL (after the tool's
side effect, before its result is recorded); process 2 is started on the same database and
resumes the run to the end. Systems:

* ``dbos``: DBOS Transact, a ``@DBOS.workflow`` calling a ``@DBOS.step`` per step, SQLite
  system database as DBOS configures it (rollback journal); ``dbos-wal``: the same file
  switched to WAL first (a tuning DBOS does not do itself).
* ``langgraph-sync`` / ``langgraph-default``: a ``StateGraph`` whose one node loops N times,
  ``SqliteSaver`` checkpointer, ``durability="sync"`` / LangGraph's default (``"async"``).
* ``actorlog``: one actor, one ``Run(N)`` message whose handler makes N ``ctx.call``s;
  ``actorlog-msgs``: N ``Step(i)`` messages with one ``ctx.call`` each (snapshot every 100
  steps). ``SqliteStore`` with its default durability (WAL, fsync on every commit).

A ``@MS`` suffix (``langgraph-default@1``) makes the tool wait MS milliseconds (time.sleep),
like a tool waiting on I/O.

Figures: steps/s before the crash and after the resume; bytes per step (growth of the used
database pages over the resumed part, per tool execution); process start to first resumed
step; tool executions beyond one per step (re-executed steps). Peers that are not installed
are reported and skipped.
"""

from __future__ import annotations

import importlib.util
import math
import os
import shutil
import signal
import sqlite3
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING

import attrs

from ._common import (
    REPO_ROOT,
    Table,
    bench_parser,
    configure_output,
    fmt_bytes,
    fmt_num,
    loadavg,
    machine_info,
    quick,
    scratch_dir,
    write_report,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["PeerResult", "available", "main", "run_system"]

DEFAULT_SYSTEMS = (
    "actorlog",
    "actorlog-msgs",
    "dbos",
    "dbos-wal",
    "langgraph-sync",
    "langgraph-default",
    "actorlog@1",
    "langgraph-default@1",
)


def available(system: str) -> str | None:
    """None if ``system`` can run here, else the reason it cannot."""
    base = system.split("@", 1)[0]
    if base.startswith("dbos"):
        if importlib.util.find_spec("dbos") is None:
            return "not installed (pip install 'actorlog[peers]', or dbos)"
    elif base.startswith("langgraph"):
        if (
            importlib.util.find_spec("langgraph") is None
            or importlib.util.find_spec("langgraph.checkpoint.sqlite") is None
        ):
            return "not installed (pip install 'actorlog[peers]')"
    elif base.startswith("actorlog"):
        try:
            import actorlog
        except ImportError:
            return "actorlog is not importable"
        missing = [n for n in ("ActorSystem", "Actor", "tool") if not hasattr(actorlog, n)]
        if missing:
            return f"actorlog runtime not available yet (missing {', '.join(missing)})"
    else:
        return f"unknown system {base!r}"
    return None


@attrs.define
class PeerResult:
    system: str
    steps: int
    crash_at: int
    status: str = "ok"
    run_steps_per_s: float = float("nan")
    resume_steps_per_s: float = float("nan")
    bytes_per_step: float = float("nan")
    db_bytes: int = 0
    start_to_main_s: float = float("nan")
    start_to_ready_s: float = float("nan")
    start_to_resume_s: float = float("nan")
    #: the resume process's CPU time (all its threads) from its start to its first effect
    resume_cpu_s: float = float("nan")
    first_resumed_step: int = -1
    reexecuted: int = -1
    missing_steps: int = 0
    correct: bool = False
    pragmas: str = "?"
    run_wall_s: float = float("nan")
    resume_wall_s: float = float("nan")
    notes: list[str] = attrs.Factory(list)


def _used_bytes(db: Path) -> int:
    """Bytes in use by the database (pages minus free pages), after folding in WAL/journal."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("SELECT count(*) FROM sqlite_master").fetchone()  # hot journal / WAL
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)").fetchone()
        page_size = int(conn.execute("PRAGMA page_size").fetchone()[0])
        pages = int(conn.execute("PRAGMA page_count").fetchone()[0])
        free = int(conn.execute("PRAGMA freelist_count").fetchone()[0])
    finally:
        conn.close()
    return (pages - free) * page_size


def _copy_db(db: Path, dest_dir: Path) -> Path:
    """Copy a database with its -wal/-journal files as a crash left them."""
    dest_dir.mkdir(parents=True, exist_ok=True)
    for suffix in ("", "-wal", "-journal", "-shm"):
        src = Path(str(db) + suffix)
        if src.exists():
            shutil.copyfile(src, dest_dir / (db.name + suffix))
    return dest_dir / db.name


def _read_events(path: Path) -> list[tuple[str, str, int]]:
    events: list[tuple[str, str, int]] = []
    with open(path, encoding="utf-8") as f:
        for line in f:
            parts = line.split()
            if len(parts) == 3 and parts[2].isdigit():
                events.append((parts[0], parts[1], int(parts[2])))
    return events


def _phases(
    events: Sequence[tuple[str, str, int]],
) -> dict[str, list[tuple[str, str, int]]]:
    out: dict[str, list[tuple[str, str, int]]] = {}
    current: list[tuple[str, str, int]] | None = None
    for ev in events:
        if ev[0] == "start":
            current = out.setdefault(ev[1], [])
        if current is not None:
            current.append(ev)
    return out


def _spawn(
    system: str,
    phase: str,
    db: Path,
    events: Path,
    steps: int,
    crash_at: int,
    tool_ms: float,
    log: Path,
    timeout: float,
    runs: int = 1,
) -> tuple[int | None, int, float]:
    """Start one worker process; returns (returncode or None on timeout, t0_ns, wall s)."""
    cmd = [
        sys.executable,
        "-m",
        f"{__package__}._peer_worker",
        system,
        phase,
        "--db",
        str(db),
        "--events",
        str(events),
        "--steps",
        str(steps),
        "--tool-ms",
        str(tool_ms),
    ]
    if phase == "run":
        cmd += ["--crash-at", str(crash_at)]
    if phase == "concurrent":
        cmd += ["--runs", str(runs)]
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    with open(log, "ab") as out:
        t0 = time.monotonic_ns()
        proc = subprocess.Popen(cmd, cwd=REPO_ROOT, stdout=out, stderr=subprocess.STDOUT, env=env)
        try:
            rc: int | None = proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
            rc = None
    return rc, t0, (time.monotonic_ns() - t0) / 1e9


def _log_tail(log: Path, limit: int = 200) -> str:
    """The last line of the worker's output (the exception, usually), shortened."""
    try:
        text = log.read_text(encoding="utf-8", errors="replace").strip().splitlines()
    except OSError:
        return ""
    last = text[-1].strip() if text else ""
    return last if len(last) <= limit else last[: limit - 1] + "…"


def run_system(
    spec: str, steps: int, crash_frac: float, workdir: Path, timeout: float = 300.0, rep: int = 0
) -> PeerResult:
    system, _, ms = spec.partition("@")
    tool_ms = float(ms) if ms else 0.0
    crash_at = min(steps - 1, max(1, int(steps * crash_frac)))
    res = PeerResult(spec, steps, crash_at)
    reason = available(system)
    if reason is not None:
        res.status = reason
        return res
    d = workdir / f"{spec.replace('@', '_at_')}-{rep}"
    d.mkdir(parents=True)
    db, events, log = d / "bench.db", d / "events.txt", d / "worker.log"

    rc, _t0_run, res.run_wall_s = _spawn(
        system, "run", db, events, steps, crash_at, tool_ms, log, timeout
    )
    if rc != -signal.SIGKILL:
        res.status = (
            "timed out in run phase"
            if rc is None
            else f"run phase exited {rc} instead of being killed: {_log_tail(log)}"
        )
        return res
    used_at_crash = _used_bytes(_copy_db(db, d / "at-crash")) if db.exists() else 0

    rc, t0_resume, res.resume_wall_s = _spawn(
        system, "resume", db, events, steps, crash_at, tool_ms, log, timeout
    )
    if rc != 0:
        res.status = (
            "timed out in resume phase"
            if rc is None
            else f"resume phase exited {rc}: {_log_tail(log)}"
        )
        return res

    phases = _phases(_read_events(events))
    run_ev, resume_ev = phases.get("run", []), phases.get("resume", [])
    run_exec = [(int(s), t) for k, s, t in run_ev if k == "exec"]
    res_exec = [(int(s), t) for k, s, t in resume_ev if k == "exec"]
    if len(run_exec) > 1:
        (_, t_first), (_, t_last) = run_exec[0], run_exec[-1]
        res.run_steps_per_s = (len(run_exec) - 1) / ((t_last - t_first) / 1e9)
    if res_exec:
        res.first_resumed_step = res_exec[0][0]
        res.start_to_resume_s = (res_exec[0][1] - t0_resume) / 1e9
        # live rate: the steps after the first resumed one
        if len(res_exec) > 2:
            res.resume_steps_per_s = (len(res_exec) - 2) / (
                (res_exec[-1][1] - res_exec[1][1]) / 1e9
            )
    for kind, value, t in resume_ev:
        if kind == "start":
            res.start_to_main_s = (t - t0_resume) / 1e9
        elif kind == "ready":
            res.start_to_ready_s = (t - t0_resume) / 1e9
        elif kind == "pragmas":
            res.pragmas = value
        elif kind == "cpu" and value.isdigit() and res.resume_cpu_s != res.resume_cpu_s:
            res.resume_cpu_s = int(value) / 1e9
        elif kind == "correct":
            res.correct = True
    executed = [s for s, _ in run_exec + res_exec]
    res.missing_steps = steps - len(set(executed))
    res.reexecuted = len(executed) - len(set(executed))
    res.db_bytes = _used_bytes(db)
    if res_exec:
        res.bytes_per_step = (res.db_bytes - used_at_crash) / len(res_exec)
    if not res.correct:
        res.status = "finished with a wrong result"
    if res.missing_steps:
        res.status = f"{res.missing_steps} steps never executed"
    if res.reexecuted > 1:
        res.notes.append(
            f"{spec} (run {rep + 1}): {res.reexecuted} steps re-executed: at the kill, the "
            f"last durable step was {res.first_resumed_step - 1} of {crash_at} executed."
        )
    return res


@attrs.define
class ConcurrentResult:
    system: str
    runs: int
    steps_each: int
    status: str = "ok"
    steps_per_s: float = float("nan")


def run_concurrent(
    spec: str, runs: int, steps_each: int, workdir: Path, timeout: float = 300.0, rep: int = 0
) -> ConcurrentResult:
    """C runs of ``steps_each`` steps at once in one process (no crash): total steps/s."""
    system, _, ms = spec.partition("@")
    res = ConcurrentResult(spec, runs, steps_each)
    reason = available(system)
    if reason is not None:
        res.status = reason
        return res
    d = workdir / f"conc-{spec.replace('@', '_at_')}-{rep}"
    d.mkdir(parents=True)
    db, events, log = d / "bench.db", d / "events.txt", d / "worker.log"
    rc, _, _ = _spawn(
        system, "concurrent", db, events, steps_each, 0, float(ms or 0), log, timeout, runs
    )
    if rc != 0:
        res.status = "timed out" if rc is None else f"exited {rc}: {_log_tail(log)}"
        return res
    ev = _read_events(events)
    times = {k: t for k, _, t in ev if k in ("begin", "end")}
    if not any(k == "correct" for k, _, _ in ev):
        res.status = "finished with a wrong result"
    elif "begin" in times and "end" in times:
        res.steps_per_s = runs * steps_each / ((times["end"] - times["begin"]) / 1e9)
    return res


def _median(values: Sequence[float]) -> float:
    vals = sorted(v for v in values if not math.isnan(v))
    if not vals:
        return float("nan")
    mid = len(vals) // 2
    return vals[mid] if len(vals) % 2 else (vals[mid - 1] + vals[mid]) / 2


def _same_or_all(values: Sequence[int]) -> str:
    return fmt_num(values[0]) if len(set(values)) == 1 else " / ".join(fmt_num(v) for v in values)


@attrs.define
class Summary:
    """The median over repeated runs of one system (failed runs are reported, not averaged)."""

    system: str
    runs: list[PeerResult]

    @property
    def ok(self) -> list[PeerResult]:
        return [r for r in self.runs if r.status == "ok"]

    def median(self, field: str) -> float:
        return _median([float(getattr(r, field)) for r in self.ok])


def summarize(results: Sequence[PeerResult]) -> list[Summary]:
    groups: dict[str, list[PeerResult]] = {}
    for r in results:
        groups.setdefault(r.system, []).append(r)
    return [Summary(k, v) for k, v in groups.items()]


def results_table(summaries: Sequence[Summary]) -> Table:
    table = Table(
        [
            "system",
            "steps/s (before crash)",
            "steps/s (after resume)",
            "bytes/step",
            "db size",
            "start → main (s)",
            "start → ready (s)",
            "start → first resumed step (s)",
            "resumed at step",
            "steps re-executed",
            "SQLite journal, sync",
        ]
    )
    for sm in summaries:
        ok = sm.ok
        if not ok:
            table.add(sm.system, sm.runs[0].status, *(["-"] * 9))
            continue
        table.add(
            sm.system,
            sm.median("run_steps_per_s"),
            sm.median("resume_steps_per_s"),
            round(sm.median("bytes_per_step")),
            fmt_bytes(sm.median("db_bytes")),
            sm.median("start_to_main_s"),
            sm.median("start_to_ready_s"),
            sm.median("start_to_resume_s"),
            _same_or_all([r.first_resumed_step for r in ok]),
            _same_or_all([r.reexecuted for r in ok]),
            ok[0].pragmas.replace("journal=", "").replace(",synchronous=", ", "),
        )
    return table


def ratios(summaries: Sequence[Summary]) -> list[str]:
    """actorlog against each peer with the same tool delay, from this run's medians."""
    by = {sm.system: sm for sm in summaries if sm.ok}
    lines = []
    for name, me in by.items():
        if not name.startswith("actorlog"):
            continue
        delay = name.partition("@")[2]
        for peer, other in by.items():
            if peer.startswith("actorlog") or peer.partition("@")[2] != delay:
                continue
            speed = me.median("run_steps_per_s") / other.median("run_steps_per_s")
            size = me.median("bytes_per_step") / other.median("bytes_per_step")
            resume = other.median("start_to_resume_s") / me.median("start_to_resume_s")
            lines.append(
                f"{name} vs {peer}: {speed:.2f}x the steps/s, {size:.2f}x the bytes/step, "
                f"first resumed step {resume:.1f}x sooner"
            )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--steps 100 --concurrent 10", writes=True)
    parser.add_argument("--steps", type=int, default=1000, help="steps per run (default 1000)")
    parser.add_argument(
        "--crash-at", type=float, default=0.75, help="fraction of the run at which to kill"
    )
    parser.add_argument(
        "--systems",
        default=",".join(DEFAULT_SYSTEMS),
        help="comma-separated; a @MS suffix gives the tool MS ms of I/O wait",
    )
    parser.add_argument("--repeat", type=int, default=1, help="runs per system; medians shown")
    parser.add_argument("--timeout", type=float, default=300.0, help="per process, seconds")
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    parser.add_argument(
        "--concurrent", type=int, default=100, help="concurrent runs in part 2 (0: skip)"
    )
    parser.add_argument(
        "--concurrent-steps", type=int, default=20, help="steps of each concurrent run"
    )
    parser.add_argument("--name", default="peers", help="report name: docs/benchmarks/NAME.md")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    args = parser.parse_args(argv)
    quick(args, parser, steps=100, concurrent=10)
    configure_output(args)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]

    results: list[PeerResult] = []
    with scratch_dir(args.dir, keep=args.keep) as work:
        info = machine_info(work)
        for rep in range(args.repeat):  # interleaved, so load changes hit every system alike
            for spec in systems:
                if rep and available(spec.split("@")[0]) is not None:
                    continue  # reported once
                print(f"{spec} (run {rep + 1}/{args.repeat}): ", end="", flush=True)
                t = time.perf_counter()
                r = run_system(spec, args.steps, args.crash_at, work, args.timeout, rep)
                results.append(r)
                if r.status == "ok":
                    print(
                        f"{fmt_num(r.run_steps_per_s)} steps/s, resumed in "
                        f"{fmt_num(r.start_to_resume_s)} s, {r.reexecuted} re-executed "
                        f"({time.perf_counter() - t:.1f} s)"
                    )
                else:
                    print(f"skipped: {r.status}")
        conc: dict[str, list[ConcurrentResult]] = {}
        if args.concurrent > 0:
            conc_systems = [s for s in systems if "@" not in s]
            for rep in range(args.repeat):
                for spec in conc_systems:
                    if rep and available(spec) is not None:
                        continue
                    print(
                        f"{spec}: {args.concurrent} concurrent runs of {args.concurrent_steps} "
                        f"steps (run {rep + 1}/{args.repeat}): ",
                        end="",
                        flush=True,
                    )
                    cr = run_concurrent(
                        spec, args.concurrent, args.concurrent_steps, work, args.timeout, rep
                    )
                    conc.setdefault(spec, []).append(cr)
                    print(f"{fmt_num(cr.steps_per_s)} steps/s" if cr.status == "ok" else cr.status)
        info["load average (1, 5, 15 min) at end"] = loadavg()
    summaries = summarize(results)
    table = results_table(summaries)
    print()
    print(table.text())
    notes = [n for r in results for n in r.notes]
    ratio_lines = ratios(summaries)
    conc_table = _concurrent_table(conc)
    conc_ratios = _concurrent_ratios(conc)
    if conc:
        print()
        print(conc_table.text())
    for line in notes + ratio_lines + conc_ratios:
        print(line)
    if not args.no_write:
        crash_at = min(args.steps - 1, max(1, int(args.steps * args.crash_at)))
        body = _report_body(args.steps, crash_at, args.repeat, table, notes, ratio_lines)
        if conc:
            body += (
                f"\n\n## {args.concurrent} concurrent runs\n\n"
                f"{args.concurrent} runs of {args.concurrent_steps} steps each at once in one "
                "process (no crash), each system the way it runs concurrent work: DBOS "
                "workflows started with `DBOS.start_workflow` on its executor threads (its "
                "default pool), LangGraph invocations on one thread each sharing one "
                "`SqliteSaver`, actorlog actors on one event loop (one actor per run). "
                "Steps/s over all runs, from the first start to the last finish"
                + (" (median of the repeats)" if args.repeat > 1 else "")
                + ".\n\n"
                + conc_table.markdown()
                + ("\n\n" + "\n".join(f"- {x}" for x in conc_ratios) if conc_ratios else "")
            )
        title = "actorlog and its peers: the same agent run"
        out = write_report(args.name, title, body, info=info)
        print(f"\nwrote {out}")


def _concurrent_table(conc: dict[str, list[ConcurrentResult]]) -> Table:
    table = Table(["system", "concurrent runs", "steps each", "steps/s (all runs)"])
    for spec, rs in conc.items():
        ok = [r.steps_per_s for r in rs if r.status == "ok"]
        table.add(spec, rs[0].runs, rs[0].steps_each, _median(ok) if ok else rs[0].status)
    return table


def _concurrent_ratios(conc: dict[str, list[ConcurrentResult]]) -> list[str]:
    med = {
        spec: _median([r.steps_per_s for r in rs if r.status == "ok"])
        for spec, rs in conc.items()
        if any(r.status == "ok" for r in rs)
    }
    lines = []
    for me, mine in med.items():
        if not me.startswith("actorlog"):
            continue
        for peer, theirs in med.items():
            if not peer.startswith("actorlog"):
                lines.append(f"concurrent: {me} {mine / theirs:.2f}x the steps/s of {peer}")
    return lines


def _report_body(
    steps: int,
    crash_at: int,
    repeat: int,
    table: Table,
    notes: Sequence[str],
    ratio_lines: Sequence[str],
) -> str:
    parts = [
        f"One agent run of {steps:,} sequential durable steps. Each step calls a tool that "
        "returns a short string and folds it into a small state (count, total, last value). "
        f"Process 1 is killed with SIGKILL inside the tool of step {crash_at:,} (after the "
        "tool's side effect, before its result is recorded: a crash mid-step), process 2 is "
        "started on the same SQLite file and resumes the run to the end. Every system runs "
        "in its own processes on the same machine, one after another"
        + (
            f"; each system ran {repeat} times (interleaved) and the table shows medians."
            if repeat > 1
            else "."
        ),
        table.markdown(),
        "Columns:\n\n"
        "- *steps/s (before crash)*: steps completed per second in process 1 (tool "
        "executions over the time between the first and the last one).\n"
        "- *steps/s (after resume)*: the same for the live steps of process 2.\n"
        "- *bytes/step*: growth of the database's used pages (WAL folded in, free pages "
        "excluded) over process 2, per tool execution in process 2.\n"
        "- *db size*: used bytes at the end.\n"
        "- *start → main*: from `Popen` of process 2 to its first line of Python (interpreter "
        "start, the same for all).\n"
        "- *start → ready*: from `Popen` of process 2 to the system being initialised "
        "(interpreter start, imports, opening the database, launching).\n"
        "- *start → first resumed step*: from `Popen` of process 2 to the tool of the "
        "first step that runs again (recovery included).\n"
        "- *steps re-executed*: tool executions beyond one per step. 1 is the minimum for a "
        "crash in the middle of a step: that step's result was never recorded, so its tool "
        "runs again (at-least-once for a tool without an idempotency protocol).\n"
        "- *SQLite journal, sync*: the journal mode and `synchronous` level of the system's "
        "own connection, read in process 2.",
    ]
    if notes:
        parts.append("Notes:\n\n" + "\n".join(f"- {n}" for n in notes))
    if ratio_lines:
        parts.append("Ratios from this run:\n\n" + "\n".join(f"- {x}" for x in ratio_lines))
    return "\n\n".join(parts)


if __name__ == "__main__":
    main()
