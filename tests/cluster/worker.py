"""One runtime process of the multi-process test (``python -m tests.cluster.worker``).

Args: DSN SCHEMA OWNER LEASE_TTL CLIENTS. Runs an ActorSystem with ``owner=OWNER`` over the
shared PostgreSQL schema, and CLIENTS concurrent clients that take asks from the ``work``
table (a taken item whose taker went silent is taken again), ask them with their message id,
and record the answer. The ``book`` tool writes the ``ledger`` table (idempotency key as
primary key) and ``calls`` (every execution). Exits when every ask is answered; writes the
actors it lost to ``lost``.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence
from typing import Any

import anyio
import asyncpg
from actorlog import ActorSystem
from actorlog.store import EntryRow
from actorlog.stores import PostgresStore

from .agents import (
    BEFORE_REMOTE,
    LEDGER_WRITER,
    NAPPING,
    ON_NAP,
    OWNER,
    SERVICE,
    Account,
    Deposit,
    Ledgered,
    Nap,
    Remote,
    Sleeper,
)

CLAIM = """
UPDATE work SET taken_by = $1, taken_at = now() WHERE message_id = (
    SELECT message_id FROM work
    WHERE answer IS NULL AND (taken_by IS NULL OR taken_at < now() - make_interval(secs => $2))
    ORDER BY random() LIMIT 1 FOR UPDATE SKIP LOCKED)
RETURNING message_id, actor_id, n
"""


async def main(dsn: str, schema: str, owner: str, ttl: float, clients: int) -> None:
    pool: Any = await asyncpg.create_pool(
        dsn, min_size=1, max_size=4, server_settings={"search_path": f'"{schema}"'}
    )

    async def write_ledger(key: str, amount: int) -> None:
        await pool.execute("INSERT INTO calls (key, owner) VALUES ($1, $2)", key, owner)
        await pool.execute(
            "INSERT INTO ledger (key, amount) VALUES ($1, $2) ON CONFLICT DO NOTHING", key, amount
        )
        await anyio.sleep(0.002)  # an effect takes a while: steps are in flight at a kill

    LEDGER_WRITER.append(write_ledger)
    store = PostgresStore(dsn, schema=schema, max_size=6)
    async with ActorSystem(store, actors=[Account], owner=owner, lease_ttl=ttl) as system:
        print("ready", flush=True)
        done = anyio.Event()

        async def client() -> None:
            while not done.is_set():
                item = await pool.fetchrow(CLAIM, owner, ttl * 2.5)
                if item is None:
                    left = await pool.fetchval("SELECT count(*) FROM work WHERE answer IS NULL")
                    if left == 0:
                        done.set()
                        return
                    await anyio.sleep(0.05)
                    continue
                message_id, actor_id, n = item
                try:
                    ref = system.ref(Account, actor_id)
                    answer = await ref.ask(Deposit(n), message_id=message_id, timeout=ttl * 4)
                except Exception as exc:
                    await pool.execute(
                        "UPDATE work SET taken_by = NULL, errors = errors || $2::text "
                        "WHERE message_id = $1",
                        message_id,
                        f"{owner}:{type(exc).__name__};",
                    )
                    continue
                await pool.execute(
                    "UPDATE work SET answer = $2, answered_by = $3, answers = answers + 1 "
                    "WHERE message_id = $1",
                    message_id,
                    answer,
                    owner,
                )

        async def report_lost() -> None:
            async for change in system.ownership_changes():
                if change.kind == "lost":
                    await pool.execute(
                        "INSERT INTO lost (owner, actor_id) VALUES ($1, $2)",
                        owner,
                        change.actor_id,
                    )

        async with anyio.create_task_group() as tg:
            tg.start_soon(report_lost)
            async with anyio.create_task_group() as clients_tg:
                for _ in range(clients):
                    clients_tg.start_soon(client)
            await anyio.sleep(ttl)  # a renewal round: a resumed zombie notices its losses
            tg.cancel_scope.cancel()
    await pool.close()


async def zombie(dsn: str, schema: str, ttl: float) -> None:
    """Own actor ``z`` and start a long tool call in it (the test SIGSTOPs us there); print
    how the actor ended once the call returns."""
    NAPPING[0] = 1.0
    ON_NAP.append(lambda: print("in-tool", flush=True))
    store = PostgresStore(dsn, schema=schema)
    async with ActorSystem(store, actors=[Sleeper], owner="zombie", lease_ttl=ttl) as system:
        ref = await system.spawn(Sleeper, "z")
        await ref.send(Nap(ttl * 2), message_id="nap-1")
        with anyio.fail_after(ttl * 20):
            while system.status("z") != "stopped":
                await anyio.sleep(0.05)
        print(f"stopped {type(system.error('z')).__name__}", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)


async def fenced(dsn: str, schema: str, ttl: float, port: int, pause_at: str) -> None:
    """Own actor ``r`` and send it one message whose step calls ``remote_write`` (the fake
    fencing-aware service on ``port``). Print ``paused-here`` where the test SIGSTOPs us:
    right after the tool's intent commits (``pause_at=intent``) or inside the tool, after
    the lease check, before its request (``pause_at=tool``); a blocking sleep keeps us there
    until the signal lands. Print how the actor ended."""
    SERVICE[:] = [port]
    OWNER[0] = "zombie"

    def pause_here() -> None:
        print("paused-here", flush=True)
        time.sleep(0.5)  # the test's SIGSTOP lands here

    class Store(PostgresStore):
        async def append(
            self,
            actor_id: str,
            expected_last_seq: int,
            rows: Sequence[EntryRow],
            *,
            fence: int | None = None,
        ) -> None:
            await super().append(actor_id, expected_last_seq, rows, fence=fence)
            if pause_at == "intent" and any(r.kind == "intent" for r in rows):
                pause_here()

    if pause_at == "tool":
        BEFORE_REMOTE.append(pause_here)
    store = Store(dsn, schema=schema)
    async with ActorSystem(store, actors=[Remote], owner="zombie", lease_ttl=ttl) as system:
        ref = await system.spawn(Remote, "r")
        await ref.send(Deposit(1), message_id="w-1")
        with anyio.fail_after(ttl * 20):
            while system.status("r") != "stopped":
                await anyio.sleep(0.05)
        print(f"stopped {type(system.error('r')).__name__}", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)


async def history(dsn: str, schema: str, owner: str, ttl: float, port: int) -> None:
    """One runtime of the history test: runs ``Ledgered`` actors until stdin closes."""
    SERVICE[:] = [port]
    OWNER[0] = owner
    store = PostgresStore(dsn, schema=schema, max_size=4)
    async with ActorSystem(store, actors=[Ledgered], owner=owner, lease_ttl=ttl):
        print("ready", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)


if __name__ == "__main__":
    if sys.argv[1] == "history":
        dsn, schema, owner, ttl, port = sys.argv[2:7]
        anyio.run(history, dsn, schema, owner, float(ttl), int(port), backend="asyncio")
    elif sys.argv[1] == "fenced":
        dsn, schema, ttl, port, pause_at = sys.argv[2:7]
        anyio.run(fenced, dsn, schema, float(ttl), int(port), pause_at, backend="asyncio")
    elif sys.argv[1] == "zombie":
        anyio.run(zombie, sys.argv[2], sys.argv[3], float(sys.argv[4]), backend="asyncio")
    else:
        dsn, schema, owner, ttl, clients = sys.argv[1:6]
        anyio.run(main, dsn, schema, owner, float(ttl), int(clients), backend="asyncio")
