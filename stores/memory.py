"""An in-process store for tests and examples. Nothing survives the process."""

from __future__ import annotations

import bisect
import contextlib
import heapq
import time
from collections.abc import AsyncIterator, Sequence

import attrs
from actorlog.store import (
    ActorRow,
    AuditRow,
    ConfigurationError,
    EntryRow,
    EventRow,
    LogStartRow,
    SequenceConflictError,
    SnapshotInfo,
    SnapshotRow,
    StoreCapabilities,
    StoreClosedError,
    TimerRow,
)

__all__ = ["MemoryStore"]

#: Timer states the loop still has to deliver (``firing``: claimed, delivery not finished).
_DUE_STATES = ("pending", "firing")


@attrs.define
class _Actor:
    actor_type: str
    created_at: float
    entries: list[EntryRow] = attrs.Factory(list)
    seqs: list[int] = attrs.Factory(list)
    message_ids: dict[str, int] = attrs.Factory(dict)
    last_message_seq: int = 0
    handled_seq: int = 0
    snapshots: dict[int, SnapshotRow] = attrs.Factory(dict)
    events: list[EventRow] = attrs.Factory(list)
    log_start: LogStartRow | None = None


class MemoryStore:
    """A store in a Python dict. Atomic and ordered like the others, durable to nothing.

    Tests may reach into :attr:`actors` to damage entries (``replace_row``).
    """

    def __init__(self) -> None:
        self.actors: dict[str, _Actor] = {}
        self._closed = False
        #: store-level audit rows (``delete_actor``): they outlive the actors
        self.audit: list[AuditRow] = []
        self.timers: dict[str, TimerRow] = {}
        #: (due, timer_id) of pending timers; entries whose timer moved or ended are skipped
        self._due: list[tuple[float, str]] = []

    #: ``append`` below never suspends (the journal needs no shield around it); a subclass
    #: that overrides ``append`` does not inherit this (``_durability/wal.py``)
    _append_never_suspends = True

    @property
    def capabilities(self) -> StoreCapabilities:
        return StoreCapabilities(torn_writes=False, multi_process=False, durable=False, timers=True)

    @property
    def url(self) -> str:
        return "memory://"

    async def open(self) -> None:
        self._closed = False

    async def close(self) -> None:
        self._closed = True

    def _check(self) -> None:
        if self._closed:
            raise StoreClosedError("the memory store is closed")

    def _actor(self, actor_id: str) -> _Actor:
        a = self.actors.get(actor_id)
        if a is None:
            a = self.actors[actor_id] = _Actor(actor_type="", created_at=time.time())
        return a

    def _row(self, actor_id: str, a: _Actor) -> ActorRow:
        return ActorRow(
            actor_id=actor_id,
            actor_type=a.actor_type,
            last_seq=a.seqs[-1] if a.seqs else 0,
            last_message_seq=a.last_message_seq,
            handled_seq=a.handled_seq,
            first_seq=a.seqs[0] if a.seqs else 0,
            created_at=a.created_at,
        )

    async def register_actor(self, actor_id: str, actor_type: str) -> ActorRow:
        self._check()
        a = self._actor(actor_id)
        if a.actor_type:
            return self._row(actor_id, a)
        # ``created`` (the runtime starts it without recovery's reads) only if nothing of
        # it is here: not even an event or a snapshot written before its registration
        created = not (a.entries or a.snapshots or a.events or a.log_start)
        a.actor_type = actor_type
        row = self._row(actor_id, a)
        return attrs.evolve(row, created=True) if created else row

    async def get_actor(self, actor_id: str) -> ActorRow | None:
        self._check()
        a = self.actors.get(actor_id)
        return None if a is None or not a.actor_type else self._row(actor_id, a)

    async def list_actors(self) -> list[ActorRow]:
        self._check()
        return [self._row(k, a) for k, a in sorted(self.actors.items()) if a.actor_type]

    async def unfinished_actors(self) -> list[ActorRow]:
        """``UnfinishedStore`` (the rows of a memory store cannot be damaged)."""
        return [a for a in await self.list_actors() if a.handled_seq < a.last_message_seq]

    async def append(self, actor_id: str, expected_last_seq: int, rows: Sequence[EntryRow]) -> None:
        if self._closed:  # _check and _actor, inlined: two appends an ask
            raise StoreClosedError("the memory store is closed")
        if not rows:
            return
        a = self.actors.get(actor_id)
        if a is None:
            a = self._actor(actor_id)
        last = a.seqs[-1] if a.seqs else 0
        if not a.actor_type or last != expected_last_seq:
            raise SequenceConflictError(actor_id, expected_last_seq, last)
        # every check before anything is stored: a refused append stores nothing
        seen: set[str] | None = None  # the batch's message ids (a set only when it has one)
        seq = expected_last_seq
        message_ids = a.message_ids
        for row in rows:
            seq += 1
            if row.actor_id != actor_id or row.seq != seq:
                raise SequenceConflictError(actor_id, expected_last_seq, last)
            mid = row.message_id
            if mid is not None:
                if mid in message_ids or (seen is not None and mid in seen):
                    raise SequenceConflictError(actor_id, expected_last_seq, last)
                if seen is None:
                    seen = set()
                seen.add(mid)
        a.entries.extend(rows)
        a.seqs.extend(range(expected_last_seq + 1, seq + 1))  # checked: contiguous
        for row in rows:
            if row.message_id is not None:
                message_ids[row.message_id] = row.seq
            kind = row.kind
            if kind == "message" and row.seq > a.last_message_seq:
                a.last_message_seq = row.seq
            elif kind == "step" and row.ref > a.handled_seq:
                a.handled_seq = row.ref

    async def read(
        self,
        actor_id: str,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[EntryRow]:
        self._check()
        a = self.actors.get(actor_id)
        if a is None:
            return []
        start = bisect.bisect_right(a.seqs, after_seq)
        out: list[EntryRow] = []
        if limit is not None and limit <= 0:
            return out
        for row in a.entries[start:]:
            if upto_seq is not None and row.seq > upto_seq:
                break
            if kinds is not None and row.kind not in kinds:
                continue
            out.append(row)
            if limit is not None and len(out) >= limit:
                break
        return out

    async def find_message(self, actor_id: str, message_id: str) -> EntryRow | None:
        self._check()
        a = self.actors.get(actor_id)
        if a is None or message_id not in a.message_ids:
            return None
        seq = a.message_ids[message_id]
        i = bisect.bisect_left(a.seqs, seq)
        return a.entries[i]

    async def message_ids(self, actor_id: str, *, limit: int) -> list[str] | None:
        """``MessageIdIndex``: the ids of the actor's stored messages (None past ``limit``)."""
        self._check()
        a = self.actors.get(actor_id)
        if a is None:
            return []
        return None if len(a.message_ids) > limit else list(a.message_ids)

    async def find_ref(self, actor_id: str, kind: str, ref: int) -> list[EntryRow]:
        self._check()
        a = self.actors.get(actor_id)
        if a is None:
            return []
        start = bisect.bisect_right(a.seqs, ref)
        return [r for r in a.entries[start:] if r.kind == kind and r.ref == ref]

    async def save_snapshot(self, snapshot: SnapshotRow) -> None:
        self._check()
        self._actor(snapshot.info.actor_id).snapshots[snapshot.info.seq] = snapshot

    async def list_snapshots(self, actor_id: str) -> list[SnapshotInfo]:
        self._check()
        a = self.actors.get(actor_id)
        if a is None:
            return []
        return [a.snapshots[s].info for s in sorted(a.snapshots, reverse=True)]

    async def load_snapshot(self, actor_id: str, seq: int) -> SnapshotRow | None:
        self._check()
        a = self.actors.get(actor_id)
        return None if a is None else a.snapshots.get(seq)

    async def delete_snapshots(self, actor_id: str, seqs: Sequence[int]) -> None:
        self._check()
        a = self.actors.get(actor_id)
        if a is not None:
            for s in seqs:
                a.snapshots.pop(s, None)

    async def record_event(self, actor_id: str, kind: str, detail: str) -> None:
        self._check()
        self._actor(actor_id).events.append(EventRow(actor_id, time.time(), kind, detail))

    async def read_events(self, actor_id: str) -> list[EventRow]:
        self._check()
        a = self.actors.get(actor_id)
        return [] if a is None else list(a.events)

    # -- compaction (actorlog.store.CompactingStore) -----------------------------------------

    async def compact(self, actor_id: str, upto_seq: int, *, checksum: int) -> int:
        self._check()
        a = self.actors.get(actor_id)
        if a is None or not a.actor_type:
            raise ConfigurationError(f"cannot compact {actor_id!r}: no such actor")
        if not a.seqs or upto_seq >= a.seqs[-1]:
            raise ConfigurationError(
                f"cannot compact {actor_id!r} up to seq {upto_seq}: its last entry must stay"
            )
        cut = bisect.bisect_right(a.seqs, upto_seq)
        if cut == 0:
            return 0
        for row in a.entries[:cut]:
            if row.message_id is not None:
                a.message_ids.pop(row.message_id, None)
        del a.entries[:cut], a.seqs[:cut]
        a.log_start = LogStartRow(actor_id, upto_seq + 1, checksum, time.time())
        return cut

    async def log_start(self, actor_id: str) -> LogStartRow | None:
        self._check()
        a = self.actors.get(actor_id)
        return None if a is None else a.log_start

    # -- deleting actors (actorlog.store.AuditStore) ----------------------------------------

    async def delete_actor(self, actor_id: str, detail: str) -> AuditRow:
        self._check()
        self.actors.pop(actor_id, None)
        for timer_id, t in list(self.timers.items()):
            # its timers go with it: pending ones, and claimed ones (a crash during their
            # delivery left them ``firing``; a restart would deliver them again)
            if t.actor_id == actor_id and t.state in ("pending", "firing"):
                self.timers[timer_id] = t._replace(state="cancelled")
        row = AuditRow(len(self.audit) + 1, time.time(), "deleted", actor_id, detail)
        self.audit.append(row)
        return row

    async def read_audit(self, actor_id: str | None = None) -> list[AuditRow]:
        self._check()
        return [r for r in self.audit if actor_id is None or r.actor_id == actor_id]

    # -- test helpers ---------------------------------------------------------------------

    @contextlib.asynccontextmanager
    async def reading(self) -> AsyncIterator[MemoryStore]:
        """A read-only copy of the store as it is now (see ``actorlog.store``: consistent
        reads for operators' tools). Operators' tools never write to it; anything written
        to the copy would not reach this store."""
        self._check()
        view = MemoryStore()
        view.actors = {
            k: attrs.evolve(
                a,
                entries=list(a.entries),
                seqs=list(a.seqs),
                message_ids=dict(a.message_ids),
                snapshots=dict(a.snapshots),
                events=list(a.events),
            )
            for k, a in self.actors.items()
        }
        view.audit = list(self.audit)
        view.timers = dict(self.timers)
        yield view

    # -- timers (TimerStore) ----------------------------------------------------------------

    async def put_timer(self, timer: TimerRow, *, replace: bool = False) -> bool:
        self._check()
        if timer.timer_id in self.timers and not replace:
            return False
        self.timers[timer.timer_id] = timer._replace(state="pending")
        heapq.heappush(self._due, (timer.due, timer.timer_id))
        return True

    async def get_timer(self, timer_id: str) -> TimerRow | None:
        self._check()
        return self.timers.get(timer_id)

    async def cancel_timer(self, timer_id: str) -> str | None:
        self._check()
        t = self.timers.get(timer_id)
        if t is None:
            return None
        if t.state == "pending" or (t.state == "firing" and t.recurrence is not None):
            self.timers[timer_id] = t._replace(state="cancelled")
        return t.state

    async def claim_timer(self, timer_id: str, due: float) -> bool:
        self._check()
        t = self.timers.get(timer_id)
        if t is None or t.state not in _DUE_STATES or t.due != due:
            return False
        self.timers[timer_id] = t._replace(state="firing")
        return True

    async def fire_timer(self, timer_id: str, due: float, next_due: float | None) -> bool:
        self._check()
        t = self.timers.get(timer_id)
        if t is None or t.state not in _DUE_STATES or t.due != due:
            return False
        if next_due is None:
            self.timers[timer_id] = t._replace(state="fired")
        else:
            self.timers[timer_id] = t._replace(due=next_due, state="pending")
            heapq.heappush(self._due, (next_due, timer_id))
        return True

    async def fail_timer(self, timer_id: str, due: float, reason: str) -> bool:
        self._check()
        t = self.timers.get(timer_id)
        if t is None or t.state not in _DUE_STATES or t.due != due:
            return False
        self.timers[timer_id] = t._replace(state=f"failed: {reason}")
        return True

    def _pending_heads(self) -> None:
        """Drop heap heads that no longer name a pending timer at that due time."""
        while self._due:
            due, tid = self._due[0]
            t = self.timers.get(tid)
            if t is not None and t.state in _DUE_STATES and t.due == due:
                return
            heapq.heappop(self._due)

    async def due_timers(
        self, before: float, *, limit: int = 100, owner: str | None = None
    ) -> list[TimerRow]:
        self._check()
        self._pending_heads()
        found: list[TimerRow] = []
        seen: set[str] = set()
        for due, tid in heapq.nsmallest(limit * 2 + 16, self._due):
            t = self.timers.get(tid)
            if due > before or len(found) >= limit:
                break
            if t is not None and t.state in _DUE_STATES and t.due == due and tid not in seen:
                seen.add(tid)
                found.append(t)
        return found

    async def next_due(self) -> float | None:
        self._check()
        self._pending_heads()
        return self._due[0][0] if self._due else None

    async def list_timers(self, actor_id: str | None = None) -> list[TimerRow]:
        self._check()
        rows = [t for t in self.timers.values() if actor_id is None or t.actor_id == actor_id]
        return sorted(rows, key=lambda t: (t.due, t.timer_id))

    async def delete_timers_before(self, before: float) -> int:
        self._check()
        gone = [k for k, t in self.timers.items() if t.state not in _DUE_STATES and t.due < before]
        for k in gone:
            del self.timers[k]
        return len(gone)

    def replace_row(self, actor_id: str, seq: int, row: EntryRow) -> None:
        """Overwrite a stored entry in place (tests use it to inject damage)."""
        a = self.actors[actor_id]
        i = bisect.bisect_left(a.seqs, seq)
        a.entries[i] = row

    def replace_snapshot(self, actor_id: str, seq: int, data: bytes) -> None:
        """Overwrite a snapshot's bytes, keeping its recorded digest (tests inject damage)."""
        a = self.actors[actor_id]
        old = a.snapshots[seq]
        a.snapshots[seq] = SnapshotRow(info=old.info, data=data)
