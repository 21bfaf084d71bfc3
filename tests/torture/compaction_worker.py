"""A process the compaction crash test kills (tests/torture/test_compaction_crash.py).

``python -m tests.torture.compaction_worker URL run N``: the actor ``rolling`` (retention
``since-snapshot``, compacted in the background after each snapshot) handles ``Step(i)`` for
i = where it left off .. N-1, each with message id ``s{i}``.
``... URL fill N``: the actor ``big`` (retention ``all``) handles N steps.
``... URL compact``: ``ops.compact`` of every actor, since-snapshot, a few entries per
transaction (so a kill lands mid-compaction). Prints a line before each phase (flushed).
"""

from __future__ import annotations

import sys
from datetime import timedelta
from typing import ClassVar

import anyio
import attrs
from actorlog import Actor, ActorSystem, Context, message, ops
from actorlog._durability import retention as _retention
from actorlog.stores import open_store


@message(name="torture.compaction.Step")
@attrs.define
class Step:
    i: int


@message(name="torture.compaction.Peek")
@attrs.define
class Peek:
    pass


@message(name="torture.compaction.Seen")
@attrs.define
class Seen:
    seen: list[int] = attrs.Factory(list)


class Rolling(Actor[Seen], name="torture.compaction.Rolling"):
    snapshot_every: ClassVar[int | None] = 3
    snapshot_keep: ClassVar[int] = 2
    retention: ClassVar[str | float | timedelta] = "since-snapshot"

    async def receive(self, ctx: Context, msg: Step | Peek) -> list[int]:
        if isinstance(msg, Step):
            ctx.now()
            self.state.seen.append(msg.i)
        return list(self.state.seen)


class Big(Rolling, name="torture.compaction.Big"):
    retention: ClassVar[str | float | timedelta] = "all"


async def main(url: str, mode: str, n: int) -> None:
    store = open_store(url)
    if mode == "compact":
        _retention.MAX_PER_CALL = 5
        await store.open()
        try:
            print("compacting", flush=True)
            await ops.compact(store, retention="since-snapshot", by="torture")
        finally:
            await store.close()
        print("done", flush=True)
        return
    cls, actor_id = (Rolling, "rolling") if mode == "run" else (Big, "big")
    async with ActorSystem(store, actors=[Rolling, Big]) as system:
        ref = await system.spawn(cls, actor_id)
        start = len(await ref.ask(Peek()))
        for i in range(start, n):
            await ref.ask(Step(i), message_id=f"s{i}")
            print("step", i, flush=True)
    print("done", flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], int(sys.argv[3]) if len(sys.argv) > 3 else 0)
