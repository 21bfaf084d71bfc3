"""The group committer's ``gather`` modes (``actorlog.stores._groupcommit``): which appenders
share a batch, with a commit that awaits (the SQLite writer's thread, a network round trip) and one
that does not (``SqliteStore(commit_on_loop=True)`` committing a lone append)."""

from __future__ import annotations

from collections.abc import Sequence

import anyio
import anyio.lowlevel
import pytest
from actorlog.stores._groupcommit import Gather, GroupCommitter, Request

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    return request.param  # type: ignore[no-any-return]  # pytest params are untyped


async def waves(gather: Gather, *, awaits: bool, waves: int = 2, size: int = 10) -> list[int]:
    """Batch sizes when ``waves`` groups of ``size`` appenders are woken together."""
    sizes: list[int] = []

    async def commit(batch: Sequence[Request[int]]) -> None:
        sizes.append(len(batch))
        if awaits:
            await anyio.lowlevel.checkpoint()

    committer = GroupCommitter(commit, on_batch=lambda n: None, gather=gather)
    for w in range(waves):
        async with anyio.create_task_group() as tg:
            for i in range(size):
                tg.start_soon(committer.submit, w * size + i)
    return sizes


async def test_a_commit_without_an_await_shares_nothing_unless_the_leader_gathers() -> None:
    assert await waves("never", awaits=False) == [1] * 20
    assert await waves("when_shared", awaits=False) == [1] * 20  # never shared: never waits
    assert await waves("always", awaits=False) == [10, 10]


async def test_when_shared_gathers_once_batches_are_shared() -> None:
    # the first leader commits alone; the other nine queue meanwhile and share the next
    # batch; from then on leaders wait for those woken with them
    assert await waves("never", awaits=True) == [1, 9, 1, 9]
    assert await waves("when_shared", awaits=True) == [1, 9, 10]
    assert await waves("always", awaits=True) == [10, 10]
