"""The store contract kit: the tests every :class:`~actorlog.store.Store` must pass.

Like Akka's journal TCK (``JournalSpec``): a store written by a third party runs the same
suite as actorlog's own stores. This module imports only public actorlog modules
(``actorlog.store``; ``actorlog.stores`` only for the default :meth:`StoreHarness.open_url`)
and needs pytest and anyio's pytest plugin (which comes with anyio), nothing else.

Use (``docs/stores.md`` has the whole walk-through)::

    import pytest
    from actorlog.testing import StoreContract, StoreHarness

    class MyHarness(StoreHarness):
        def new(self, *, read_only=False):
            return MyStore(self.path, read_only=read_only)

    class TestMyStore(StoreContract):
        @pytest.fixture
        async def harness(self, tmp_path):
            h = MyHarness()
            yield h
            await h.aclose()

Each test asks for ``harness`` (a :class:`StoreHarness`) or ``store`` (an opened store of the
harness). A test that needs something the harness cannot do (a damaging write, a shared
database, ...) skips with the reason; tests that need a capability flag the store does not
claim (``StoreCapabilities``) skip too.

The module also holds the frames of ``docs/FORMAT.md`` written from the spec, independently
of the runtime's codec: :func:`entry_checksum` ([F6]) and :func:`snapshot_digest` ([F12]), so
that the rows the kit appends are valid entries a runtime could read back.
"""

from __future__ import annotations

import hashlib
import struct
import time
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import anyio
import attrs
import pytest

from .store import (
    FORMAT_VERSION,
    KINDS,
    ActorRow,
    EntryRow,
    SequenceConflictError,
    SnapshotInfo,
    SnapshotRow,
    Store,
    StoreCapabilities,
    StoreClosedError,
    StoreError,
    UnsupportedFormatError,
)

__all__ = [
    "StoreContract",
    "StoreHarness",
    "entry_checksum",
    "make_entry",
    "needs",
    "snapshot_digest",
]

_F = TypeVar("_F", bound=Callable[..., Any])

# -- the frames of docs/FORMAT.md, from the spec --------------------------------------------


def entry_checksum(
    actor_id: str,
    seq: int,
    kind: str,
    type_tag: str,
    ref: int,
    message_id: str | None,
    payload: bytes,
) -> int:
    """[F6] The CRC-32 of an entry's frame, as FORMAT.md section 3.5 defines it."""
    a, t = actor_id.encode(), type_tag.encode()
    f = struct.pack(">BBQQ", FORMAT_VERSION, KINDS.index(kind) + 1, seq, ref)
    f += struct.pack(">H", len(a)) + a + struct.pack(">H", len(t)) + t
    if message_id is None:
        f += struct.pack(">H", 0xFFFF)
    else:
        m = message_id.encode()
        f += struct.pack(">H", len(m)) + m
    f += struct.pack(">I", len(payload)) + payload
    return zlib.crc32(f)


def snapshot_digest(
    actor_id: str, seq: int, handled_seq: int, type_tag: str, schema_version: int, data: bytes
) -> bytes:
    """[F12] The SHA-256 of a snapshot's frame, as FORMAT.md section 4 defines it."""
    a, t = actor_id.encode(), type_tag.encode()
    f = struct.pack(">BH", FORMAT_VERSION, len(a)) + a
    f += struct.pack(">QQIH", seq, handled_seq, schema_version, len(t)) + t
    f += struct.pack(">Q", len(data)) + data
    return hashlib.sha256(f).digest()


def make_entry(
    actor_id: str,
    seq: int,
    kind: str,
    type_tag: str,
    ref: int,
    message_id: str | None,
    payload: bytes,
) -> EntryRow:
    """An :class:`~actorlog.store.EntryRow` with its checksum."""
    checksum = entry_checksum(actor_id, seq, kind, type_tag, ref, message_id, payload)
    return EntryRow(actor_id, seq, kind, type_tag, ref, message_id, payload, checksum)


def _intact(row: EntryRow) -> bool:
    return row.checksum == entry_checksum(
        row.actor_id, row.seq, row.kind, row.type_tag, row.ref, row.message_id, row.payload
    )


# -- the harness: what the suite needs beyond the store protocol ----------------------------


def needs(*what: str) -> Callable[[_F], _F]:
    """Mark a contract test as needing ``what`` (a capability flag of the store, or an
    ability of the harness: ``group_commit``, ``view_refuses_writes``). The test skips
    itself when the harness lacks it (:attr:`StoreHarness.lacks`); a test runner may also
    read the names from the function's ``actorlog_needs`` attribute and deselect the test
    (actorlog's own suite does, so that it reports no skips)."""

    def mark(fn: _F) -> _F:
        fn.actorlog_needs = frozenset(what)  # type: ignore[attr-defined]  # a plain tag
        return fn

    return mark


class StoreHarness:
    """Opens store instances on one backing database, and reaches under them for tests.

    Subclass it and implement :meth:`new`; the damaging methods are optional (a test that
    needs one skips if it raises ``NotImplementedError``).

    Attributes:
        lacks: what this store legitimately lacks: capability names (``multi_process``,
            ``durable``, ...) and kit names (``group_commit``: concurrent appends do not
            share transactions; ``view_refuses_writes``: a ``reading()`` view accepts
            writes, e.g. because it is a copy). Tests that need them skip.
    """

    lacks: frozenset[str] = frozenset()

    def __init__(self) -> None:
        self._opened: list[Store] = []

    def new(self, *, read_only: bool = False) -> Store:
        """A new, unopened store instance on this harness's database (every call: the same
        data, so that a test can close a store and open it again)."""
        raise NotImplementedError

    async def open(self, *, read_only: bool = False) -> Store:
        """A new instance, opened; :meth:`aclose` closes it."""
        store = self.new(read_only=read_only)
        await store.open()
        self._opened.append(store)
        return store

    def open_url(self, url: str, *, read_only: bool = False) -> Store:
        """An unopened store from ``store.url``: by default ``actorlog.stores.open_store``.
        Override it for a URL scheme ``open_store`` does not know."""
        from actorlog.stores import open_store

        return open_store(url, read_only=read_only)

    def batch_sizes(self, store: Store) -> list[int]:
        """The number of appends in each transaction ``store`` committed so far, oldest
        first (for the group-commit tests; a store need not offer this). Raise
        ``NotImplementedError`` if the store cannot tell."""
        raise NotImplementedError

    async def damage_payload(self, store: Store, actor_id: str, seq: int, payload: bytes) -> None:
        """Overwrite a stored entry's payload, keeping its stored checksum."""
        raise NotImplementedError

    async def raw_insert(self, row: EntryRow) -> None:
        """Insert an entry bypassing the store's code (not its database's own checks)."""
        raise NotImplementedError

    async def set_format_version(self, version: int) -> None:
        """Write ``version`` into the store's metadata, as a newer actorlog would."""
        raise NotImplementedError

    async def aclose(self) -> None:
        """Close every store :meth:`open` opened (newest first)."""
        for store in reversed(self._opened):
            await store.close()


async def _harness_call(call: Awaitable[None]) -> None:
    try:
        await call
    except NotImplementedError:
        pytest.skip("the harness cannot do this (NotImplementedError)")


def _batch_sizes(harness: StoreHarness, store: Store) -> list[int] | None:
    if "group_commit" in harness.lacks:
        return None
    try:
        return list(harness.batch_sizes(store))
    except NotImplementedError:
        return None


# -- rows ------------------------------------------------------------------------------------

ACTOR = "actor-1"
TYPE = "tests.Researcher"


def msg(actor_id: str, seq: int, message_id: str | None = None, payload: bytes = b"") -> EntryRow:
    """A ``message`` entry (message id defaults to one derived from the seq)."""
    return make_entry(
        actor_id,
        seq,
        "message",
        "tests.Ask",
        0,
        message_id if message_id is not None else f"m-{seq}",
        payload or b'{"question":"q%d"}' % seq,
    )


def entry(actor_id: str, seq: int, kind: str, ref: int, tag: str = "tests.tool") -> EntryRow:
    """A non-message entry referring to ``ref``."""
    return make_entry(actor_id, seq, kind, tag, ref, None, b'{"seq":%d}' % seq)


def msgs(actor_id: str, first: int, count: int) -> list[EntryRow]:
    return [msg(actor_id, s) for s in range(first, first + count)]


def snapshot(actor_id: str, seq: int, data: bytes | None = None) -> SnapshotRow:
    data = data if data is not None else b'{"answers":["%d"]}' % seq
    info = SnapshotInfo(
        actor_id=actor_id,
        seq=seq,
        handled_seq=max(seq - 1, 0),
        type_tag="tests.Notes",
        schema_version=3,
        digest=snapshot_digest(actor_id, seq, max(seq - 1, 0), "tests.Notes", 3, data),
        size=len(data),
        created_at=1_700_000_000.25 + seq,
    )
    return SnapshotRow(info=info, data=data)


async def registered(store: Store, *actor_ids: str) -> None:
    for actor_id in actor_ids:
        await store.register_actor(actor_id, TYPE)


async def assert_unchanged(
    store: Store, actor_id: str, rows: Sequence[EntryRow], actor: ActorRow | None
) -> None:
    """The actor's log and summary are exactly as before a rejected append."""
    assert await store.read(actor_id) == list(rows)
    assert await store.get_actor(actor_id) == actor


async def _log_of_two(store: Store) -> tuple[list[EntryRow], ActorRow | None]:
    await registered(store, ACTOR)
    rows = msgs(ACTOR, 1, 2)
    await store.append(ACTOR, 0, rows)
    return rows, await store.get_actor(ACTOR)


def _require(harness: StoreHarness, store: Store, what: str) -> None:
    if what in harness.lacks or getattr(store.capabilities, what, True) is False:
        pytest.skip(f"{type(store).__name__}: no {what}")


async def _race(
    outcome: dict[str, BaseException | None], name: str, s: Store, actor_id: str, seq: int
) -> None:
    try:
        await s.append(actor_id, seq - 1, [msg(actor_id, seq, f"{name}-{seq}")])
    except StoreError as exc:
        outcome[name] = exc
    else:
        outcome[name] = None


# -- the suite -------------------------------------------------------------------------------


class StoreContract:
    """The contract tests. Subclass it as ``Test<YourStore>`` and give it a ``harness``
    fixture yielding a :class:`StoreHarness` (and closing it afterwards).

    Every test runs on anyio's ``asyncio`` backend; override the ``anyio_backend`` fixture
    for a store that runs elsewhere too. The contract itself is written down in
    :mod:`actorlog.store`.
    """

    pytestmark = pytest.mark.anyio

    @pytest.fixture
    def anyio_backend(self) -> str:
        return "asyncio"

    @pytest.fixture
    async def store(self, harness: StoreHarness) -> Store:
        """An opened store of the harness."""
        return await harness.open()

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

    # -- append and read -------------------------------------------------------------------

    async def test_append_then_read_returns_identical_rows(self, store: Store) -> None:
        await registered(store, ACTOR)
        rows = [
            msg(ACTOR, 1, payload=bytes(range(256))),
            make_entry(ACTOR, 2, "intent", "tools.s\u00fcche \U0001f50d", 1, None, b""),
            make_entry(ACTOR, 3, "result", "tools.search", 2, None, b"\x00" * 1000),
            make_entry(ACTOR, 4, "step", "tests.Ask", 1, None, b'{"reply":"\xc3\xa9"}'),
            make_entry(ACTOR, 5, "effect", "now", 1, None, b"1.5"),
            make_entry(ACTOR, 6, "decision", "retry", 2, None, b"{}"),
            msg(ACTOR, 7, message_id="\u00e9-" + "x" * 500),
        ]
        assert {r.kind for r in rows} == set(KINDS)
        await store.append(ACTOR, 0, rows[:1])
        await store.append(ACTOR, 1, rows[1:])
        got = await store.read(ACTOR)
        assert got == rows
        assert all(isinstance(r.payload, bytes) for r in got)
        assert all(_intact(r) for r in got)

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
        rows, actor = await _log_of_two(store)
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
        rows, actor = await _log_of_two(store)
        with pytest.raises(SequenceConflictError):
            await store.append(ACTOR, 2, [msg(ACTOR, 3, message_id="m-1")])
        await assert_unchanged(store, ACTOR, rows, actor)

    async def test_append_rejects_a_message_id_repeated_within_the_call(self, store: Store) -> None:
        rows, actor = await _log_of_two(store)
        with pytest.raises(SequenceConflictError):
            await store.append(ACTOR, 2, [msg(ACTOR, 3, "dup"), msg(ACTOR, 4, "dup")])
        await assert_unchanged(store, ACTOR, rows, actor)

    async def test_append_that_conflicts_midway_writes_nothing(self, store: Store) -> None:
        """Atomicity: rows before the conflicting one are not written either."""
        rows, actor = await _log_of_two(store)
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
        await _log_of_two(store)
        with pytest.raises(StoreError) as info:
            await store.append(ACTOR, 5, [msg(ACTOR, 6)])
        assert isinstance(info.value, SequenceConflictError)
        assert (info.value.actor_id, info.value.expected) == (ACTOR, 5)
        assert info.value.found in (2, None)  # the store may not know the current last seq

    @needs("multi_process")
    async def test_database_enforces_the_conditional_append(self, harness: StoreHarness) -> None:
        """A writer that bypasses the store's code still cannot break the seq chain."""
        store = await harness.open()
        _require(harness, store, "multi_process")
        rows, actor = await _log_of_two(store)
        for bad in (msg(ACTOR, 4, "x"), msg(ACTOR, 2, "y"), msg(ACTOR, 1, "z")):
            with pytest.raises(Exception) as info:
                await harness.raw_insert(bad)
            if info.type is NotImplementedError:
                pytest.skip("the harness cannot insert rows bypassing the store")
            await assert_unchanged(store, ACTOR, rows, actor)
        with pytest.raises(Exception):  # noqa: B017
            await harness.raw_insert(msg("ghost", 1))
        assert await store.read("ghost") == []
        await harness.raw_insert(msg(ACTOR, 3, "ok"))
        after = await store.get_actor(ACTOR)
        assert after is not None and after.last_seq == 3 and after.last_message_seq == 3

    # -- concurrency and group commit ------------------------------------------------------

    async def test_concurrent_appends_to_one_actor_keep_their_order(self, store: Store) -> None:
        """Appends awaited concurrently (each expecting the previous) all land, in order."""
        await registered(store, ACTOR)
        rows = msgs(ACTOR, 1, 20)
        async with anyio.create_task_group() as tg:
            for r in rows:
                tg.start_soon(store.append, ACTOR, r.seq - 1, [r])
        assert await store.read(ACTOR) == rows

    async def test_many_actors_appending_concurrently_all_land_in_order(
        self, harness: StoreHarness, store: Store
    ) -> None:
        n_actors, n_appends = 50, 6
        ids = [f"actor-{i:02d}" for i in range(n_actors)]
        await registered(store, *ids)
        sizes = _batch_sizes(harness, store)

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
            assert all(_intact(r) and r.actor_id == actor_id for r in got)
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
        sizes = _batch_sizes(harness, store)
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

        sizes = _batch_sizes(harness, store)
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
        _require(harness, first, "multi_process")
        second = await harness.open()
        await registered(first, ACTOR)
        await registered(second, ACTOR)
        winners: list[str] = []
        for seq in range(1, 16):
            outcome: dict[str, BaseException | None] = {}
            async with anyio.create_task_group() as tg:
                tg.start_soon(_race, outcome, "first", first, ACTOR, seq)
                tg.start_soon(_race, outcome, "second", second, ACTOR, seq)
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
        _require(harness, first, "multi_process")
        second = await harness.open()
        ids = [f"o-{i:02d}" for i in range(12)]
        await registered(first, *ids)
        rounds = 6
        for seq in range(1, rounds + 1):
            outcomes = {actor_id: dict[str, BaseException | None]() for actor_id in ids}
            async with anyio.create_task_group() as tg:
                for actor_id in ids:
                    tg.start_soon(_race, outcomes[actor_id], "first", first, actor_id, seq)
                for actor_id in reversed(ids):
                    tg.start_soon(_race, outcomes[actor_id], "second", second, actor_id, seq)
            for actor_id, outcome in outcomes.items():
                assert sorted(outcome) == ["first", "second"]
                won = [name for name, exc in outcome.items() if exc is None]
                assert len(won) == 1, (actor_id, seq, outcome)
                errors = [e for e in outcome.values() if e is not None]
                assert all(isinstance(e, SequenceConflictError) for e in errors), errors
        for actor_id in ids:
            log = await second.read(actor_id)
            assert [r.seq for r in log] == list(range(1, rounds + 1))
            assert all(_intact(r) and r.actor_id == actor_id for r in log)

    @needs("multi_process")
    async def test_instances_opening_a_new_database_at_once_all_succeed(
        self, harness: StoreHarness
    ) -> None:
        """Schema creation is serialized (advisory lock, write transaction)."""
        probe = harness.new()
        _require(harness, probe, "multi_process")
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
        assert not _intact((await store.read(ACTOR))[1])

    async def test_damaged_payload_is_returned_as_stored(self, harness: StoreHarness) -> None:
        store = await harness.open()
        await registered(store, ACTOR)
        rows = msgs(ACTOR, 1, 3)
        await store.append(ACTOR, 0, rows)
        await _harness_call(harness.damage_payload(store, ACTOR, 2, b'{"question":"q3"}'))
        got = await store.read(ACTOR)
        assert got[0] == rows[0] and got[2] == rows[2]
        assert got[1] == attrs.evolve(rows[1], payload=b'{"question":"q3"}')
        assert not _intact(got[1])  # the stored checksum no longer matches

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

    # -- durability across reopen ----------------------------------------------------------

    @needs("durable")
    async def test_reopened_store_holds_everything(self, harness: StoreHarness) -> None:
        store = await harness.open()
        _require(harness, store, "durable")
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
        _require(harness, store, "durable")
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
        _require(harness, store, "durable")
        await registered(store, ACTOR)
        await store.close()
        await _harness_call(harness.set_format_version(FORMAT_VERSION + 1))
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
        _require(harness, store, "durable")
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
