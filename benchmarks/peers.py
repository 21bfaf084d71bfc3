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
* ``actorlog``: one actor (see the worker), ``SqliteStore`` with its default durability.

A ``@MS`` suffix (``langgraph-default@1``) makes the tool wait MS milliseconds (time.sleep),
like a tool waiting on I/O.

Figures: steps/s before the crash and after the resume; bytes per step (growth of the used
database pages over the resumed part, per tool execution); process start to first resumed
step; tool executions beyond one per step (re-executed steps). Peers that are not installed
are reported and skipped.
"""

from __future__ import annotations

import argparse
import importlib.util
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
    fmt_bytes,
    fmt_num,
    machine_info,
    scratch_dir,
    write_report,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

__all__ = ["PeerResult", "available", "main", "run_system"]

DEFAULT_SYSTEMS = (
    "actorlog",
    "dbos",
    "dbos-wal",
    "langgraph-sync",
    "langgraph-default",
    "langgraph-default@1",
)


def available(system: str) -> str | None:
    """None if ``system`` can run here, else the reason it cannot."""
    base = system.split("@", 1)[0]
    if base.startswith("dbos"):
        if importlib.util.find_spec("dbos") is None:
            return "not installed (pip install dbos)"
    elif base.startswith("langgraph"):
        if (
            importlib.util.find_spec("langgraph") is None
            or importlib.util.find_spec("langgraph.checkpoint.sqlite") is None
        ):
            return "not installed (pip install langgraph langgraph-checkpoint-sqlite)"
    elif base == "actorlog":
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
    start_to_ready_s: float = float("nan")
    start_to_resume_s: float = float("nan")
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
) -> tuple[int | None, int, float]:
    """Start one worker process; returns (returncode or None on timeout, t0_ns, wall s)."""
    cmd = [
        sys.executable,
        "-m",
        "benchmarks._peer_worker",
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
    spec: str, steps: int, crash_frac: float, workdir: Path, timeout: float = 300.0
) -> PeerResult:
    system, _, ms = spec.partition("@")
    tool_ms = float(ms) if ms else 0.0
    crash_at = min(steps - 1, max(1, int(steps * crash_frac)))
    res = PeerResult(spec, steps, crash_at)
    reason = available(system)
    if reason is not None:
        res.status = reason
        return res
    d = workdir / spec.replace("@", "_at_")
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
        if kind == "ready":
            res.start_to_ready_s = (t - t0_resume) / 1e9
        elif kind == "pragmas":
            res.pragmas = value
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
            f"{spec}: {res.reexecuted} steps re-executed: at the kill, the last durable step "
            f"was {res.first_resumed_step - 1} of {crash_at} executed."
        )
    return res


def results_table(results: Sequence[PeerResult]) -> Table:
    table = Table(
        [
            "system",
            "steps/s (before crash)",
            "steps/s (after resume)",
            "bytes/step",
            "db size",
            "start → ready (s)",
            "start → first resumed step (s)",
            "resumed at step",
            "steps re-executed",
            "SQLite journal, sync",
        ]
    )
    for r in results:
        if r.status != "ok":
            table.add(r.system, r.status, *(["-"] * 8))
            continue
        table.add(
            r.system,
            r.run_steps_per_s,
            r.resume_steps_per_s,
            round(r.bytes_per_step),
            fmt_bytes(r.db_bytes),
            r.start_to_ready_s,
            r.start_to_resume_s,
            r.first_resumed_step,
            r.reexecuted,
            r.pragmas.replace("journal=", "").replace(",synchronous=", ", "),
        )
    return table


def ratios(results: Sequence[PeerResult], ours: str = "actorlog") -> list[str]:
    """One line per peer: actorlog's figures as multiples of the peer's, from this run."""
    by = {r.system: r for r in results if r.status == "ok"}
    me = by.get(ours)
    if me is None:
        return []
    lines = []
    for name, r in by.items():
        if name == ours:
            continue
        lines.append(
            f"{ours} vs {name}: steps/s x{me.run_steps_per_s / r.run_steps_per_s:.2f}, "
            f"bytes/step x{me.bytes_per_step / r.bytes_per_step:.2f}, "
            f"start → resumed x{me.start_to_resume_s / r.start_to_resume_s:.2f} "
            "(x < 1: actorlog smaller/faster for bytes and resume time; x > 1: more steps/s)"
        )
    return lines


def main(argv: Sequence[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=(__doc__ or "").split("\n\n")[0])
    parser.add_argument("--steps", type=int, default=1000, help="steps per run (default 1000)")
    parser.add_argument(
        "--crash-at", type=float, default=0.75, help="fraction of the run at which to kill"
    )
    parser.add_argument(
        "--systems",
        default=",".join(DEFAULT_SYSTEMS),
        help="comma-separated; a @MS suffix gives the tool MS ms of I/O wait",
    )
    parser.add_argument("--timeout", type=float, default=300.0, help="per process, seconds")
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--keep", action="store_true", help="keep the scratch databases")
    parser.add_argument("--no-write", action="store_true", help="print only; no docs/ file")
    args = parser.parse_args(argv)
    systems = [s.strip() for s in args.systems.split(",") if s.strip()]

    results: list[PeerResult] = []
    with scratch_dir(args.dir, keep=args.keep) as work:
        info = machine_info(work)
        for spec in systems:
            print(f"{spec}: ", end="", flush=True)
            t = time.perf_counter()
            r = run_system(spec, args.steps, args.crash_at, work, args.timeout)
            results.append(r)
            if r.status == "ok":
                print(
                    f"{fmt_num(r.run_steps_per_s)} steps/s, resumed in "
                    f"{fmt_num(r.start_to_resume_s)} s, {r.reexecuted} re-executed "
                    f"({time.perf_counter() - t:.1f} s)"
                )
            else:
                print(f"skipped: {r.status}")
    table = results_table(results)
    print()
    print(table.text())
    notes = [n for r in results for n in r.notes]
    ratio_lines = ratios(results)
    for line in notes + ratio_lines:
        print(line)
    if not args.no_write:
        crash_at = min(args.steps - 1, max(1, int(args.steps * args.crash_at)))
        body = _report_body(args.steps, crash_at, table, notes, ratio_lines)
        out = write_report("peers", "actorlog and its peers: the same agent run", body, info=info)
        print(f"\nwrote {out}")


def _report_body(
    steps: int, crash_at: int, table: Table, notes: Sequence[str], ratio_lines: Sequence[str]
) -> str:
    parts = [
        f"One agent run of {steps:,} sequential durable steps. Each step calls a tool that "
        "returns a short string and folds it into a small state (count, total, last value). "
        f"Process 1 is killed with SIGKILL inside the tool of step {crash_at:,} (after the "
        "tool's side effect, before its result is recorded: a crash mid-step), process 2 is "
        "started on the same SQLite file and resumes the run to the end. Every system runs "
        "in its own processes on the same machine, one after another.",
        table.markdown(),
        "Columns:\n\n"
        "- *steps/s (before crash)*: steps completed per second in process 1 (tool "
        "executions over the time between the first and the last one).\n"
        "- *steps/s (after resume)*: the same for the live steps of process 2.\n"
        "- *bytes/step*: growth of the database's used pages (WAL folded in, free pages "
        "excluded) over process 2, per tool execution in process 2.\n"
        "- *db size*: used bytes at the end.\n"
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
