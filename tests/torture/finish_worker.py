"""A runtime process for the finish crash test (``test_finish_crash.py``).

``python -m tests.torture.finish_worker DB MARKS MODE``

* ``run-before``: actor ``f`` handles ``Mark`` (its write tool ``mark`` appends a line to
  MARKS), then ``Finish`` (``ctx.stop()``). The store prints ``KILLPOINT`` and blocks just
  before the finishing step's entries (the ``finish`` effect and the step) are appended:
  SIGKILL lands there.
* ``run-after``: the same, but it blocks once the step is durable, before the ``finished``
  event of the operator history is recorded.
* ``restart``: starts a runtime, asks ``f`` again and prints ``refused TYPE`` (or ``ran``).
"""

from __future__ import annotations

import sys
import time
from collections.abc import Sequence

import anyio
from actorlog import ActorSystem
from actorlog.store import EntryRow
from actorlog.stores import SqliteStore

from ._finish_agents import MARKS, Finish, Finisher, Mark


def _killpoint() -> None:
    print("KILLPOINT", flush=True)
    time.sleep(600)  # blocking: the SIGKILL lands here


class Hanging(SqliteStore):
    mode = ""

    async def append(self, actor_id: str, expected_last_seq: int, rows: Sequence[EntryRow]) -> None:
        if self.mode == "run-before" and any(r.type_tag == "finish" for r in rows):
            _killpoint()
        await super().append(actor_id, expected_last_seq, rows)

    async def record_event(self, actor_id: str, kind: str, detail: str) -> None:
        if self.mode == "run-after" and kind == "finished":
            _killpoint()
        await super().record_event(actor_id, kind, detail)


async def main(db: str, marks: str, mode: str) -> None:
    MARKS[0] = marks
    store = Hanging(db)
    store.mode = mode
    async with ActorSystem(store, actors=[Finisher]) as system:
        if mode == "restart":
            try:
                await system.ref(Finisher, "f").ask(Finish("again"), timeout=30)
                print("ran", flush=True)
            except Exception as exc:
                print("refused", type(exc).__name__, flush=True)
            return
        ref = await system.spawn(Finisher, "f")
        await ref.ask(Mark())  # durable before the next step starts
        await ref.send(Finish("done"))  # returns once the message is durable
        await ref.ask(Mark())  # queued behind it
        print("no kill point reached", flush=True)


if __name__ == "__main__":
    db, marks, mode = sys.argv[1:4]
    anyio.run(main, db, marks, mode, backend="asyncio")
