"""Run by ``test_retry_crash.py``: spawn an actor over the store at ``argv[1]`` (a URL),
send it one message, then wait to be killed. ``argv[2]``, if given, names the planned actor
(``read`` or ``write``, ``retry_agents.PLANNED``) instead of the retrier (its first attempt
fails, the back-off waits ``retry_agents.DELAY`` seconds)."""

from __future__ import annotations

import sys

import anyio
from actorlog import Actor, ActorSystem
from actorlog.stores.url import open_store

from tests.torture.retry_agents import PLANNED, Go, Retrier


async def main(url: str, which: str) -> None:
    cls: type[Actor[object]] = PLANNED[which] if which else Retrier  # type: ignore[assignment]
    actor_id = f"planned-{which}" if which else "retrier"
    async with ActorSystem(open_store(url), actors=[cls]) as system:
        ref = await system.spawn(cls, actor_id)
        await ref.send(Go("report"), message_id="go-1")
        await anyio.sleep_forever()


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2] if len(sys.argv) > 2 else "")
