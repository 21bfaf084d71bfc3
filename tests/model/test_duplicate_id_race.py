"""Found by the model test (not in issues 11/18), fixed: two callers asking one fresh
``message_id`` at once, when the first caller's step ends before the second caller's store
lookup answers.

The second caller looked the id up in the store before the first message was committed (so
the store says "not there"); by the time that answer arrives the first message's step has
ended and ``Cell`` has dropped the id from its in-flight table (at the end of the step, before
the step is durable), so the second caller logs the same message id again. The unique
message-id index rejects the append, the store reports it as a ``SequenceConflictError``
("another runtime is writing this actor's log"), and the actor is stopped for the life of the
runtime. Expected (and now true): the second caller gets the first one's reply; the message
is logged once; the actor goes on.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import anyio
import pytest
from actorlog import ActorSystem, ops
from actorlog._durability import seenids as seenids_module
from actorlog.store import EntryRow, Store
from actorlog.stores import SqliteStore

from .agent import Agent, Op

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class SlowLookups:
    """A real store whose ``find_message`` answers ``delay`` seconds after it has read (a
    slow disk or network between the read and the answer)."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.delay = 0.0
        self.looked_up = anyio.Event()

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def find_message(self, actor_id: str, message_id: str) -> EntryRow | None:
        delay = self.delay
        row = await self._inner.find_message(actor_id, message_id)
        self.looked_up.set()
        await anyio.sleep(delay)
        return row


async def test_two_callers_of_one_new_message_id_get_one_step(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # the race is in the store lookup: every id goes to the store, as for a store without
    # MessageIdIndex (with the filter, a fresh id is checked with no await: no race)
    monkeypatch.setattr(seenids_module, "SEEN_IDS_LIMIT", 0)
    path = tmp_path / "agents.db"
    store = SlowLookups(SqliteStore(path))
    op = Op("m1", "plain")
    replies: list[Any] = []
    async with ActorSystem(store, actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")

        async def late_caller() -> None:
            replies.append(await ref.ask(op, message_id="m1"))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                store.delay = 0.5  # the second caller's lookup answers late
                tg.start_soon(late_caller)
                await store.looked_up.wait()
                store.delay = 0.0
                replies.append(await ref.ask(op, message_id="m1"))  # the first caller
        assert replies == ["ok", "ok"]
        assert system.status("a") in ("idle", "running"), system.error("a")
        assert await ref.ask(Op("m2", "plain"), message_id="m2") == "ok"
    reader = SqliteStore(path, read_only=True)
    await reader.open()
    try:
        steps = (await ops.history(reader, "a")).steps
        assert [s.message_id for s in steps] == ["m1", "m2"]
    finally:
        await reader.close()


class SlowCommits:
    """A real store whose appends take ``delay`` seconds (a slow disk) once armed."""

    def __init__(self, inner: Store) -> None:
        self._inner = inner
        self.delay = 0.0

    def __getattr__(self, name: str) -> Any:
        return getattr(self._inner, name)

    async def append(self, actor_id: str, expected_last_seq: int, rows: Any) -> None:
        await anyio.sleep(self.delay)
        await self._inner.append(actor_id, expected_last_seq, rows)


async def test_asking_again_while_the_first_step_commits_gets_its_reply(tmp_path: Path) -> None:
    """The same race with one caller after another: the second ask of an id arrives while
    the first one's step is committing (its in-flight entry already dropped, its message not
    yet in the store). This is also what a caller cancelled mid-ask meets when it retries."""
    path = tmp_path / "agents.db"
    store = SlowCommits(SqliteStore(path))
    op = Op("m1", "plain")
    replies: list[Any] = []
    async with ActorSystem(store, actors=[Agent]) as system:
        ref = await system.spawn(Agent, "a")

        async def first() -> None:
            replies.append(await ref.ask(op, message_id="m1"))

        with anyio.fail_after(10):
            async with anyio.create_task_group() as tg:
                store.delay = 0.5
                tg.start_soon(first)
                await anyio.sleep(0.2)  # the first step ran; its commit takes 0.5 s
                replies.append(await ref.ask(op, message_id="m1"))
            store.delay = 0.0
        assert replies == ["ok", "ok"]
        assert await ref.ask(Op("m2", "plain"), message_id="m2") == "ok"
    reader = SqliteStore(path, read_only=True)
    await reader.open()
    try:
        steps = (await ops.history(reader, "a")).steps
        assert [s.message_id for s in steps] == ["m1", "m2"]
    finally:
        await reader.close()
