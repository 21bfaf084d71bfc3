"""One process of the peers workload (started by ``benchmarks.peers``; not run by hand).

    python -m benchmarks._peer_worker SYSTEM PHASE --db PATH --events PATH --steps N --crash-at K
    python -m benchmarks._peer_worker SYSTEM concurrent --db PATH --events PATH --steps N --runs C

The workload, the same on every system: an "agent" run of N sequential durable steps; step i
calls a tool ``tool(i)`` that returns a small string, and folds it into a small state
(``count``, ``total``, ``last``). In phase ``run`` the tool of step K kills its own process
with SIGKILL right after its side effect (a crash in the middle of a step: its result was never
recorded). Phase ``resume`` is a fresh process on the same database that lets the system
resume the run and finish it. Phase ``concurrent`` runs C such runs at once (no crash), each
the way the system runs concurrent work: DBOS workflows started on its executor threads,
LangGraph invocations on C threads sharing one checkpointer, actorlog actors on one event loop.

The tool's side effect is one line appended to the events file (``exec <i> <t_ns>``), so the
parent counts how often each step's tool really ran. Times are ``time.monotonic_ns()``
(system-wide on Linux, so comparable across processes); at its first effect a process also
notes its CPU time so far (``cpu <process_time_ns> <t_ns>``: steadier than wall time on a
loaded machine). Only the standard library is imported
at the top: the time to import a system is part of its start-up.
"""

from __future__ import annotations

import os
import signal
import sys
import time
from typing import Any, TypedDict

_T_START = time.monotonic_ns()

__all__ = ["SYSTEMS", "main"]

_events_fd = -1


def _event(kind: str, step: int | str = "-") -> None:
    os.write(_events_fd, f"{kind} {step} {time.monotonic_ns()}\n".encode())


class State(TypedDict):
    """The agent's small state (LangGraph's graph state; DBOS keeps it in workflow locals)."""

    count: int
    total: int
    last: str


class _Workload:
    def __init__(self, steps: int, crash_at: int | None, tool_ms: float = 0.0) -> None:
        self.steps = steps
        self.crash_at = crash_at
        self.tool_s = tool_ms / 1000
        self.cpu_noted = False

    def tool(self, i: int) -> str:
        """The side-effecting tool call of step ``i``."""
        value = self.effect(i)
        if self.tool_s:
            time.sleep(self.tool_s)  # a tool that waits on I/O (an API call, a model)
        return value

    def effect(self, i: int) -> str:
        """The side effect itself (async systems do the I/O wait their own way)."""
        _event("exec", i)
        if not self.cpu_noted:  # the process's CPU time (all threads) to its first effect
            self.cpu_noted = True
            _event("cpu", time.process_time_ns())
        if self.crash_at is not None and i == self.crash_at:
            os.kill(os.getpid(), signal.SIGKILL)
        return f"value-{i:06d}"

    def expected_total(self) -> int:
        return sum(len(f"value-{i:06d}") for i in range(self.steps))


def _pragmas(execute: Any) -> None:
    """Record the journal mode and synchronous level the system's own connection uses."""
    journal = execute("PRAGMA journal_mode").fetchone()[0]
    sync = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}.get(
        int(execute("PRAGMA synchronous").fetchone()[0]), "?"
    )
    _event("pragmas", f"journal={journal},synchronous={sync}")


# -- DBOS Transact ------------------------------------------------------------------------


def _run_dbos(w: _Workload, db: str, phase: str, wal: bool, runs: int) -> int:
    if wal and phase != "resume":
        import sqlite3

        # Tuned variant: the system database in WAL mode (persistent in the file). DBOS
        # itself leaves SQLite's default rollback journal.
        with sqlite3.connect(db) as conn:
            conn.execute("PRAGMA journal_mode=WAL")
    from dbos import DBOS, DBOSConfig, SetWorkflowID

    config: DBOSConfig = {
        "name": "actorlog-bench",
        "system_database_url": f"sqlite:///{db}",
        "log_level": "WARNING",
    }
    DBOS(config=config)

    @DBOS.step()
    def tool(i: int) -> str:
        return w.tool(i)

    @DBOS.workflow()
    def agent(n: int) -> int:
        state: dict[str, Any] = {"count": 0, "total": 0, "last": ""}
        for i in range(n):
            v = tool(i)
            state["count"] += 1
            state["total"] += len(v)
            state["last"] = v
        return int(state["total"])

    DBOS.launch()  # in phase "resume", this starts recovery of the pending run
    _event("ready")
    if phase == "resume":
        try:
            from dbos._dbos import _get_dbos_instance

            sys_db = _get_dbos_instance()._sys_db
            with sys_db.engine.connect() as c:
                _pragmas(c.exec_driver_sql)
        except Exception as exc:  # internal API: only informative
            _event("pragmas", f"unknown({type(exc).__name__})")
    try:
        if phase == "concurrent":
            _event("begin")
            handles = []
            for k in range(runs):  # DBOS runs them on its executor threads
                with SetWorkflowID(f"bench-run-{k}"):
                    handles.append(DBOS.start_workflow(agent, w.steps))
            total = sum(int(h.get_result()) for h in handles)
            _event("end")
        elif phase == "run":
            with SetWorkflowID("bench-run"):
                total = agent(w.steps)
        else:
            total = int(DBOS.retrieve_workflow("bench-run").get_result())
    finally:
        DBOS.destroy()
    return total


# -- LangGraph with its SQLite checkpointer -------------------------------------------------


def _run_langgraph(w: _Workload, db: str, phase: str, durability: str | None, runs: int) -> int:
    import sqlite3

    from langgraph.checkpoint.sqlite import SqliteSaver
    from langgraph.graph import END, START, StateGraph

    def step(state: State) -> dict[str, Any]:
        v = w.tool(state["count"])
        return {"count": state["count"] + 1, "total": state["total"] + len(v), "last": v}

    def route(state: State) -> str:
        return "step" if state["count"] < w.steps else END

    graph = StateGraph(State)
    graph.add_node("step", step)
    graph.add_edge(START, "step")
    graph.add_conditional_edges("step", route)
    conn = sqlite3.connect(db, check_same_thread=False)
    app = graph.compile(checkpointer=SqliteSaver(conn))
    config: Any = {"configurable": {"thread_id": "bench-run"}, "recursion_limit": w.steps + 10}
    kwargs: dict[str, Any] = {} if durability is None else {"durability": durability}
    _event("ready")
    if phase == "resume":
        _pragmas(conn.execute)
    try:
        if phase == "concurrent":
            from concurrent.futures import ThreadPoolExecutor

            def one(c: int) -> int:
                cfg: Any = {
                    "configurable": {"thread_id": f"bench-run-{c}"},
                    "recursion_limit": w.steps + 10,
                }
                out = app.invoke({"count": 0, "total": 0, "last": ""}, cfg, **kwargs)
                return int(out["total"])

            _event("begin")
            with ThreadPoolExecutor(max_workers=runs) as pool:
                total = sum(pool.map(one, range(runs)))
            _event("end")
            return total
        start: State | None = {"count": 0, "total": 0, "last": ""} if phase == "run" else None
        out = app.invoke(start, config, **kwargs)
    finally:
        conn.close()
    return int(out["total"])


# -- actorlog -------------------------------------------------------------------------------


def _run_actorlog(w: _Workload, db: str, phase: str, per_message: bool, runs: int) -> int:
    """``per_message=False``: one ``Run(N)`` message whose handler makes N ``ctx.call``s.
    ``True``: N ``Step(i)`` messages asked one after another (snapshots every 100 steps, the
    class default); after the restart the driver asks ``Status()`` where to continue."""
    import anyio
    from actorlog import ActorSystem
    from actorlog.stores import SqliteStore

    from . import _agent

    _agent.configure(w.effect, w.tool_s)

    async def main() -> int:
        store = SqliteStore(db)
        async with ActorSystem(store, actors=[_agent.Agent]) as system:
            _event("ready")  # store open, actors with unfinished work recovering
            if phase == "resume":
                try:
                    conn: Any = store._w  # our own store's writer connection, to report it
                    rows = list(await conn.execute_fetchall("PRAGMA journal_mode"))
                    sync = list(await conn.execute_fetchall("PRAGMA synchronous"))
                    names = {0: "OFF", 1: "NORMAL", 2: "FULL", 3: "EXTRA"}
                    _event("pragmas", f"journal={rows[0][0]},synchronous={names[sync[0][0]]}")
                except Exception as exc:
                    _event("pragmas", f"unknown({type(exc).__name__})")
            if phase == "concurrent":
                refs = [await system.spawn(_agent.Agent, f"bench-run-{c}") for c in range(runs)]
                totals: list[int] = []

                async def one(ref: Any) -> None:
                    if not per_message:
                        totals.append(int(await ref.ask(_agent.Run(w.steps), message_id="run")))
                        return
                    t = 0
                    for i in range(w.steps):
                        t = int(await ref.ask(_agent.Step(i), message_id=f"step-{i}"))
                    totals.append(t)

                _event("begin")
                async with anyio.create_task_group() as tg:
                    for ref in refs:
                        tg.start_soon(one, ref)
                _event("end")
                return sum(totals)
            ref = await system.spawn(_agent.Agent, "bench-run")
            if not per_message:
                return int(await ref.ask(_agent.Run(w.steps), message_id="run"))
            start = 0 if phase == "run" else int(await ref.ask(_agent.Status()))
            total = 0
            for i in range(start, w.steps):
                total = int(await ref.ask(_agent.Step(i), message_id=f"step-{i}"))
            return total

    return anyio.run(main)


SYSTEMS = ("dbos", "dbos-wal", "langgraph-sync", "langgraph-default", "actorlog", "actorlog-msgs")


class _Args:
    """The command line, parsed by hand: argparse (and the ``re`` patterns it compiles) would
    be the harness's cost in every system's start-up."""

    def __init__(self, argv: list[str]) -> None:
        usage = "usage: _peer_worker SYSTEM PHASE --db P --events P --steps N [options]"
        opts: dict[str, str] = {}
        pos: list[str] = []
        it = iter(argv)
        for a in it:
            if a.startswith("--"):
                opts[a[2:].replace("-", "_")] = next(it, "")
            else:
                pos.append(a)
        if len(pos) != 2 or pos[0] not in SYSTEMS or pos[1] not in ("run", "resume", "concurrent"):
            raise SystemExit(usage)
        unknown = set(opts) - {"db", "events", "steps", "crash_at", "tool_ms", "runs"}
        if unknown or not {"db", "events", "steps"} <= set(opts):
            raise SystemExit(usage)
        self.system, self.phase = pos
        self.db, self.events, self.steps = opts["db"], opts["events"], int(opts["steps"])
        self.crash_at = int(opts["crash_at"]) if "crash_at" in opts else None
        self.tool_ms = float(opts.get("tool_ms", 0.0))
        self.runs = int(opts.get("runs", 1))  # concurrent runs (phase concurrent)


def main(argv: list[str] | None = None) -> int:
    global _events_fd
    args = _Args(sys.argv[1:] if argv is None else argv)
    _events_fd = os.open(args.events, os.O_WRONLY | os.O_APPEND | os.O_CREAT, 0o644)
    os.write(_events_fd, f"start {args.phase} {_T_START}\n".encode())
    w = _Workload(args.steps, args.crash_at if args.phase == "run" else None, args.tool_ms)
    runs = args.runs
    if args.system in ("dbos", "dbos-wal"):
        total = _run_dbos(w, args.db, args.phase, args.system == "dbos-wal", runs)
    elif args.system == "langgraph-sync":
        total = _run_langgraph(w, args.db, args.phase, "sync", runs)
    elif args.system == "langgraph-default":
        total = _run_langgraph(w, args.db, args.phase, None, runs)
    else:
        total = _run_actorlog(w, args.db, args.phase, args.system == "actorlog-msgs", runs)
    _event("done", total)
    expected = w.expected_total() * (runs if args.phase == "concurrent" else 1)
    ok = total == expected
    _event("correct" if ok else "wrong", total)
    os.close(_events_fd)
    return 0


if __name__ == "__main__":
    sys.exit(main())
