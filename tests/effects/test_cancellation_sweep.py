"""Cancellation at every await of ``send``/``ask`` (issue 11, "cancellation at every await").

For every N, a caller is cancelled at the N-th store call made while it runs (the store call
itself proceeds: the caller's scope is cancelled, and it sees that at its next await), or
after N scheduler rounds; then a retry with the same ``message_id`` is cancelled the same
way, and a last retry runs to the end. After each run the
invariants must hold: the message is in the log once, the reply is right, no waiter, slot or
in-flight id is left, the actor passivates, and a fresh system recovers the same state.
N grows until the call completes without being cancelled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.lowlevel
import pytest
from actorlog import ActorRef, ActorSystem
from actorlog.store import Store
from actorlog.stores import MemoryStore

from ..runtime.agents import Add, Researcher

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


class CancellingStore:
    """Delegates to a store; cancels ``scope`` at the ``cancel_at``-th call while armed."""

    def __init__(self, inner: Store) -> None:
        self.inner = inner
        self.scope: anyio.CancelScope | None = None
        self.cancel_at = 0
        self.seen = 0

    def __getattr__(self, name: str) -> Any:
        attr = getattr(self.inner, name)
        if not callable(attr) or name.startswith("_"):
            return attr

        async def call(*args: Any, **kwargs: Any) -> Any:
            if self.scope is not None:
                self.seen += 1
                if self.seen == self.cancel_at:
                    self.scope.cancel()
            return await attr(*args, **kwargs)

        return call


async def _by_store_call(store: CancellingStore, n: int, op: Awaitable[Any]) -> bool:
    """Run ``op``, cancelled at the n-th store call; True if it was cancelled."""
    with anyio.CancelScope() as scope:
        store.scope, store.cancel_at, store.seen = scope, n, 0
        try:
            await op
        finally:
            store.scope = None
    return scope.cancelled_caught


async def _by_rounds(n: int, op: Awaitable[Any]) -> bool:
    """Run ``op``, cancelled after n scheduler rounds; True if it was cancelled."""
    cancelled = False
    async with anyio.create_task_group() as tg:

        async def canceller() -> None:
            nonlocal cancelled
            for _ in range(n):
                await anyio.lowlevel.checkpoint()
            cancelled = True
            tg.cancel_scope.cancel()

        async def run() -> None:
            nonlocal cancelled
            await op
            cancelled = False
            tg.cancel_scope.cancel()

        tg.start_soon(run)
        tg.start_soon(canceller)
    return cancelled


async def _check(
    system: ActorSystem, ref: ActorRef[Researcher], store: Store, actor_id: str
) -> None:
    """The invariants after a cancelled call and its retry."""
    with anyio.fail_after(10):
        while not (system._cells.get(actor_id) is None or system._cells[actor_id].is_idle()):
            await anyio.sleep(0.005)
    cell = system._cells.get(actor_id)
    if cell is not None:
        assert not cell.waiters, cell.waiters
        assert not cell.inflight_ids, cell.inflight_ids
        assert not getattr(cell, "holds", 0)
        cell.passivate()
        with anyio.fail_after(10):
            await cell.done.wait()
        assert cell.status == "passivated"
    ids = [r.message_id for r in await store.read(actor_id, kinds=["message"])]
    assert ids.count("m") == 1, ids
    with anyio.fail_after(10):
        assert await ref.ask(Add(0)) == "1"


def _rounds(n: int) -> int:
    """Every round up to 60, then growing by a tenth: a store whose commit runs on a thread
    (SQLite) needs as many rounds as the thread takes, which a loaded machine stretches."""
    return n if n <= 60 else int(60 * 1.1 ** (n - 60))


@pytest.mark.parametrize("how", ["store_call", "rounds"])
@pytest.mark.parametrize("call", ["send", "ask"])
async def test_cancel_at_every_await_then_retry(
    make_store: StoreFactory, call: str, how: str
) -> None:
    inner = make_store()
    store = CancellingStore(inner)
    n = 0
    async with ActorSystem(store, actors=[Researcher]) as system:
        while True:
            n += 1
            assert n < 200, "the call never completed"
            actor_id = f"{call}-{how}-{n}"
            ref = await system.spawn(Researcher, actor_id)

            async def op(ref: ActorRef[Researcher] = ref) -> Any:
                if call == "send":
                    return await ref.send(Add(1), message_id="m")
                return await ref.ask(Add(1), message_id="m")

            # The first call and a first retry are both cancelled at the same point (a
            # retry finds the id in flight or answered: other awaits than a fresh call).
            cancelled = False
            for _ in range(2):
                if how == "store_call":
                    cancelled = await _by_store_call(store, n, op()) or cancelled
                else:
                    cancelled = await _by_rounds(_rounds(n), op()) or cancelled
            with anyio.fail_after(10):  # the retry
                got = await op()
            if call == "ask":
                assert got == "1"
            await _check(system, ref, inner, actor_id)
            if not cancelled:
                break
    # A fresh system recovers every actor to the same state.
    async with ActorSystem(make_store(), actors=[Researcher]) as system:
        for k in range(1, n + 1):
            ref = system.ref(Researcher, f"{call}-{how}-{k}")
            assert await ref.ask(Add(0)) == "1"
    if not isinstance(inner, MemoryStore):
        await inner.close()
