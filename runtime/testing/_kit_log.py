"""The store contract, first half: identity and lifecycle, actors, appends and reads,
conditional appends (:class:`actorlog.testing.StoreContract`)."""

from __future__ import annotations

import time
from collections.abc import Awaitable, Callable
from typing import Any

import pytest

from ..store import (
    KINDS,
    ActorRow,
    MessageIdIndex,
    SequenceConflictError,
    Store,
    StoreCapabilities,
    StoreClosedError,
    StoreError,
    UnfinishedStore,
)
from ._kit import (
    ACTOR,
    TYPE,
    StoreHarness,
    assert_unchanged,
    entry,
    intact,
    log_of_two,
    make_entry,
    msg,
    msgs,
    needs,
    registered,
    require,
    require_hook,
    snapshot,
)


class LogContract:
    """Contract tests of the log itself (a mixin of :class:`actorlog.testing.StoreContract`)."""

    # -- identity and lifecycle ------------------------------------------------------------

    async def test_store_satisfies_protocol(self, store: Store) -> None:
        assert isinstance(store, Store)
        assert isinstance(store.capabilities, StoreCapabilities)
        assert isinstance(store.url, str) and "://" in store.url

    async def test_open_is_idempotent(self, store: Store) -> None:
        await registered(store, ACTOR)
        await store.open()
        assert (await store.get_actor(ACTOR)) is not None

    async def test_closed_store_raises_store_closed(self, store: Store) -> None:
        await registered(store, ACTOR)
        await store.append(ACTOR, 0, [msg(ACTOR, 1)])
        await store.close()
        await store.close()  # idempotent
        snap = snapshot(ACTOR, 1)
        calls: list[Callable[[], Awaitable[Any]]] = [
            lambda: store.register_actor("other", TYPE),
            lambda: store.get_actor(ACTOR),
            lambda: store.list_actors(),
            lambda: store.append(ACTOR, 1, [msg(ACTOR, 2)]),
            lambda: store.read(ACTOR),
            lambda: store.find_message(ACTOR, "m-1"),
            lambda: store.find_ref(ACTOR, "step", 1),
            lambda: store.save_snapshot(snap),
            lambda: store.list_snapshots(ACTOR),
            lambda: store.load_snapshot(ACTOR, 1),
            lambda: store.delete_snapshots(ACTOR, [1]),
            lambda: store.record_event(ACTOR, "recovered", "{}"),
            lambda: store.read_events(ACTOR),
        ]
        for call in calls:
            with pytest.raises(StoreClosedError):
                await call()

    # -- actors ----------------------------------------------------------------------------

    async def test_register_actor_returns_empty_summary(self, store: Store) -> None:
        before = time.time()
        row = await store.register_actor(ACTOR, TYPE)
        assert row == ActorRow(ACTOR, TYPE, 0, 0, 0, 0, row.created_at)
        assert before - 1 <= row.created_at <= time.time() + 1
        assert await store.get_actor(ACTOR) == row

    async def test_register_actor_keeps_type_of_first_registration(self, store: Store) -> None:
        first = await store.register_actor(ACTOR, TYPE)
        await store.append(ACTOR, 0, [msg(ACTOR, 1)])
        again = await store.register_actor(ACTOR, "tests.SomethingElse")
        assert again.actor_type == TYPE
        assert again.created_at == first.created_at
        assert again.last_seq == 1  # re-registering does not reset the log

    async def test_get_actor_of_unknown_id_is_none(self, store: Store) -> None:
        assert await store.get_actor("nobody") is None

    async def test_list_actors_is_ordered_by_id(self, store: Store) -> None:
        ids = ["b", "a", "c-\u00e9t\u00e9", "a-2", "\u65e5\u672c"]
        for actor_id in ids:
            await store.register_actor(actor_id, TYPE)
        listed = await store.list_actors()
        assert [a.actor_id for a in listed] == sorted(ids)
        assert all(a.actor_type == TYPE for a in listed)

    async def test_actor_summary_tracks_the_log(self, store: Store) -> None:
        """last_seq, last_message_seq, handled_seq (max ref of steps) and first_seq."""
        await registered(store, ACTOR)
        await store.append(
            ACTOR,
            0,
            [
                msg(ACTOR, 1),
                entry(ACTOR, 2, "intent", 1),
                entry(ACTOR, 3, "result", 2),
                entry(ACTOR, 4, "step", 1),
                msg(ACTOR, 5),
                msg(ACTOR, 6),
            ],
        )
        await store.append(ACTOR, 6, [entry(ACTOR, 7, "step", 5), entry(ACTOR, 8, "effect", 6)])
        actor = await store.get_actor(ACTOR)
        assert actor is not None
        summary = (actor.last_seq, actor.last_message_seq, actor.handled_seq, actor.first_seq)
        assert summary == (8, 6, 5, 1)
        # handled_seq is the *highest* step ref, not the latest one
        await store.append(ACTOR, 8, [entry(ACTOR, 9, "step", 1)])
        actor = await store.get_actor(ACTOR)
        assert actor is not None
        assert (actor.last_seq, actor.handled_seq) == (9, 5)
        assert [a for a in await store.list_actors() if a.actor_id == ACTOR] == [actor]

    @needs("unfinished")
    async def test_unfinished_actors_are_those_with_a_message_after_the_last_step(
        self, store: Store
    ) -> None:
        """Optional ``UnfinishedStore``: what a runtime recovers at start, in one query."""
        if not isinstance(store, UnfinishedStore):
            pytest.skip("the store does not implement actorlog.store.UnfinishedStore")
        for actor_id in ("done", "idle", "waiting", "mid-step"):
            await registered(store, actor_id)
        await store.append("done", 0, [msg("done", 1), entry("done", 2, "step", 1)])
        await store.append("waiting", 0, [msg("waiting", 1), entry("waiting", 2, "step", 1)])
        await store.append("waiting", 2, [msg("waiting", 3)])
        await store.append("mid-step", 0, [msg("mid-step", 1), entry("mid-step", 2, "intent", 1)])
        found = await store.unfinished_actors()
        assert [a.actor_id for a in found] == ["mid-step", "waiting"]
        listed = {a.actor_id: a for a in await store.list_actors()}
        assert found == [listed["mid-step"], listed["waiting"]]

    # -- append and read -------------------------------------------------------------------

    async def test_append_then_read_returns_identical_rows(self, store: Store) -> None:
        await registered(store, ACTOR)
        rows = [
            msg(ACTOR, 1, payload=bytes(range(256))),
            make_entry(ACTOR, 2, "intent", "tools.s\u00fcche \U0001f50d", 1, payload=b""),
            make_entry(ACTOR, 3, "result", "tools.search", 2, payload=b"\x00" * 1000),
            make_entry(ACTOR, 4, "step", "tests.Ask", 1, payload=b'{"reply":"\xc3\xa9"}'),
            make_entry(ACTOR, 5, "effect", "now", 1, payload=b"1.5"),
            make_entry(ACTOR, 6, "decision", "retry", 2, payload=b"{}"),
            msg(ACTOR, 7, message_id="\u00e9-" + "x" * 500),
        ]
        assert {r.kind for r in rows} == set(KINDS)
        await store.append(ACTOR, 0, rows[:1])
        await store.append(ACTOR, 1, rows[1:])
        got = await store.read(ACTOR)
        assert got == rows
        assert all(isinstance(r.payload, bytes) for r in got)
        assert all(intact(r) for r in got)

    async def test_read_of_unknown_actor_is_empty(self, store: Store) -> None:
        assert await store.read("nobody") == []
        assert await store.find_message("nobody", "m-1") is None
        assert await store.find_ref("nobody", "step", 1) == []

    async def test_logs_of_actors_are_separate(self, store: Store) -> None:
        await registered(store, "a", "b")
        await store.append("a", 0, msgs("a", 1, 3))
        await store.append("b", 0, msgs("b", 1, 2))  # the same message ids in another actor
        assert await store.read("a") == msgs("a", 1, 3)
        assert await store.read("b") == msgs("b", 1, 2)
        found = await store.find_message("b", "m-2")
        assert found == msg("b", 2)

    async def test_read_filters(self, store: Store) -> None:
        await registered(store, ACTOR)
        rows = [
            msg(ACTOR, 1),
            entry(ACTOR, 2, "intent", 1),
            entry(ACTOR, 3, "result", 2),
            entry(ACTOR, 4, "step", 1),
            msg(ACTOR, 5),
            entry(ACTOR, 6, "step", 5),
            msg(ACTOR, 7),
            msg(ACTOR, 8),
        ]
        await store.append(ACTOR, 0, rows)

        async def seqs(**kw: Any) -> list[int]:
            return [r.seq for r in await store.read(ACTOR, **kw)]

        assert await seqs() == [1, 2, 3, 4, 5, 6, 7, 8]
        assert await seqs(after_seq=5) == [6, 7, 8]
        assert await seqs(after_seq=8) == []
        assert await seqs(upto_seq=3) == [1, 2, 3]
        assert await seqs(after_seq=2, upto_seq=6) == [3, 4, 5, 6]
        assert await seqs(upto_seq=0) == []
        assert await seqs(kinds=["message"]) == [1, 5, 7, 8]
        assert await seqs(kinds=("step", "intent")) == [2, 4, 6]
        assert await seqs(kinds=[]) == []
        assert await seqs(limit=3) == [1, 2, 3]
        assert await seqs(after_seq=4, kinds=["message"], limit=2) == [5, 7]
        assert await seqs(after_seq=1, upto_seq=7, kinds=["message", "step"], limit=10) == [
            4,
            5,
            6,
            7,
        ]
        assert await store.read(ACTOR, after_seq=3, upto_seq=4) == rows[3:4]

    async def test_read_with_limit_zero_is_empty(self, store: Store) -> None:
        await registered(store, ACTOR)
        await store.append(ACTOR, 0, msgs(ACTOR, 1, 3))
        assert await store.read(ACTOR, limit=0) == []

    async def test_find_message_uses_the_message_id(self, store: Store) -> None:
        await registered(store, ACTOR)
        rows = [msg(ACTOR, 1, "q-1"), entry(ACTOR, 2, "step", 1), msg(ACTOR, 3, "q-2")]
        await store.append(ACTOR, 0, rows)
        assert await store.find_message(ACTOR, "q-2") == rows[2]
        assert await store.find_message(ACTOR, "q-1") == rows[0]
        assert await store.find_message(ACTOR, "q-3") is None

    @needs("message_ids")
    async def test_message_ids_lists_a_logs_ids(self, store: Store) -> None:
        """Optional ``MessageIdIndex``: one actor's message ids, or None past the limit."""
        if not isinstance(store, MessageIdIndex):
            pytest.skip("the store does not implement actorlog.store.MessageIdIndex")
        await registered(store, ACTOR)
        await registered(store, "other")
        assert await store.message_ids(ACTOR, limit=10) == []
        rows = [msg(ACTOR, 1, "q-1"), entry(ACTOR, 2, "step", 1), msg(ACTOR, 3, "q-2")]
        await store.append(ACTOR, 0, rows)
        await store.append("other", 0, [msg("other", 1, "o-1")])
        assert sorted(await store.message_ids(ACTOR, limit=10) or []) == ["q-1", "q-2"]
        assert sorted(await store.message_ids(ACTOR, limit=2) or []) == ["q-1", "q-2"]
        assert await store.message_ids(ACTOR, limit=1) is None
        assert await store.message_ids("nobody", limit=10) == []

    async def test_find_ref_returns_matching_kind_by_seq(self, store: Store) -> None:
        await registered(store, ACTOR)
        rows = [
            msg(ACTOR, 1),
            entry(ACTOR, 2, "intent", 1),
            entry(ACTOR, 3, "result", 2),
            entry(ACTOR, 4, "intent", 1),
            entry(ACTOR, 5, "result", 4),
            entry(ACTOR, 6, "step", 1),
            msg(ACTOR, 7),
            entry(ACTOR, 8, "intent", 7),
        ]
        await store.append(ACTOR, 0, rows)
        assert await store.find_ref(ACTOR, "intent", 1) == [rows[1], rows[3]]
        assert await store.find_ref(ACTOR, "result", 4) == [rows[4]]
        assert await store.find_ref(ACTOR, "step", 1) == [rows[5]]
        assert await store.find_ref(ACTOR, "step", 7) == []

    # -- conditional appends ---------------------------------------------------------------

    @pytest.mark.parametrize(
        ("expected", "seqs"),
        [
            pytest.param(1, [2], id="expected-too-low"),
            pytest.param(3, [4], id="expected-too-high"),
            pytest.param(0, [1], id="duplicate-seq"),
            pytest.param(2, [4], id="gap-after-expected"),
            pytest.param(2, [3, 5], id="gap-inside"),
            pytest.param(2, [3, 3], id="repeated-seq"),
            pytest.param(2, [4, 3], id="out-of-order"),
        ],
    )
    async def test_append_rejects_seqs_that_do_not_continue_the_log(
        self, store: Store, expected: int, seqs: list[int]
    ) -> None:
        rows, actor = await log_of_two(store)
        new = [msg(ACTOR, s, message_id=f"new-{i}") for i, s in enumerate(seqs)]
        with pytest.raises(SequenceConflictError) as info:
            await store.append(ACTOR, expected, new)
        assert info.value.actor_id == ACTOR
        await assert_unchanged(store, ACTOR, rows, actor)
        await store.append(ACTOR, 2, [msg(ACTOR, 3)])  # the right append still works

    async def test_append_to_unregistered_actor_is_rejected(self, store: Store) -> None:
        with pytest.raises(SequenceConflictError):
            await store.append("ghost", 0, [msg("ghost", 1)])
        assert await store.read("ghost") == []
        assert await store.get_actor("ghost") is None
        assert [a.actor_id for a in await store.list_actors()] == []

    async def test_append_rejects_rows_of_another_actor(self, store: Store) -> None:
        await registered(store, "a", "b")
        with pytest.raises(SequenceConflictError):
            await store.append("a", 0, [msg("a", 1), msg("b", 2)])
        assert await store.read("a") == []
        assert await store.read("b") == []

    async def test_append_rejects_a_used_message_id(self, store: Store) -> None:
        rows, actor = await log_of_two(store)
        with pytest.raises(SequenceConflictError):
            await store.append(ACTOR, 2, [msg(ACTOR, 3, message_id="m-1")])
        await assert_unchanged(store, ACTOR, rows, actor)

    async def test_append_rejects_a_message_id_repeated_within_the_call(self, store: Store) -> None:
        rows, actor = await log_of_two(store)
        with pytest.raises(SequenceConflictError):
            await store.append(ACTOR, 2, [msg(ACTOR, 3, "dup"), msg(ACTOR, 4, "dup")])
        await assert_unchanged(store, ACTOR, rows, actor)

    async def test_append_that_conflicts_midway_writes_nothing(self, store: Store) -> None:
        """Atomicity: rows before the conflicting one are not written either."""
        rows, actor = await log_of_two(store)
        new = [
            msg(ACTOR, 3, "fresh-3"),
            entry(ACTOR, 4, "step", 3),
            msg(ACTOR, 5, "fresh-5"),
            msg(ACTOR, 6, "m-2"),  # already used: the store finds out on the fourth row
            msg(ACTOR, 7, "fresh-7"),
        ]
        with pytest.raises(SequenceConflictError):
            await store.append(ACTOR, 2, new)
        await assert_unchanged(store, ACTOR, rows, actor)
        assert await store.find_message(ACTOR, "fresh-3") is None
        assert await store.find_ref(ACTOR, "step", 3) == []
        await store.append(ACTOR, 2, new[:3])
        assert await store.read(ACTOR) == rows + new[:3]

    async def test_rejection_is_a_store_error_with_fields(self, store: Store) -> None:
        await log_of_two(store)
        with pytest.raises(StoreError) as info:
            await store.append(ACTOR, 5, [msg(ACTOR, 6)])
        assert isinstance(info.value, SequenceConflictError)
        assert (info.value.actor_id, info.value.expected) == (ACTOR, 5)
        assert info.value.found in (2, None)  # the store may not know the current last seq

    @needs("multi_process")
    async def test_database_enforces_the_conditional_append(self, harness: StoreHarness) -> None:
        """A writer that bypasses the store's code still cannot break the seq chain."""
        store = await harness.open()
        require(harness, store, "multi_process")
        require_hook(harness, "raw_insert")
        rows, actor = await log_of_two(store)
        for bad in (msg(ACTOR, 4, "x"), msg(ACTOR, 2, "y"), msg(ACTOR, 1, "z")):
            with pytest.raises(Exception):  # noqa: B017  # the database's own error type
                await harness.raw_insert(bad)
            await assert_unchanged(store, ACTOR, rows, actor)
        with pytest.raises(Exception):  # noqa: B017
            await harness.raw_insert(msg("ghost", 1))
        assert await store.read("ghost") == []
        await harness.raw_insert(msg(ACTOR, 3, "ok"))
        after = await store.get_actor(ACTOR)
        assert after is not None and after.last_seq == 3 and after.last_message_seq == 3
