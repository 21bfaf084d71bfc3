"""Cancellation at every await of ``system.resolve`` (issue 11, "cancellation at every
await": send, ask and resolve; send and ask are in ``test_cancellation_sweep.py``).

An escalating write is left in doubt by a crash; the operator's ``resolve`` is cancelled at
the N-th store call it makes (or after N scheduler rounds), then retried. A retry either
decides the intent or is refused with ``AlreadyDecidedError`` because the cancelled call had
already decided it; never both, never neither. After each run: exactly one decision is in
the log, the step completes with the decided result, no in-doubt waiter is left, and a fresh
system recovers the same state without running the tool again. N grows until the call
completes without being cancelled.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from actorlog import ActorSystem, AlreadyDecidedError
from actorlog.store import Store

from ..effects.test_cancellation_sweep import CancellingStore, _by_rounds, _by_store_call
from ..runtime.agents import CALLS, Ask, Blocker

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@pytest.fixture(autouse=True)
def _reset_calls() -> None:
    CALLS.reset()


async def _in_doubt(make_store: StoreFactory, actor_id: str) -> None:
    """Leave ``actor_id``'s escalating write in doubt: the tool hangs, the system stops
    without grace (a crash mid-tool)."""
    CALLS.hang = {"send_email"}
    async with ActorSystem(make_store(), actors=[Blocker], shutdown_grace=0) as system:
        ref = await system.spawn(Blocker, actor_id)
        await ref.send(Ask("email:1"), message_id="m1")
        with anyio.fail_after(5):
            await CALLS.started.wait()
    CALLS.hang = set()
    CALLS.started = anyio.Event()


async def _cancelled(how: str, store: CancellingStore, n: int, op: Awaitable[Any]) -> bool:
    try:
        if how == "store_call":
            return await _by_store_call(store, n, op)
        # every round up to 40, then doubling: a network store's call spans many rounds
        return await _by_rounds(n if n <= 40 else 40 << (n - 40), op)
    except AlreadyDecidedError:
        return False  # an earlier cancelled attempt had decided it: refused, nothing written


@pytest.mark.parametrize("how", ["store_call", "rounds"])
async def test_cancel_resolve_at_every_await_then_retry(make_store: StoreFactory, how: str) -> None:
    n = 0
    while True:
        n += 1
        assert n < 60, "resolve never completed"
        actor_id = f"r-{how}-{n}"
        await _in_doubt(make_store, actor_id)
        inner = make_store()
        store = CancellingStore(inner)
        async with ActorSystem(store, actors=[Blocker]) as system:
            ref = await system.spawn(Blocker, actor_id)
            with anyio.fail_after(5):
                (seq,) = await system.wait_in_doubt(actor_id)

            def op(seq: int = seq, actor_id: str = actor_id) -> Awaitable[None]:
                return system.resolve(actor_id, seq, result="sent by hand")

            cancelled = await _cancelled(how, store, n, op())
            try:
                with anyio.fail_after(10):
                    await op()  # the retry
            except AlreadyDecidedError as exc:
                assert exc.action == "result", exc  # the cancelled call decided it
            with anyio.fail_after(10):
                assert await ref.ask(Ask("email:1"), message_id="m1") == "sent by hand"
                while system.status(actor_id) != "idle":
                    await anyio.sleep(0.005)
            assert not system.in_doubt(actor_id)
            cell = system._cells[actor_id]  # internals: no waiter left behind
            assert not cell.in_doubt and not cell.waiters, (cell.in_doubt, cell.waiters)
            decisions = await inner.read(actor_id, kinds=["decision"])
            assert [r.type_tag for r in decisions] == ["result"], decisions
        async with ActorSystem(make_store(), actors=[Blocker]) as system:
            ref = await system.spawn(Blocker, actor_id)
            assert await ref.ask(Ask("email:1"), message_id="m1") == "sent by hand"
            assert not system.in_doubt(actor_id)
        assert CALLS.count("send_email") == 1  # the tool ran only before the crash
        CALLS.reset()
        if not cancelled:
            break
