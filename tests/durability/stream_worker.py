"""A process that streams a ``Resumable`` step (``tests/durability/test_streaming_crash.py``).

``python -m tests.durability.stream_worker DB MARKS FLAG first|again``: asks ``q-1`` with
``ask_stream`` and prints each event as a JSON line, then ``reply <value>``. In ``again`` it
creates FLAG once it is streaming, which lets the step's slow tool finish.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import anyio
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from tests.durability import stream_agents
from tests.durability.stream_agents import Resumable, Tell


async def main(db: Path, marks: Path, flag: Path, mode: str) -> None:
    stream_agents.GATE.update(marks=marks, flag=flag)
    async with ActorSystem(SqliteStore(db), actors=[Resumable]) as system:
        ref = await system.spawn(Resumable, "r")
        async with ref.ask_stream(Tell("x"), message_id="q-1") as stream:
            if mode == "again":
                flag.touch()
            async for ev in stream:
                line = {"number": ev.number, "data": ev.data, "replayed": ev.replayed}
                print(json.dumps(line), flush=True)
        print("reply", stream.reply, flush=True)


if __name__ == "__main__":
    db, marks, flag, mode = sys.argv[1:5]
    anyio.run(main, Path(db), Path(marks), Path(flag), mode)
