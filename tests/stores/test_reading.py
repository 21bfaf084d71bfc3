"""The optional consistent-read method ``reading()`` (actorlog.store, FORMAT.md 6b): a
read-only view whose reads all see one state of the store, however it is written meanwhile.
Runs once per store kind (see conftest.py)."""

from __future__ import annotations

from typing import Any

import pytest
from actorlog._journal.codec import make_row
from actorlog._journal.errors import StoreClosedError
from actorlog.store import SnapshotInfo, SnapshotRow, Store

pytestmark = pytest.mark.anyio


def _msg(actor_id: str, seq: int) -> Any:
    return make_row(actor_id, seq, "message", "tests.Ask", 0, f"m-{seq}", b'{"q":%d}' % seq)


def _snapshot(actor_id: str, seq: int) -> SnapshotRow:
    """A snapshot row (a store does not check digests: 32 zero bytes will do)."""
    data = b'{"n":%d}' % seq
    return SnapshotRow(
        info=SnapshotInfo(actor_id, seq, seq, "tests.State", 1, bytes(32), len(data), 1.0),
        data=data,
    )


async def test_reading_sees_one_state_while_the_store_is_written(store: Store) -> None:
    reading = getattr(store, "reading", None)
    assert reading is not None, "the bundled stores offer reading()"
    await store.register_actor("a", "tests.Actor")
    await store.append("a", 0, [_msg("a", 1), _msg("a", 2)])
    await store.save_snapshot(_snapshot("a", 2))
    async with reading() as view:
        row = await view.get_actor("a")
        assert row is not None and row.last_seq == 2
        await store.append("a", 2, [_msg("a", 3)])
        await store.save_snapshot(_snapshot("a", 3))
        await store.delete_snapshots("a", [2])
        await store.register_actor("b", "tests.Actor")
        assert [r.seq for r in await view.read("a")] == [1, 2]
        assert (await view.get_actor("a")).last_seq == 2
        assert [i.seq for i in await view.list_snapshots("a")] == [2]
        assert await view.load_snapshot("a", 2) is not None
        assert [a.actor_id for a in await view.list_actors()] == ["a"]
    assert [r.seq for r in await store.read("a")] == [1, 2, 3]
    assert [i.seq for i in await store.list_snapshots("a")] == [3]


@pytest.mark.needs("view_refuses_writes")
async def test_reading_view_refuses_writes(store: Store) -> None:
    await store.register_actor("a", "tests.Actor")
    async with store.reading() as view:  # type: ignore[attr-defined]  # optional method
        with pytest.raises(StoreClosedError):
            await view.append("a", 0, [_msg("a", 1)])
    assert await store.read("a") == []
