"""A firing claimed before ``unschedule`` / ``cancel_timer`` / a new ``schedule`` of the same
name is delivered before that call returns, never after it (docs/recovery.md "Schedules").

The race is forced, not waited for: the store wrapper holds the firing's message between the
loop's claim and its delivery (the ``message`` append of the addressee), the cancel is made
while it is held, and the gate opens only once every task is blocked. Before the fix the
cancel returned at once and the held firing arrived later ("flaky under load" on PostgreSQL,
where claim and cancel are round trips).
"""

from __future__ import annotations

import datetime
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import pytest
from actorlog import ActorSystem
from actorlog.store import Store

from ..runtime._gated import GatedStore
from .agents import Get, Note, Recorder

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]
SOON = datetime.timedelta(milliseconds=20)


class CancelWatch(GatedStore):
    """A :class:`GatedStore` that says when the store's ``cancel_timer`` / ``put_timer``
    has returned (so the test knows the runtime's call is past the store)."""

    def __init__(self, inner: Store) -> None:
        super().__init__(inner)
        self.stored = anyio.Event()
        self.armed = False  # set once the firing is held: the calls before it do not count

    async def cancel_timer(self, timer_id: str) -> str | None:
        was: str | None = await self.inner.cancel_timer(timer_id)  # type: ignore[attr-defined]  # a timer store
        if self.armed:
            self.stored.set()
        return was

    async def put_timer(self, timer: Any, *, replace: bool = False) -> bool:
        put: bool = await self.inner.put_timer(timer, replace=replace)  # type: ignore[attr-defined]  # a timer store
        if self.armed:
            self.stored.set()
        return put


async def race(
    store: CancelWatch,
    start: Callable[[ActorSystem], Awaitable[object]],
    cancel: Callable[[ActorSystem], Awaitable[object]],
) -> tuple[bool, list[str | None], list[str]]:
    """Start a timer, hold its first firing after the claim, cancel it meanwhile; return
    whether the firing's message was released before the cancel returned, the message ids
    logged for ``rec`` when it returned, and what ``rec`` holds at the end."""
    held = store.gate("append", actor_id="rec", entry_kinds=("message",))
    released_first = False
    logged: list[str | None] = []
    async with ActorSystem(store, actors=[Recorder]) as system:
        await start(system)
        with anyio.fail_after(15):
            await held.reached.wait()  # claimed; its message waits before the log
        store.armed = True

        async def cancel_it() -> None:
            nonlocal released_first, logged
            await cancel(system)
            released_first = held.release.is_set()
            logged = [r.message_id for r in await system.store.read("rec", kinds=["message"])]

        async with anyio.create_task_group() as tg:
            tg.start_soon(cancel_it)
            with anyio.fail_after(15):
                await store.stored.wait()
            await anyio.wait_all_tasks_blocked()  # the cancel returned, or it waits
            held.open()
        got: list[str] = await system.ref(Recorder, "rec").ask(Get())
    return released_first, logged, got


async def test_unschedule_returns_after_the_firing_under_way_is_delivered(
    make_store: StoreFactory,
) -> None:
    store = CancelWatch(make_store())

    async def start(system: ActorSystem) -> None:
        await system.schedule("tick", system.ref(Recorder, "rec"), Note("tick"), every=SOON)

    async def cancel(system: ActorSystem) -> None:
        assert await system.unschedule("tick")

    released_first, logged, got = await race(store, start, cancel)
    assert released_first, "unschedule returned while a claimed firing was still on its way"
    assert len(logged) == 1 and str(logged[0]).startswith("schedule:tick@")
    assert got == ["tick"]  # that one firing, and none after the unschedule


async def test_cancel_timer_answers_fired_only_once_it_was_delivered(
    make_store: StoreFactory,
) -> None:
    store = CancelWatch(make_store())
    timer_id = ""
    answer = ""

    async def start(system: ActorSystem) -> None:
        nonlocal timer_id
        timer_id = await system.send_later(system.ref(Recorder, "rec"), Note("a"), delay=0)

    async def cancel(system: ActorSystem) -> None:
        nonlocal answer
        answer = await system.cancel_timer(timer_id)

    released_first, logged, got = await race(store, start, cancel)
    assert answer == "fired"
    assert released_first, "cancel_timer answered 'fired' before the message was delivered"
    assert logged == [f"timer:{timer_id}"]
    assert got == ["a"]


async def test_rescheduling_returns_after_the_old_firing_under_way_is_delivered(
    make_store: StoreFactory,
) -> None:
    store = CancelWatch(make_store())
    far = datetime.timedelta(days=1)

    async def start(system: ActorSystem) -> None:
        await system.schedule("tick", system.ref(Recorder, "rec"), Note("old"), every=SOON)

    async def cancel(system: ActorSystem) -> None:
        await system.schedule("tick", system.ref(Recorder, "rec"), Note("new"), every=far)

    released_first, logged, got = await race(store, start, cancel)
    assert got[0] == "old"
    assert released_first, "schedule() returned while the old definition's firing was on its way"
    assert len(logged) == 1 and str(logged[0]).startswith("schedule:tick@")
