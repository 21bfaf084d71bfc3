"""How many store commits a step costs (docs/FORMAT.md section 6c), counted by the stores
themselves, on every store that commits in transactions: SQLite, and PostgreSQL without and
with leases (fenced appends).

``batch_sizes`` is the store's own record of its commits: one element per transaction, the
number of appends it carried. A step started by ``ask`` with one ``ctx.call`` commits twice
(message + intent before the tool runs; result + step before the reply); sequential calls
commit once per call; concurrent actors share transactions. A commit boundary added to the
step (or a commit split per actor) changes these counts.
"""

from __future__ import annotations

import functools
from collections.abc import AsyncIterator, Callable
from contextlib import asynccontextmanager
from typing import Any

import anyio
import attrs
import pytest
from actorlog import Actor, ActorSystem, Context, tool
from actorlog.store import Store

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@pytest.fixture(
    params=[
        pytest.param(("asyncio", "sqlite", None), id="sqlite"),
        pytest.param(("asyncio", "postgres", None), id="postgres"),
        pytest.param(("asyncio", "postgres", "runtime-a"), id="postgres-leases"),
    ]
)
def backend_and_store(request: pytest.FixtureRequest) -> tuple[str, str, str | None]:
    """Only the stores with transactions (``make_store`` reads the first two items)."""
    return request.param  # type: ignore[no-any-return]  # pytest params are untyped


@pytest.fixture
def owner(backend_and_store: tuple[str, str, str | None]) -> str | None:
    return backend_and_store[2]


@attrs.define
class Step:
    calls: int


@attrs.define
class Tally:
    total: int = 0


@tool(effect="read")
async def look(n: int) -> int:
    return n


class Caller(Actor[Tally]):
    async def receive(self, ctx: Context, msg: Step) -> int:
        for i in range(msg.calls):
            self.state.total += await ctx.call(look, i)
        return self.state.total


def commits(store: Store) -> list[int]:
    """The store's commits so far: appends per transaction (our SQL stores record them)."""
    sizes: list[int] = getattr(store, "batch_sizes")  # noqa: B009 - our stores' own
    return list(sizes)


@asynccontextmanager
async def system_on(make_store: StoreFactory, owner: str | None) -> AsyncIterator[ActorSystem]:
    kwargs: dict[str, Any] = {"owner": owner, "lease_ttl": 30} if owner else {}
    async with ActorSystem(make_store(), actors=[Caller], **kwargs) as system:
        yield system


async def test_a_step_started_by_ask_with_one_call_commits_twice(
    make_store: StoreFactory, owner: str | None
) -> None:
    async with system_on(make_store, owner) as system:
        ref = await system.spawn(Caller, "one")
        await ref.ask(Step(1), message_id="warm-up")
        before = len(commits(system.store))
        for k in range(5):
            assert await ref.ask(Step(1), message_id=f"m{k}") == 0
        during = commits(system.store)[before:]
    after = commits(system.store)[before:]
    # message + intent, then result + step: two commits of one append each per step, and
    # nothing left for the stop to commit
    assert during == [1] * 10
    assert after == during
    rows = await _log(make_store, "one")
    assert [r.kind for r in rows[-4:]] == ["message", "intent", "result", "step"]


async def test_sequential_calls_commit_once_per_call(
    make_store: StoreFactory, owner: str | None
) -> None:
    async with system_on(make_store, owner) as system:
        ref = await system.spawn(Caller, "seq")
        await ref.ask(Step(1), message_id="warm-up")
        before = len(commits(system.store))
        await ref.ask(Step(8), message_id="run")
    # message + intent 1, result i + intent i+1 (7), result 8 + step
    assert commits(system.store)[before:] == [1] * 9
    rows = await _log(make_store, "seq")
    assert len(rows) == 4 + 2 + 8 * 2  # warm-up step, message + step, 8 intents + results


class FanOut(Actor[Tally]):
    """One task per call, started together (a fan-out)."""

    async def receive(self, ctx: Context, msg: Step) -> int:
        got = [0] * msg.calls

        async def one(i: int) -> None:
            got[i] = await ctx.call(look, i)

        async with anyio.create_task_group() as tg:
            for i in range(msg.calls):
                tg.start_soon(one, i)
        self.state.total += sum(got)
        return self.state.total


async def test_a_fan_out_commits_its_intents_together(
    make_store: StoreFactory, owner: str | None
) -> None:
    """The intents of calls started together are committed together before their tools
    run: one commit, not the first call's alone and the others' in the next (issue 25)."""
    kwargs: dict[str, Any] = {"owner": owner, "lease_ttl": 30} if owner else {}
    async with ActorSystem(make_store(), actors=[FanOut], **kwargs) as system:
        ref = await system.spawn(FanOut, "fan")
        await ref.ask(Step(5), message_id="warm-up")
        before = len(commits(system.store))
        assert await ref.ask(Step(5), message_id="run") == 20
        during = commits(system.store)[before:]
    rows = await _log(make_store, "fan")
    kinds = [r.kind for r in rows[-12:]]
    assert kinds[:6] == ["message"] + ["intent"] * 5, kinds
    # message + 5 intents, then 5 results + step: two commits of one append each
    assert during == [1, 1], during


async def test_concurrent_actors_share_commits(make_store: StoreFactory, owner: str | None) -> None:
    n = 100
    async with system_on(make_store, owner) as system:
        refs = [await system.spawn(Caller, f"c{i:03d}") for i in range(n)]

        async def ask_all(message_id: str) -> None:
            async with anyio.create_task_group() as tg:
                for ref in refs:
                    tg.start_soon(functools.partial(ref.ask, Step(1), message_id=message_id))

        await ask_all("warm-up")
        before = len(commits(system.store))
        await ask_all("m1")
        shared = commits(system.store)[before:]
    # every step still commits twice (one append each time) ...
    assert sum(shared) == 2 * n
    # ... but 100 actors' appends share transactions: group commit
    assert len(shared) < n / 2, shared
    assert max(shared) > 10, shared


class Counter(Actor[Tally]):
    """No tool call: a step's only commit is its end (or the burst's)."""

    async def receive(self, ctx: Context, msg: Step) -> int:
        self.state.total += msg.calls
        return self.state.total


async def test_a_burst_of_queued_asks_commits_once(
    make_store: StoreFactory, owner: str | None
) -> None:
    """Asks queued together for one actor are handled as a burst: the step ends share one
    commit instead of one each (issue 28), and each reply is still released only once its
    step entry is durable (read back from the store when the ask returns)."""
    n = 20
    kwargs: dict[str, Any] = {"owner": owner, "lease_ttl": 30} if owner else {}
    async with ActorSystem(make_store(), actors=[Counter], **kwargs) as system:
        ref = await system.spawn(Counter, "burst")
        await ref.ask(Step(0), message_id="warm-up")
        before = len(commits(system.store))
        replies: dict[int, int] = {}

        async def one(k: int) -> None:
            replies[k] = await ref.ask(Step(1), message_id=f"b{k}")
            rows = await system.store.read("burst")
            steps = {r.ref for r in rows if r.kind == "step"}
            message = next(r.seq for r in rows if r.message_id == f"b{k}")
            assert message in steps, f"reply of b{k} released before its step was durable"

        async with anyio.create_task_group() as tg:
            for k in range(n):
                tg.start_soon(one, k)
        during = commits(system.store)[before:]
    assert sorted(replies.values()) == list(range(1, n + 1))
    # before issue 28: one commit per step (20); now the queued steps' ends share commits
    assert sum(during) <= 4, during
    rows = await _log(make_store, "burst")
    assert [r.kind for r in rows].count("step") == n + 1


@pytest.mark.parametrize(
    ("backend_and_store", "anyio_backend"), [(("trio", "sqlite", None), "trio")], ids=["trio"]
)
async def test_a_burst_commits_once_on_trio_too(make_store: StoreFactory) -> None:
    """The burst on trio: the background commit and the replies released by a flush."""
    n = 20
    async with ActorSystem(make_store(), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "burst")
        await ref.ask(Step(0), message_id="warm-up")
        before = len(commits(system.store))
        replies: list[int] = []

        async def one(k: int) -> None:
            replies.append(await ref.ask(Step(1), message_id=f"b{k}"))
            rows = await system.store.read("burst")
            message = next(r.seq for r in rows if r.message_id == f"b{k}")
            assert message in {r.ref for r in rows if r.kind == "step"}

        async with anyio.create_task_group() as tg:
            for k in range(n):
                tg.start_soon(one, k)
        during = commits(system.store)[before:]
    assert sorted(replies) == list(range(1, n + 1))
    assert sum(during) <= 4, during


async def _log(make_store: StoreFactory, actor_id: str) -> list[Any]:
    store = make_store()
    await store.open()
    try:
        return await store.read(actor_id)
    finally:
        await store.close()
