"""A store written the way a third party would write one, run through the public kit.

``DictStore`` is written from scratch against ``actorlog.store`` (nothing private of actorlog
is imported here: only ``actorlog.store`` and ``actorlog.testing``), keeps its "database" in a
dict shared by every instance of one name (so it is durable for as long as the process
lives, and can be reopened from its URL), and passes :class:`actorlog.testing.StoreContract`.
What it does not offer (several writing processes, group commit) the kit skips, saying why.
"""

from __future__ import annotations

import time
from collections.abc import AsyncIterator, Sequence

import attrs
import pytest
from actorlog.store import (
    FORMAT_VERSION,
    ActorRow,
    EntryRow,
    EventRow,
    SequenceConflictError,
    SnapshotInfo,
    SnapshotRow,
    Store,
    StoreCapabilities,
    StoreClosedError,
    UnsupportedFormatError,
)
from actorlog.testing import StoreContract, StoreHarness


@attrs.define
class _Database:
    meta: dict[str, int] = attrs.Factory(lambda: {"format_version": FORMAT_VERSION})
    actors: dict[str, ActorRow] = attrs.Factory(dict)
    logs: dict[str, list[EntryRow]] = attrs.Factory(dict)
    snapshots: dict[tuple[str, int], SnapshotRow] = attrs.Factory(dict)
    events: list[EventRow] = attrs.Factory(list)


_DATABASES: dict[str, _Database] = {}


class DictStore:
    """A log store in a process-wide dict: ``dict://<name>``."""

    def __init__(self, name: str, *, read_only: bool = False) -> None:
        self.name = name
        self.read_only = read_only
        self._db: _Database | None = None

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(durable=True, multi_process=False)

    @property
    def url(self) -> str:
        return f"dict://{self.name}"

    async def open(self) -> None:
        db = _DATABASES.setdefault(self.name, _Database())
        found = db.meta["format_version"]
        if found > FORMAT_VERSION:
            raise UnsupportedFormatError(found, FORMAT_VERSION)
        self._db = db

    async def close(self) -> None:
        self._db = None

    def _reading(self) -> _Database:
        if self._db is None:
            raise StoreClosedError(f"{self.url} is closed")
        return self._db

    def _writing(self) -> _Database:
        if self.read_only:
            raise StoreClosedError(f"{self.url} is open read-only")
        return self._reading()

    async def register_actor(self, actor_id: str, actor_type: str) -> ActorRow:
        db = self._writing()
        if actor_id not in db.actors:
            db.actors[actor_id] = ActorRow(actor_id, actor_type, 0, 0, 0, 0, time.time())
            db.logs[actor_id] = []
        return db.actors[actor_id]

    async def get_actor(self, actor_id: str) -> ActorRow | None:
        return self._reading().actors.get(actor_id)

    async def list_actors(self) -> list[ActorRow]:
        db = self._reading()
        return [db.actors[a] for a in sorted(db.actors)]

    async def append(self, actor_id: str, expected_last_seq: int, rows: Sequence[EntryRow]) -> None:
        db = self._writing()
        actor = db.actors.get(actor_id)
        if actor is None or actor.last_seq != expected_last_seq:
            found = None if actor is None else actor.last_seq
            raise SequenceConflictError(actor_id, expected_last_seq, found)
        log = db.logs[actor_id]
        used = {r.message_id for r in log if r.message_id is not None}
        for i, row in enumerate(rows):
            if row.actor_id != actor_id or row.seq != expected_last_seq + 1 + i:
                raise SequenceConflictError(actor_id, expected_last_seq, actor.last_seq)
            if row.message_id is not None:
                if row.message_id in used:
                    raise SequenceConflictError(actor_id, expected_last_seq, actor.last_seq)
                used.add(row.message_id)
        log.extend(rows)
        messages = [r.seq for r in log if r.kind == "message"]
        steps = [r.ref for r in log if r.kind == "step"]
        db.actors[actor_id] = attrs.evolve(
            actor,
            last_seq=log[-1].seq if log else 0,
            last_message_seq=max(messages, default=0),
            handled_seq=max(steps, default=0),
            first_seq=log[0].seq if log else 0,
        )

    async def read(
        self,
        actor_id: str,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[EntryRow]:
        out = [
            r
            for r in self._reading().logs.get(actor_id, [])
            if r.seq > after_seq
            and (upto_seq is None or r.seq <= upto_seq)
            and (kinds is None or r.kind in kinds)
        ]
        return out if limit is None else out[:limit]

    async def find_message(self, actor_id: str, message_id: str) -> EntryRow | None:
        for r in self._reading().logs.get(actor_id, []):
            if r.kind == "message" and r.message_id == message_id:
                return r
        return None

    async def find_ref(self, actor_id: str, kind: str, ref: int) -> list[EntryRow]:
        return [
            r for r in self._reading().logs.get(actor_id, []) if r.kind == kind and r.ref == ref
        ]

    async def save_snapshot(self, snapshot: SnapshotRow) -> None:
        self._writing().snapshots[(snapshot.info.actor_id, snapshot.info.seq)] = snapshot

    async def list_snapshots(self, actor_id: str) -> list[SnapshotInfo]:
        snaps = [s.info for (a, _), s in self._reading().snapshots.items() if a == actor_id]
        return sorted(snaps, key=lambda i: i.seq, reverse=True)

    async def load_snapshot(self, actor_id: str, seq: int) -> SnapshotRow | None:
        return self._reading().snapshots.get((actor_id, seq))

    async def delete_snapshots(self, actor_id: str, seqs: Sequence[int]) -> None:
        db = self._writing()
        for seq in seqs:
            db.snapshots.pop((actor_id, seq), None)

    async def record_event(self, actor_id: str, kind: str, detail: str) -> None:
        self._writing().events.append(EventRow(actor_id, time.time(), kind, detail))

    async def read_events(self, actor_id: str) -> list[EventRow]:
        return [e for e in self._reading().events if e.actor_id == actor_id]


class DictHarness(StoreHarness):
    """Opens ``DictStore`` instances on one named database, and damages it for tests."""

    # not written here: the kit skips what needs them (our conftest deselects)
    lacks = frozenset(
        {
            "multi_process",
            "group_commit",
            "compaction",
            "timers",
            "audit",
            "unfinished",
            "message_ids",
        }
    )  # not written

    def __init__(self, name: str) -> None:
        super().__init__()
        self.name = name

    def new(self, *, read_only: bool = False) -> Store:
        return DictStore(self.name, read_only=read_only)

    def open_url(self, url: str, *, read_only: bool = False) -> Store:
        assert url.startswith("dict://")
        return DictStore(url.removeprefix("dict://"), read_only=read_only)

    async def damage_payload(self, store: Store, actor_id: str, seq: int, payload: bytes) -> None:
        log = _DATABASES[self.name].logs[actor_id]
        log[seq - 1] = attrs.evolve(log[seq - 1], payload=payload)

    async def set_format_version(self, version: int) -> None:
        _DATABASES[self.name].meta["format_version"] = version

    async def aclose(self) -> None:
        await super().aclose()
        _DATABASES.pop(self.name, None)


class TestDictStore(StoreContract):
    """The whole kit on a store that imports nothing private of actorlog."""

    harness_class = DictHarness  # read by tests/stores/conftest.py to deselect by ``lacks``

    @pytest.fixture
    async def harness(self, request: pytest.FixtureRequest) -> AsyncIterator[StoreHarness]:
        h = DictHarness(request.node.nodeid)
        yield h
        await h.aclose()


def test_dict_store_is_a_store() -> None:
    assert isinstance(DictStore("x"), Store)
