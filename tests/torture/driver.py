"""The crash driver: runs the workload in real processes, SIGKILLs them, checks invariants.

``run_scenario`` starts ``python -m tests.torture.workload`` over one store (a SQLite file,
or a PostgreSQL schema named by a ``postgresql://`` URL) and one ledger, kills it (from
outside after a random delay, or from inside at a durability boundary through
``ACTORLOG_TORTURE_KILL``), restarts it, and repeats until a run completes. Between runs it
reads the dead worker's store with plain SQL (``sqlite3``, or ``asyncpg``) to learn which
intents were open at the crash: those are the only calls that may run again, and the open
``notify`` intents are exactly the escalations the next run must see.

``check`` compares a crashed scenario with the crash-free reference and returns every
violated invariant as a sentence (an empty list means the run was correct).
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import signal
import sqlite3
import subprocess
import sys
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import attrs
from actorlog._journal.codec import verify_row
from actorlog._journal.errors import CorruptEntryError
from actorlog.store import EntryRow

from tests._payload import payload_of

from .faulty import BOUNDARIES
from .workload import Config, is_postgres

__all__ = [
    "Outcome",
    "RunPlan",
    "boundary_plans",
    "check",
    "mixed_plans",
    "open_intents",
    "random_plans",
    "run_scenario",
]

REPO = Path(__file__).resolve().parents[2]
RUN_TIMEOUT = 120.0  # seconds one worker run may take before the driver calls it a hang


@attrs.define
class RunPlan:
    """How one run of a scenario ends: killed at a boundary, killed after a delay, or not."""

    kill_spec: str = ""
    kill_after: float | None = None


@attrs.define
class OpenIntent:
    actor: str
    seq: int
    tool: str
    ident: str
    outcomes: list[str]  # "result" or "decision:<action>", in log order

    @property
    def escalates(self) -> bool:
        """An open intent of an escalating tool waits for an operator on the next start,
        unless the operator's retry was recorded and not yet started."""
        return self.tool == "notify" and (
            not self.outcomes or self.outcomes[-1] != "decision:retry"
        )


@attrs.define
class Outcome:
    seed: int
    dumps: dict[str, Any] = attrs.Factory(dict)
    runs: int = 0
    kills: list[str] = attrs.Factory(list)
    #: ident -> number of crashes at which that call's intent was open
    open_counts: Counter[str] = attrs.Factory(Counter)
    #: run -> idents whose escalation that run must see (from the store after the last crash)
    expected_escalations: dict[int, set[str]] = attrs.Factory(dict)
    #: run -> idents the worker's resolver saw escalated in that run
    escalations: dict[int, set[str]] = attrs.Factory(dict)
    escalated_tools: set[str] = attrs.Factory(set)
    attempts: Counter[tuple[str, str]] = attrs.Factory(Counter)
    ledger: dict[str, list[tuple[Any, ...]]] = attrs.Factory(dict)
    messages: dict[str, int] = attrs.Factory(dict)
    store_problems: list[str] = attrs.Factory(list)
    boundaries_hit: Counter[str] = attrs.Factory(Counter)
    seconds: float = 0.0
    #: fanout jobs: job number -> the race's contestants whose call returned a value, in log
    #: order (the first is the winner the live run and every replay must have chosen)
    races: dict[str, list[str]] = attrs.Factory(dict)


def _worker_env(cfg: Config, plan: RunPlan, marker: Path) -> dict[str, str]:
    env = dict(os.environ)
    env.update(cfg.env())
    env["ACTORLOG_TORTURE_KILL"] = plan.kill_spec
    env["ACTORLOG_TORTURE_KILL_MARKER"] = str(marker)
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH", "")]))
    env.pop("OTEL_TRACES_EXPORTER", None)
    return env


def _select(db: str, sql: str) -> list[tuple[Any, ...]]:
    """Rows of ``sql`` (plain SELECT, no parameters) from the store ``db`` (a SQLite path or
    a ``postgresql://`` URL), read beside the store's code; ``[]`` if it has no tables yet
    (the worker was killed before it created them)."""
    if is_postgres(db):
        return asyncio.run(_select_postgres(db, sql))
    if not os.path.exists(db):
        return []
    conn = sqlite3.connect(db)
    try:
        return [tuple(r) for r in conn.execute(sql).fetchall()]
    except sqlite3.OperationalError as exc:
        if "no such table" not in str(exc):
            raise
        return []
    finally:
        conn.close()


async def _select_postgres(url: str, sql: str) -> list[tuple[Any, ...]]:
    import asyncpg

    conn = await asyncpg.connect(url)  # the URL's search_path names the scenario's schema
    try:
        return [tuple(r) for r in await conn.fetch(sql)]
    except asyncpg.UndefinedTableError:
        return []
    finally:
        await conn.close()


def open_intents(db: str) -> list[OpenIntent]:
    """Intents with no result and no operator verdict (result/fail), read with plain SQL."""
    rows = _select(
        db,
        "SELECT actor_id, seq, kind, type_tag, ref, payload FROM entries "
        "WHERE kind IN ('intent', 'result', 'decision') ORDER BY actor_id, seq",
    )
    intents: dict[tuple[str, int], OpenIntent] = {}
    for actor, seq, kind, tag, ref, payload in rows:
        if kind == "intent":
            ident = str(payload_of(kind, payload)["args"][0])
            intents[(actor, seq)] = OpenIntent(actor, seq, tag, ident, [])
        else:
            it = intents.get((actor, ref))
            if it is not None:
                it.outcomes.append("result" if kind == "result" else f"decision:{tag}")
    return [
        it
        for it in intents.values()
        if "result" not in it.outcomes
        and "decision:result" not in it.outcomes
        and "decision:fail" not in it.outcomes
    ]


def _read_ledger(path: str, out: Outcome) -> None:
    db = sqlite3.connect(path)
    try:
        for tool, ident in db.execute("SELECT tool, ident FROM attempts"):
            out.attempts[(tool, ident)] += 1
        for table, cols in (
            ("ledger", "ident, account, amount, memo"),
            ("transfers", "ident, src, dst, amount, memo"),
            ("notifications", "ident, text, value"),
            ("done", "ident, count"),
        ):
            out.ledger[table] = [tuple(r) for r in db.execute(f"SELECT {cols} FROM {table}")]
        for run, tool, ident in db.execute("SELECT run, tool, ident FROM escalations"):
            out.escalations.setdefault(int(run), set()).add(str(ident))
            out.escalated_tools.add(str(tool))
    finally:
        db.close()


def _read_store(db: str, out: Outcome) -> None:
    """Count messages per actor, check every message has exactly one step, verify all rows."""
    rows = _select(
        db,
        "SELECT actor_id, seq, kind, type_tag, ref, message_id, payload, checksum "
        "FROM entries ORDER BY actor_id, seq",
    )
    last: dict[str, int] = {}
    steps: dict[str, Counter[int]] = {}
    message_seqs: dict[str, list[int]] = {}
    for r in rows:
        row = EntryRow(r[0], r[1], r[2], r[3], r[4], r[5], bytes(r[6]), r[7])
        expected = last.get(row.actor_id, 0) + 1
        try:
            verify_row(row, row.actor_id, expected)
        except CorruptEntryError as exc:
            out.store_problems.append(str(exc))
        last[row.actor_id] = row.seq
        if row.kind == "message":
            message_seqs.setdefault(row.actor_id, []).append(row.seq)
        elif row.kind == "step":
            steps.setdefault(row.actor_id, Counter())[row.ref] += 1
    for actor, seqs in message_seqs.items():
        out.messages[actor] = len(seqs)
        got = steps.get(actor, Counter())
        for s in seqs:
            if got[s] != 1:
                out.store_problems.append(f"{actor}: message seq {s} has {got[s]} steps")
        for s in set(got) - set(seqs):
            out.store_problems.append(f"{actor}: step for seq {s}, which is no message")


def _read_races(db: str, out: Outcome) -> None:
    """The race contestants of fanout jobs whose call returned a value, in log order."""
    rows = _select(
        db,
        "SELECT actor_id, seq, kind, ref, payload FROM entries "
        "WHERE kind IN ('intent', 'result') AND type_tag = 'race_quote' ORDER BY actor_id, seq",
    )
    idents: dict[tuple[str, int], str] = {}
    for actor, seq, kind, ref, payload in rows:
        body = payload_of(kind, payload)
        if kind == "intent":
            idents[(actor, seq)] = str(body["args"][0])
        elif body.get("ok") and (actor, ref) in idents:
            job, _, who = idents[(actor, ref)].removeprefix("job-").partition(":race-")
            out.races.setdefault(job, []).append(who)


def run_scenario(
    cfg: Config, plans: Iterator[RunPlan], *, max_runs: int = 200, log: Path | None = None
) -> Outcome:
    """Run the workload until a run completes, ending run i as ``plans`` says."""
    out = Outcome(seed=cfg.seed)
    t0 = time.monotonic()
    workdir = Path(cfg.ledger).parent
    marker = workdir / "killed-at"
    for run in range(1, max_runs + 1):
        plan = next(plans, RunPlan())
        cfg.run = run
        marker.unlink(missing_ok=True)
        stderr_path = workdir / f"run-{run}.err"
        with open(stderr_path, "wb") as err:
            p = subprocess.Popen(
                [sys.executable, "-m", "tests.torture.workload"],
                env=_worker_env(cfg, plan, marker),
                cwd=REPO,
                stdout=subprocess.DEVNULL,
                stderr=err,
            )
            try:
                p.wait(timeout=plan.kill_after if plan.kill_after is not None else RUN_TIMEOUT)
            except subprocess.TimeoutExpired:
                p.send_signal(signal.SIGKILL)
                p.wait()
                if plan.kill_after is None:
                    raise AssertionError(
                        f"seed {cfg.seed}: run {run} hung for {RUN_TIMEOUT}s; "
                        f"stderr in {stderr_path}"
                    ) from None
        out.runs = run
        if p.returncode == 0:
            break
        if p.returncode != -signal.SIGKILL:
            raise AssertionError(
                f"seed {cfg.seed}: run {run} exited with {p.returncode}:\n"
                + stderr_path.read_text()[-4000:]
            )
        why = marker.read_text() if marker.exists() else f"external@{plan.kill_after:.2f}s"
        out.kills.append(why)
        out.boundaries_hit[why.partition("@")[0]] += 1
        if log is not None:
            with open(log, "a") as f:
                f.write(f"seed {cfg.seed} run {run}: killed at {why}\n")
        opened = open_intents(cfg.db)
        for it in opened:
            out.open_counts[it.ident] += 1
        out.expected_escalations[run + 1] = {it.ident for it in opened if it.escalates}
    else:
        raise AssertionError(f"seed {cfg.seed}: no run completed in {max_runs} runs")
    out.dumps = json.loads(Path(cfg.out).read_text())
    _read_ledger(cfg.ledger, out)
    _read_store(cfg.db, out)
    _read_races(cfg.db, out)
    out.seconds = time.monotonic() - t0
    return out


def _normalized(dumps: dict[str, Any]) -> dict[str, Any]:
    """The states without the values that differ between runs by design (uuid, random)."""
    norm: dict[str, Any] = json.loads(json.dumps(dumps))
    for state in norm.values():
        state.pop("uuids", None)
        state.pop("memos", None)
        state.pop("winners", None)
    return norm


def check(ref: Outcome, got: Outcome) -> list[str]:
    """Every invariant ``got`` violates, compared with the crash-free ``ref``."""
    bad: list[str] = []
    # 1. identical final states
    if _normalized(got.dumps) != _normalized(ref.dumps):
        for actor in sorted(set(ref.dumps) | set(got.dumps)):
            a = _normalized(ref.dumps).get(actor)
            b = _normalized(got.dumps).get(actor)
            if a != b:
                bad.append(f"final state of {actor} differs:\n  reference {a}\n  crashed   {b}")
    # journaled values: what the states recorded is what the side effects saw
    uuids = got.dumps.get("coord", {}).get("uuids", {})
    memos: dict[str, str] = {}
    for actor, state in got.dumps.items():
        for n, memo in state.get("memos", {}).items():
            memos[n] = memo
            if memo.split("|")[0] != uuids.get(n):
                bad.append(
                    f"{actor} job {n}: memo {memo} does not carry coord's uuid {uuids.get(n)}"
                )
    for table in ("ledger", "transfers"):
        for row in got.ledger.get(table, []):
            n = row[0].split(":")[0].removeprefix("job-")
            if row[-1] != memos.get(n):
                bad.append(
                    f"{table} row {row}: memo differs from the worker state's {memos.get(n)}"
                )
    # 2. every message handled exactly once
    bad += [f"store: {p}" for p in got.store_problems]
    if got.messages != ref.messages:
        bad.append(f"messages per actor {got.messages} != reference {ref.messages}")
    for actor, state in got.dumps.items():
        for field in ("jobs", "done"):
            seq = state.get(field)
            if isinstance(seq, list) and len(seq) != len(set(seq)):
                bad.append(f"{actor}.{field} handled a message twice: {seq}")
    # 3. every side effect exactly once
    for table in ("ledger", "transfers", "notifications", "done"):
        idents = Counter(row[0] for row in got.ledger.get(table, []))
        want = Counter(row[0] for row in ref.ledger.get(table, []))
        if idents != want:
            extra = idents - want
            missing = want - idents
            bad.append(f"{table}: applied twice/unexpected {dict(extra)}, missing {dict(missing)}")
    # 4. a call runs again only if a crash left it open, at most once per such crash
    for (tool, ident), n in sorted(got.attempts.items()):
        if tool.startswith("reconcile"):
            limit, low = got.open_counts[ident], 0
        elif tool.startswith("race"):
            # a race's loser may be cancelled before it starts (then it never ran)
            limit, low = 1 + got.open_counts[ident], 0
        else:
            limit, low = 1 + got.open_counts[ident], 1
        if not low <= n <= limit:
            bad.append(
                f"{tool}({ident}) ran {n} times with {got.open_counts[ident]} crashes in doubt "
                f"(allowed {low}..{limit})"
            )
    for tool, ident in ref.attempts:
        if not tool.startswith(("reconcile", "race")) and (tool, ident) not in got.attempts:
            bad.append(f"{tool}({ident}) never ran")
    # 4b. a race is won by the contestant whose value was logged first, the same live and
    # in every replay (outcomes are handed back in log order), and won once
    for actor, state in got.dumps.items():
        for n, who in state.get("winners", {}).items():
            first = got.races.get(n, [])[:1]
            if [who] != first:
                bad.append(f"{actor} job {n}: race won by {who!r}, logged first: {first}")
    # 5. escalations exactly where a non-idempotent write was interrupted
    if got.escalated_tools - {"notify"}:
        bad.append(f"tools escalated that must not: {sorted(got.escalated_tools - {'notify'})}")
    for run, seen in sorted(got.escalations.items()):
        expected = got.expected_escalations.get(run, set())
        if not seen <= expected:
            bad.append(f"run {run}: escalated {sorted(seen - expected)} that no crash left open")
    final = got.runs
    if got.escalations.get(final, set()) != got.expected_escalations.get(final, set()):
        bad.append(
            f"final run {final}: escalated {sorted(got.escalations.get(final, set()))}, "
            f"expected {sorted(got.expected_escalations.get(final, set()))}"
        )
    return bad


def random_plans(rng: random.Random, kills: int, lo: float, hi: float) -> Iterator[RunPlan]:
    """``kills`` runs killed from outside after a random delay, then one left to finish."""
    for _ in range(kills):
        yield RunPlan(kill_after=rng.uniform(lo, hi))


def boundary_plans(rng: random.Random, boundaries: list[str], max_nth: int) -> Iterator[RunPlan]:
    """One run per boundary (in the given order), killed at its 1st..max_nth crossing."""
    for b in boundaries:
        yield RunPlan(kill_spec=f"{b}:{rng.randint(1, max_nth)}")


def mixed_plans(rng: random.Random, kills: int, lo: float, hi: float) -> Iterator[RunPlan]:
    """Random boundaries (with tool filters) and random external kills, mixed."""
    targets = [
        *BOUNDARIES,
        "tool_after@notify",
        "intent_commit_after@notify",
        "tool_after@transfer",
        "tool_before@transfer",
        "tool_after@ledger_write",
        "tool_after@fetch_account",
        "decision_commit_after",
    ]
    for _ in range(kills):
        # a boundary kill most of the time, with an outside kill as the backstop in case the
        # boundary is not crossed often enough in this run
        spec = f"{rng.choice(targets)}:{rng.randint(1, 6)}" if rng.random() < 0.7 else ""
        yield RunPlan(kill_spec=spec, kill_after=rng.uniform(lo, hi))
