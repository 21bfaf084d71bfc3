"""The store contract kit's base: FORMAT.md's frames written from the spec, the harness, and
the rows the tests write (public names: :mod:`actorlog.testing`). Imports only
``actorlog.store``."""

from __future__ import annotations

import hashlib
import struct
import zlib
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import attrs
import pytest

from ..store import (
    KINDS,
    ActorRow,
    EntryRow,
    SnapshotInfo,
    SnapshotRow,
    Store,
    StoreError,
)

_F = TypeVar("_F", bound=Callable[..., Any])

# -- the frames of docs/FORMAT.md, from the spec --------------------------------------------


#: [F6] the first byte of every frame: 1 in formats 1 and 2
FRAME_VERSION = 1


def entry_checksum(row: EntryRow) -> int:
    """[F6] The CRC-32 of ``row``'s frame, as FORMAT.md section 3.5 defines it (its stored
    ``checksum`` is not read)."""
    a, t = row.actor_id.encode(), row.type_tag.encode()
    f = struct.pack(">BBQQ", FRAME_VERSION, KINDS.index(row.kind) + 1, row.seq, row.ref)
    f += struct.pack(">H", len(a)) + a + struct.pack(">H", len(t)) + t
    if row.message_id is None:
        f += struct.pack(">H", 0xFFFF)
    else:
        m = row.message_id.encode()
        f += struct.pack(">H", len(m)) + m
    f += struct.pack(">I", len(row.payload)) + row.payload
    return zlib.crc32(f)


def snapshot_digest(
    actor_id: str, seq: int, handled_seq: int, type_tag: str, schema_version: int, data: bytes
) -> bytes:
    """[F12] The SHA-256 of a snapshot's frame, as FORMAT.md section 4 defines it."""
    a, t = actor_id.encode(), type_tag.encode()
    f = struct.pack(">BH", FRAME_VERSION, len(a)) + a
    f += struct.pack(">QQIH", seq, handled_seq, schema_version, len(t)) + t
    f += struct.pack(">Q", len(data)) + data
    return hashlib.sha256(f).digest()


def make_entry(
    actor_id: str,
    seq: int,
    kind: str,
    type_tag: str,
    ref: int = 0,
    *,
    message_id: str | None = None,
    payload: bytes = b"{}",
) -> EntryRow:
    """An :class:`~actorlog.store.EntryRow` with its checksum ([F6])."""
    row = EntryRow(actor_id, seq, kind, type_tag, ref, message_id, payload, 0)
    return attrs.evolve(row, checksum=entry_checksum(row))


def intact(row: EntryRow) -> bool:
    """The row's stored checksum is the checksum of its fields."""
    return row.checksum == entry_checksum(row)


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


async def harness_call(call: Awaitable[None]) -> None:
    try:
        await call
    except NotImplementedError:
        pytest.skip("the harness cannot do this (NotImplementedError)")


def require_hook(harness: StoreHarness, name: str) -> None:
    """Skip the test if the harness does not implement its optional hook ``name``."""
    if getattr(type(harness), name) is getattr(StoreHarness, name):
        pytest.skip(f"{type(harness).__name__} does not implement {name}()")


def batch_sizes_of(harness: StoreHarness, store: Store) -> list[int] | None:
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
        message_id=message_id if message_id is not None else f"m-{seq}",
        payload=payload or b'{"question":"q%d"}' % seq,
    )


def entry(actor_id: str, seq: int, kind: str, ref: int, tag: str = "tests.tool") -> EntryRow:
    """A non-message entry referring to ``ref``."""
    return make_entry(actor_id, seq, kind, tag, ref, payload=b'{"seq":%d}' % seq)


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


async def log_of_two(store: Store) -> tuple[list[EntryRow], ActorRow | None]:
    await registered(store, ACTOR)
    rows = msgs(ACTOR, 1, 2)
    await store.append(ACTOR, 0, rows)
    return rows, await store.get_actor(ACTOR)


def require(harness: StoreHarness, store: Store, what: str) -> None:
    if what in harness.lacks or getattr(store.capabilities, what, True) is False:
        pytest.skip(f"{type(store).__name__}: no {what}")


async def race(
    outcome: dict[str, BaseException | None], name: str, s: Store, actor_id: str, seq: int
) -> None:
    try:
        await s.append(actor_id, seq - 1, [msg(actor_id, seq, f"{name}-{seq}")])
    except StoreError as exc:
        outcome[name] = exc
    else:
        outcome[name] = None
