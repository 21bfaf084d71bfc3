"""A runtime killed with SIGKILL by tests/torture/test_timer_crash.py.

``start DB [SECONDS]``: a sleeper starts a durable sleep of SECONDS (default 1.5), a
sender's step sets a timer (ctx.send_later, SECONDS) and the system sets another
(send_later, SECONDS); prints READY once all are durable, then waits to be killed.
``resume DB [AHEAD]``: a new runtime on the same file, its wall clock AHEAD seconds in the
future (a fake clock: the runtime's ``time.time()``, which durable waits and timers are
measured by); prints the outcome as JSON once the sleep ended and both timers were
delivered.
"""

from __future__ import annotations

import datetime
import json
import sys
import time

import anyio
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from tests.time.agents import Get, Later, Nap, Note, Recorder, Sender, Sleeper

ACTORS = [Sleeper, Recorder, Sender]


class _AheadClock:
    """``time`` as the runtime's timer modules see it, ``ahead`` seconds in the future."""

    def __init__(self, ahead: float) -> None:
        self.ahead = ahead

    def time(self) -> float:
        return time.time() + self.ahead

    def __getattr__(self, name: str) -> object:
        return getattr(time, name)


def fake_clock(ahead: float) -> None:
    """Move the wall clock of the timer code forward (the event loop's clock is untouched:
    a wait is computed from the wall clock, then slept on the loop's)."""
    from actorlog._durability import timers as _timers
    from actorlog._effects import ctxtimers as _ctxtimers
    from actorlog._runtime import systimers as _systimers

    for module in (_timers, _ctxtimers, _systimers):
        module.time = _AheadClock(ahead)  # type: ignore[attr-defined]


async def start(path: str, seconds: float = 1.5) -> None:
    async with ActorSystem(SqliteStore(path), actors=ACTORS) as system:
        await system.ref(Sleeper, "sleeper").send(Nap(seconds, "nap"))
        await system.ref(Sender, "sender").ask(Later("rec", "from-step", seconds))
        await system.send_later(system.ref(Recorder, "rec"), Note("from-system"), delay=seconds)
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
    if sys.argv[1] == "start":
        anyio.run(start, sys.argv[2], float(sys.argv[3]) if len(sys.argv) > 3 else 1.5)
    else:
        if len(sys.argv) > 3:
            fake_clock(float(sys.argv[3]))
        anyio.run(resume, sys.argv[2])
