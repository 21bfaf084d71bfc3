"""The store contract, second half: concurrency and group commit, damage returned as
stored, snapshots and events, durability across reopen
(:class:`actorlog.testing.StoreContract`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import anyio
import anyio.abc
import attrs
import pytest

from ..store import (
    FORMAT_VERSION,
    AuditStore,
    EntryRow,
    SequenceConflictError,
    Store,
    StoreClosedError,
    StoreError,
    UnsupportedFormatError,
)
from ._kit import (
    ACTOR,
    TYPE,
    StoreHarness,
    batch_sizes_of,
    entry,
    harness_call,
    intact,
    msg,
    msgs,
    needs,
    race,
    registered,
    require,
    snapshot,
)


class SharingContract:
    """Contract tests of concurrent writers, damage, snapshots, events and reopening (a mixin
    of :class:`actorlog.testing.StoreContract`)."""

    # -- concurrency and group commit ------------------------------------------------------

    async def test_concurrent_appends_to_one_actor_keep_their_order(self, store: Store) -> None:
        """Appends awaited concurrently (each expecting the previous) all land, in order.
        Each task is under way (inside ``append``) before the next starts: trio, unlike
        asyncio, does not run tasks started together in the order they were started."""
        await registered(store, ACTOR)
        rows = msgs(ACTOR, 1, 20)

        async def append_in_turn(
            r: EntryRow, *, task_status: anyio.abc.TaskStatus[None] = anyio.TASK_STATUS_IGNORED
        ) -> None:
            task_status.started()  # runs on into append before the starter resumes
            await store.append(ACTOR, r.seq - 1, [r])

        async with anyio.create_task_group() as tg:
            for r in rows:
                await tg.start(append_in_turn, r)
        assert await store.read(ACTOR) == rows

    async def test_many_actors_appending_concurrently_all_land_in_order(
        self, harness: StoreHarness, store: Store
    ) -> None:
        n_actors, n_appends = 50, 6
        ids = [f"actor-{i:02d}" for i in range(n_actors)]
        await registered(store, *ids)
        sizes = batch_sizes_of(harness, store)

        async def writer(actor_id: str) -> None:
            for k in range(n_appends):
                # one or two rows per append
                rows = [msg(actor_id, 2 * k + 1), entry(actor_id, 2 * k + 2, "step", 2 * k + 1)]
                await store.append(actor_id, 2 * k, rows[: 1 + k % 2])
                if k % 2 == 0:
                    await store.append(actor_id, 2 * k + 1, rows[1:])

        async with anyio.create_task_group() as tg:
            for actor_id in ids:
                tg.start_soon(writer, actor_id)
        for actor_id in ids:
            got = await store.read(actor_id)
            assert [r.seq for r in got] == list(range(1, 2 * n_appends + 1))
            assert all(intact(r) and r.actor_id == actor_id for r in got)
            actor = await store.get_actor(actor_id)
            assert actor is not None and actor.last_seq == 2 * n_appends
        if sizes is not None:
            appends = n_actors * (n_appends + n_appends // 2 + n_appends % 2)
            commits = harness.batch_sizes(store)[len(sizes) :]
            assert sum(commits) == appends
            assert len(commits) < appends / 5, commits

    @needs("group_commit")
    async def test_group_commit_shares_transactions(
        self, harness: StoreHarness, store: Store
    ) -> None:
        """50 concurrent appenders are committed in fewer transactions than appends."""
        sizes = batch_sizes_of(harness, store)
        if sizes is None:
            pytest.skip(f"{type(store).__name__}: no group commit (or no batch sizes)")
        ids = [f"g-{i:02d}" for i in range(50)]
        await registered(store, *ids)
        before = len(harness.batch_sizes(store))
        async with anyio.create_task_group() as tg:
            for actor_id in ids:
                tg.start_soon(store.append, actor_id, 0, [msg(actor_id, 1)])
        commits = harness.batch_sizes(store)[before:]
        assert sum(commits) == 50
        assert len(commits) < 50, commits
        assert max(commits) > 1
        for actor_id in ids:
            assert await store.read(actor_id) == [msg(actor_id, 1)]

    async def test_conflict_in_a_shared_commit_fails_only_its_append(
        self, harness: StoreHarness, store: Store
    ) -> None:
        ids = [f"c-{i:02d}" for i in range(20)]
        await registered(store, *ids)
        bad = ids[10]
        await store.append(bad, 0, [msg(bad, 1, "taken")])
        results: dict[str, BaseException | None] = {}

        async def append(actor_id: str) -> None:
            expected = 1 if actor_id == bad else 0
            mid = "taken" if actor_id == bad else "fresh"
            try:
                await store.append(actor_id, expected, [msg(actor_id, expected + 1, mid)])
            except StoreError as exc:
                results[actor_id] = exc
            else:
                results[actor_id] = None

        sizes = batch_sizes_of(harness, store)
        async with anyio.create_task_group() as tg:
            for actor_id in ids:
                tg.start_soon(append, actor_id)
        assert isinstance(results.pop(bad), SequenceConflictError)
        assert results == dict.fromkeys(ids[:10] + ids[11:])
        assert await store.read(bad) == [msg(bad, 1, "taken")]
        for actor_id in ids:
            if actor_id != bad:
                assert await store.read(actor_id) == [msg(actor_id, 1, "fresh")]
        if sizes is not None:
            commits = harness.batch_sizes(store)[len(sizes) :]
            assert max(commits) > 1, "the conflicting append was not part of a shared commit"

    @needs("multi_process")
    async def test_racing_instances_exactly_one_wins(self, harness: StoreHarness) -> None:
        """Two store instances on one database append the same next seq: one wins, one
        conflicts."""
        first = await harness.open()
        require(harness, first, "multi_process")
        second = await harness.open()
        await registered(first, ACTOR)
        await registered(second, ACTOR)
        winners: list[str] = []
        for seq in range(1, 16):
            outcome: dict[str, BaseException | None] = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(race, outcome, "first", first, ACTOR, seq)
                tg.start_soon(race, outcome, "second", second, ACTOR, seq)
            won = [name for name, exc in outcome.items() if exc is None]
            assert len(won) == 1, outcome
            lost = [exc for exc in outcome.values() if exc is not None]
            assert all(isinstance(e, SequenceConflictError) for e in lost), lost
            winners.append(won[0])
        log = await first.read(ACTOR)
        assert log == await second.read(ACTOR)
        assert [(r.seq, r.message_id) for r in log] == [
            (seq, f"{name}-{seq}") for seq, name in enumerate(winners, start=1)
        ]

    @needs("multi_process")
    async def test_instances_racing_over_many_actors_have_one_winner_per_seq(
        self, harness: StoreHarness
    ) -> None:
        """Two instances append the same seqs to the same actors at once, so their shared
        commits overlap (in opposite orders): per actor and seq exactly one wins, nothing
        fails otherwise (no deadlock between the two commits), and every log stays a
        chain."""
        first = await harness.open()
        require(harness, first, "multi_process")
        second = await harness.open()
        ids = [f"o-{i:02d}" for i in range(12)]
        await registered(first, *ids)
        rounds = 6
        for seq in range(1, rounds + 1):
            outcomes = {actor_id: dict[str, BaseException | None]() for actor_id in ids}
            async with anyio.create_task_group() as tg:
                for actor_id in ids:
                    tg.start_soon(race, outcomes[actor_id], "first", first, actor_id, seq)
                for actor_id in reversed(ids):
                    tg.start_soon(race, outcomes[actor_id], "second", second, actor_id, seq)
            for actor_id, outcome in outcomes.items():
                assert sorted(outcome) == ["first", "second"]
                won = [name for name, exc in outcome.items() if exc is None]
                assert len(won) == 1, (actor_id, seq, outcome)
                errors = [e for e in outcome.values() if e is not None]
                assert all(isinstance(e, SequenceConflictError) for e in errors), errors
        for actor_id in ids:
            log = await second.read(actor_id)
            assert [r.seq for r in log] == list(range(1, rounds + 1))
            assert all(intact(r) and r.actor_id == actor_id for r in log)

    @needs("multi_process")
    async def test_instances_opening_a_new_database_at_once_all_succeed(
        self, harness: StoreHarness
    ) -> None:
        """Schema creation is serialized (advisory lock, write transaction)."""
        probe = harness.new()
        require(harness, probe, "multi_process")
        stores = [harness.new() for _ in range(6)]
        try:
            async with anyio.create_task_group() as tg:
                for s in stores:
                    tg.start_soon(s.open)
            await stores[0].register_actor(ACTOR, TYPE)
            for s in stores:
                assert [a.actor_id for a in await s.list_actors()] == [ACTOR]
        finally:
            for s in stores:
                await s.close()

    # -- damage is returned as stored ------------------------------------------------------

    async def test_store_keeps_rows_with_wrong_checksums(self, store: Store) -> None:
        """Stores never compute or check checksums: verification is the runtime's job."""
        await registered(store, ACTOR)
        good = msg(ACTOR, 1)
        bad = attrs.evolve(msg(ACTOR, 2), checksum=good.checksum ^ 0xFFFFFFFF)
        extreme = attrs.evolve(entry(ACTOR, 3, "step", 1), checksum=0xFFFFFFFF)
        await store.append(ACTOR, 0, [good, bad, extreme])
        assert await store.read(ACTOR) == [good, bad, extreme]
        assert await store.find_message(ACTOR, "m-2") == bad
        assert not intact((await store.read(ACTOR))[1])

    async def test_damaged_payload_is_returned_as_stored(self, harness: StoreHarness) -> None:
        store = await harness.open()
        await registered(store, ACTOR)
        rows = msgs(ACTOR, 1, 3)
        await store.append(ACTOR, 0, rows)
        await harness_call(harness.damage_payload(store, ACTOR, 2, b'{"question":"q3"}'))
        got = await store.read(ACTOR)
        assert got[0] == rows[0] and got[2] == rows[2]
        assert got[1] == attrs.evolve(rows[1], payload=b'{"question":"q3"}')
        assert not intact(got[1])  # the stored checksum no longer matches

    # -- snapshots and events --------------------------------------------------------------

    async def test_snapshots_save_list_load_delete(self, store: Store) -> None:
        await registered(store, ACTOR, "other")
        snaps = {seq: snapshot(ACTOR, seq) for seq in (3, 10, 7)}
        for snap in snaps.values():
            await store.save_snapshot(snap)
        await store.save_snapshot(snapshot("other", 5))
        assert await store.list_snapshots(ACTOR) == [snaps[s].info for s in (10, 7, 3)]
        for seq, snap in snaps.items():
            assert await store.load_snapshot(ACTOR, seq) == snap
        assert await store.load_snapshot(ACTOR, 5) is None
        assert await store.load_snapshot("nobody", 3) is None
        assert await store.list_snapshots("nobody") == []

        replacement = snapshot(ACTOR, 7, data=bytes(range(256)) * 4)
        await store.save_snapshot(replacement)
        assert await store.load_snapshot(ACTOR, 7) == replacement
        assert [i.seq for i in await store.list_snapshots(ACTOR)] == [10, 7, 3]

        await store.delete_snapshots(ACTOR, [3, 99])
        await store.delete_snapshots(ACTOR, [])
        assert [i.seq for i in await store.list_snapshots(ACTOR)] == [10, 7]
        assert await store.load_snapshot(ACTOR, 3) is None
        assert [i.seq for i in await store.list_snapshots("other")] == [5]

    async def test_events_are_kept_oldest_first(self, store: Store) -> None:
        await registered(store, ACTOR)
        before = time.time()
        details = ['{"n":1}', '{"n":2,"why":"crc"}', '{"n":3,"note":"\u00e9"}']
        for i, detail in enumerate(details):
            await store.record_event(ACTOR, f"kind-{i}", detail)
        await store.record_event("other", "quarantined", "{}")
        events = await store.read_events(ACTOR)
        assert [(e.actor_id, e.kind, e.detail) for e in events] == [
            (ACTOR, f"kind-{i}", d) for i, d in enumerate(details)
        ]
        ats = [e.at for e in events]
        assert ats == sorted(ats) and before - 1 <= ats[0] <= time.time() + 1
        assert [e.kind for e in await store.read_events("other")] == ["quarantined"]
        assert await store.read_events("nobody") == []

    @needs("audit")
    async def test_delete_actor_leaves_an_audit_row(self, store: Store) -> None:
        """Optional ``AuditStore`` (a harness whose store has none lists ``audit`` in
        ``lacks``): delete removes log, snapshots and history together and appends an audit
        row that outlives them; the id can start afresh from seq 1."""
        if not isinstance(store, AuditStore):
            pytest.skip("the store has no delete_actor/read_audit: list 'audit' in lacks")
        await registered(store, ACTOR)
        await registered(store, "kept")
        await store.append(ACTOR, 0, msgs(ACTOR, 1, 3))
        await store.append("kept", 0, msgs("kept", 1, 2))
        await store.save_snapshot(snapshot(ACTOR, 2))
        await store.record_event(ACTOR, "finished", "{}")
        row = await store.delete_actor(ACTOR, '{"by":"kit"}')
        assert (row.kind, row.actor_id, row.detail) == ("deleted", ACTOR, '{"by":"kit"}')
        assert await store.get_actor(ACTOR) is None
        assert await store.read(ACTOR) == []
        assert await store.list_snapshots(ACTOR) == []
        assert await store.read_events(ACTOR) == []
        assert await store.read_audit(ACTOR) == [row]
        assert [r.actor_id for r in await store.read_audit()] == [ACTOR]
        assert len(await store.read("kept")) == 2  # others untouched
        await registered(store, ACTOR)
        await store.append(ACTOR, 0, msgs(ACTOR, 1, 1))
        assert len(await store.read(ACTOR)) == 1

    # -- durability across reopen ----------------------------------------------------------

    @needs("durable")
    async def test_reopened_store_holds_everything(self, harness: StoreHarness) -> None:
        store = await harness.open()
        require(harness, store, "durable")
        await registered(store, "a", "b")
        rows = [msg("a", 1), entry("a", 2, "intent", 1), entry("a", 3, "step", 1)]
        await store.append("a", 0, rows)
        await store.save_snapshot(snapshot("a", 3))
        await store.record_event("a", "recovered", '{"replayed":3}')
        actors = await store.list_actors()
        await store.close()

        again = await harness.open()
        assert await again.list_actors() == actors
        assert await again.read("a") == rows
        assert await again.find_message("a", "m-1") == rows[0]
        assert await again.load_snapshot("a", 3) == snapshot("a", 3)
        assert [(e.kind, e.detail) for e in await again.read_events("a")] == [
            ("recovered", '{"replayed":3}')
        ]
        await again.append("a", 3, [msg("a", 4)])  # the chain continues where it was
        with pytest.raises(SequenceConflictError):
            await again.append("a", 3, [msg("a", 4, "other")])

    @needs("durable")
    async def test_url_reopens_the_same_store(self, harness: StoreHarness) -> None:
        store = await harness.open()
        require(harness, store, "durable")
        await registered(store, ACTOR)
        await store.append(ACTOR, 0, [msg(ACTOR, 1)])
        # a store with one writer per database (SQLite) is reopened next to it for reading
        other = harness.open_url(store.url, read_only=not store.capabilities.multi_process)
        await other.open()
        try:
            assert await other.read(ACTOR) == [msg(ACTOR, 1)]
        finally:
            await other.close()

    @needs("durable")
    async def test_newer_format_version_is_refused(self, harness: StoreHarness) -> None:
        store = await harness.open()
        require(harness, store, "durable")
        await registered(store, ACTOR)
        await store.close()
        await harness_call(harness.set_format_version(FORMAT_VERSION + 1))
        with pytest.raises(UnsupportedFormatError) as info:
            await harness.open()
        assert (info.value.found, info.value.supported) == (FORMAT_VERSION + 1, FORMAT_VERSION)
        with pytest.raises(UnsupportedFormatError):
            await harness.open(read_only=True)
        await harness.set_format_version(FORMAT_VERSION)  # nothing else was changed
        again = await harness.open()
        assert [a.actor_id for a in await again.list_actors()] == [ACTOR]

    @needs("durable")
    async def test_read_only_store_reads_but_refuses_writes(self, harness: StoreHarness) -> None:
        store = await harness.open()
        require(harness, store, "durable")
        await registered(store, ACTOR)
        await store.append(ACTOR, 0, [msg(ACTOR, 1)])
        reader = await harness.open(read_only=True)
        assert await reader.read(ACTOR) == [msg(ACTOR, 1)]
        assert [a.actor_id for a in await reader.list_actors()] == [ACTOR]
        writes: list[Callable[[], Awaitable[Any]]] = [
            lambda: reader.register_actor("new", TYPE),
            lambda: reader.append(ACTOR, 1, [msg(ACTOR, 2)]),
            lambda: reader.save_snapshot(snapshot(ACTOR, 1)),
            lambda: reader.record_event(ACTOR, "x", "{}"),
        ]
        for write in writes:
            with pytest.raises(StoreClosedError):
                await write()
        assert await store.read(ACTOR) == [msg(ACTOR, 1)]
