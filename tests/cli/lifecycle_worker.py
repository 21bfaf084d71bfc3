"""A runtime in its own process for the lifecycle CLI tests.

``python -m tests.cli.lifecycle_worker MODE ...``

* ``sqlite-crash DB``: spawns ``job-1``, sends it ``Slow`` (its write tool blocks, printing
  ``in-tool``) and two ``Work`` messages queued behind it, then waits to be SIGKILLed.
* ``pg-own DSN SCHEMA``: owner ``w1``; asks ``job-1`` a ``Slow`` step (prints ``in-tool``),
  then prints ``outcome TYPE`` (how that ask ended) and ``after VALUE-OR-TYPE`` (a ``Work``
  ask after it); waits for stdin to close.
* ``pg-finished DSN SCHEMA``: owner ``w1``; ``fin-1`` finishes (``ctx.stop``); prints
  ``finished`` and keeps owning it until stdin closes.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.stores import PostgresStore, SqliteStore

from ._lifecycle_agents import Done, Job, Slow, Work


async def _outcome(aw: Any) -> str:
    try:
        return str(await aw)
    except Exception as exc:
        return type(exc).__name__


async def sqlite_crash(db: str) -> None:
    async with ActorSystem(SqliteStore(db), actors=[Job]) as system:
        ref = await system.spawn(Job, "job-1")
        await ref.send(Slow(600), message_id="slow-1")
        await ref.send(Work("q1"), message_id="q-1")
        await ref.send(Work("q2"), message_id="q-2")
        await anyio.sleep(600)


async def pg_own(dsn: str, schema: str) -> None:
    store = PostgresStore(dsn, schema=schema)
    async with ActorSystem(store, actors=[Job], owner="w1", lease_ttl=5) as system:
        ref = await system.spawn(Job, "job-1")
        print("outcome", await _outcome(ref.ask(Slow(600), timeout=120)), flush=True)
        print("after", await _outcome(ref.ask(Work("next"), timeout=60)), flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)


async def pg_finished(dsn: str, schema: str) -> None:
    store = PostgresStore(dsn, schema=schema)
    async with ActorSystem(store, actors=[Job], owner="w1", lease_ttl=5) as system:
        ref = await system.spawn(Job, "fin-1")
        await ref.ask(Done("bye"))
        print("finished", flush=True)
        await anyio.to_thread.run_sync(sys.stdin.readline)


if __name__ == "__main__":
    mode = sys.argv[1]
    if mode == "sqlite-crash":
        anyio.run(sqlite_crash, sys.argv[2], backend="asyncio")
    else:
        fn = {"pg-own": pg_own, "pg-finished": pg_finished}[mode]
        anyio.run(fn, sys.argv[2], sys.argv[3], backend="asyncio")
