"""Contract tests of compaction (``actorlog.store.CompactingStore``), a mixin of
:class:`actorlog.testing.StoreContract`. A store that does not implement it skips them (or
deselects them: they need ``"compaction"``, which such a harness lists in ``lacks``)."""

from __future__ import annotations

import struct
import zlib

import pytest

from ..store import (
    CompactingStore,
    ConfigurationError,
    EntryRow,
    SequenceConflictError,
    Store,
)
from ._kit import ACTOR, FRAME_VERSION, StoreHarness, entry, msg, msgs, needs, registered, require


def log_start_checksum(actor_id: str, first_seq: int) -> int:
    """[F16] The CRC-32 of a log start frame, as FORMAT.md defines it."""
    a = actor_id.encode()
    return zlib.crc32(struct.pack(">BBQH", FRAME_VERSION, 0x80, first_seq, len(a)) + a)


def _compacting(store: Store) -> CompactingStore:
    if not isinstance(store, CompactingStore):
        pytest.skip(f"{type(store).__name__} does not compact (no CompactingStore)")
    return store


async def _log(store: Store, n: int = 10) -> list[EntryRow]:
    """Messages at odd seqs, each followed by its step."""
    await registered(store, ACTOR)
    rows: list[EntryRow] = []
    for s in range(1, n + 1, 2):
        rows += [msg(ACTOR, s), entry(ACTOR, s + 1, "step", s, "tests.Ask")]
    await store.append(ACTOR, 0, rows)
    return rows


class CompactionContract:
    """Compaction: atomic, recorded, never empties a log, and appends go on after it."""

    @needs("compaction")
    async def test_compact_removes_the_start_and_records_it(self, store: Store) -> None:
        c = _compacting(store)
        rows = await _log(store)
        assert await c.compact(ACTOR, 4, checksum=log_start_checksum(ACTOR, 5)) == 4
        assert await store.read(ACTOR) == rows[4:]
        actor = await store.get_actor(ACTOR)
        assert actor is not None and (actor.first_seq, actor.last_seq) == (5, 10)
        start = await c.log_start(ACTOR)
        assert start is not None
        assert (start.actor_id, start.first_seq) == (ACTOR, 5)
        assert start.checksum == log_start_checksum(ACTOR, 5)

    @needs("compaction")
    async def test_compact_before_the_start_changes_nothing(self, store: Store) -> None:
        c = _compacting(store)
        rows = await _log(store)
        await c.compact(ACTOR, 6, checksum=log_start_checksum(ACTOR, 7))
        before = await c.log_start(ACTOR)
        assert await c.compact(ACTOR, 4, checksum=log_start_checksum(ACTOR, 5)) == 0
        assert await c.log_start(ACTOR) == before
        assert await store.read(ACTOR) == rows[6:]

    @needs("compaction")
    async def test_compact_never_removes_the_last_entry(self, store: Store) -> None:
        c = _compacting(store)
        rows = await _log(store)
        for upto in (10, 11):
            with pytest.raises(ConfigurationError):
                await c.compact(ACTOR, upto, checksum=log_start_checksum(ACTOR, upto + 1))
        assert await store.read(ACTOR) == rows
        assert await c.log_start(ACTOR) is None
        with pytest.raises(ConfigurationError):
            await c.compact("nobody", 1, checksum=log_start_checksum("nobody", 2))

    @needs("compaction")
    async def test_appends_go_on_after_compaction(self, store: Store) -> None:
        c = _compacting(store)
        await _log(store)
        await c.compact(ACTOR, 8, checksum=log_start_checksum(ACTOR, 9))
        with pytest.raises(SequenceConflictError):
            await store.append(ACTOR, 8, [msg(ACTOR, 9, "again")])
        await store.append(ACTOR, 10, msgs(ACTOR, 11, 2))
        assert [r.seq for r in await store.read(ACTOR)] == [9, 10, 11, 12]
        assert (await store.find_message(ACTOR, "m-9")) is not None
        assert await store.find_message(ACTOR, "m-1") is None  # outside the kept log
        assert [r.seq for r in await store.find_ref(ACTOR, "step", 9)] == [10]
        actor = await store.get_actor(ACTOR)
        assert actor is not None and (actor.first_seq, actor.last_seq) == (9, 12)

    @needs("durable", "compaction")
    async def test_compaction_is_durable(self, harness: StoreHarness) -> None:
        store = await harness.open()
        c = _compacting(store)
        require(harness, store, "durable")
        rows = await _log(store)
        await c.compact(ACTOR, 2, checksum=log_start_checksum(ACTOR, 3))
        await store.close()
        reopened = await harness.open()
        assert await reopened.read(ACTOR) == rows[2:]
        start = await _compacting(reopened).log_start(ACTOR)
        assert start is not None and start.first_seq == 3
