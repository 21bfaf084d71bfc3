"""A long actor for the console's size tests, built fast: a real runtime logs two steps of
``Chat`` (and a snapshot), then the last step's entries are appended again and again through
the store (each copy a checksummed entry at its own seq, refs shifted) and a snapshot is
saved at the end, as ``snapshot_every`` would have."""

from __future__ import annotations

from pathlib import Path

import anyio
import attrs
from actorlog import ActorSystem
from actorlog._journal.codec import make_row, snapshot_digest
from actorlog._journal.rows import SnapshotRow
from actorlog.stores import SqliteStore

from tests.web._agents import Chat, Say


class Chatty(Chat):
    snapshot_every = 1


async def _build(db: Path, actor_id: str, entries: int) -> None:
    async with ActorSystem(SqliteStore(db), actors=[Chatty]) as system:
        ref = await system.spawn(Chatty, actor_id)
        await ref.ask(Say("first"))
        await ref.ask(Say("a step copied many times"))
    store = SqliteStore(db)
    await store.open()
    try:
        row = await store.get_actor(actor_id)
        assert row is not None
        last = row.last_seq
        rows = await store.read(actor_id, after_seq=0, upto_seq=last, limit=1000)
        start = row.last_message_seq
        step = [r for r in rows if r.seq >= start]  # the last step: message .. step
        width = len(step)
        snap_info = (await store.list_snapshots(actor_id))[0]
        snap = await store.load_snapshot(actor_id, snap_info.seq)
        assert snap is not None
        batch = []
        seq = last
        while seq + width <= entries:
            shift = seq + 1 - start
            for r in step:
                batch.append(
                    make_row(
                        actor_id,
                        r.seq + shift,
                        r.kind,
                        r.type_tag,
                        r.ref + shift if r.ref else 0,
                        None,
                        r.payload,
                    )
                )
            seq += width
            if len(batch) >= 2000:
                await store.append(actor_id, batch[0].seq - 1, batch)
                batch = []
        if batch:
            await store.append(actor_id, batch[0].seq - 1, batch)
        handled = seq - width + 1
        info = attrs.evolve(
            snap_info,
            seq=seq,
            handled_seq=handled,
            digest=snapshot_digest(
                actor_id, seq, handled, snap_info.type_tag, snap_info.schema_version, snap.data
            ),
        )
        await store.save_snapshot(SnapshotRow(info=info, data=snap.data))
    finally:
        await store.close()


def build_long_actor(db: Path, actor_id: str = "long-1", entries: int = 100_000) -> int:
    """Build it; returns its last seq (``entries`` or a few less)."""
    anyio.run(_build, db, actor_id, entries, backend="asyncio")

    async def last() -> int:
        store = SqliteStore(db)
        await store.open()
        try:
            row = await store.get_actor(actor_id)
            assert row is not None
            return row.last_seq
        finally:
            await store.close()

    return anyio.run(last, backend="asyncio")
