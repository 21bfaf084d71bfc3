"""Parallel tool calls in one durable step: sequential vs parallel, live and after a crash,
and a pydantic-ai agent with the integration vs without it.

    python -m benchmarks.parallel [--calls 5] [--delay 0.1] [--rounds 5] [--quick]

Part 1, actorlog alone (``SqliteStore``, its default durability: fsync before a tool runs).
One message whose handler makes ``--calls`` calls of a tool that waits ``--delay`` seconds
(an idempotent write, like ``benchmarks._agent``'s): one after another (``for``), or all at
once from the tasks of an ``anyio`` task group. Shown, median of ``--rounds`` interleaved
rounds:

* *live*: ``ask`` to reply, a fresh actor each time;
* *restart → reply*: the process running the step is killed with SIGKILL when the tool call
  number ``--kill-at`` starts (sequential: the calls before it are done and logged; parallel:
  every call has started), a fresh process (``Popen``) opens the store, recovery resumes the
  step (the completed calls come from the log, the calls in doubt run again with their keys)
  and the caller's ``ask`` with the same message id gets the reply. Measured from ``Popen``
  (interpreter start and imports included) and from the end of the imports (opening the
  store, recovery, the rest of the step).

Part 2, pydantic-ai (needs ``actorlog[pydantic-ai]``; skipped without it): an agent on a
scripted ``FunctionModel`` whose first response carries ``--calls`` tool calls (the tool
waits ``--delay``), whose second one answers. Run by pydantic-ai alone (its default
parallel mode, and its ``sequential`` mode for reference), and as a ``DurableAgent`` on
``SqliteStore`` (a fresh conversation each run). The same with tools that do not wait
measures what the log costs (its commits and the runtime): the durable run should take no
longer than pydantic-ai alone plus that cost.
"""

from __future__ import annotations

import time

_T_MAIN = time.monotonic_ns()  # first line of Python in a worker process

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import signal  # noqa: E402
import statistics  # noqa: E402
import subprocess  # noqa: E402
import sys  # noqa: E402
from pathlib import Path  # noqa: E402
from typing import TYPE_CHECKING, Any  # noqa: E402

import anyio  # noqa: E402
import attrs  # noqa: E402
from actorlog import Actor, ActorSystem, Context, message, ops, tool  # noqa: E402
from actorlog.stores import SqliteStore  # noqa: E402

from ._common import (  # noqa: E402
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
from ._parallel_agent import (  # noqa: E402
    BYTES,
    COMMIT_TIME,
    COMMITS,
    CPU,
    LONG,
    LONG_ALONE,
    LONG_DURABLE,
    PHASE_CPU,
    PHASES,
    SHAPED,
    SHAPED_NONE,
    SPLIT,
    WALL,
    agent_rounds,
)

if TYPE_CHECKING:
    from collections.abc import Sequence

_T_IMPORTED = time.monotonic_ns()  # the imports done

__all__ = ["Fan", "FanOut", "main"]

MESSAGE_ID = "fan-1"
ACTOR = "fan"

# -- the actor ------------------------------------------------------------------------------


@message(name="bench.fan")
@attrs.define
class Fan:
    calls: int
    parallel: bool


_delay_s = 0.1
_kill_at = 0  # in a crash worker: SIGKILL itself when this tool call starts (1-based)
_started = 0


@tool(effect="write", idempotent=True, name="bench.slow")
async def slow(i: int, *, idempotency_key: str) -> str:
    global _started
    _started += 1
    if _started == _kill_at:
        os.kill(os.getpid(), signal.SIGKILL)
    await anyio.sleep(_delay_s)  # a tool waiting on I/O
    return f"value-{i}"


@message(name="bench.fan_state")
@attrs.define
class FanState:
    steps: int = 0


class FanOut(Actor[FanState], name="bench.fan_out"):
    async def receive(self, ctx: Context, msg: Fan) -> list[str]:
        self.state.steps += 1
        results = [""] * msg.calls
        if not msg.parallel:
            for i in range(msg.calls):
                results[i] = await ctx.call(slow, i)
            return results

        async def one(i: int) -> None:
            results[i] = await ctx.call(slow, i)

        async with anyio.create_task_group() as tg:
            for i in range(msg.calls):
                tg.start_soon(one, i)
        return results


# -- part 1: live ---------------------------------------------------------------------------


async def live_round(db: Path, calls: int, round_no: int) -> dict[str, float]:
    """One ask per mode on fresh actors; seconds from ask to reply."""
    out: dict[str, float] = {}
    async with ActorSystem(SqliteStore(db), actors=[FanOut]) as system:
        for parallel in (False, True):
            ref = await system.spawn(FanOut, f"live-{round_no}-{parallel:d}")
            t = time.perf_counter()
            reply = await ref.ask(Fan(calls, parallel))
            out["parallel" if parallel else "sequential"] = time.perf_counter() - t
            assert reply == [f"value-{i}" for i in range(calls)], reply
    return out


# -- part 1: killed mid-step, restarted -----------------------------------------------------


async def _worker(db: str, calls: int, parallel: bool) -> dict[str, Any]:
    t_open = time.monotonic_ns()  # inside the event loop: anyio's backend is loaded
    async with ActorSystem(SqliteStore(db), actors=[FanOut]) as system:
        t_ready = time.monotonic_ns()
        ref = await system.spawn(FanOut, ACTOR)
        reply = await ref.ask(Fan(calls, parallel), message_id=MESSAGE_ID)
        t_reply = time.monotonic_ns()
        found = await ops.history(system.store, ACTOR)
    assert reply == [f"value-{i}" for i in range(calls)], reply
    return {
        "t_main": _T_MAIN,
        "t_imported": _T_IMPORTED,
        "t_open": t_open,
        "t_ready": t_ready,
        "t_reply": t_reply,
        "started": _started,
        "step": found.steps[-1].duration,
    }


def _run_worker(db: Path, calls: int, delay: float, parallel: bool, kill_at: int) -> Any:
    env = dict(os.environ)
    env["PYTHONPATH"] = str(REPO_ROOT) + os.pathsep + env.get("PYTHONPATH", "")
    cmd = [
        *(sys.executable, "-m", f"{__package__}.parallel", "--worker", str(db)),
        *("--calls", str(calls), "--delay", str(delay), "--kill-at", str(kill_at)),
        *(["--parallel"] if parallel else []),
    ]
    t0 = time.monotonic_ns()
    proc = subprocess.run(cmd, cwd=REPO_ROOT, env=env, capture_output=True, text=True)
    return t0, proc


def restart_round(work: Path, calls: int, delay: float, kill_at: int, round_no: int) -> Any:
    """Per mode: a process killed mid-step, then a fresh one to the reply. Seconds."""
    out: dict[str, dict[str, float]] = {}
    for parallel in (False, True):
        mode = "parallel" if parallel else "sequential"
        db = work / f"restart-{round_no}-{mode}.db"
        _, killed = _run_worker(db, calls, delay, parallel, kill_at)
        if killed.returncode != -signal.SIGKILL:
            raise SystemExit(f"the {mode} worker was not killed: {killed.stderr[-2000:]}")
        t0, proc = _run_worker(db, calls, delay, parallel, 0)
        if proc.returncode != 0:
            raise SystemExit(f"the {mode} resume failed: {proc.stderr[-2000:]}")
        r = json.loads(proc.stdout.strip().splitlines()[-1])
        out[mode] = {
            "process": (r["t_reply"] - t0) / 1e9,
            "imported": (r["t_reply"] - r["t_imported"]) / 1e9,
            "opened": (r["t_reply"] - r["t_open"]) / 1e9,
            "rerun": float(r["started"]),
            "step": float(r["step"] or "nan"),
        }
    return out


# -- the report ------------------------------------------------------------------------------


def _ms(seconds: float) -> str:
    return f"{fmt_num(seconds * 1000)} ms"


def _sooner(seconds: float) -> str:
    return f"{_ms(seconds)} sooner" if seconds >= 0 else f"{_ms(-seconds)} later"


def _median(values: Sequence[float]) -> float:
    return statistics.median(values) if values else float("nan")


def main(argv: Sequence[str] | None = None) -> None:
    parser = bench_parser(__doc__, quick_help="--rounds 1 --delay 0.02")
    parser.add_argument("--calls", type=int, default=5, help="tool calls in the step")
    parser.add_argument("--delay", type=float, default=0.1, help="each tool call's wait, s")
    parser.add_argument("--rounds", type=int, default=5, help="interleaved rounds; medians")
    parser.add_argument(
        "--kill-at", type=int, default=3, help="SIGKILL when this tool call starts (1-based)"
    )
    parser.add_argument("--no-agent", action="store_true", help="skip part 2 (pydantic-ai)")
    parser.add_argument("--no-write", action="store_true", help="print only; write no report")
    parser.add_argument("--dir", default=None, help="where to create the scratch databases")
    parser.add_argument("--worker", metavar="DB", help=argparse.SUPPRESS)
    parser.add_argument("--parallel", action="store_true", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    global _delay_s, _kill_at
    if args.worker:
        _delay_s, _kill_at = args.delay, args.kill_at
        done = anyio.run(_worker, args.worker, args.calls, args.parallel)
        print(json.dumps(done), flush=True)
        return
    quick(args, parser, rounds=1, delay=0.02)
    if not 1 <= args.kill_at <= args.calls:
        parser.error("--kill-at must be between 1 and --calls")
    configure_output(args)
    _delay_s = args.delay

    live: dict[str, list[float]] = {"sequential": [], "parallel": []}
    restart: dict[str, dict[str, list[float]]] = {
        m: {"process": [], "imported": [], "opened": [], "rerun": [], "step": []}
        for m in ("sequential", "parallel")
    }
    with scratch_dir(args.dir) as work:
        info = machine_info(work)
        for r in range(args.rounds):
            print(f"round {r + 1}/{args.rounds}: live", end="", flush=True)
            for mode, s in anyio.run(live_round, work / "live.db", args.calls, r).items():
                live[mode].append(s)
            print(", killed and restarted", end="", flush=True)
            got = restart_round(work, args.calls, args.delay, args.kill_at, r)
            for mode, figures in got.items():
                for k, v in figures.items():
                    restart[mode][k].append(v)
            print()
        agent: dict[str, list[float]] = {}
        if not args.no_agent:
            print("pydantic-ai ...", flush=True)
            agent = anyio.run(agent_rounds, work / "agent.db", args.calls, args.delay, args.rounds)
            if not agent:
                print(
                    "(pydantic-ai is not installed: part 2 skipped; "
                    "pip install 'actorlog[pydantic-ai]')"
                )
        info["load average (1, 5, 15 min) at end"] = loadavg()

    body = report(args, live, restart, agent)
    start = info.get("load average (1, 5, 15 min) at start", "?").split()[0]
    end = info["load average (1, 5, 15 min) at end"].split()[0]
    body += (
        f"\n\nThe 1-minute load average was {start} at the start and {end} at the end on "
        f"{os.cpu_count()} logical cores: with other work on the machine the absolute times "
        "vary from run to run; the ratios compare cases measured in the same rounds."
    )
    print()
    print(body)
    if not args.no_write:
        title = "Parallel tool calls in one durable step"
        out = write_report("parallel", title, body, info=info)
        print(f"\nwrote {out}")


def report(
    args: Any,
    live: dict[str, list[float]],
    restart: dict[str, dict[str, list[float]]],
    agent: dict[str, list[float]],
) -> str:
    n, d = args.calls, args.delay
    lines: list[str] = []
    seq, par = _median(live["sequential"]), _median(live["parallel"])
    t1 = Table(
        [
            "step",
            "live: ask → reply",
            "restart → reply (from Popen)",
            "(after imports)",
            "(from opening the store)",
            "resumed step's own time",
            "calls run again",
        ]
    )
    for mode in ("sequential", "parallel"):
        rs = restart[mode]
        t1.add(
            f"{n} calls of {_ms(d)}, {mode}",
            _ms(_median(live[mode])),
            _ms(_median(rs["process"])),
            _ms(_median(rs["imported"])),
            _ms(_median(rs["opened"])),
            _ms(_median(rs["step"])),
            int(_median(rs["rerun"])),
        )
    rseq, rpar = (
        _median(restart["sequential"]["imported"]),
        _median(restart["parallel"]["imported"]),
    )
    oseq, opar = (
        _median(restart["sequential"]["opened"]),
        _median(restart["parallel"]["opened"]),
    )
    pseq, ppar = (
        _median(restart["sequential"]["process"]),
        _median(restart["parallel"]["process"]),
    )
    lines.append("## actorlog: one step, sequential vs parallel\n")
    lines.append(
        f"One message whose handler makes {n} `ctx.call`s of a tool waiting {_ms(d)} "
        "(an idempotent write) on `SqliteStore`: a `for` loop, or one task per call in an "
        f"`anyio` task group. Killed with SIGKILL when call {args.kill_at} starts, then "
        f"restarted in a fresh process. Medians of {args.rounds} interleaved round(s).\n"
    )
    lines.append(t1.markdown() + "\n")
    lines.append(f"- live: parallel is **{seq / par:.1f}x** faster than sequential")
    sseq, spar = _median(restart["sequential"]["step"]), _median(restart["parallel"]["step"])
    lines.append(
        f"- restart → reply, from opening the store (`ActorSystem(...)`: the store, recovery, "
        f"the resumed step, the reply's commit): parallel is **{oseq / opar:.1f}x** faster "
        f"than sequential, {_sooner(oseq - opar)} (sequential re-runs the call in flight "
        "and makes the rest; parallel re-runs every call in doubt at once)"
    )
    lines.append(
        f"- the resumed step's own time (its `duration` in the log, from the start of its "
        f"replay to its end): parallel is **{sseq / spar:.1f}x** faster than sequential; the "
        f"rest from opening the store ({_ms(oseq - sseq)} sequential, {_ms(opar - spar)} "
        "parallel) is opening the store, recovery and the reply's commit"
    )
    lines.append(
        f"- after the imports: **{rseq / rpar:.1f}x** ({_sooner(rseq - rpar)}); this also "
        "counts `anyio.run` loading its asyncio backend (anyio imports it at the first run); "
        f"from `Popen`: **{pseq / ppar:.1f}x** ({_sooner(pseq - ppar)}), the interpreter's "
        "start and the imports (the same work for both, and the noisiest part on a loaded "
        "machine) included"
    )
    lines.append(
        f"- floor: {_ms(n * d)} sequential, {_ms(d)} parallel (the tools' own waits); the "
        f"rest is the log: parallel live {_ms(par - d)} over the floor"
    )
    if agent:
        runs = [name for name in agent if ": " not in name]
        t2 = Table(
            [
                "run",
                "median",
                "vs pydantic-ai alone (parallel)",
                "CPU",
                "store transactions",
                "their wall time",
                "bytes logged",
            ]
        )
        base = _median(agent["pydantic-ai alone (parallel)"])
        for name in runs:
            m = _median(agent[name])
            commits = agent.get(f"{name}: {COMMITS}")
            spent = agent.get(f"{name}: {COMMIT_TIME}")
            logged = agent.get(f"{name}: {BYTES}")
            t2.add(
                name,
                _ms(m),
                f"{m / base:.2f}x" if "(" in name else "-",
                _ms(_median(agent[f"{name}: {CPU}"])),
                "-" if commits is None else f"{_median(commits):g}",
                "-" if spent is None else _ms(_median(spent)),
                "-" if logged is None else f"{_median(logged):,.0f}",
            )
        durable = _median(agent["DurableAgent (parallel)"])
        commit_time = _median(agent[f"DurableAgent (parallel): {COMMIT_TIME}"])
        commits_n = _median(agent[f"DurableAgent (parallel): {COMMITS}"])
        cost = _median(agent["DurableAgent, tools that do not wait"]) - _median(
            agent["pydantic-ai alone, tools that do not wait"]
        )
        lines.append("\n## pydantic-ai: the same agent with the integration vs without it\n")
        lines.append(
            f"A `FunctionModel` whose first response carries {n} tool calls (each waits "
            f"{_ms(d)}), whose second one answers: 2 model requests and {n} tool calls per "
            "run. `DurableAgent` runs on `SqliteStore`, a fresh conversation (actor) per run, "
            "so each run also spawns an actor. *tools that do not wait*: the same with "
            "tools returning at once, so the difference between the two is what the log "
            "costs (its commits and the runtime's own work). *store transactions*: the "
            "store's commits during one run (the new actor's registration, the appends) "
            "and the wall time they took. *CPU*: `time.process_time` over the run (every "
            "thread: SQLite's writer thread included). The rows *the same journaled calls* "
            f"and *the same step* are actorlog without pydantic-ai: an actor spawned per run "
            f"whose step makes 2 + {n} "
            "journaled calls (2 reads around a task group of parallel ones), logging the "
            "values a durable run logs (its model responses, tool results of the same "
            "form), and keeping and replying its whole conversation, as `DurableAgent` "
            "does; and the same step making no call. The rows *after "
            f"{LONG} runs* continue one conversation (pydantic-ai alone: its message "
            f"history), {LONG} runs long before the first round, one run longer each round. "
            "Medians of "
            f"{args.rounds} interleaved round(s) after one warm-up run.\n"
        )
        lines.append(t2.markdown() + "\n")

        def verdict(bound: float) -> str:
            return f"{'within' if durable <= bound else 'over'} it ({durable / bound:.2f}x)"

        lines.append(
            f"- the issue's bound, pydantic-ai alone {_ms(base)} + the log's commits "
            f"({commits_n:g} transactions, {_ms(commit_time)}) = {_ms(base + commit_time)}: "
            f"DurableAgent (parallel) {_ms(durable)} is {verdict(base + commit_time)}"
            + (
                "; what it spends over it is CPU work, split below"
                if durable > base + commit_time
                else ""
            )
        )
        lines.append(
            f"- pydantic-ai alone {_ms(base)} + the log's whole cost measured with tools "
            f"that do not wait {_ms(cost)} = {_ms(base + cost)}: DurableAgent (parallel) is "
            f"{verdict(base + cost)}"
        )
        cpu = {name: _median(agent[f"{name}: {CPU}"]) for name in runs}
        alone_cpu = cpu["pydantic-ai alone, tools that do not wait"]
        durable_cpu = cpu["DurableAgent, tools that do not wait"]
        runtime_cpu, step_cpu = cpu[SHAPED], cpu[SHAPED_NONE]
        own = durable_cpu - alone_cpu - runtime_cpu
        lines.append(
            f"- CPU per run, tools that do not wait: DurableAgent {_ms(durable_cpu)}, "
            f"pydantic-ai alone {_ms(alone_cpu)}: actorlog adds {_ms(durable_cpu - alone_cpu)}"
            f". Of it, the runtime's work for the same journaled calls without pydantic-ai "
            f"is {_ms(runtime_cpu)} ({_ms(step_cpu)} of it spawning the actor, the step, its "
            f"state and reply; {_ms((runtime_cpu - step_cpu) / (n + 2))} per journaled "
            f"call); the integration's own is the rest, {_ms(own)} (fingerprints, encoding "
            "and decoding the responses and the conversation, the wrapped model and "
            "toolsets pydantic-ai runs through)"
        )
        alone_name, durable_name = SPLIT
        t3 = Table(
            [
                "phase",
                "pydantic-ai alone: wall / CPU",
                "DurableAgent: wall / CPU",
                "wall added",
                "CPU added",
            ]
        )
        added_outside = 0.0
        for phase in PHASES:
            aw, ac, dw, dc = (
                _median(agent[f"{case}: {phase}{what}"])
                for case in SPLIT
                for what in (WALL, PHASE_CPU)
            )
            t3.add(
                phase,
                f"{_ms(aw)} / {_ms(ac)}",
                f"{_ms(dw)} / {_ms(dc)}",
                _ms(dw - aw),
                _ms(dc - ac),
            )
            if phase != PHASES[2]:
                added_outside += dw - aw
        lines.append(
            f"\nWhere the time of a run whose tools wait goes (*{alone_name}* and "
            f"*{durable_name}* above, the same rounds): the wall clock and process CPU "
            "between the run's start, the model function's calls, the first tool's start, "
            "the last tool's end and the caller's result (medians per phase):\n"
        )
        lines.append(t3.markdown() + "\n")
        lines.append(
            f"- outside the tools' wait DurableAgent adds {_ms(added_outside)} of wall time; "
            f"the log's commits ({_ms(commit_time)}) fall there too (the actor's "
            "registration and the first request's intent before the first request, the "
            "tool calls' intents before the tools, their results with the second request's "
            "intent, the step's end); the rest is the CPU it adds there (the last column; "
            "none of it while the tools wait) and, on a loaded machine, the event loop's "
            "thread waiting to run"
        )
        long_d, long_a = cpu[LONG_DURABLE], cpu[LONG_ALONE]
        lines.append(
            f"- a conversation's run after {LONG} earlier ones (about {4 * LONG} messages of "
            f"history; tools that do not wait): CPU per run DurableAgent {_ms(long_d)}, "
            f"pydantic-ai alone with the same history {_ms(long_a)}: actorlog adds "
            f"{_ms(long_d - long_a)}, against {_ms(durable_cpu - alone_cpu)} on a fresh "
            "conversation. Each model request's fingerprint covers only what is new since "
            "the conversation's previous request and the reply holds only the run's new "
            "messages (FORMAT.md [F23]); the caller rebuilds the whole conversation from the "
            "one it kept from the run before and the reply (reading one entry, the base "
            "run's reply); what still grows is the integration's handling of the whole "
            "conversation once per run: checking the history kept from the run before at "
            "the step's start and the conversation at its end (signatures), and the "
            "caller's loading it and validating it into fresh objects"
        )
        fresh_bytes = _median(agent[f"DurableAgent, tools that do not wait: {BYTES}"])
        long_bytes = _median(agent[f"{LONG_DURABLE}: {BYTES}"])
        lines.append(
            f"- bytes logged per run (entry payloads): {fresh_bytes:,.0f} on a fresh "
            f"conversation, {long_bytes:,.0f} after {LONG} runs"
        )
        sequential_alone = _median(agent["pydantic-ai alone (sequential mode)"])
        lines.append(
            f"- the sequential mode the integration forced before took {_ms(sequential_alone)} "
            f"without the log: the durable agent is now {sequential_alone / durable:.1f}x "
            "faster than that"
        )
    return "\n".join(lines)


if __name__ == "__main__":
    main()
