"""A Jepsen-style history check: runtimes that die and pause, a client, one PostgreSQL.

Three runtime processes (``tests/cluster/worker.py history``) run ``Ledgered`` actors, whose
every step calls ``remote_write`` on a fake service that enforces fencing tokens and applies
each idempotency key once (``fence_service.py``: the side ledger). A client in this process
(``ActorSystem(store, client=True)``) runs one sequential stream of asks per actor, each with
its own ``message_id``, and records every operation: ``invoke``, then ``ok`` (with the
reply), ``fail`` (a recorded error) or ``timeout`` (asked again with the same id). Meanwhile a
nemesis driven by a seed SIGKILLs runtimes (a new one starts in their place) and SIGSTOPs them
for 0.3-2.5 leases before SIGCONT.

At the end the checker proves from the log, the side ledger and the recorded history:

1. no acknowledged operation lost: each ``ok`` has its message in the log with one step whose
   reply is what the client got;
2. nothing handled twice: one message entry per message id, one step per message, every
   message handled;
3. per-actor replies in order: steps number 1, 2, 3... along each log, running totals add up,
   and the client saw each actor's counts increase in the order it asked;
4. each idempotency key applied once, and only for a logged intent;
5. no write and no accepted effect by a runtime after it lost the actor: fencing tokens never
   go down along an actor's log; the service accepted no token lower than one it had seen,
   and every (actor, token) belongs to one runtime; stale tool starts (a pause between the
   lease check and the request, docs/scaling.md) are counted, and were all refused;
6. every actor's status true: ``ops.list_actors`` says ``idle`` with nothing pending for
   every actor, and ``ops.verify`` finds no damage.

Short by default (about 15 s of operations); ``ACTORLOG_SOAK=1`` runs 120 s with more actors,
``ACTORLOG_HISTORY_SECONDS`` / ``ACTORLOG_HISTORY_ACTORS`` / ``ACTORLOG_HISTORY_SEED`` set them
directly. The figures (failover time per fault against the lease) are printed (``-s``).
"""

from __future__ import annotations

import os
import random
import time
from typing import Any

import anyio
import asyncpg
import attrs
import pytest
from actorlog import ActorlogError, ActorSystem, HandlerError, ops
from actorlog.stores import PostgresStore

from tests._owner import OwnerProcess
from tests._payload import payload_of
from tests._pgserver import CrashableServer

from . import agents
from .agents import Ledgered, Op
from .fence_service import FenceService

pytestmark = pytest.mark.anyio

SOAK = os.environ.get("ACTORLOG_SOAK", "") not in ("", "0")
SEED = int(os.environ.get("ACTORLOG_HISTORY_SEED", "12"))
SECONDS = float(os.environ.get("ACTORLOG_HISTORY_SECONDS", "120" if SOAK else "15"))
N_ACTORS = int(os.environ.get("ACTORLOG_HISTORY_ACTORS", "40" if SOAK else "12"))
TTL = 1.0
ASK_TIMEOUT = 4 * TTL


@attrs.define
class Event:
    kind: str  # invoke | ok | fail | timeout
    op: str  # the message id
    actor: str
    n: int
    at: float
    value: Any = None


@attrs.define
class Fault:
    kind: str  # kill | pause | crash
    victim: str
    at: float
    held: list[str]  # actors whose live lease the victim held
    seconds: float = 0.0


class Runtimes:
    def __init__(self, url: str, schema: str, port: int) -> None:
        self.url, self.schema, self.port = url, schema, port
        self.procs: dict[str, OwnerProcess] = {}
        self.count = 0

    async def start(self) -> str:
        name = f"w{self.count}"
        self.count += 1
        proc = OwnerProcess(
            "tests.cluster.worker", "history", self.url, self.schema, name, TTL, self.port
        )
        self.procs[name] = proc
        line = await proc.next_line()
        assert line == "ready", line
        return name

    async def stop_all(self) -> None:
        for proc in self.procs.values():
            proc.resume()
            proc.say()
        for proc in self.procs.values():
            await proc.wait()

    def kill_all(self) -> None:
        for proc in self.procs.values():
            if proc.proc.poll() is None:
                proc.kill()
            proc.close()


async def _connect(url: str, schema: str) -> Any:
    return await asyncpg.connect(url, server_settings={"search_path": f'"{schema}"'})


async def _held(url: str, schema: str, owner: str) -> list[str]:
    try:
        conn = await _connect(url, schema)
    except (OSError, asyncpg.PostgresError):
        return []  # the server is down (the server-crash variant)
    try:
        rows = await conn.fetch(
            "SELECT actor_id FROM leases WHERE owner = $1 AND expires_at > now()", owner
        )
    finally:
        await conn.close()
    return [r[0] for r in rows]


async def test_history_under_kills_and_pauses(pg_url: str, pg_schema: str) -> None:
    await _history(pg_url, pg_schema, None)


async def test_history_with_server_crashes_too() -> None:
    """The same, and the nemesis also crashes PostgreSQL itself (SIGKILL of every server
    process; a durable server of the test's own) and starts it again."""
    server = CrashableServer()
    try:
        await anyio.to_thread.run_sync(server.start)
        await _history(server.url, "actorlog_history", server)
    finally:
        await anyio.to_thread.run_sync(server.destroy)


async def _history(pg_url: str, pg_schema: str, server: CrashableServer | None) -> None:
    rng = random.Random(SEED)
    service = FenceService()
    listener = await anyio.create_tcp_listener(local_host="127.0.0.1")
    port = listener.extra(anyio.abc.SocketAttribute.local_port)
    agents.SERVICE[:] = [port]
    store = PostgresStore(pg_url, schema=pg_schema)
    await store.open()  # the schema, before the workers start
    await store.close()  # (the server may crash meanwhile: the checker opens its own)
    runtimes = Runtimes(pg_url, pg_schema, port)
    history: list[Event] = []
    faults: list[Fault] = []
    actors = [f"h{i:03d}" for i in range(N_ACTORS)]
    try:
        async with listener, anyio.create_task_group() as service_tg:
            service_tg.start_soon(listener.serve, service.handle)
            for _ in range(3):
                await runtimes.start()
            client = ActorSystem(
                PostgresStore(pg_url, schema=pg_schema), client=True, reply_poll_interval=0.5
            )
            t0 = time.monotonic()
            stop_at = t0 + SECONDS
            async with client:

                async def stream(actor: str, seed: int) -> None:
                    mine = random.Random(seed)
                    ref = client.ref(Ledgered, actor)
                    k = 0
                    while time.monotonic() < stop_at:
                        op, n = f"{actor}-{k}", mine.randint(1, 9)
                        k += 1
                        while True:  # until it has an outcome (same message id each time)
                            history.append(Event("invoke", op, actor, n, time.monotonic()))
                            try:
                                value = await ref.ask(Op(n), message_id=op, timeout=ASK_TIMEOUT)
                            except TimeoutError:
                                history.append(Event("timeout", op, actor, n, time.monotonic()))
                                continue
                            except HandlerError as exc:
                                history.append(
                                    Event("fail", op, actor, n, time.monotonic(), str(exc))
                                )
                                break
                            except ActorlogError:  # the server is down: indeterminate
                                history.append(Event("timeout", op, actor, n, time.monotonic()))
                                await anyio.sleep(0.2)
                                continue
                            history.append(Event("ok", op, actor, n, time.monotonic(), value))
                            break

                async def nemesis() -> None:
                    while time.monotonic() < stop_at - 2 * TTL:
                        await anyio.sleep(rng.uniform(1.0, 2.5))
                        alive = sorted(runtimes.procs)
                        victim = rng.choice(alive)
                        proc = runtimes.procs[victim]
                        actions = ["kill", "pause", "pause", "none"]
                        action = rng.choice([*actions, "crash"] if server else actions)
                        if action == "crash" and server is not None:
                            await anyio.to_thread.run_sync(server.crash)
                            faults.append(Fault("crash", "postgres", time.monotonic(), actors))
                            await anyio.sleep(rng.uniform(0.2, 1.0))
                            await anyio.to_thread.run_sync(server.start)
                        elif action == "kill":
                            held = await _held(pg_url, pg_schema, victim)
                            await anyio.to_thread.run_sync(proc.kill)
                            faults.append(Fault("kill", victim, time.monotonic(), held))
                            del runtimes.procs[victim]
                            proc.close()
                            await runtimes.start()
                        elif action == "pause":
                            held = await _held(pg_url, pg_schema, victim)
                            seconds = rng.uniform(0.3, 2.5) * TTL
                            proc.pause()
                            faults.append(Fault("pause", victim, time.monotonic(), held, seconds))
                            await anyio.sleep(seconds)
                            proc.resume()

                async with anyio.create_task_group() as tg:
                    tg.start_soon(nemesis)
                    for i, actor in enumerate(actors):
                        tg.start_soon(stream, actor, SEED * 1000 + i)
            await anyio.sleep(TTL)  # resumed runtimes notice their losses
            await runtimes.stop_all()
            service_tg.cancel_scope.cancel()
        conn = await _connect(pg_url, pg_schema)
        store = PostgresStore(pg_url, schema=pg_schema)
        await store.open()
        try:
            report = await _check(store, conn, history, service, actors)
        finally:
            await conn.close()
            await store.close()
        report.update(_failovers(history, faults))
        print(f"\nhistory seed={SEED} seconds={SECONDS} actors={N_ACTORS} lease={TTL}s: {report}")
    finally:
        runtimes.kill_all()


async def _check(
    store: PostgresStore,
    conn: Any,
    history: list[Event],
    service: FenceService,
    actors: list[str],
) -> dict[str, Any]:
    oks = {e.op: e for e in history if e.kind == "ok"}
    asked = {e.op: e for e in history if e.kind == "invoke"}
    fences = {
        (r[0], r[1]): r[2] for r in await conn.fetch("SELECT actor_id, seq, fence FROM entries")
    }
    keys_logged: set[str] = set()
    steps_total = 0
    for actor in actors:
        rows = await store.read(actor)
        messages: dict[int, str] = {}
        by_id: dict[str, int] = {}
        steps: dict[int, dict[str, Any]] = {}
        for row in rows:
            if row.kind == "message":
                assert row.message_id is not None
                # 2. one message entry per message id
                assert row.message_id not in by_id, (actor, row.message_id)
                by_id[row.message_id] = row.seq
                messages[row.seq] = row.message_id
            elif row.kind == "step":
                assert row.ref not in steps, (actor, "two steps for message", row.ref)
                steps[row.ref] = payload_of(row.kind, row.payload)
            elif row.kind == "intent":
                keys_logged.add(str(payload_of(row.kind, row.payload)["key"]))
        # 2. every message handled; every message was asked by the client
        assert set(steps) == set(messages), (actor, set(messages) - set(steps))
        assert set(by_id) <= set(asked), (actor, set(by_id) - set(asked))
        # 3. steps numbered 1, 2, 3... in log order, totals add up
        total = 0
        for i, seq in enumerate(sorted(messages), start=1):
            step = steps[seq]
            assert step.get("ok"), (actor, seq, step)
            total += asked[messages[seq]].n
            assert step["reply"] == [i, total], (actor, seq, step["reply"], i, total)
            op = oks.get(messages[seq])
            # 1. what the client got is what the log recorded
            if op is not None:
                assert op.value == step["reply"], (actor, op, step)
        steps_total += len(steps)
        # 1. no acknowledged operation lost
        for op_id, ev in oks.items():
            if ev.actor == actor:
                assert op_id in by_id, (actor, "acknowledged but not in the log", op_id)
        # 3. the client saw this actor's counts increase in the order it asked
        counts = [e.value[0] for e in history if e.kind == "ok" and e.actor == actor]
        assert counts == sorted(counts) and len(set(counts)) == len(counts), (actor, counts)
        # 5. fencing tokens never go down along the log
        tokens = [fences[(actor, r.seq)] for r in rows]
        assert None not in tokens, (actor, "an unfenced write")
        assert tokens == sorted(tokens), (actor, tokens)
    # 4. each idempotency key applied once, and only for a logged intent
    assert all(count == 1 for count in service.applied.values())
    assert set(service.applied) <= keys_logged, set(service.applied) - keys_logged
    step_keys = {k for k in keys_logged}
    assert len(service.applied) == steps_total, (len(service.applied), steps_total)
    assert set(service.applied) == step_keys
    # 5. the service accepted no token lower than one it had seen; one runtime per token
    highest: dict[str, int] = {}
    owner_of: dict[tuple[str, int], str] = {}
    stale = 0
    for req in service.log:
        assert owner_of.setdefault((req.resource, req.token), req.owner) == req.owner, req
        if req.token < highest.get(req.resource, 0):
            stale += 1
            assert not req.accepted, req
        if req.accepted:
            highest[req.resource] = req.token
    # 6. every actor's status true, no damage
    statuses = {s.actor_id: s for s in await ops.list_actors(store)}
    for actor in actors:
        s = statuses[actor]
        assert (s.status, s.pending_messages, s.problem) == ("idle", 0, None), s
    report = await ops.verify(store)
    assert report.ok, report.findings
    return {
        "ops ok": len(oks),
        "timeouts": sum(1 for e in history if e.kind == "timeout"),
        "fails": sum(1 for e in history if e.kind == "fail"),
        "steps": steps_total,
        "tool calls": len(service.log),
        "stale tool starts refused": stale,
    }


def _failovers(history: list[Event], faults: list[Fault]) -> dict[str, Any]:
    """Per fault: seconds from the fault to the first answer to an ask made after it, from
    an actor the victim held (its failover, from the client's side)."""
    invoked: dict[str, float] = {}
    answered: list[tuple[str, float, float]] = []  # actor, last invoke, answer
    for e in history:
        if e.kind == "invoke":
            invoked[e.op] = e.at
        elif e.kind == "ok":
            answered.append((e.actor, invoked[e.op], e.at))
    out: list[str] = []
    for f in faults:
        held = set(f.held)
        answers = [at for actor, asked, at in answered if actor in held and asked > f.at]
        what = f"{f.kind}" + (f" {f.seconds:.1f}s" if f.kind == "pause" else "")
        took = f"{min(answers) - f.at:.2f}s" if answers else "-"
        out.append(f"{what}: {len(held)} actors, first answer after {took}")
    return {"faults": out}
