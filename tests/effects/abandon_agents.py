"""A race whose calls are cancelled while the runtime settles them (issue 25), shared by
tests/effects/test_abandoned_while_settling.py and its SIGKILL worker (abandon_worker.py).

Every tool writes ``start ARG`` to the LEDGER file and, while ``LEDGER["hold"]``, then
hangs (the worker process is SIGKILLed then, so the intents are in doubt). A task of the
step besides the contestants, the referee, cancels the race when the test sets ``KICK``.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

import anyio
import attrs
from actorlog import Actor, Context, Happened, NotHappened, Retry, tool

#: the ledger file; ``hold``: tools hang (the process to be killed); the reconcile answer
LEDGER: dict[str, Any] = {"path": None, "hold": True, "happened": True, "asks": 0}
#: set by the test: the referee cancels the race
KICK: dict[str, anyio.Event] = {}


def note(line: str) -> None:
    path = LEDGER["path"]
    if path is None:
        return
    with Path(path).open("a") as f:
        f.write(line + "\n")
        f.flush()
        os.fsync(f.fileno())


async def _run(tag: str) -> str:
    note(f"start {tag}")
    if LEDGER["hold"]:
        await anyio.sleep_forever()  # until the SIGKILL (or a timeout, live)
    await anyio.lowlevel.checkpoint()
    return tag


@tool(effect="read", name="abandon.look")
async def look(tag: str) -> str:
    return await _run(tag)


async def _reconcile(key: str, args: dict[str, Any]) -> Happened | NotHappened | None:
    LEDGER["asks"] += 1
    note(f"asked {args['tag']}")
    if LEDGER["asks"] == 1:
        await anyio.sleep_forever()  # the first ask is the one the referee cancels
    return Happened(f"booked {args['tag']}") if LEDGER["happened"] else NotHappened()


@tool(effect="write", name="abandon.book", reconcile=_reconcile)
async def book(tag: str) -> str:
    return await _run(tag)


@tool(effect="write", name="abandon.pay")
async def pay(tag: str) -> str:
    return await _run(tag)


#: a write whose first attempt times out (in doubt) and escalates, live: no crash needed
@tool(effect="write", name="abandon.slow_pay", retry=Retry(attempts=2), timeout=0.05)
async def slow_pay(tag: str) -> str:
    return await _run(tag)


TOOLS = {"read": look, "reconcile": book, "escalate": pay, "timeout": slow_pay}


@attrs.define
class Race:
    kind: str  # a key of TOOLS
    contestants: int = 2


@attrs.define
class Nothing:
    pass


class Racer(Actor[Nothing]):
    """Contestants call the tool of ``kind``; the referee cancels them all when kicked."""

    name = "abandon.Racer"
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Race) -> str:
        got: list[str] = []
        t = TOOLS[msg.kind]

        async def contestant(i: int) -> None:
            got.append(await ctx.call(t, f"{msg.kind[0]}{i}"))

        async def referee() -> None:
            await KICK["go"].wait()
            tg.cancel_scope.cancel()

        async with anyio.create_task_group() as tg:
            for i in range(msg.contestants):
                tg.start_soon(contestant, i)
            tg.start_soon(referee)
        return f"kicked:{','.join(sorted(got))}"
