"""The realistic worker the crash tests kill: several actors, messages between them, tools.

Pipeline (a DAG, so every actor's inbox order is deterministic and a crash-free reference
run is comparable field by field)::

    driver --Job--> coord --Task--> w0..wK --Tally--> auditor
             (send, message_id)   (ctx.spawn + ctx.send)   (ctx.spawn + ctx.send)

* ``coord`` reads a rate (read tool), draws ``ctx.uuid()`` and ``ctx.now()``, spawns the
  worker and sends it a Task carrying the uuid.
* a worker reads the account (read tool), draws ``ctx.random()``, and by job kind calls an
  idempotent ledger write (``pay``), a non-idempotent transfer with a reconcile function
  (``transfer``), a plain non-idempotent write that escalates when in doubt (``notify``),
  a read tool that fails (``flaky``), or raises in the handler (``boom``); then sends a
  Tally to the auditor.
* the auditor counts tallies and, when it has them all, marks the run done through an
  idempotent write.
* with ``Config.fanout`` (issue 25) a worker's ``fanout`` job runs five tasks at once in a
  task group, each a read then an idempotent ledger write that depends on it (``part_read``,
  ``part_write``, random latencies, so they finish in any order), then races two reads
  (``race_quote``, random latencies): the first to return cancels the other, whose call is
  settled as cancelled.

The store is a SQLite file or a PostgreSQL schema (``Config.db`` is then a
``postgresql://`` URL whose ``search_path`` names it, opened with ``open_store``); with
``Config.owner`` set the PostgreSQL runtime runs as that owner, taking a lease (and fencing
token) for every actor, as several runtimes sharing a database do.

Every tool records each execution in an external SQLite *ledger* database (``attempts``)
and applies its effect there: ``ledger`` rows keyed by idempotency key (INSERT OR IGNORE),
``transfers`` and ``notifications`` with no uniqueness at all, so a repeated side effect
shows up as a second row. The first argument of every tool is its call identity (``ident``).

Run as a process (``python -m tests.torture.workload``) it sends all jobs (with stable
message ids, so a restarted run re-sends them harmlessly), resolves in-doubt intents like an
operator would (looks the call up in ``notifications`` and answers ``result=`` or
``retry=True``), waits for the auditor's done row, asks every actor for a final dump and
writes it to ``$ACTORLOG_TORTURE_OUT``. It reads its configuration from the environment
(see :class:`Config`) and can be killed by :class:`~tests.torture.faulty.KillSwitch`.
"""

from __future__ import annotations

import contextlib
import json
import os
import random
import sqlite3
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import anyio
import anyio.to_thread
import attrs
from actorlog import (
    Actor,
    ActorRef,
    ActorSystem,
    Context,
    Happened,
    NotHappened,
    ToolCallError,
    tool,
)
from actorlog.store import Store
from actorlog.stores import SqliteStore, open_store
from actorlog.stores.sqlite import Durability

from tests._payload import payload_of

from .faulty import FaultyStore, KillSwitch

__all__ = [
    "Auditor",
    "Config",
    "Coordinator",
    "Dump",
    "Job",
    "Tally",
    "Task",
    "Worker",
    "actor_ids",
    "configure",
    "is_postgres",
    "ledger_connect",
    "main",
    "make_jobs",
    "make_store",
]

KINDS = ("pay", "pay", "transfer", "notify", "mixed", "flaky", "boom")

# -- configuration -------------------------------------------------------------------------


@attrs.define
class Config:
    """What one worker process (or the in-test verifier) runs against.

    Environment: ``ACTORLOG_TORTURE_DB`` (the store: a SQLite file, or a ``postgresql://``
    URL whose ``search_path`` names an existing schema), ``ACTORLOG_TORTURE_LEDGER``,
    ``ACTORLOG_TORTURE_OUT`` (final dump), ``ACTORLOG_TORTURE_SEED``,
    ``ACTORLOG_TORTURE_JOBS``, ``ACTORLOG_TORTURE_WORKERS``, ``ACTORLOG_TORTURE_RUN`` (run
    number, recorded with every tool execution), ``ACTORLOG_TORTURE_KILL`` (kill spec),
    ``ACTORLOG_TORTURE_DURABILITY`` (the SqliteStore durability mode),
    ``ACTORLOG_TORTURE_COMMIT_ON_LOOP`` (``1``: ``SqliteStore(commit_on_loop=True)``, ``0``:
    ``False``; empty: the default, ``"auto"``),
    ``ACTORLOG_TORTURE_TOOL_DELAY`` (seconds each tool takes, like a remote service),
    ``ACTORLOG_TORTURE_OWNER`` (PostgreSQL: the runtime's owner name for leases; empty for
    none; a restarted run keeps the name, as a restarted service would),
    ``ACTORLOG_TORTURE_BACKEND`` (the worker's anyio backend: ``asyncio``, the default, or
    ``trio``; SQLite only, asyncpg runs on asyncio only), ``ACTORLOG_TORTURE_FANOUT``
    (``1``: ``fanout`` jobs too, concurrent tool calls inside a step).
    """

    db: str
    ledger: str
    out: str = ""
    seed: int = 0
    jobs: int = 30
    workers: int = 3
    run: int = 0
    durability: str = "fsync"
    tool_delay: float = 0.0
    owner: str = ""
    commit_on_loop: bool | None = None  # None: the store's default ("auto")
    backend: str = "asyncio"
    fanout: bool = False

    @classmethod
    def from_env(cls) -> Config:
        e = os.environ
        return cls(
            db=e["ACTORLOG_TORTURE_DB"],
            ledger=e["ACTORLOG_TORTURE_LEDGER"],
            out=e.get("ACTORLOG_TORTURE_OUT", ""),
            seed=int(e.get("ACTORLOG_TORTURE_SEED", "0")),
            jobs=int(e.get("ACTORLOG_TORTURE_JOBS", "30")),
            workers=int(e.get("ACTORLOG_TORTURE_WORKERS", "3")),
            run=int(e.get("ACTORLOG_TORTURE_RUN", "0")),
            durability=e.get("ACTORLOG_TORTURE_DURABILITY", "fsync"),
            tool_delay=float(e.get("ACTORLOG_TORTURE_TOOL_DELAY", "0")),
            owner=e.get("ACTORLOG_TORTURE_OWNER", ""),
            commit_on_loop={"1": True, "0": False}.get(
                e.get("ACTORLOG_TORTURE_COMMIT_ON_LOOP", "")
            ),
            backend=e.get("ACTORLOG_TORTURE_BACKEND", "asyncio"),
            fanout=e.get("ACTORLOG_TORTURE_FANOUT", "") == "1",
        )

    def env(self) -> dict[str, str]:
        return {
            "ACTORLOG_TORTURE_DB": self.db,
            "ACTORLOG_TORTURE_LEDGER": self.ledger,
            "ACTORLOG_TORTURE_OUT": self.out,
            "ACTORLOG_TORTURE_SEED": str(self.seed),
            "ACTORLOG_TORTURE_JOBS": str(self.jobs),
            "ACTORLOG_TORTURE_WORKERS": str(self.workers),
            "ACTORLOG_TORTURE_RUN": str(self.run),
            "ACTORLOG_TORTURE_DURABILITY": self.durability,
            "ACTORLOG_TORTURE_TOOL_DELAY": str(self.tool_delay),
            "ACTORLOG_TORTURE_OWNER": self.owner,
            "ACTORLOG_TORTURE_COMMIT_ON_LOOP": {True: "1", False: "0", None: ""}[
                self.commit_on_loop
            ],
            "ACTORLOG_TORTURE_BACKEND": self.backend,
            "ACTORLOG_TORTURE_FANOUT": "1" if self.fanout else "",
        }


def is_postgres(db: str) -> bool:
    """True if the store ``db`` names is PostgreSQL (a URL), False for a SQLite file."""
    return db.startswith(("postgresql://", "postgres://"))


def make_store(config: Config) -> Store:
    """The (unopened) store ``config.db`` names, in ``config.durability`` for SQLite."""
    if is_postgres(config.db):
        return open_store(config.db)
    durability: Durability = "fsync" if config.durability == "fsync" else "survive-process-crash"
    if config.commit_on_loop is None:
        return SqliteStore(config.db, durability=durability)
    return SqliteStore(config.db, durability=durability, commit_on_loop=config.commit_on_loop)


_config: Config | None = None
_kill = KillSwitch()


def configure(config: Config, kill: KillSwitch | None = None) -> None:
    """Point the tools at a ledger (and a kill switch). Creates the ledger schema."""
    global _config, _kill
    _config = config
    _kill = kill or KillSwitch()
    with ledger_connect(config.ledger) as db:
        db.executescript(_LEDGER_SCHEMA)


def _cfg() -> Config:
    if _config is None:
        raise RuntimeError("tests.torture.workload.configure() was not called")
    return _config


def make_jobs(seed: int, n: int, workers: int, fanout: bool = False) -> list[Job]:
    """The seeded job list: the same for the reference run and every crashed run. With
    ``fanout``, ``fanout`` jobs are a third of the kinds drawn."""
    rng = random.Random(seed)
    kinds = (*KINDS, *(("fanout",) * (len(KINDS) // 2) if fanout else ()))
    first = rng.sample(kinds, len(kinds))  # every kind early on, in a seeded order
    jobs = []
    for i in range(1, n + 1):
        jobs.append(
            Job(
                n=i,
                kind=first[i - 1] if i <= len(first) else rng.choice(kinds),
                account=f"acct-{rng.randrange(5)}",
                amount=rng.randrange(1, 1000),
                worker=f"w{rng.randrange(workers)}",
            )
        )
    return jobs


def expected_tallies(jobs: list[Job]) -> int:
    return sum(1 for j in jobs if j.kind != "boom")


def actor_ids(config: Config) -> list[str]:
    return ["coord", *(f"w{i}" for i in range(config.workers)), "auditor"]


# -- the external ledger --------------------------------------------------------------------

_LEDGER_SCHEMA = """
PRAGMA journal_mode=WAL;
CREATE TABLE IF NOT EXISTS attempts (
    id INTEGER PRIMARY KEY, tool TEXT NOT NULL, ident TEXT NOT NULL, run INTEGER NOT NULL);
CREATE TABLE IF NOT EXISTS ledger (
    key TEXT PRIMARY KEY, ident TEXT NOT NULL, account TEXT NOT NULL,
    amount INTEGER NOT NULL, memo TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS transfers (
    id INTEGER PRIMARY KEY, ident TEXT NOT NULL, src TEXT NOT NULL, dst TEXT NOT NULL,
    amount INTEGER NOT NULL, memo TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS notifications (
    id INTEGER PRIMARY KEY, ident TEXT NOT NULL, text TEXT NOT NULL, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS done (key TEXT PRIMARY KEY, ident TEXT NOT NULL, count INTEGER);
CREATE TABLE IF NOT EXISTS escalations (
    id INTEGER PRIMARY KEY, run INTEGER NOT NULL, actor TEXT NOT NULL,
    intent_seq INTEGER NOT NULL, tool TEXT NOT NULL, key TEXT NOT NULL, ident TEXT NOT NULL,
    decision TEXT NOT NULL);
"""


@contextlib.contextmanager
def ledger_connect(path: str) -> Iterator[sqlite3.Connection]:
    """An autocommit connection to the ledger, closed on exit."""
    db = sqlite3.connect(path, isolation_level=None, timeout=30)
    try:
        db.execute("PRAGMA synchronous=FULL")
        yield db
    finally:
        db.close()


def _ledger(tool_name: str, ident: str, *statements: tuple[str, tuple[Any, ...]]) -> None:
    """Record one execution of a tool and apply its effect, in one transaction."""
    with ledger_connect(_cfg().ledger) as db:
        db.execute("BEGIN IMMEDIATE")
        db.execute(
            "INSERT INTO attempts (tool, ident, run) VALUES (?, ?, ?)",
            (tool_name, ident, _cfg().run),
        )
        for sql, params in statements:
            db.execute(sql, params)
        db.execute("COMMIT")


async def _apply(tool_name: str, ident: str, *statements: tuple[str, tuple[Any, ...]]) -> None:
    if _cfg().tool_delay:
        await anyio.sleep(_cfg().tool_delay)  # the latency of a real remote call
    _kill.hit("tool_before", [tool_name, ident])
    await anyio.to_thread.run_sync(lambda: _ledger(tool_name, ident, *statements))
    _kill.hit("tool_after", [tool_name, ident])


# -- tools ----------------------------------------------------------------------------------


@tool(effect="read", name="lookup_rate")
async def lookup_rate(ident: str, n: int) -> int:
    await _apply("lookup_rate", ident)
    return 1 + (n * 7) % 5


@tool(effect="read", name="fetch_account")
async def fetch_account(ident: str, account: str) -> dict[str, Any]:
    await _apply("fetch_account", ident)
    return {"account": account, "limit": 100 * (1 + len(account))}


@tool(effect="read", name="flaky_lookup")
async def flaky_lookup(ident: str, n: int) -> int:
    await _apply("flaky_lookup", ident)
    raise LookupError(f"no data for job {n}")


@tool(effect="write", idempotent=True, name="ledger_write")
async def ledger_write(
    ident: str, account: str, amount: int, memo: str, *, idempotency_key: str
) -> str:
    await _apply(
        "ledger_write",
        ident,
        (
            "INSERT OR IGNORE INTO ledger (key, ident, account, amount, memo) VALUES (?,?,?,?,?)",
            (idempotency_key, ident, account, amount, memo),
        ),
    )
    return f"paid {amount} to {account}"


def _find_transfer(ident: str) -> int | None:
    with ledger_connect(_cfg().ledger) as db:
        db.execute(
            "INSERT INTO attempts (tool, ident, run) VALUES (?, ?, ?)",
            ("reconcile_transfer", ident, _cfg().run),
        )
        row = db.execute("SELECT amount FROM transfers WHERE ident = ?", (ident,)).fetchone()
    return None if row is None else int(row[0])


async def reconcile_transfer(key: str, args: dict[str, Any]) -> Happened | NotHappened:
    amount = await anyio.to_thread.run_sync(lambda: _find_transfer(str(args["ident"])))
    if amount is None:
        return NotHappened()
    return Happened(f"moved {amount}")


@tool(effect="write", reconcile=reconcile_transfer, name="transfer")
async def transfer(ident: str, src: str, dst: str, amount: int, memo: str) -> str:
    await _apply(
        "transfer",
        ident,
        (
            "INSERT INTO transfers (ident, src, dst, amount, memo) VALUES (?,?,?,?,?)",
            (ident, src, dst, amount, memo),
        ),
    )
    return f"moved {amount}"


@tool(effect="write", name="notify")
async def notify(ident: str, text: str) -> str:
    value = f"sent {len(text)} chars"
    await _apply(
        "notify",
        ident,
        ("INSERT INTO notifications (ident, text, value) VALUES (?,?,?)", (ident, text, value)),
    )
    return value


@tool(effect="read", name="part_read")
async def part_read(ident: str, i: int) -> int:
    """A fan-out task's first call: a read after a random latency."""
    await anyio.sleep(random.uniform(0.0, 0.02))
    await _apply("part_read", ident)
    return i * 3


@tool(effect="write", idempotent=True, name="part_write")
async def part_write(
    ident: str, account: str, amount: int, memo: str, *, idempotency_key: str
) -> str:
    """One of a fan-out's parallel writes: an idempotent ledger row after a random latency
    (not journaled: a tool may be as non-deterministic as the world), so the parts of a
    step finish in a different order in every run."""
    await anyio.sleep(random.uniform(0.0, 0.02))
    await _apply(
        "part_write",
        ident,
        (
            "INSERT OR IGNORE INTO ledger (key, ident, account, amount, memo) VALUES (?,?,?,?,?)",
            (idempotency_key, ident, account, amount, memo),
        ),
    )
    return f"part {amount}"


@tool(effect="read", name="race_quote")
async def race_quote(ident: str, who: str) -> str:
    """A contestant of a race: recorded when it starts, returns after a random latency (the
    loser is cancelled while it waits, or finishes too late to win)."""
    await _apply("race_quote", ident)
    await anyio.sleep(random.uniform(0.0, 0.03))
    return who


@tool(effect="write", idempotent=True, name="mark_done")
async def mark_done(ident: str, count: int, *, idempotency_key: str) -> None:
    await _apply(
        "mark_done",
        ident,
        (
            "INSERT OR IGNORE INTO done (key, ident, count) VALUES (?,?,?)",
            (idempotency_key, ident, count),
        ),
    )


# -- messages and states --------------------------------------------------------------------


@attrs.define
class Job:
    n: int
    kind: str
    account: str
    amount: int
    worker: str


@attrs.define
class Task:
    n: int
    kind: str
    account: str
    amount: int
    uuid: str


@attrs.define
class Tally:
    n: int
    worker: str
    amount: int


@attrs.define
class Dump:
    """Reply with the whole state (read-only)."""


@attrs.define
class CoordState:
    jobs: list[int] = attrs.Factory(list)
    chain: int = 0
    uuids: dict[str, str] = attrs.Factory(dict)
    clock_ok: int = 0


@attrs.define
class WorkerState:
    done: list[int] = attrs.Factory(list)
    total: int = 0
    results: dict[str, str] = attrs.Factory(dict)
    memos: dict[str, str] = attrs.Factory(dict)
    tool_errors: list[int] = attrs.Factory(list)
    #: fanout jobs: which contestant won the race (timing: not compared with the reference)
    winners: dict[str, str] = attrs.Factory(dict)


@attrs.define
class AuditState:
    tallies: dict[str, int] = attrs.Factory(dict)
    by_worker: dict[str, int] = attrs.Factory(dict)
    done: bool = False


class Coordinator(Actor[CoordState]):
    __actorlog_tag__ = "torture.Coordinator"
    snapshot_every = 5
    snapshot_keep = 2

    async def receive(self, ctx: Context, msg: Job | Dump) -> Any:
        if isinstance(msg, Dump):
            return attrs.asdict(self.state)
        rate = await ctx.call(lookup_rate, f"job-{msg.n}:rate", msg.n)
        u = ctx.uuid()
        if ctx.now().tzinfo is not None:
            self.state.clock_ok += 1
        ref = await ctx.spawn(Worker, msg.worker)
        await ctx.send(ref, Task(msg.n, msg.kind, msg.account, msg.amount * rate, str(u)))
        self.state.jobs.append(msg.n)
        self.state.chain = (self.state.chain * 31 + msg.n * rate) % 1_000_000_007
        self.state.uuids[str(msg.n)] = str(u)
        return rate


class Worker(Actor[WorkerState]):
    __actorlog_tag__ = "torture.Worker"
    snapshot_every = 3
    snapshot_keep = 2

    async def receive(self, ctx: Context, msg: Task | Dump) -> Any:
        if isinstance(msg, Dump):
            return attrs.asdict(self.state)
        n = msg.n
        info = await ctx.call(fetch_account, f"job-{n}:fetch", msg.account)
        memo = f"{msg.uuid}|{ctx.random()!r}"
        amount = min(msg.amount, int(info["limit"]) * 10)
        result = ""
        if msg.kind == "boom":
            raise RuntimeError(f"job {n} refused by policy")
        if msg.kind in ("pay", "mixed"):
            result = await ctx.call(ledger_write, f"job-{n}:pay", msg.account, amount, memo)
        if msg.kind == "transfer":
            result = await ctx.call(
                transfer, f"job-{n}:transfer", msg.account, "bank", amount, memo
            )
        if msg.kind in ("notify", "mixed"):
            result += await ctx.call(notify, f"job-{n}:notify", f"{msg.account}: {amount}")
        if msg.kind == "fanout":
            result = await self._fanout(ctx, n, msg.account, amount, memo)
        if msg.kind == "flaky":
            try:
                await ctx.call(flaky_lookup, f"job-{n}:flaky", n)
            except ToolCallError as exc:
                self.state.tool_errors.append(n)
                result = exc.error_type
        self.state.done.append(n)
        self.state.total += amount
        self.state.results[str(n)] = result
        self.state.memos[str(n)] = memo
        auditor = await ctx.spawn(Auditor, "auditor")
        await ctx.send(auditor, Tally(n, self.actor_id, amount))
        return result

    async def _fanout(self, ctx: Context, n: int, account: str, amount: int, memo: str) -> str:
        """Five parallel writes in a task group, then a race of two reads."""
        parts: dict[int, str] = {}

        async def part(i: int) -> None:
            # two dependent calls per task (issue 25's example): which intent a task logs
            # second depends on which of the reads returned first
            extra = await ctx.call(part_read, f"job-{n}:read-{i}", i)
            ident = f"job-{n}:part-{i}"
            parts[i] = await ctx.call(part_write, ident, account, amount + extra, memo)

        async with anyio.create_task_group() as tg:
            for i in range(5):
                tg.start_soon(part, i)
        winner: list[str] = []

        async def contestant(who: str) -> None:
            got = await ctx.call(race_quote, f"job-{n}:race-{who}", who)
            if not winner:
                winner.append(got)
                tg.cancel_scope.cancel()  # the loser's call is settled as cancelled

        async with anyio.create_task_group() as tg:
            for who in ("a", "b"):
                tg.start_soon(contestant, who)
        self.state.winners[str(n)] = winner[0]
        return ",".join(parts[i] for i in range(5))


class Auditor(Actor[AuditState]):
    __actorlog_tag__ = "torture.Auditor"
    snapshot_every = 4
    snapshot_keep = 3

    async def receive(self, ctx: Context, msg: Tally | Dump) -> Any:
        if isinstance(msg, Dump):
            return attrs.asdict(self.state)
        self.state.tallies[str(msg.n)] = msg.amount
        self.state.by_worker[msg.worker] = self.state.by_worker.get(msg.worker, 0) + 1
        cfg = _cfg()
        jobs = make_jobs(cfg.seed, cfg.jobs, cfg.workers, cfg.fanout)
        if len(self.state.tallies) == expected_tallies(jobs):
            await ctx.call(mark_done, "done", len(self.state.tallies))
            self.state.done = True
        return len(self.state.tallies)


ACTORS: list[type[Actor[Any]]] = [Coordinator, Worker, Auditor]


# -- the worker process ---------------------------------------------------------------------


def _is_done(ledger: str) -> bool:
    with ledger_connect(ledger) as db:
        return int(db.execute("SELECT count(*) FROM done").fetchone()[0]) > 0


def _decide(cfg: Config, actor: str, seq: int, tool_name: str, key: str, ident: str) -> str:
    """The operator's policy for an escalated call: did it happen? (look it up)."""
    with ledger_connect(cfg.ledger) as db:
        row = db.execute("SELECT value FROM notifications WHERE ident = ?", (ident,)).fetchone()
        decision = "retry" if row is None else "result:" + str(row[0])
        db.execute(
            "INSERT INTO escalations (run, actor, intent_seq, tool, key, ident, decision) "
            "VALUES (?,?,?,?,?,?,?)",
            (cfg.run, actor, seq, tool_name, key, ident, decision),
        )
    return decision


async def _resolver(system: ActorSystem, cfg: Config) -> None:
    """Resolve every escalated intent like an operator reading the history would."""
    while True:
        for actor in actor_ids(cfg):
            for seq, (tool_name, key) in system.in_doubt(actor).items():
                (row,) = await system.store.read(actor, after_seq=seq - 1, upto_seq=seq)
                ident = str(payload_of(row.kind, row.payload)["args"][0])
                decision = await anyio.to_thread.run_sync(
                    _decide, cfg, actor, seq, tool_name, key, ident
                )
                if decision == "retry":
                    await system.resolve(actor, seq, retry=True, by="torture", reason="not found")
                else:
                    value = decision.removeprefix("result:")
                    await system.resolve(actor, seq, result=value, by="torture", reason="found")
        await anyio.sleep(0.02)


def _no_quarantine(system: ActorSystem, cfg: Config) -> None:
    """Fail the run at once (the driver reports its stderr) when an actor is quarantined:
    it would never finish its work, and the driver would only see a hang."""
    for actor in actor_ids(cfg):
        if system.status(actor) == "quarantined":
            raise RuntimeError(f"{actor} is quarantined: {system.error(actor)!r}")


async def run_worker(cfg: Config, kill: KillSwitch) -> None:
    if cfg.backend == "trio":  # the backend asked for, not a silent fallback to asyncio
        import trio

        trio.lowlevel.current_task()  # RuntimeError outside trio
    configure(cfg, kill)
    store = FaultyStore(make_store(cfg), kill=kill)
    jobs = make_jobs(cfg.seed, cfg.jobs, cfg.workers, cfg.fanout)
    dump: dict[str, Any] = {}
    async with (
        ActorSystem(store, actors=ACTORS, shutdown_grace=1.0, owner=cfg.owner or None) as system,
        anyio.create_task_group() as tg,
    ):
        tg.start_soon(_resolver, system, cfg)
        coord = await system.spawn(Coordinator, "coord")
        for job in jobs:
            await coord.send(job, message_id=f"job-{job.n}")
        while not await anyio.to_thread.run_sync(_is_done, cfg.ledger):
            _no_quarantine(system, cfg)
            await anyio.sleep(0.02)
        refs: list[ActorRef[Any]] = [
            system.ref(Coordinator, "coord"),
            *(system.ref(Worker, f"w{i}") for i in range(cfg.workers)),
            system.ref(Auditor, "auditor"),
        ]
        for ref in refs:
            dump[ref.actor_id] = await ref.ask(Dump(), message_id="final-dump")
        tg.cancel_scope.cancel()
    if cfg.out:
        tmp = cfg.out + ".tmp"
        Path(tmp).write_text(json.dumps(dump, sort_keys=True))
        os.replace(tmp, cfg.out)


def main() -> None:
    cfg = Config.from_env()
    anyio.run(run_worker, cfg, KillSwitch.from_env(), backend=cfg.backend)


if __name__ == "__main__":
    # Run as ``python -m tests.torture.workload``: use the importable module, so class and
    # tool names are the same in the worker and in the tests that verify its store.
    from tests.torture import workload

    workload.main()
    sys.exit(0)
