"""A fault-injecting :class:`~actorlog.store.Store` wrapper and the kill hooks.

``FaultyStore`` delegates every call to a real store and, when a :class:`Fault` rule
matches the Nth call, fails or stalls it the way real storage fails:

* ``disk_full`` / ``io_error`` / ``lock_timeout``: the call raises the
  ``StoreUnavailableError`` a SQL store raises for that ``sqlite3`` error, and writes nothing;
* ``error_after_commit``: the write is committed, then the call raises (a lost
  acknowledgement: "the rows may or may not be written" in the store contract);
* ``torn``: a store that breaks atomicity writes the batch with its last entry's payload cut
  short, then raises (nothing half-written may ever be read back as valid);
* ``stall``: the call waits ``stall_seconds`` (or until ``release`` is set), then proceeds;
  ``stalled`` is set while it waits, so a test can cancel a caller mid-commit.

With a store that arbitrates ownership (``capabilities.leases``: PostgreSQL), ``FaultyStore``
forwards the lease, fencing and inbox operations too (counted, and open to fault rules like
every other call), so a system with an ``owner`` runs over the wrapper as over the store.

``KillSwitch`` is how the crash tests kill a worker process *exactly* at a durability
boundary: ``ACTORLOG_TORTURE_KILL="intent_commit_after@notify:2"`` makes the worker
``SIGKILL`` itself right after the second append that carries an intent of the tool whose
name contains ``notify``. The boundaries are listed in :data:`BOUNDARIES`.
"""

from __future__ import annotations

import os
import signal
import sqlite3
from collections import Counter
from collections.abc import Awaitable, Callable, Mapping, Sequence
from pathlib import Path
from typing import cast

import anyio
import attrs
from actorlog import StoreUnavailableError
from actorlog.store import (
    ActorRow,
    EntryRow,
    EventRow,
    InboxRow,
    LeaseStore,
    OrphanRow,
    SnapshotInfo,
    SnapshotRow,
    Store,
    StoreCapabilities,
)

__all__ = ["BOUNDARIES", "FAULTS", "Fault", "FaultyStore", "KillSwitch"]

#: Durability boundaries a worker can be killed at. ``<kind>_commit_*`` fire around an
#: append carrying an entry of that kind (one commit may carry several kinds);
#: ``tool_*`` fire inside a tool, before its side effect and after it is committed.
BOUNDARIES: tuple[str, ...] = (
    "message_commit_before",
    "message_commit_after",
    "intent_commit_before",
    "intent_commit_after",
    "tool_before",
    "tool_after",
    "result_commit_before",
    "result_commit_after",
    "step_commit_before",
    "step_commit_after",
    "effect_commit_after",
    "decision_commit_after",
    "snapshot_write_before",
    "snapshot_write_after",
)

FAULTS: tuple[str, ...] = (
    "disk_full",
    "io_error",
    "lock_timeout",
    "error_after_commit",
    "torn",
    "stall",
)

_SQLITE_MESSAGES = {
    "disk_full": "database or disk is full",
    "io_error": "disk I/O error",
    "lock_timeout": "database is locked",
    "error_after_commit": "disk I/O error",
    "torn": "disk I/O error",
}


class KillSwitch:
    """Counts boundary hits and SIGKILLs this process at the configured one.

    Args:
        spec: ``"<boundary>[@<name filter>]:<n>"``, or empty for never.
        marker: a file to write the boundary name into just before the kill (so the driver
            can tell which boundary fired; it is written and fsynced first).
    """

    def __init__(self, spec: str = "", marker: str | os.PathLike[str] | None = None) -> None:
        self.boundary = ""
        self.name_filter = ""
        self.nth = 0
        if spec:
            where, _, n = spec.rpartition(":")
            self.boundary, _, self.name_filter = where.partition("@")
            if self.boundary not in BOUNDARIES or not n.isdigit() or int(n) < 1:
                raise ValueError(f"bad kill spec {spec!r}: expected <boundary>[@name]:<n>")
            self.nth = int(n)
        self.marker = Path(marker) if marker is not None else None
        self.hits: Counter[str] = Counter()

    @classmethod
    def from_env(cls) -> KillSwitch:
        return cls(
            os.environ.get("ACTORLOG_TORTURE_KILL", ""),
            os.environ.get("ACTORLOG_TORTURE_KILL_MARKER") or None,
        )

    def hit(self, boundary: str, names: Sequence[str] = ()) -> None:
        """Record one crossing of ``boundary`` (by calls involving ``names``)."""
        self.hits[boundary] += 1
        if boundary != self.boundary:
            return
        if self.name_filter and not any(self.name_filter in n for n in names):
            return
        self.nth -= 1
        if self.nth == 0:
            self.kill(f"{boundary}@{','.join(names)}" if names else boundary)

    def kill(self, why: str) -> None:
        if self.marker is not None:
            with open(self.marker, "w") as f:
                f.write(why)
                f.flush()
                os.fsync(f.fileno())
        os.kill(os.getpid(), signal.SIGKILL)


@attrs.define
class Fault:
    """Fail or stall the ``nth`` call of ``method`` that matches.

    Args:
        method: a Store method name (``append``, ``save_snapshot``, ``read``, ...).
        nth: which matching call (1 = the first).
        kind: one of :data:`FAULTS`.
        actor_id: only calls about this actor match.
        entry_kinds: for ``append``: only appends carrying one of these entry kinds match.
        stall_seconds: how long ``stall`` and ``lock_timeout`` wait.
    """

    method: str
    nth: int
    kind: str
    actor_id: str | None = None
    entry_kinds: tuple[str, ...] | None = None
    stall_seconds: float = 0.0
    seen: int = 0
    fired: bool = False
    stalled: anyio.Event = attrs.field(factory=anyio.Event)
    release: anyio.Event = attrs.field(factory=anyio.Event)

    def __attrs_post_init__(self) -> None:
        if self.kind not in FAULTS:
            raise ValueError(f"unknown fault {self.kind!r}; expected one of {FAULTS}")

    def matches(self, method: str, actor_id: str | None, kinds: Sequence[str]) -> bool:
        if self.fired or method != self.method:
            return False
        if self.actor_id is not None and actor_id != self.actor_id:
            return False
        if self.entry_kinds is not None and not set(kinds) & set(self.entry_kinds):
            return False
        self.seen += 1
        if self.seen == self.nth:
            self.fired = True
            return True
        return False

    def error(self) -> StoreUnavailableError:
        cause = sqlite3.OperationalError(_SQLITE_MESSAGES.get(self.kind, "injected fault"))
        err = StoreUnavailableError(f"SQLite commit failed: {cause} (injected {self.kind})")
        err.__cause__ = cause
        return err

    async def wait(self) -> None:
        self.stalled.set()
        with anyio.move_on_after(self.stall_seconds if self.stall_seconds > 0 else None):
            await self.release.wait()


def _torn(row: EntryRow) -> EntryRow:
    """The row as a non-atomic store might leave it: payload cut short, checksum kept."""
    return attrs.evolve(row, payload=row.payload[: max(0, len(row.payload) // 2)])


class FaultyStore:
    """Wraps a store; injects :class:`Fault` rules and crosses :class:`KillSwitch` boundaries.

    ``calls`` counts every call by method name; ``fired`` lists the faults that fired.
    """

    def __init__(
        self,
        inner: Store,
        faults: Sequence[Fault] = (),
        *,
        kill: KillSwitch | None = None,
        on_fault: Callable[[Fault], None] | None = None,
    ) -> None:
        self.inner = inner
        self.faults = list(faults)
        self.kill = kill or KillSwitch()
        self.on_fault = on_fault
        self.calls: Counter[str] = Counter()
        self.fired: list[Fault] = []

    def add(self, fault: Fault) -> Fault:
        self.faults.append(fault)
        return fault

    async def _gate(
        self, method: str, actor_id: str | None = None, kinds: Sequence[str] = ()
    ) -> Fault | None:
        """Count the call; stall or raise if a fault fires; return it if it acts later."""
        self.calls[method] += 1
        for f in self.faults:
            if f.matches(method, actor_id, kinds):
                self.fired.append(f)
                if self.on_fault is not None:
                    self.on_fault(f)
                if f.kind == "stall":
                    await f.wait()
                    return None
                if f.kind == "lock_timeout":
                    await f.wait()
                    raise f.error()
                if f.kind in ("disk_full", "io_error"):
                    raise f.error()
                return f  # error_after_commit, torn: act around the real call
        return None

    # -- Store protocol --------------------------------------------------------------------

    @property
    def capabilities(self) -> StoreCapabilities:
        return self.inner.capabilities

    @property
    def url(self) -> str:
        return self.inner.url

    async def open(self) -> None:
        await self._gate("open")
        await self.inner.open()

    async def close(self) -> None:
        self.calls["close"] += 1
        await self.inner.close()

    async def register_actor(self, actor_id: str, actor_type: str) -> ActorRow:
        f = await self._gate("register_actor", actor_id)
        row = await self.inner.register_actor(actor_id, actor_type)
        if f is not None:
            raise f.error()
        return row

    async def get_actor(self, actor_id: str) -> ActorRow | None:
        await self._gate("get_actor", actor_id)
        return await self.inner.get_actor(actor_id)

    async def list_actors(self) -> list[ActorRow]:
        await self._gate("list_actors")
        return await self.inner.list_actors()

    async def append(self, actor_id: str, expected_last_seq: int, rows: Sequence[EntryRow]) -> None:
        kinds = sorted({r.kind for r in rows})
        names = sorted({r.type_tag for r in rows if r.kind in ("intent", "result", "decision")})
        f = await self._gate("append", actor_id, kinds)
        for k in kinds:
            self.kill.hit(f"{k}_commit_before", names)
        if f is not None and f.kind == "torn":
            await self.inner.append(actor_id, expected_last_seq, [*rows[:-1], _torn(rows[-1])])
            raise f.error()
        await self.inner.append(actor_id, expected_last_seq, rows)
        for k in kinds:
            self.kill.hit(f"{k}_commit_after", names)
        if f is not None:
            raise f.error()

    async def read(
        self,
        actor_id: str,
        *,
        after_seq: int = 0,
        upto_seq: int | None = None,
        kinds: Sequence[str] | None = None,
        limit: int | None = None,
    ) -> list[EntryRow]:
        await self._gate("read", actor_id)
        return await self.inner.read(
            actor_id, after_seq=after_seq, upto_seq=upto_seq, kinds=kinds, limit=limit
        )

    async def find_message(self, actor_id: str, message_id: str) -> EntryRow | None:
        await self._gate("find_message", actor_id)
        return await self.inner.find_message(actor_id, message_id)

    async def find_ref(self, actor_id: str, kind: str, ref: int) -> list[EntryRow]:
        await self._gate("find_ref", actor_id)
        return await self.inner.find_ref(actor_id, kind, ref)

    async def save_snapshot(self, snapshot: SnapshotRow) -> None:
        f = await self._gate("save_snapshot", snapshot.info.actor_id)
        self.kill.hit("snapshot_write_before")
        if f is not None and f.kind == "torn":
            await self.inner.save_snapshot(
                attrs.evolve(snapshot, data=snapshot.data[: len(snapshot.data) // 2])
            )
            raise f.error()
        await self.inner.save_snapshot(snapshot)
        self.kill.hit("snapshot_write_after")
        if f is not None:
            raise f.error()

    async def list_snapshots(self, actor_id: str) -> list[SnapshotInfo]:
        await self._gate("list_snapshots", actor_id)
        return await self.inner.list_snapshots(actor_id)

    async def load_snapshot(self, actor_id: str, seq: int) -> SnapshotRow | None:
        await self._gate("load_snapshot", actor_id)
        return await self.inner.load_snapshot(actor_id, seq)

    async def delete_snapshots(self, actor_id: str, seqs: Sequence[int]) -> None:
        f = await self._gate("delete_snapshots", actor_id)
        await self.inner.delete_snapshots(actor_id, seqs)
        if f is not None:
            raise f.error()

    async def record_event(self, actor_id: str, kind: str, detail: str) -> None:
        f = await self._gate("record_event", actor_id)
        await self.inner.record_event(actor_id, kind, detail)
        if f is not None:
            raise f.error()

    async def read_events(self, actor_id: str) -> list[EventRow]:
        await self._gate("read_events", actor_id)
        return await self.inner.read_events(actor_id)

    # -- ownership (stores with capabilities.leases) -----------------------------------------

    def _leases(self) -> LeaseStore:
        if not self.inner.capabilities.leases:
            raise AttributeError(f"{type(self.inner).__name__} has no leases")
        return cast("LeaseStore", self.inner)

    def set_fence(self, actor_id: str, token: int | None) -> None:
        self.calls["set_fence"] += 1
        self._leases().set_fence(actor_id, token)

    async def acquire_lease(self, actor_id: str, owner: str, ttl: float) -> int | None:
        f = await self._gate("acquire_lease", actor_id)
        token = await self._leases().acquire_lease(actor_id, owner, ttl)
        if f is not None:
            raise f.error()
        return token

    async def renew_leases(self, owner: str, tokens: Mapping[str, int], ttl: float) -> set[str]:
        f = await self._gate("renew_leases")
        renewed = await self._leases().renew_leases(owner, tokens, ttl)
        if f is not None:
            raise f.error()
        return renewed

    async def release_lease(self, actor_id: str, owner: str, token: int) -> None:
        f = await self._gate("release_lease", actor_id)
        await self._leases().release_lease(actor_id, owner, token)
        if f is not None:
            raise f.error()

    async def orphans(self, limit: int = 100, owner: str | None = None) -> list[OrphanRow]:
        await self._gate("orphans")
        return await self._leases().orphans(limit, owner)

    async def inbox_put(
        self, actor_id: str, message_id: str, type_tag: str, body: str, sender: str | None
    ) -> tuple[str, str] | None:
        f = await self._gate("inbox_put", actor_id)
        queued = await self._leases().inbox_put(actor_id, message_id, type_tag, body, sender)
        if f is not None:
            raise f.error()
        return queued

    async def inbox_for(self, owner: str, limit: int = 500) -> list[InboxRow]:
        await self._gate("inbox_for")
        return await self._leases().inbox_for(owner, limit)

    async def inbox_delete(self, actor_id: str, message_id: str) -> None:
        f = await self._gate("inbox_delete", actor_id)
        await self._leases().inbox_delete(actor_id, message_id)
        if f is not None:
            raise f.error()

    async def listen_inbox(self, callback: Callable[[str], None]) -> Callable[[], Awaitable[None]]:
        await self._gate("listen_inbox")
        return await self._leases().listen_inbox(callback)
