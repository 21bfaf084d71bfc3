"""Passivation bounds memory: idle actors snapshot, leave memory, and come back on demand."""

from __future__ import annotations

from collections.abc import Callable

import anyio
import pytest
from actorlog import ActorSystem, ConfigurationError
from actorlog.store import Store

from .agents import Add, Researcher

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


async def wait_until(cond: Callable[[], bool]) -> None:
    with anyio.fail_after(10):
        while not cond():
            await anyio.sleep(0.01)


async def test_max_actors_keeps_memory_bounded_and_state_survives(make_store: StoreFactory) -> None:
    async with ActorSystem(make_store(), actors=[Researcher], max_actors=5) as system:
        for i in range(30):
            assert await system.ref(Researcher, f"a{i}").ask(Add(i)) == str(i)
        await wait_until(lambda: system.active_actors <= 5)
        assert len(system._cells) <= 5 + 1  # at most one on its way out
        # every actor comes back with its state
        for i in range(30):
            assert await system.ref(Researcher, f"a{i}").ask(Add(1)) == str(i + 1)


async def test_idle_actor_passivates_and_recovers_from_its_snapshot(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(make_store(), actors=[Researcher], passivate_after=0.05) as system:
        ref = await system.spawn(Researcher, "r")
        for i in range(5):
            await ref.ask(Add(i))
        await wait_until(lambda: "r" not in system._cells)
        assert system.active_actors == 0
        assert await ref.ask(Add(0)) == "10"
        rec = system.last_recovery("r")
        assert rec is not None
        assert rec["snapshot_seq"] > 0  # written when it passivated
        assert rec["steps_replayed"] == 0


async def test_concurrent_senders_lose_nothing_while_actors_passivate(
    make_store: StoreFactory,
) -> None:
    async with ActorSystem(
        make_store(), actors=[Researcher], max_actors=3, passivate_after=0.01
    ) as system:

        async def sender(i: int) -> None:
            for _ in range(10):
                await system.ref(Researcher, f"c{i % 8}").send(Add(1))
                await anyio.sleep(0.005)

        async with anyio.create_task_group() as tg:
            for i in range(16):
                tg.start_soon(sender, i)
        totals = [await system.ref(Researcher, f"c{i}").ask(Add(0)) for i in range(8)]
    assert totals == ["20"] * 8


async def test_bad_passivation_options_fail_at_construction(make_store: StoreFactory) -> None:
    with pytest.raises(ConfigurationError, match="max_actors"):
        ActorSystem(make_store(), max_actors=0)
    with pytest.raises(ConfigurationError, match="passivate_after"):
        ActorSystem(make_store(), passivate_after=-1)
    for bad in (0, -0.5, float("nan"), float("inf"), "1", True, None):
        with pytest.raises(ConfigurationError, match="poll_interval"):
            ActorSystem(make_store(), poll_interval=bad)  # type: ignore[arg-type]
        if bad is not None:  # None: the default, 4 x poll_interval
            with pytest.raises(ConfigurationError, match="reply_poll_interval"):
                ActorSystem(make_store(), reply_poll_interval=bad)  # type: ignore[arg-type]
