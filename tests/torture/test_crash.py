"""Kill tests with real processes: SIGKILL the workload anywhere, restart it, compare.

Each scenario runs ``tests/torture/workload.py`` in a fresh process over one store and one
external (SQLite) ledger, kills it (at a named durability boundary, or from outside after a
random delay), restarts it until a run completes, and checks against a crash-free reference
run of the same seed (``driver.check``):

* identical final states (the values drawn from ctx.uuid/ctx.random excepted, which are
  instead checked to match what the side effects saw);
* every message handled exactly once (every logged message has exactly one step);
* every side effect applied exactly once in the ledger;
* a call runs again only if a crash left its intent open, at most once per such crash;
* escalations exactly for the ``notify`` intents the crashes left open.

Every test but the SQLite-only ones (durability mode, commits on the loop) runs on SQLite
(a file) and on a real PostgreSQL server (a fresh schema per scenario;
``ACTORLOG_TEST_POSTGRES_URL``, see ``tests/_pg.py``; the postgres cases skip without a
server, except under CI, where they fail). ``postgres-owner`` runs the workload as an
``owner`` (leases and fencing tokens, as runtimes sharing a database do; a restarted run
keeps the name, so it takes its dead predecessor's leases over at once); the boundary tour
also runs as plain ``postgres``, a single runtime without an owner. Each store kind has its
own crash-free reference run. ``sqlite-trio`` runs the SQLite workers under trio
(``anyio.run(..., backend="trio")``): the boundary tour and the mixed kills, a representative
subset (the PostgreSQL driver, asyncpg, runs on asyncio only).

A failure prints its seed; ``ACTORLOG_TORTURE_SEED=<base seed>`` replays the session.
"""

from __future__ import annotations

import random
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import pytest
from actorlog import Actor, ActorSystem

from tests import _pg

from . import workload
from .conftest import BASE_SEED, FIGURES, soak, soak_factor
from .driver import Outcome, RunPlan, check, mixed_plans, random_plans, run_scenario
from .faulty import BOUNDARIES
from .workload import Config

JOBS = 40
#: the workload for kills on a timer: its tools take TOOL_DELAY each (like remote calls),
#: so the coordinator alone needs LONG_JOBS * TOOL_DELAY = 1.6 s after start-up, longer than
#: any timer kill below: the first run is always killed, whatever the store's speed
LONG_JOBS = 80
TOOL_DELAY = 0.02
WORKERS = 3

#: Every boundary, plus tool-specific ones that force each in-doubt policy. Ordered so that
#: ``decision_commit_after`` follows a crash that leaves a notify call in doubt.
TOUR: list[str] = [
    *(b for b in BOUNDARIES if b != "decision_commit_after"),
    "tool_after@notify",
    "decision_commit_after",
    "intent_commit_after@notify",
    "result_commit_before@notify",
    "tool_after@ledger_write",
    "tool_after@transfer",
    "tool_before@transfer",
    "tool_after@fetch_account",
    "tool_after@mark_done",  # last: it ends the workload
]

#: PostgreSQL scenarios: fewer kills per test than on SQLite (CI time), same invariants
PG_SOAK_SHARE = 2
#: The store kinds: ``postgres-owner`` runs as an owner (leases, fencing tokens), as runtimes
#: sharing a database do; ``postgres`` without one, as a single runtime may.
KINDS = ("sqlite", "postgres-owner", "postgres", "sqlite-trio")
#: CI time: each store kind and backend takes the boundary tour; the kills at random moments
#: run on SQLite, mixed kills on SQLite and PostgreSQL; a soak (ACTORLOG_SOAK) adds the
#: random moments on PostgreSQL, the mixed kills on trio and every in-doubt policy on
#: PostgreSQL (PG_IN_DOUBT)
SOAKING = soak_factor() > 1
MOMENT_KINDS = ("sqlite", *(("postgres-owner",) if SOAKING else ()))
MIXED_KINDS = ("sqlite", "postgres-owner", *(("sqlite-trio",) if SOAKING else ()))


class Stores:
    """Makes each scenario's store: a SQLite file in its directory, or on PostgreSQL a
    fresh schema on the test server (dropped when the test ends)."""

    def __init__(self, kind: str, url: str = "") -> None:
        assert kind in KINDS, kind
        self.kind = kind
        self.url = url
        self.schemas: list[str] = []

    @property
    def postgres(self) -> bool:
        return self.kind.startswith("postgres")

    @property
    def backend(self) -> str:
        """The anyio backend the workers (and the in-test verifier) run on."""
        return "trio" if self.kind == "sqlite-trio" else "asyncio"

    @property
    def owner(self) -> str:
        """The workload's owner name; a restarted run keeps it, as a restarted service would."""
        return "torture-runtime" if self.kind == "postgres-owner" else ""

    def new(self, d: Path) -> str:
        """The store for a scenario working in ``d``: a path, or a ``postgresql://`` URL."""
        if not self.postgres:
            return str(d / "store.db")
        schema = _pg.new_schema("actorlog_torture")
        self.schemas.append(schema)
        anyio.run(_pg.create_schema, self.url, schema, backend="asyncio")
        return _pg.schema_url(self.url, schema)

    def iterations(self, n: int) -> int:
        """``soak(n)`` on SQLite; on PostgreSQL a share of it, at least one."""
        return max(1, soak(n) // PG_SOAK_SHARE) if self.postgres else soak(n)

    def drop(self) -> None:
        anyio.run(_pg.drop_schemas, self.url, *self.schemas, backend="asyncio")


@pytest.fixture(params=KINDS[:2])
def stores(request: pytest.FixtureRequest) -> Iterator[Stores]:
    """The store kind of a crash test: SQLite, and a real PostgreSQL server (with an owner;
    ``@pytest.mark.parametrize("stores", KINDS, indirect=True)`` adds the one without)."""
    kind: str = request.param
    if not kind.startswith("postgres"):
        yield Stores(kind)
        return
    s = Stores(kind, _pg.postgres_url("the PostgreSQL crash tests"))
    try:
        yield s
    finally:
        s.drop()


async def _fencing_problems(url: str, runs: int) -> list[str]:
    """What a PostgreSQL store run by an owner shows against fencing: every row carries a
    token, an actor's tokens never go back along its log nor exceed its lease's, and coord's
    lease was taken again by the restarts (at most once a run). (A run may take a lease and
    write nothing, so an actor's last row may carry an older token than its lease.)"""
    import asyncpg

    conn = await asyncpg.connect(url)
    try:
        rows = await conn.fetch("SELECT actor_id, seq, fence FROM entries ORDER BY actor_id, seq")
        leases = {str(a): int(t) for a, t in await conn.fetch("SELECT actor_id, token FROM leases")}
    finally:
        await conn.close()
    bad: list[str] = []
    last: dict[str, int] = {}
    for actor, seq, fence in rows:
        if fence is None:
            bad.append(f"{actor} seq {seq}: appended without a fencing token")
        elif fence < last.get(actor, 0) or fence > leases.get(actor, 0):
            bad.append(
                f"{actor} seq {seq}: token {fence} after {last.get(actor)}, "
                f"lease token {leases.get(actor)}"
            )
        else:
            last[actor] = fence
    if runs > 1 and not 2 <= leases.get("coord", 0) <= runs:
        bad.append(f"coord's lease token {leases.get('coord')} after {runs} runs")
    return bad


_references: dict[tuple[str, int, int], Outcome] = {}


def _config(
    stores: Stores,
    base: Path,
    name: str,
    seed: int,
    jobs: int = JOBS,
    durability: str = "fsync",
    commit_on_loop: bool | None = None,
) -> Config:
    d = base / name
    d.mkdir(parents=True)
    return Config(
        db=stores.new(d),
        ledger=str(d / "ledger.db"),
        out=str(d / "final.json"),
        seed=seed,
        jobs=jobs,
        workers=WORKERS,
        durability=durability,
        owner=stores.owner,
        commit_on_loop=commit_on_loop,
        backend=stores.backend,
    )


def _reference(stores: Stores, base: Path, seed: int, jobs: int = JOBS) -> Outcome:
    """The crash-free run of this seed on this store kind (once per session)."""
    key = (stores.kind, seed, jobs)
    ref = _references.get(key)
    if ref is None:
        cfg = _config(stores, base, f"ref-{stores.kind}-{seed}-{jobs}", seed, jobs)
        ref = run_scenario(cfg, iter(()))
        assert ref.runs == 1 and not ref.kills
        assert check(ref, ref) == []
        for (tool, ident), n in ref.attempts.items():
            assert n == 1, f"seed {seed}: reference ran {tool}({ident}) {n} times"
        assert not ref.escalations, "a crash-free run must never escalate"
        _references[key] = ref
    return ref


def _fail(seed: int, what: str, problems: list[str], got: Outcome) -> str:
    return (
        f"{what} violated invariants (scenario seed {seed}, session base seed {BASE_SEED}: "
        f"replay with ACTORLOG_TORTURE_SEED={BASE_SEED}); kills {got.kills}:\n  "
        + "\n  ".join(problems)
    )


def _count(got: Outcome) -> None:
    FIGURES["crash scenarios"] += 1
    FIGURES["worker runs"] += got.runs
    FIGURES["kills"] += len(got.kills)
    FIGURES["kills at a boundary"] += sum(1 for k in got.kills if not k.startswith("external"))


async def _recover_in_process(cfg: Config) -> dict[str, Any]:
    """Recover every actor of a finished store in this process; dump states. Runs no tool."""
    cfg.run = -1
    workload.configure(cfg)
    dumps: dict[str, Any] = {}
    async with ActorSystem(workload.make_store(cfg), actors=workload.ACTORS) as system:
        for actor_id in workload.actor_ids(cfg):
            classes: dict[str, type[Actor[Any]]] = {
                "coord": workload.Coordinator,
                "auditor": workload.Auditor,
            }
            cls = classes.get(actor_id, workload.Worker)
            ref = await system.spawn(cls, actor_id)
            dumps[actor_id] = await ref.ask(workload.Dump(), message_id="verify-dump")
    return dumps


def _ran_while_verifying(cfg: Config) -> int:
    db = sqlite3.connect(cfg.ledger)
    try:
        return int(db.execute("SELECT count(*) FROM attempts WHERE run = -1").fetchone()[0])
    finally:
        db.close()


def _scenario(
    stores: Stores,
    base: Path,
    name: str,
    seed: int,
    plans: Iterator[RunPlan],
    *,
    durability: str = "fsync",
    jobs: int = JOBS,
    tool_delay: float = 0.0,
    commit_on_loop: bool | None = None,
) -> tuple[Config, Outcome]:
    ref = _reference(stores, base, seed, jobs)
    cfg = _config(
        stores, base, name, seed, jobs, durability=durability, commit_on_loop=commit_on_loop
    )
    cfg.tool_delay = tool_delay
    got = run_scenario(cfg, plans, log=base / "kills.log")
    _count(got)
    problems = check(ref, got)
    assert not problems, _fail(seed, name, problems, got)
    return cfg, got


def _killed_ident(got: Outcome) -> str:
    """The call a tool-boundary kill interrupted (the marker names tool and ident)."""
    (why,) = got.kills
    return why.partition("@")[2].split(",")[1]


@pytest.mark.parametrize("stores", KINDS, indirect=True)
def test_kill_at_every_durability_boundary(seed: int, tmp_path: Path, stores: Stores) -> None:
    """One run per boundary, each killed at its 1st-3rd crossing (tool-specific ones at the
    1st); a boundary a run does not reach is tried again first on a fresh workload. The
    first scenario's store, recovered in this process, holds the worker's final states."""
    rng = random.Random(seed)
    todo = list(TOUR) * soak(1)
    unreachable: list[str] = []
    scenario = 0
    while todo:
        scenario += 1
        plans = (
            RunPlan(kill_spec=f"{t}:{1 if '@' in t or 'decision' in t else rng.randint(1, 3)}")
            for t in list(todo)
        )
        cfg, got = _scenario(stores, tmp_path, f"tour-{scenario}", seed, plans)
        for target, why in zip(todo, got.kills, strict=False):
            boundary, _, name_filter = target.partition("@")
            assert why.partition("@")[0] == boundary, f"seed {seed}: wanted {target}, got {why}"
            assert name_filter in why.partition("@")[2], f"seed {seed}: wanted {target}, got {why}"
        done = len(got.kills)
        if done == 0:  # not reached even on a fresh workload
            unreachable.append(todo[0])
            done = 1
        todo = todo[done:]
        if stores.owner:
            problems = anyio.run(_fencing_problems, cfg.db, got.runs, backend="asyncio")
            assert not problems, _fail(seed, f"tour-{scenario}", problems, got)
        if scenario == 1:
            assert anyio.run(_recover_in_process, cfg, backend=stores.backend) == got.dumps
            assert _ran_while_verifying(cfg) == 0
    assert not unreachable, f"seed {seed}: boundaries never crossed: {unreachable}"


#: a kill between a call's intent and its result, one per in-doubt policy
IN_DOUBT = (
    "tool_after@notify:1",
    "intent_commit_after@notify:1",
    "tool_after@ledger_write:1",
    "tool_after@fetch_account:1",
    "tool_after@transfer:1",
    "tool_before@transfer:1",
)
#: on PostgreSQL CI settles an escalation and a reconcile (its boundary tour crosses all of
#: them); a soak runs every policy there too
PG_IN_DOUBT = IN_DOUBT if SOAKING else ("tool_after@notify:1", "tool_after@transfer:1")


@pytest.mark.parametrize(
    ("stores", "spec"),
    [*(("sqlite", s) for s in IN_DOUBT), *(("postgres-owner", s) for s in PG_IN_DOUBT)],
    indirect=["stores"],
)
def test_in_doubt_call_is_settled_by_its_tools_policy(
    seed: int, tmp_path: Path, stores: Stores, spec: str
) -> None:
    """A kill between a call's intent and its result; the restart settles it by policy:
    escalate (the operator finds it happened, or not and retries), rerun with the same
    idempotency key, rerun a read, or ask the reconcile function."""
    _, got = _scenario(stores, tmp_path, "policy", seed, iter([RunPlan(kill_spec=spec)]))
    assert len(got.kills) == 1 and got.runs == 2, f"seed {seed}: {spec} was never crossed"
    decisions = _decisions(tmp_path / "policy")
    if spec == "intent_commit_after@notify:1":
        # the notify intent is durable, the tool never ran: the operator finds nothing
        assert "retry" in decisions.values(), f"seed {seed}: {decisions}"
        retried = [i for i, d in decisions.items() if d == "retry"]
        assert all(got.attempts[("notify", i)] == 1 for i in retried)
        return
    ident = _killed_ident(got)
    tool = spec.split("@")[1].split(":")[0]
    if tool == "notify":
        assert ident in got.escalations.get(2, set())
        assert decisions[ident] == "result"  # it had happened: not sent again
        assert got.attempts[("notify", ident)] == 1
    elif tool in ("ledger_write", "fetch_account"):
        assert got.attempts[(tool, ident)] == 2
        _only_notify_escalated(got, seed)
    else:
        assert got.attempts[("reconcile_transfer", ident)] == 1
        assert got.attempts[("transfer", ident)] == 1
        _only_notify_escalated(got, seed)


def _only_notify_escalated(got: Outcome, seed: int) -> None:
    """Settled by its policy, the killed call was not escalated. Another worker's notify
    call, open when the process died, is (its policy): ``check`` has already matched every
    escalation against the notify intents the crash left open."""
    escalated = set().union(*got.escalations.values())
    assert all(i.endswith(":notify") for i in escalated), f"seed {seed}: {escalated}"


def _decisions(d: Path) -> dict[str, str]:
    """ident -> the resolver's decision ("result" or "retry"), from the ledger."""
    db = sqlite3.connect(d / "ledger.db")
    try:
        rows = db.execute("SELECT ident, decision FROM escalations ORDER BY id").fetchall()
    finally:
        db.close()
    return {str(i): str(x).partition(":")[0] for i, x in rows}


@pytest.mark.parametrize("stores", MOMENT_KINDS, indirect=True)
def test_kill_at_random_moments(seed: int, tmp_path: Path, stores: Stores) -> None:
    """SIGKILL from outside after a random delay, several times per scenario."""
    rng = random.Random(seed)
    for i in range(stores.iterations(2)):
        plans = random_plans(rng, 6, 0.4, 1.2)
        _, got = _scenario(
            stores, tmp_path, f"random-{i}", seed, plans, jobs=LONG_JOBS, tool_delay=TOOL_DELAY
        )
        assert got.kills, f"seed {seed}: the first run finished before its kill"


@pytest.mark.parametrize("stores", MIXED_KINDS, indirect=True)
def test_kill_at_random_boundaries_and_moments(seed: int, tmp_path: Path, stores: Stores) -> None:
    """Random boundaries (tool filters included), random outside kills as a backstop."""
    rng = random.Random(seed)
    for i in range(stores.iterations(2)):
        plans = mixed_plans(rng, 10, 0.6, 1.5)
        _, got = _scenario(
            stores, tmp_path, f"mixed-{i}", seed, plans, jobs=LONG_JOBS, tool_delay=TOOL_DELAY
        )
        assert got.kills, f"seed {seed}: the first run finished before its kill"


def test_kill_with_the_faster_durability_mode(seed: int, tmp_path: Path) -> None:
    """``durability="survive-process-crash"`` (synchronous=NORMAL) promises exactly this:
    a killed process loses nothing acknowledged. SQLite only: the mode is SQLite's."""
    _mixed_on_sqlite(seed, tmp_path, "normal", durability="survive-process-crash")


def test_kill_with_commits_on_the_event_loop(seed: int, tmp_path: Path) -> None:
    """``SqliteStore(commit_on_loop=True)`` commits lone appends on the loop's thread, on the
    writer connection (the default, ``"auto"``, does so while commits are fast): a killed
    process still loses nothing acknowledged, and every invariant holds across kills at
    boundaries and from outside. SQLite only."""
    _mixed_on_sqlite(seed, tmp_path, "on-loop", commit_on_loop=True)


def _mixed_on_sqlite(seed: int, tmp_path: Path, name: str, **options: Any) -> None:
    """Mixed kills (boundaries and moments) on SQLite with store ``options``."""
    rng = random.Random(seed)
    for i in range(soak(1)):
        plans = mixed_plans(rng, 10, 0.6, 1.5)
        _, got = _scenario(
            Stores("sqlite"),
            tmp_path,
            f"{name}-{i}",
            seed,
            plans,
            jobs=LONG_JOBS,
            tool_delay=TOOL_DELAY,
            **options,
        )
        assert got.kills, f"seed {seed}: the first run finished before its kill"
