"""Run by ``test_retry_crash.py``: spawn the retrier over the store at ``argv[1]`` (a URL),
send it one message, then wait to be killed (the first attempt fails, the back-off waits
``retry_agents.DELAY`` seconds)."""

from __future__ import annotations

import sys

import anyio
from actorlog import ActorSystem
from actorlog.stores.url import open_store

from tests.torture.retry_agents import Go, Retrier


async def main(url: str) -> None:
    async with ActorSystem(open_store(url), actors=[Retrier]) as system:
        ref = await system.spawn(Retrier, "retrier")
        await ref.send(Go("report"), message_id="go-1")
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1])
