"""The compaction bound stops before damage and before an intent with no outcome (issue
14.4), on a memory store whose entries a test can replace."""

from __future__ import annotations

import attrs
import pytest
from actorlog import ActorSystem
from actorlog._durability.retention import bound
from actorlog._journal.codec import make_row
from actorlog.stores import MemoryStore

from ..runtime.agents import Add
from .test_retention import Keeper

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_compaction_stops_at_damage() -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k", retention="all")
        for _ in range(12):
            await ref.ask(Add(1))
    await store.open()
    row = (await store.read("k", after_seq=3, limit=1))[0]
    store.replace_row("k", 4, attrs.evolve(row, payload=row.payload + b" "))
    _first, upto, reason = await bound(store, "k", "since-snapshot")
    assert upto == 3 and "damage at seq 4" in reason


async def test_compaction_keeps_an_intent_with_no_outcome() -> None:
    store = MemoryStore()
    async with ActorSystem(store, actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k", retention="all")
        for _ in range(12):
            await ref.ask(Add(1))
    await store.open()
    # turn the effect at seq 2 into an intent and drop nothing else: an intent with no
    # result is in doubt, and nothing at or after it may go
    intent = make_row(
        "k",
        2,
        "intent",
        "tests.retention.charge",
        1,
        None,
        b'{"index":0,"effect":"write","policy":"escalate","args":[],"kwargs":{}}',
    )
    store.replace_row("k", 2, intent)
    _first, upto, reason = await bound(store, "k", "since-snapshot")
    assert upto == 1 and "intent with no outcome at seq 2" in reason


def test_log_start_checksum_matches_the_format_example() -> None:
    """[F16] The runtime's frame and the kit's (written from FORMAT.md) agree with its
    example."""
    from actorlog._journal.codec import log_start_checksum
    from actorlog.testing import log_start_checksum as from_spec

    assert log_start_checksum("a1", 5) == from_spec("a1", 5) == 0x0A82BC64


async def test_one_compaction_scans_a_bounded_range(monkeypatch: pytest.MonkeyPatch) -> None:
    """A long log is compacted over several compactions, each looking at MAX_SCAN entries."""
    from actorlog._durability import retention as _retention

    store = MemoryStore()
    async with ActorSystem(store, actors=[Keeper]) as system:
        ref = await system.spawn(Keeper, "k", retention="all")
        for _ in range(20):
            await ref.ask(Add(1))
    await store.open()
    monkeypatch.setattr(_retention, "MAX_SCAN", 7)
    done = await _retention.compact(store, "k", "since-snapshot", by="t")
    assert (done.removed, done.first_seq) == (7, 8) and "scan limit" in done.reason
    done = await _retention.compact(store, "k", "since-snapshot", by="t")
    assert (done.removed, done.first_seq) == (7, 15)
