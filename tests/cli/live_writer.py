"""A runtime that keeps writing a SQLite store until killed (for verify-while-live tests).

Usage: python live_writer.py DB   (prints READY once the first steps are durable)
"""

from __future__ import annotations

import sys

import anyio
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from tests.cli._agents import Auditor, Biller, Job


async def main(db: str) -> None:
    async with ActorSystem(SqliteStore(db), actors=[Biller, Auditor]) as system:
        refs = [
            await system.spawn(Biller, f"w-{i}", snapshot_every=2, snapshot_keep=2)
            for i in range(3)
        ]
        n = 0
        while True:
            async with anyio.create_task_group() as tg:
                for ref in refs:
                    tg.start_soon(ref.ask, Job(f"j{n}"))
            n += 1
            if n == 3:
                print("READY", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], backend="asyncio")
