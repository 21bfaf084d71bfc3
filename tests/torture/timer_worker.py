"""A runtime killed with SIGKILL by tests/torture/test_timer_crash.py.

``start DB``: a sleeper starts a 1.5 s durable sleep, a sender's step sets a timer
(ctx.send_later, 1.5 s) and the system sets another (send_later, 1.5 s); prints READY once
all are durable, then waits to be killed. ``resume DB``: a new runtime on the same file;
prints the outcome as JSON once the sleep ended and both timers were delivered.
"""

from __future__ import annotations

import datetime
import json
import sys

import anyio
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from tests.timers.agents import Get, Later, Nap, Note, Recorder, Sender, Sleeper

ACTORS = [Sleeper, Recorder, Sender]


async def start(path: str) -> None:
    async with ActorSystem(SqliteStore(path), actors=ACTORS) as system:
        await system.ref(Sleeper, "sleeper").send(Nap(1.5, "nap"))
        await system.ref(Sender, "sender").ask(Later("rec", "from-step", 1.5))
        await system.send_later(system.ref(Recorder, "rec"), Note("from-system"), delay=1.5)
        ticks = system.ref(Recorder, "ticks")
        await system.schedule("tick", ticks, Note("tick"), every=datetime.timedelta(seconds=0.4))
        while not (system._cells.get("sleeper") and system._cells["sleeper"].sleeping):
            await anyio.sleep(0.01)
        print("READY", flush=True)
        await anyio.sleep(3600)


async def resume(path: str) -> None:
    async with ActorSystem(SqliteStore(path), actors=ACTORS) as system:
        with anyio.fail_after(30):
            while system._timers.fired < 4:  # the two timers and two ticks at least
                await anyio.sleep(0.02)
        await system.unschedule("tick")
        tick_ids = [r.message_id for r in await system.store.read("ticks", kinds=["message"])]
        slept = await system.ref(Sleeper, "sleeper").ask(Get())
        notes = await system.ref(Recorder, "rec").ask(Get())
        store = system.store
        ids = [r.message_id for r in await store.read("rec", kinds=["message"])]
        effects = [r.type_tag for r in await store.read("sleeper", kinds=["effect"])]
        states = sorted(t.state for t in await system.timers() if t.timer_id != "schedule:tick")
        print(
            json.dumps(
                {
                    "slept": slept,
                    "notes": notes,
                    "ids": ids,
                    "effects": effects,
                    "states": states,
                    "ticks": tick_ids,
                }
            ),
            flush=True,
        )


if __name__ == "__main__":
    anyio.run({"start": start, "resume": resume}[sys.argv[1]], sys.argv[2])
