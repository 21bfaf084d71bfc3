"""Snapshot policy and validation (issue 18.5-18.7, 11.6's snapshot part): snapshots that do
not decode fall back, counting starts from the last snapshot, options refuse NaN and bools."""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any, ClassVar

import anyio
import attrs
import pytest
from actorlog import Actor, ActorSystem, ConfigurationError, Context
from actorlog._journal import codec as _codec
from actorlog.store import SnapshotInfo, SnapshotRow, Store
from actorlog.stores import MemoryStore

from ..runtime.agents import Add, Researcher

pytestmark = pytest.mark.anyio

StoreFactory = Callable[[], Store]


@attrs.define
class Left:
    x: int


@attrs.define
class Right:
    x: int


@attrs.define
class Held:
    item: Left | Right | None = None
    n: int = 0


class Holder(Actor[Held]):
    snapshot_every = 1

    async def receive(self, ctx: Context, msg: Add) -> str:
        self.state.n += msg.n
        if msg.n:
            self.state.item = Right(msg.n)
        return f"{type(self.state.item).__name__}:{self.state.n}"


@attrs.define
class Count:
    n: int = 0


class Counter(Actor[Count]):
    snapshot_every: ClassVar[int | None] = 3

    async def receive(self, ctx: Context, msg: Add) -> int:
        self.state.n += msg.n
        return self.state.n


async def opened(make_store: StoreFactory) -> Store:
    store = make_store()
    await store.open()
    return store


async def close(store: Store) -> None:
    if not isinstance(store, MemoryStore):
        await store.close()


async def test_state_that_does_not_round_trip_is_not_snapshotted_and_recovers(
    make_store: StoreFactory,
) -> None:
    """18.5: a state that will not decode back (look-alike union members) is not written as a
    snapshot (a snapshot failure instead), and recovery replays: the actor is not
    quarantined."""
    async with ActorSystem(make_store(), actors=[Holder]) as system:
        ref = await system.spawn(Holder, "h")
        assert await ref.ask(Add(2)) == "Right:2"
    store = await opened(make_store)
    try:
        assert await store.list_snapshots("h") == []
    finally:
        await close(store)
    async with ActorSystem(make_store(), actors=[Holder]) as system:
        ref = await system.spawn(Holder, "h")
        assert await ref.ask(Add(0)) == "Right:2"


async def _inject_snapshot(store: Store, actor_id: str, state: Any, **damage: Any) -> None:
    actor = await store.get_actor(actor_id)
    assert actor is not None
    seq, handled = actor.last_seq, actor.handled_seq
    tag = _codec.type_tag(Count)
    data = json.dumps(state, separators=(",", ":")).encode()
    info = SnapshotInfo(
        actor_id=actor_id,
        seq=seq,
        handled_seq=handled,
        type_tag=tag,
        schema_version=1,
        digest=_codec.snapshot_digest(actor_id, seq, handled, tag, 1, data),
        size=len(data),
        created_at=0.0,
    )
    await store.save_snapshot(SnapshotRow(info=attrs.evolve(info, **damage), data=data))


@pytest.mark.parametrize(
    ("state", "damage"),
    [
        ({"n": None}, {}),  # None in an int field
        ({"n": "many"}, {}),
        ({"n": 2}, {"digest": b"\0" * 32}),
        ({"n": 2}, {"type_tag": "elsewhere.Count"}),
    ],
)
async def test_snapshot_that_fails_any_check_falls_back(
    make_store: StoreFactory, state: Any, damage: dict[str, Any]
) -> None:
    """18.5 / 11.6: a snapshot that fails any check (decoding into the state class included)
    is rejected and reported; recovery falls back to seq 1 instead of quarantining."""
    async with ActorSystem(make_store(), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c", snapshot_every=None)
        for _ in range(2):
            await ref.ask(Add(1))
    store = await opened(make_store)
    try:
        await _inject_snapshot(store, "c", state, **damage)
    finally:
        await close(store)
    async with ActorSystem(make_store(), actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c", snapshot_every=None)
        assert await ref.ask(Add(0)) == 2
        rec = system.last_recovery("c")
        assert rec is not None
        assert rec["snapshot_seq"] == 0 and len(rec["snapshots_rejected"]) == 1


@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_snapshot_metadata_of_wrong_types_falls_back(anyio_backend: str) -> None:
    """11.6: metadata columns of the wrong type are damage of a snapshot: fall back."""
    mem = MemoryStore()
    async with ActorSystem(mem, actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c", snapshot_every=None)
        for _ in range(2):
            await ref.ask(Add(1))
    await mem.open()
    await _inject_snapshot(mem, "c", {"n": 2}, handled_seq="2", size=b"7")
    async with ActorSystem(mem, actors=[Counter]) as system:
        ref = await system.spawn(Counter, "c", snapshot_every=None)
        assert await ref.ask(Add(0)) == 2
        assert system.status("c") == "idle"


async def test_snapshot_every_counts_from_the_last_snapshot_across_restarts(
    make_store: StoreFactory,
) -> None:
    """18.6: with snapshot_every=3 and a restart every 2 steps, snapshots are still written."""
    total = 0
    for _ in range(4):
        async with ActorSystem(make_store(), actors=[Counter]) as system:
            ref = await system.spawn(Counter, "c")
            for _ in range(2):
                total += 1
                assert await ref.ask(Add(1)) == total
    store = await opened(make_store)
    try:
        assert await store.list_snapshots("c") != []
    finally:
        await close(store)


BAD_SECONDS = [float("nan"), float("inf"), True, False, "1", -1.0, 0]


@pytest.mark.parametrize("bad", BAD_SECONDS)
async def test_spawn_options_refuse_nan_bools_and_infinities(
    make_store: StoreFactory, bad: Any
) -> None:
    """18.7: NaN (which silently meant "never"), bools and infinities are refused."""
    async with ActorSystem(make_store(), actors=[Researcher]) as system:
        for name in ("snapshot_every_seconds", "recovery_budget", "snapshot_every"):
            with pytest.raises(ConfigurationError, match=name):
                await system.spawn(Researcher, "r", **{name: bad})
        if bad is not True and bad is not False:
            return
        with pytest.raises(ConfigurationError, match="snapshot_keep"):
            await system.spawn(Researcher, "r", snapshot_keep=bad)


@pytest.mark.parametrize("bad", BAD_SECONDS)
async def test_system_options_refuse_nan_bools_and_infinities(
    make_store: StoreFactory, bad: Any
) -> None:
    for name in ("passivate_after", "lease_ttl", "shutdown_grace"):
        if name == "shutdown_grace" and bad == 0 and not isinstance(bad, bool):
            continue  # no grace is a valid choice
        with pytest.raises(ConfigurationError, match=name):
            ActorSystem(make_store(), **{name: bad})
    if isinstance(bad, bool):
        with pytest.raises(ConfigurationError, match="max_actors"):
            ActorSystem(make_store(), max_actors=bad)


async def test_class_attribute_nan_is_refused_at_spawn(make_store: StoreFactory) -> None:
    class Never(Counter):
        snapshot_every_seconds = float("nan")

    async with ActorSystem(make_store(), actors=[Never]) as system:
        with pytest.raises(ConfigurationError, match="snapshot_every_seconds"):
            await system.spawn(Never, "n")
        await anyio.lowlevel.checkpoint()


async def test_snapshot_every_seconds_counts_from_the_last_snapshot_across_restarts(
    make_store: StoreFactory,
) -> None:
    """18.6: short-lived processes still snapshot by time: the clock runs from the last
    snapshot (or the actor's registration), not from each process start."""

    class Timed(Counter):
        snapshot_every = None
        snapshot_every_seconds = 0.3

    for i in range(3):
        async with ActorSystem(make_store(), actors=[Timed]) as system:
            ref = await system.spawn(Timed, "t")
            assert await ref.ask(Add(1)) == i + 1
        await anyio.sleep(0.2)  # between processes
    store = await opened(make_store)
    try:
        assert await store.list_snapshots("t") != []
    finally:
        await close(store)
