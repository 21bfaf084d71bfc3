"""An ask queued behind a long step is committed at once, not with that step's next commit
(found by the model test's lifecycle rule, issue 24): ``ask(timeout=...)`` raises
``TimeoutError`` saying "the message stays logged", and the message is in the file, read by
another connection, while the step still runs; a runtime killed then (no clean close) finds
it on recovery and handles it."""

from __future__ import annotations

from pathlib import Path

import anyio
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, ops, tool
from actorlog.stores import SqliteStore

RELEASE: set[str] = set()
STARTED: set[str] = set()


@attrs.define
class Work:
    tag: str


@attrs.define
class Done:
    tags: list[str] = attrs.Factory(list)


@tool(effect="read")
async def slow(tag: str) -> str:
    STARTED.add(tag)
    while tag.startswith("hold") and tag not in RELEASE:
        await anyio.sleep(0.01)
    return tag


class Busy(Actor[Done], name="test.busy-ask"):
    async def receive(self, ctx: Context, msg: Work) -> list[str]:
        self.state.tags.append(await ctx.call(slow, msg.tag))
        return list(self.state.tags)


async def _last_seq(path: Path) -> int:
    async with ops.opened(f"sqlite:///{path}") as reader:
        return (await ops.actor_status(reader, "b")).last_seq


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_an_ask_that_times_out_behind_a_busy_step_is_logged(tmp_path: Path) -> None:
    path = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(path), actors=[Busy], shutdown_grace=0) as system:
        ref = await system.spawn(Busy, "b")
        await ref.send(Work("hold-1"), message_id="hold-1")
        while "hold-1" not in STARTED:
            await anyio.sleep(0.01)
        before = await _last_seq(path)
        with pytest.raises(TimeoutError):
            await ref.ask(Work("queued"), message_id="queued", timeout=0.3)
        # "the message stays logged": committed now, while the step still runs
        assert await _last_seq(path) == before + 1
        RELEASE.add("hold-1")
        assert await ref.ask(Work("queued"), message_id="queued") == ["hold-1", "queued"]


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_a_waiting_ask_behind_a_busy_step_is_logged_without_its_commit(
    tmp_path: Path,
) -> None:
    path = tmp_path / "agents.db"
    async with ActorSystem(SqliteStore(path), actors=[Busy], shutdown_grace=0) as system:
        ref = await system.spawn(Busy, "b")
        await ref.send(Work("hold-2"), message_id="hold-2")
        while "hold-2" not in STARTED:
            await anyio.sleep(0.01)
        before = await _last_seq(path)
        async with anyio.create_task_group() as tg:
            tg.start_soon(ref.ask, Work("waiting"))
            with anyio.fail_after(5):
                while await _last_seq(path) < before + 1:
                    await anyio.sleep(0.01)
            RELEASE.add("hold-2")
