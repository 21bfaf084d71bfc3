"""A real runtime for the console tests, run as its own process.

``python -m tests.web.worker DB live``: runs actor ``chat-1`` on the SQLite store ``DB`` with
the OpenTelemetry SDK installed (so steps record trace ids); prints ``READY``, then asks it
one message per line read from stdin and prints ``DONE <n>`` once each reply is back. Exits
at the end of stdin. The store's writer lock is held all along: the console can only read.

``python -m tests.web.worker DB hostile``: fills ``DB`` with actors whose ids, messages,
replies and errors are hostile to a web page (markup, quotes, unicode, very long text), one
of them with a tool call left in doubt, and exits.
"""

from __future__ import annotations

import sys

import anyio
from actorlog import ActorSystem, HandlerError
from actorlog.stores import SqliteStore

from tests.cli._agents import crash_mid_call, ran
from tests.web._agents import HOSTILE_IDS, HOSTILE_TEXT, Chat, Say, Spiky


async def live(db: str) -> None:
    from opentelemetry import trace
    from opentelemetry.sdk.trace import TracerProvider

    trace.set_tracer_provider(TracerProvider())
    async with ActorSystem(SqliteStore(db), actors=[Chat]) as system:
        ref = await system.spawn(Chat, "chat-1")
        await ref.ask(Say("hello"), message_id="m-0")
        print("READY", flush=True)
        n = 0
        while True:
            line = await anyio.to_thread.run_sync(sys.stdin.readline)
            if not line:
                return
            n += 1
            await ref.ask(Say(line.strip()), message_id=f"m-{n}")
            print(f"DONE {n}", flush=True)


async def hostile(db: str) -> None:
    async with ActorSystem(SqliteStore(db), actors=[Spiky]) as system:
        for actor_id in HOSTILE_IDS:
            ref = await system.spawn(Spiky, actor_id)
            await ref.ask(Say(HOSTILE_TEXT), message_id='<i>m"1\x27</i>')
            try:
                await ref.ask(Say("raise"), message_id="boom")
            except HandlerError:
                pass
    ran.clear()
    await crash_mid_call(SqliteStore(db))  # bill-1: charge_card("hang") in doubt


def main(argv: list[str]) -> None:
    db, mode = argv
    anyio.run({"live": live, "hostile": hostile}[mode], db, backend="asyncio")


if __name__ == "__main__":
    main(sys.argv[1:])
