"""PostgresStore.find_message: concurrent lookups share one statement, each gets its own
answer, a lookup sees every commit made before it, and a reading() view keeps its snapshot."""

from __future__ import annotations

from typing import TYPE_CHECKING

import anyio
import pytest
from actorlog._journal.codec import make_row
from actorlog.store import EntryRow
from actorlog.stores import PostgresStore

if TYPE_CHECKING:
    # Only for the type checker: pytest imports conftest.py itself (tests/ is no package).
    from tests.stores.conftest import PostgresHarness

pytestmark = pytest.mark.anyio


def msg(actor_id: str, seq: int, message_id: str) -> EntryRow:
    return make_row(actor_id, seq, "message", "tests.Ask", 0, message_id, b"{}")


async def test_concurrent_lookups_share_statements_and_get_their_own_answers(
    pg_harness: PostgresHarness,
) -> None:
    store = await pg_harness.open()
    assert isinstance(store, PostgresStore)
    ids = [f"a-{i:02d}" for i in range(40)]
    for actor_id in ids:
        await store.register_actor(actor_id, "t")
        await store.append(actor_id, 0, [msg(actor_id, 1, "m-1"), msg(actor_id, 2, "m-2")])
    # each actor: a present id, an absent one, and another actor's id under its own name
    asked = [(a, m) for a in ids for m in ("m-2", "nope", "m-1")]
    found: dict[tuple[str, str], EntryRow | None] = {}

    async def look(actor_id: str, message_id: str) -> None:
        found[actor_id, message_id] = await store.find_message(actor_id, message_id)

    before = len(store.lookup_batch_sizes)
    async with anyio.create_task_group() as tg:
        for a, m in asked:
            tg.start_soon(look, a, m)
    sizes = store.lookup_batch_sizes[before:]
    assert sum(sizes) == len(asked)
    assert len(sizes) < len(asked) / 4, sizes
    for a in ids:
        assert found[a, "m-1"] == msg(a, 1, "m-1")
        assert found[a, "m-2"] == msg(a, 2, "m-2")
        assert found[a, "nope"] is None


async def test_a_lookup_sees_every_commit_made_before_it(pg_harness: PostgresHarness) -> None:
    """Lookups queued behind a statement in flight are answered by the next one, which
    starts after them: a message committed meanwhile is found."""
    store = await pg_harness.open()
    await store.register_actor("w", "t")
    for seq in range(1, 31):
        async with anyio.create_task_group() as tg:
            # one lookup in flight, then the append commits, then the second lookup
            tg.start_soon(store.find_message, "w", f"m-{seq}")
            await anyio.lowlevel.checkpoint()
            await store.append("w", seq - 1, [msg("w", seq, f"m-{seq}")])
            assert await store.find_message("w", f"m-{seq}") == msg("w", seq, f"m-{seq}")


async def test_a_reading_view_looks_up_in_its_own_snapshot(pg_harness: PostgresHarness) -> None:
    store = await pg_harness.open()
    assert isinstance(store, PostgresStore)
    await store.register_actor("v", "t")
    await store.append("v", 0, [msg("v", 1, "m-1")])
    async with store.reading() as view:
        assert await view.find_message("v", "m-1") == msg("v", 1, "m-1")
        await store.append("v", 1, [msg("v", 2, "m-2")])
        assert await store.find_message("v", "m-2") == msg("v", 2, "m-2")
        assert await view.find_message("v", "m-2") is None  # after the view's snapshot
