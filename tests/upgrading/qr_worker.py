"""Runtime processes for ``test_dropped_message_type.py``.

``python -m tests.upgrading.qr_worker MODE DB MARKS``

* ``v1-kill``: v1 handles ``Q("one")``, then gets ``R("two")``: its write blocks after
  writing its mark (prints ``KILLPOINT``) and the parent SIGKILLs the process.
* ``v2`` / ``v2-knows-r``: v2 (without / with ``R`` imported) starts (recovering the actor)
  and asks ``Q("three")``; prints ``ok REPLY`` or ``refused TYPE MESSAGE``, then the status.
* ``v2-sends-r``: v2 with ``R`` imported is asked ``R("five")`` (not accepted): prints
  ``refused TYPE ...`` (or ``ok``).
* ``v2-send``: like ``v2``, but sends ``Q("three")`` (prints ``ok None`` or ``refused``).
* ``v1``: v1 starts and asks ``Q("four")``; prints the outcome and the status.
* ``v1-raises``: the same with a v1 whose ``R`` handler raises before its write.
"""

from __future__ import annotations

import sys
from typing import Any

import anyio
from actorlog import ActorSystem
from actorlog.stores import SqliteStore

from ._qr_agents import SETUP, V2, Q


async def main(mode: str, db: str, marks: str) -> None:
    SETUP[0] = marks
    actor: Any = V2
    if mode.startswith("v1") or mode in ("v2-knows-r", "v2-sends-r"):
        from ._qr_r import V1, R, V1Raises

        if mode.startswith("v1"):
            actor = V1Raises if mode == "v1-raises" else V1
    async with ActorSystem(SqliteStore(db), actors=[actor]) as system:
        if mode == "v1-kill":
            SETUP[1] = "two"
            ref = await system.spawn(actor, "a")
            await ref.ask(Q("one"))
            await ref.send(R("two"))  # returns once the message is durable
            await anyio.sleep(600)  # the write blocks the loop first: SIGKILL
            return
        msg: Any = R("five") if mode == "v2-sends-r" else Q("four" if mode == "v1" else "three")
        try:
            with anyio.fail_after(30):
                ref = await system.spawn(actor, "a")
                if mode == "v2-send":
                    await ref.send(msg)
                    print("ok None", flush=True)
                else:
                    print("ok", await ref.ask(msg), flush=True)
        except Exception as exc:
            print("refused", type(exc).__name__, str(exc).replace("\n", " "), flush=True)
        print("status", system.status("a"), flush=True)


if __name__ == "__main__":
    anyio.run(main, sys.argv[1], sys.argv[2], sys.argv[3], backend="asyncio")
