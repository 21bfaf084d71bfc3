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


class Held:
    """A commit that records its batches and, while ``gate`` is set, waits for it."""

    def __init__(self) -> None:
        self.batches: list[list[int]] = []
        self.gate: anyio.Event | None = None
        self.started = anyio.Event()

    async def __call__(self, batch: Sequence[Request[int]]) -> None:
        self.batches.append([r.item for r in batch])
        self.started.set()
        if self.gate is not None:
            await self.gate.wait()
        await anyio.lowlevel.checkpoint()


async def test_a_waiter_cancelled_while_it_waits_leaves_the_committer_working() -> None:
    """Its request stays queued (committed with the next batch: a cancelled append may be
    durable); the others are committed, and the committer takes new requests."""
    commit = Held()
    commit.gate = anyio.Event()
    committer = GroupCommitter(commit, on_batch=lambda n: None)
    done: list[int] = []

    async def submit(item: int, scope: anyio.CancelScope | None = None) -> None:
        if scope is None:
            await committer.submit(item)
            done.append(item)
            return
        with scope:
            await committer.submit(item)
            done.append(item)

    cancelled = anyio.CancelScope()
    async with anyio.create_task_group() as tg:
        tg.start_soon(submit, 0)
        await commit.started.wait()  # 0 leads, its commit waits at the gate
        tg.start_soon(submit, 1, cancelled)
        tg.start_soon(submit, 2)
        await anyio.wait_all_tasks_blocked()
        cancelled.cancel()
        await anyio.wait_all_tasks_blocked()
        commit.gate.set()
    assert cancelled.cancelled_caught
    assert sorted(done) == [0, 2]
    assert [sorted(b) for b in commit.batches] == [[0], [1, 2]]
    commit.gate = None
    await committer.submit(3)
    assert commit.batches[-1] == [3]


async def test_a_leader_cancelled_while_it_gathers_still_commits_the_queue(
    anyio_backend: str,
) -> None:
    """``gather``: the leader lets the others queue first; a cancel in that turn does not
    leave them without a leader."""
    commit = Held()
    committer = GroupCommitter(commit, on_batch=lambda n: None, gather="always")
    done: list[int] = []
    scope = anyio.CancelScope()

    async def lead() -> None:
        with scope:
            await committer.submit(0)
            done.append(0)

    async def follow(item: int) -> None:
        await committer.submit(item)
        done.append(item)

    async def cancel() -> None:
        scope.cancel()

    async with anyio.create_task_group() as tg:
        tg.start_soon(lead)
        tg.start_soon(follow, 1)
        tg.start_soon(follow, 2)
        tg.start_soon(cancel)
    assert 1 in done and 2 in done  # the cancelled one's outcome: cancelled or committed
    if anyio_backend == "asyncio":  # tasks start in order: 0 leads, the others queue
        assert [sorted(b) for b in commit.batches] == [[0, 1, 2]]
    await committer.submit(3)  # nothing left waiting for a leader
    assert commit.batches[-1] == [3]


async def test_leadership_handed_to_a_waiter_being_cancelled_still_commits() -> None:
    commit = Held()
    commit.gate = anyio.Event()
    committer = GroupCommitter(commit, on_batch=lambda n: None)
    done: list[int] = []
    second = anyio.CancelScope()

    async def first() -> None:
        await committer.submit(0)
        second.cancel()  # the next leader is woken but has not run yet
        done.append(0)

    async def then(item: int, scope: anyio.CancelScope | None) -> None:
        with scope or anyio.CancelScope():
            await committer.submit(item)
            done.append(item)

    async with anyio.create_task_group() as tg:
        tg.start_soon(first)
        await commit.started.wait()
        tg.start_soon(then, 1, second)
        tg.start_soon(then, 2, None)
        await anyio.wait_all_tasks_blocked()
        commit.gate.set()
    assert [sorted(b) for b in commit.batches] == [[0], [1, 2]]
    assert 0 in done and 2 in done
