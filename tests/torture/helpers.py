"""Small actors and store probes shared by the in-process torture tests."""

from __future__ import annotations

from typing import Any

import attrs
from actorlog import Actor, Context, tool
from actorlog.store import EntryRow, SnapshotInfo, Store

__all__ = [
    "Add",
    "Counter",
    "CounterState",
    "Get",
    "ToolLog",
    "contents",
    "entries",
]


class ToolLog:
    """Counts tool executions by argument, so a test can tell what ran (and how often)."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, Any]] = []

    def count(self, name: str, arg: Any = None) -> int:
        return sum(1 for n, a in self.calls if n == name and (arg is None or a == arg))


TOOLS = ToolLog()


@tool(effect="read", name="helpers.lookup")
async def lookup(n: int) -> int:
    TOOLS.calls.append(("lookup", n))
    return n * 10


@tool(effect="write", idempotent=True, name="helpers.record")
async def record(n: int, *, idempotency_key: str) -> str:
    TOOLS.calls.append(("record", n))
    return f"recorded {n} as {idempotency_key}"


@attrs.define
class Add:
    n: int
    note: str = ""  # padding, for tests that need a large message


@attrs.define
class Get:
    pass


@attrs.define
class CounterState:
    total: int = 0
    seen: list[int] = attrs.Factory(list)
    receipts: list[str] = attrs.Factory(list)


class Counter(Actor[CounterState]):
    """Each ``Add`` reads (tool), records (idempotent tool), journals a random draw."""

    __actorlog_tag__ = "torture.Counter"
    snapshot_every = 3
    snapshot_keep = 3

    async def receive(self, ctx: Context, msg: Add | Get) -> Any:
        if isinstance(msg, Get):
            return attrs.asdict(self.state)
        value = await ctx.call(lookup, msg.n)
        ctx.random()
        receipt = await ctx.call(record, msg.n)
        self.state.total += value
        self.state.seen.append(msg.n)
        self.state.receipts.append(receipt)
        return self.state.total


async def entries(store: Store, actor_id: str) -> list[EntryRow]:
    return await store.read(actor_id)


async def contents(store: Store) -> dict[str, tuple[list[EntryRow], list[SnapshotInfo]]]:
    """Everything a store holds about its actors: entries and snapshot metadata."""
    out: dict[str, tuple[list[EntryRow], list[SnapshotInfo]]] = {}
    for row in await store.list_actors():
        out[row.actor_id] = (
            await store.read(row.actor_id),
            await store.list_snapshots(row.actor_id),
        )
    return out
