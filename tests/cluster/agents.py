"""Actors for the multi-runtime tests (imported by the worker processes too)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import anyio
import attrs
from actorlog import Actor, Context, tool

from . import fence_service


@attrs.define
class Deposit:
    n: int


@attrs.define
class Balance:
    total: int = 0
    steps: int = 0


#: Where the ledger tool writes: (idempotency key, amount) -> None. Replaced by the worker
#: processes with an INSERT ... ON CONFLICT DO NOTHING into a PostgreSQL ledger table.
LEDGER: list[tuple[str, int]] = []
LEDGER_WRITER: list[Callable[[str, int], Awaitable[None]]] = []


@tool(effect="write", idempotent=True)
async def book(amount: int, *, idempotency_key: str) -> int:
    if LEDGER_WRITER:
        await LEDGER_WRITER[0](idempotency_key, amount)
    else:
        LEDGER.append((idempotency_key, amount))
    return amount


class Account(Actor[Balance]):
    snapshot_every = 20

    async def receive(self, ctx: Context, msg: Deposit) -> int:
        if msg.n < 0:
            raise ValueError(f"cannot deposit {msg.n}")
        booked = await ctx.call(book, msg.n)
        self.state.total += booked
        self.state.steps += 1
        return self.state.total


@attrs.define
class Nap:
    seconds: float


#: Called when ``nap`` starts (the zombie worker prints a line); ``NAPPING[0]`` scales the
#: sleep (0 outside the zombie process: a re-run after a take-over returns at once).
ON_NAP: list[Callable[[], None]] = []
NAPPING: list[float] = [0.0]
#: if it holds an event, ``nap`` waits for it first (a test holds the steps until it has
#: seen what it waits for)
NAP_GATE: list[anyio.Event] = []


@tool(effect="read")
async def nap(seconds: float) -> str:
    for hook in ON_NAP:
        hook()
    for gate in NAP_GATE:
        await gate.wait()
    await anyio.sleep(seconds * NAPPING[0])
    return "rested"


class Sleeper(Actor[Balance]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Nap) -> str:
        out = await ctx.call(nap, msg.seconds)
        self.state.steps += 1
        return out


#: The fake fencing-aware service (``tests/cluster/fence_service.py``): its port, this
#: process's owner name, and hooks run when ``remote_write`` starts (before its request).
SERVICE: list[int] = []
OWNER: list[str] = ["test"]
BEFORE_REMOTE: list[Callable[[], None]] = []


@tool(effect="write", idempotent=True)
async def remote_write(amount: int, *, idempotency_key: str, fencing_token: int) -> int:
    for hook in BEFORE_REMOTE:
        hook()
    resource = idempotency_key.rsplit(":", 2)[0]  # the actor id
    await fence_service.call(SERVICE[0], OWNER[0], resource, idempotency_key, fencing_token)
    return fencing_token


class Remote(Actor[Balance]):
    snapshot_every = None

    async def receive(self, ctx: Context, msg: Deposit) -> int:
        token = await ctx.call(remote_write, msg.n)
        self.state.steps += 1
        return token


@attrs.define
class Op:
    """One operation of the history test: add ``n`` (ids are the message ids)."""

    n: int


@attrs.define
class Tally:
    total: int = 0
    count: int = 0


class Ledgered(Actor[Tally]):
    """Applies each ``Op`` through the fencing-aware service; replies ``[count, total]``."""

    snapshot_every = 5

    async def receive(self, ctx: Context, msg: Op) -> list[int]:
        await ctx.call(remote_write, msg.n)
        self.state.total += msg.n
        self.state.count += 1
        return [self.state.count, self.state.total]
