"""Actors for the multi-runtime tests (imported by the worker processes too)."""

from __future__ import annotations

from collections.abc import Awaitable, Callable

import attrs
from actorlog import Actor, Context, tool


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
        booked = await ctx.call(book, msg.n)
        self.state.total += booked
        self.state.steps += 1
        return self.state.total
